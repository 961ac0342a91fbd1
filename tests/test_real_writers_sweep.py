"""Files holding several runs, as the tools really write them: a GuideLLM sweep report
(several benchmarks) and an SGLang result file (one line appended per run).

``guidellm-0.8.1-sweep/`` holds the two reports ``guidellm run`` 0.8.1 (from PyPI) wrote
with the ``sweep`` profile (``sweep_size`` 4: synchronous, throughput, two constant
rates interpolated between the two measured rates; 8 requests each) against
``fixtures/real_writers/server.py`` (``record_guidellm_sweep.py`` and the README say
how). The SGLang file of an arm is the two real one-run files of
``sglang-0.5.23/`` concatenated: byte for byte what bench_serving writes when two runs
append to one ``--output-file``.

Every expected value is computed here with plain numpy from the per-request records,
with each tool's definitions (as in ``test_real_writers_more.py``), never read from
the importer.
"""

from __future__ import annotations

import json
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from bundler.errors import BundleFormatError
from bundler.format.serving_run import SourceError
from bundler.importers import guidellm, sglang
from replay.serving.inputs import Cache, load_serving, pick_run
from tests.real_writers_support import (
    REAL,
    guidellm_expected,
    guidellm_samples,
    guidellm_summary,
    import_runs,
    import_seal_replay,
    read_json,
    replay_json,
    seal_unsigned,
    sglang_expected,
)

SWEEP = REAL / "guidellm-0.8.1-sweep"
GUIDELLM = REAL / "guidellm-0.8.1"
SGLANG = REAL / "sglang-0.5.23"
ARMS = ("base", "cand")


def _sweep(arm: str) -> dict[str, Any]:
    return read_json(SWEEP / f"{arm}-sweep.json")


def _load_point(b: dict[str, Any], profile_cap: int) -> str:
    """The load point id by the spec (claims vocabulary), from the strategy as written."""
    st = b["config"]["strategy"]
    if st["type_"] == "synchronous":
        return "rinf-c1"
    if st["type_"] == "throughput":
        return f"rinf-c{st['max_concurrency']}"
    assert st["type_"] == "constant"
    return f"r{st['rate']:g}-c{profile_cap}-constant"


# --- GuideLLM's definitions in plain numpy --------------------------------------------


def _guidellm_expected(arm: str, doc: dict[str, Any], cap: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for b in doc["benchmarks"]:
        out |= guidellm_expected(b, f"{arm}.{_load_point(b, cap)}")
    return out


def test_sweep_recording_is_guidellm_0_8_1_as_described() -> None:
    rec = read_json(SWEEP / "recording.json")
    assert rec["tool"] == "guidellm" and rec["version"] == "0.8.1"
    assert [r["file"] for r in rec["runs"]] == [f"{a}-sweep.json" for a in ARMS]
    for arm in ARMS:
        doc = _sweep(arm)
        assert doc["metadata"]["guidellm_version"] == "0.8.1"
        kinds = [b["config"]["strategy"]["type_"] for b in doc["benchmarks"]]
        assert kinds == ["synchronous", "throughput", "constant", "constant"]
        for b in doc["benchmarks"]:
            t = b["metrics"]["request_totals"]
            assert t["successful"] + t["errored"] == 8 and t["incomplete"] == 0
            # Independent of the importer: GuideLLM's own aggregates are its
            # definitions over its records.
            for tag, (v, w) in guidellm_samples(b).items():
                tool = b["metrics"][tag]["successful"]
                for stat, x in guidellm_summary(v, w).items():
                    y = tool[stat] if stat in tool else tool["percentiles"][stat]
                    assert x == pytest.approx(y, rel=1e-12), (arm, tag, stat)
    size = sum(p.stat().st_size for p in SWEEP.iterdir())
    assert size < 1_100_000


@pytest.fixture(scope="module")
def sweep_replayed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("real-guidellm-sweep")
    arms = [(arm, f"{SWEEP / arm}-sweep.json") for arm in ARMS]
    doc = import_seal_replay(tmp, "guidellm", arms, bundle="g.bundle")
    return doc | {"_stdout": doc["_import"].stdout, "_stderr": doc["_import"].stderr}


def test_a_real_sweep_imports_seals_and_replays_every_claim_confirmed(
    sweep_replayed: dict[str, Any],
) -> None:
    expected: dict[str, float] = {}
    for arm in ARMS:
        doc = _sweep(arm)
        expected |= _guidellm_expected(
            arm, doc, doc["config"]["spec"]["profile"]["max_concurrency"]
        )
    checks = {c["claim_id"]: c for c in sweep_replayed["claims"]["checks"]}
    assert len(expected) == 8 * 61
    assert set(checks) == set(expected)
    bad = {k: c for k, c in checks.items() if c["status"] != "confirmed"}
    assert not bad, bad
    for key, c in checks.items():
        assert Fraction(c["exact"]) == pytest.approx(Fraction(expected[key]), rel=1e-9), key
    # Each claim cites its benchmark in the one carried file.
    camp = sweep_replayed["_camp"]
    rows = [json.loads(x) for x in (camp / "claims.jsonl").read_text().splitlines()]
    text = next(r["text"] for r in rows if r["claim_id"] == "cand.rinf-c512.mean_ttft_ms")
    assert "benchmarks[1].metrics.time_to_first_token_ms.successful.mean" in text
    assert "imported 2 source file(s) (8 runs), 6 load point(s)" in sweep_replayed["_stdout"]


def test_a_sweep_is_carried_once_and_each_run_named_by_index(
    sweep_replayed: dict[str, Any],
) -> None:
    camp = sweep_replayed["_camp"]
    index = read_json(camp / "serving.json")
    for arm in ARMS:
        data = (SWEEP / f"{arm}-sweep.json").read_bytes()
        entries = [s for s in index["sources"] if s["arm"] == arm]
        assert [s["benchmark"] for s in entries] == [0, 1, 2, 3]
        assert {s["benchmarks"] for s in entries} == {4}
        assert len({s["path"] for s in entries}) == 1
        carried = list((camp / "sources" / arm).iterdir())
        assert len(carried) == 1 and carried[0].read_bytes() == data
        assert entries[0]["path"] == f"sources/{arm}/{carried[0].name}"
        doc = _sweep(arm)
        cap = doc["config"]["spec"]["profile"]["max_concurrency"]
        assert [s["load_point"] for s in entries] == [
            _load_point(b, cap) for b in doc["benchmarks"]
        ]


def test_an_adaptive_sweep_compares_arms_only_where_their_rates_meet(
    sweep_replayed: dict[str, Any],
) -> None:
    # GuideLLM interpolates a sweep's constant rates between the rates each arm
    # measured, so the arms' constant load points differ: each is a planned load
    # point the other arm has no source for (a deviation, never a silent merge).
    devs = sweep_replayed["conformance"]["deviations"]
    rates = {
        arm: [f"{b['config']['strategy']['rate']:g}" for b in _sweep(arm)["benchmarks"][2:]]
        for arm in ARMS
    }
    want = {
        (f"arm {other}", f"planned load point r{r}-c512-constant has no source")
        for arm, other in (("base", "cand"), ("cand", "base"))
        for r in rates[arm]
    }
    assert {(d["where"], d["message"]) for d in devs} == want
    assert sweep_replayed["_exit"] == 4  # the deviations; every claim confirmed
    # Said at import already, before sealing.
    err = sweep_replayed["_stderr"]
    assert "warning: 4 load point(s) not run by every arm" in err
    for arm, other in (("base", "cand"), ("cand", "base")):
        for r in rates[arm]:
            assert f"  r{r}-c512-constant: no run of {other}\n" in err


def _merged(*names: str) -> bytes:
    """One report holding the benchmarks of GuideLLM's one-benchmark reports ``names``
    (what a scenario listing both loads writes, built from real benchmarks)."""
    docs = [read_json(GUIDELLM / f"{n}.json") for n in names]
    return json.dumps(docs[0] | {"benchmarks": [d["benchmarks"][0] for d in docs]}).encode()


def test_several_benchmarks_give_the_claims_their_one_benchmark_files_give(
    tmp_path: Path,
) -> None:
    for arm in ARMS:
        (tmp_path / f"{arm}.json").write_bytes(_merged(f"{arm}-c2", f"{arm}-r8"))
    arms = [(arm, f"{tmp_path}/{arm}.json") for arm in ARMS]
    res = import_runs(tmp_path, "guidellm", arms, camp="multi")
    assert res.returncode == 0, res.stderr
    runs = ("base-c2", "base-r8", "cand-c2", "cand-r8")
    arms = [(run[:4], f"{GUIDELLM / run}.json") for run in runs]
    res = import_runs(tmp_path, "guidellm", arms, camp="single")
    assert res.returncode == 0, res.stderr

    def claims(d: str) -> dict[str, tuple[str, str]]:
        rows = [json.loads(x) for x in (tmp_path / d / "claims.jsonl").read_text().splitlines()]
        return {r["claim_id"]: (r["statistic"], r["value"]) for r in rows}

    assert claims("multi") == claims("single")
    assert len(claims("multi")) == 244
    plans = [read_json(tmp_path / d / "plans/serving.json") for d in ("multi", "single")]
    assert plans[0]["load_points"] == plans[1]["load_points"]


# --- SGLang: one line appended per run -------------------------------------------------


def _sgl_expected(arm: str, line: bytes, lp: str) -> dict[str, float]:
    """SGLang's definitions (vLLM's) in numpy over one line's arrays."""
    return {f"{arm}.{lp}.{k}": x for k, x in sglang_expected(json.loads(line)).items()}


def test_a_multi_line_sglang_file_imports_seals_and_replays(tmp_path: Path) -> None:
    expected: dict[str, float] = {}
    arms: list[tuple[str, str | Path]] = []
    for arm in ARMS:
        lines = [(SGLANG / f"{arm}-{lp}.jsonl").read_bytes() for lp in ("c2", "r8")]
        (tmp_path / f"{arm}.jsonl").write_bytes(b"".join(lines))
        arms.append((arm, f"{tmp_path}/{arm}.jsonl"))
        expected |= _sgl_expected(arm, lines[0], "rinf-c2") | _sgl_expected(
            arm, lines[1], "r8-cnone"
        )
    res = import_runs(tmp_path, "sglang", arms)
    assert res.returncode == 0, res.stderr
    index = read_json(tmp_path / "camp" / "serving.json")
    got = [(s["arm"], s["benchmark"], s["benchmarks"], s["load_point"]) for s in index["sources"]]
    assert got == [
        ("base", 0, 2, "rinf-c2"),
        ("base", 1, 2, "r8-cnone"),
        ("cand", 0, 2, "rinf-c2"),
        ("cand", 1, 2, "r8-cnone"),
    ]
    assert all(s["path"].endswith(".jsonl") for s in index["sources"])
    doc = replay_json(seal_unsigned(tmp_path, "s.bundle"))
    assert doc["_exit"] == 5  # E2E and TPOT: SGLang writes no per-request latency
    assert doc["conformance"]["deviations"] == []
    checks = {c["claim_id"]: c for c in doc["claims"]["checks"]}
    for key, x in expected.items():
        c = checks.pop(key)
        assert c["status"] == "confirmed", c
        assert Fraction(c["exact"]) == pytest.approx(Fraction(x), rel=1e-9), key
    assert checks and all(c["status"] == "unverifiable" for c in checks.values())
    assert {k.rsplit("_", 2)[1] for k in checks} == {"e2el", "tpot"}


# --- refusals, located ----------------------------------------------------------------


def _problems(exc: pytest.ExceptionInfo[SourceError]) -> list[tuple[str | None, str | None]]:
    return [(p.record, p.field) for p in exc.value.problems]


def test_two_benchmarks_at_one_load_point_are_refused_located(tmp_path: Path) -> None:
    data = _merged("base-c2", "base-r8", "base-c2")
    with pytest.raises(SourceError) as exc:
        guidellm.parse_all(data, "g.json", "base")
    assert _problems(exc) == [("benchmarks[2]", None)]
    assert "load point rinf-c2 again (benchmarks[0] is at it)" in str(exc.value.problems[0])
    (tmp_path / "g.json").write_bytes(data)
    arms = [("base", f"{tmp_path}/g.json"), ("cand", f"{GUIDELLM}/cand-c2.json")]
    res = import_runs(tmp_path, "guidellm", arms, camp="c")
    assert res.returncode == 2 and "benchmarks[2]" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "c").exists()


def test_a_run_repeated_across_files_is_refused_located(tmp_path: Path) -> None:
    (tmp_path / "g.json").write_bytes(_merged("base-c2", "base-r8"))
    arms = [
        ("base", f"{tmp_path}/g.json"),
        ("base", f"{GUIDELLM}/base-r8.json"),
        ("cand", f"{GUIDELLM}/cand-c2.json"),
    ]
    res = import_runs(tmp_path, "guidellm", arms, camp="c")
    assert res.returncode == 2, res.stderr
    assert "r8-cnone-constant already comes from" in res.stderr and "(run 1)" in res.stderr
    assert not (tmp_path / "c").exists()


def test_a_benchmark_refusal_names_its_benchmark() -> None:
    doc = json.loads(_merged("base-c2", "cand-r8"))
    doc["benchmarks"][1]["requests"]["successful"][2]["output_metrics"]["total_tokens"] = -1
    with pytest.raises(SourceError) as exc:
        guidellm.parse_all(json.dumps(doc).encode(), "g.json", "x")
    assert _problems(exc) == [
        ("benchmarks[1].requests.successful[2]", "output_metrics.total_tokens")
    ]
    doc = json.loads(_merged("base-c2", "cand-r8"))
    doc["benchmarks"][1]["metrics"]["time_to_first_token_ms"]["successful"]["mean"] = "x"
    with pytest.raises(SourceError) as exc:
        guidellm.parse_all(json.dumps(doc).encode(), "g.json", "x")
    assert _problems(exc) == [
        (None, "benchmarks[1].metrics.time_to_first_token_ms.successful.mean")
    ]


def test_ten_thousand_benchmarks_are_refused_over_the_cap_before_any_is_read() -> None:
    # Empty benchmarks and lines: had any been read, its refusal would be another.
    one = read_json(GUIDELLM / "base-c2.json")
    data = json.dumps(one | {"benchmarks": [{}] * 10_000}).encode()
    t0 = time.monotonic()
    with pytest.raises(SourceError) as exc:
        guidellm.parse_all(data, "g.json", "x")
    assert _problems(exc) == [(None, "benchmarks")]
    assert f"holds 10000 benchmarks, more than the {guidellm.MAX_BENCHMARKS}" in str(
        exc.value.problems[0]
    )
    with pytest.raises(SourceError) as exc:
        sglang.parse_all(b"{}\n" * 10_000, "s.jsonl", "x")
    assert _problems(exc) == [(None, None)]
    assert f"holds 10000 runs, more than the {sglang.MAX_RUNS}" in str(exc.value.problems[0])
    assert time.monotonic() - t0 < 10
    # Under the cap, every benchmark is read.
    b = one["benchmarks"][0]
    assert guidellm.MAX_BENCHMARKS == 100
    over = json.dumps(one | {"benchmarks": [b] * 2}).encode()
    with pytest.raises(SourceError) as exc:
        guidellm.parse_all(over, "g.json", "x")
    assert _problems(exc) == [("benchmarks[1]", None)]  # read, and a duplicate


def test_sglang_repeated_or_bad_lines_are_refused_located() -> None:
    c2, r8 = ((SGLANG / f"cand-{lp}.jsonl").read_bytes() for lp in ("c2", "r8"))
    with pytest.raises(SourceError) as exc:
        sglang.parse_all(c2 + r8 + c2, "s.jsonl", "x")
    assert _problems(exc) == [("line 3", None)]
    assert "load point rinf-c2 again (line 1 is at it)" in str(exc.value.problems[0])
    doc = json.loads(r8)
    doc["ttfts"][2] = -1.0
    with pytest.raises(SourceError) as exc:
        sglang.parse_all(c2 + json.dumps(doc).encode() + b"\n", "s.jsonl", "x")
    assert _problems(exc) == [("line 2", "ttfts[2]")]
    del doc["itls"]
    with pytest.raises(SourceError) as exc:
        sglang.parse_all(c2 + b"\n" + json.dumps(doc).encode() + b"\n", "s.jsonl", "x")
    assert _problems(exc) == [("line 3", "itls")]


# --- replay: the index names the run, or is a located format error -------------------


def test_replay_refuses_an_index_out_of_range_or_a_changed_count(
    sweep_replayed: dict[str, Any],
) -> None:
    camp = sweep_replayed["_camp"]
    index = read_json(camp / "serving.json")
    src = index["sources"][1]
    data = (camp / src["path"]).read_bytes()
    cache: Cache = {}
    assert pick_run(src, data, "sources[1]", cache).load_point == src["load_point"]
    for change, field, says in (
        ({"benchmark": 4}, "benchmark", "4 is out of range"),
        ({"benchmarks": 5}, "benchmarks", "says 5 runs, but the carried"),
        ({"benchmark": True}, "benchmark", "expected an integer >= 0"),
        ({"format": "vllm"}, "benchmark", "holds one run per file"),
    ):
        with pytest.raises(BundleFormatError) as exc:
            pick_run(src | change, data, "sources[1]", cache)
        p = exc.value.problems
        assert [(x.where, x.record, x.field) for x in p] == [
            ("files/serving.json", "sources[1]", field)
        ]
        assert says in p[0].message

    # The bundle's whole serving view: that source is a listed problem (a conformance
    # deviation), its claims unverifiable; the other sources still parse.
    index["sources"][1]["benchmark"] = 9
    files = {"files/serving.json": json.dumps(index).encode()}

    def member(name: str) -> bytes | None:
        if name in files:
            return files[name]
        p = camp / name.removeprefix("files/")
        return p.read_bytes() if p.is_file() else None

    data_view = load_serving(member)
    assert data_view is not None
    assert len(data_view.runs) == 7
    assert any("sources[1]: benchmark 9 is out of range" in x for x in data_view.problems)
    # A file is parsed once for every source naming it; each run keeps its entry's arm.
    index["sources"][1]["benchmark"] = 1
    index["sources"].append(index["sources"][2] | {"arm": "other"})
    files["files/serving.json"] = json.dumps(index).encode()
    data_view = load_serving(member)
    assert data_view is not None and data_view.problems == ()
    lp = index["sources"][2]["load_point"]
    assert data_view.runs[("other", lp)].run.arm == "other"
    assert data_view.runs[(index["sources"][2]["arm"], lp)].run.arm == "base"


def test_one_run_files_import_as_before(tmp_path: Path) -> None:
    # What a70afa3 (before several runs per file) wrote for one-run files: each
    # carried as sources/<arm>/<load point>.<ext>, an entry without benchmark fields,
    # the attempt's note unchanged (the whole directory was compared byte for byte
    # against a70afa3's import when this landed).
    for fmt, root, ext in (("guidellm", GUIDELLM, "json"), ("sglang", SGLANG, "jsonl")):
        arms = [(run[:4], f"{root / run}.{ext}") for run in ("base-c2", "cand-r8")]
        res = import_runs(tmp_path, fmt, arms, "-q", camp=fmt)
        assert res.returncode == 0, res.stderr
        index = read_json(tmp_path / fmt / "serving.json")
        for s in index["sources"]:
            assert set(s) == {"arm", "format", "path", "load_point", "original_name", "sha256"}
            assert s["path"] == f"sources/{s['arm']}/{s['load_point']}.{ext}"
        note = json.loads((tmp_path / fmt / "attempts.jsonl").read_text())["note"]
        assert note == "one benchmark run per source file; the tool records no attempt boundaries"
