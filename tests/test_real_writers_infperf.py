"""The inference-perf importer on reports the real tool wrote.

``fixtures/real_writers/inference-perf-0.7.0/`` holds what ``inference-perf -c
CONFIG`` 0.7.0 (from PyPI, on Python 3.11 with ``--ignore-requires-python``)
wrote against ``fixtures/real_writers/server.py``: two arms (a slower server and
a faster one that fails every 12th request), each at a constant arrival of 8
requests/s and a Poisson arrival of 5 requests/s (one 2 s stage per run) and
10 requests at concurrency 2,
streamed completions, the per-request report on (``fixtures/real_writers/
README.md`` says how). inference-perf is not installed here.

Two independent computations check the importer and replay: inference-perf's
own aggregates (every claim made from them must be confirmed), and plain numpy
over the per-request report, following the definitions read in inference-perf's
source (``reportgen/base.py``), not our parser.
"""

from __future__ import annotations

import dataclasses
import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bundler.format.serving_run import ServingRun, SourceError
from bundler.importers import inference_perf as ip
from replay.serving.stats import RunStats, throughput
from tests import real_writers_support as support
from tests.real_writers_support import cli as _cli
from tests.real_writers_support import import_seal_replay, read_json

REAL = support.REAL / "inference-perf-0.7.0"
RUNS = tuple(
    f"{arm}-{lp}"
    for arm in ("base", "cand")
    for lp in ("constant-r8", "poisson-r5", "concurrent-c2")
)
# The arrival process is part of the load point id (specs/claims-vocabulary.md): constant
# gaps at rate 8 are "-constant"; Poisson is the default and is not named.
LOAD_POINT = {
    "constant-r8": "r8-cnone-constant",
    "poisson-r5": "r5-cnone",
    "concurrent-c2": "rinf-c2",
}
METRICS = {
    "time_to_first_token": "ttft",
    "time_per_output_token": "tpot",
    "inter_token_latency": "itl",
    "request_latency": "e2el",
}
PERCENTILES = (0.1, 1, 5, 10, 25, 50, 75, 90, 95, 99, 99.9)


def _summary(run: str) -> dict[str, Any]:
    return read_json(REAL / run / ip.AGGREGATE_NAME)


def _entries(run: str) -> list[dict[str, Any]]:
    doc: list[dict[str, Any]] = json.loads((REAL / run / ip.RECORDS_NAME).read_text())
    return doc


def _files(run: str, **override: bytes) -> tuple[tuple[bytes, str], ...]:
    out = []
    for name in (ip.RECORDS_NAME, ip.AGGREGATE_NAME, ip.CONFIG_NAME):
        data = override.get(name.split("_")[0].split(".")[0], (REAL / run / name).read_bytes())
        out.append((data, f"{run}/{name}"))
    return tuple(out)


def _parse(run: str, **override: bytes) -> ServingRun:
    r, a, c = _files(run, **override)
    return ip.parse(r, a, c, "x")


def _arm_lp(run: str) -> str:
    arm, rest = run.split("-", 1)
    return f"{arm}.{LOAD_POINT[rest]}"


# --- the recorded files are what the README says -----------------------------------


def test_the_recording_is_inference_perf_0_7_0_as_described() -> None:
    rec = read_json(REAL / "recording.json")
    assert rec["tool"] == "inference-perf" and rec["version"] == "0.7.0"
    assert rec["python"].startswith("3.11.")  # installed with --ignore-requires-python
    assert [r["dir"] for r in rec["runs"]] == list(RUNS)
    for run in RUNS:
        cfg = (REAL / run / ip.CONFIG_NAME).read_text()
        assert f"type: {run.split('-')[1]}\n" in cfg
        assert "per_request: true" in cfg and "computed_metrics: true" in cfg
        entries = _entries(run)
        failed = sum(e["error"] is not None for e in entries)
        assert failed == (1 if run.startswith("cand") else 0)
        # One stage per run: the stage report and the summary agree on the successes.
        stage = read_json(REAL / run / "stage_0_lifecycle_metrics.json")
        assert stage["successes"] == _summary(run)["successes"]
    size = sum(p.stat().st_size for p in REAL.rglob("*") if p.is_file())
    assert size < 700_000


# --- end to end: the real files through import, seal, replay ----------------------


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("real-infperf")
    arms = [(run[:4], REAL / run) for run in RUNS]
    doc = import_seal_replay(tmp, "inference-perf", arms, "--json")
    doc["_import"] = json.loads(doc["_import"].stdout)
    return doc


def _expected() -> dict[str, float]:
    """claim id -> inference-perf's own figure (ms for latencies), enumerated here from
    the summary files: every latency statistic, three throughputs, three counts."""
    out: dict[str, float] = {}
    for run in RUNS:
        doc = _summary(run)
        pre = _arm_lp(run)
        for metric, lat in METRICS.items():
            stats = doc["successes"]["latency"][metric]
            out[f"{pre}.mean_{lat}_ms"] = stats["mean"] * 1000
            out[f"{pre}.p0_{lat}_ms"] = stats["min"] * 1000
            out[f"{pre}.p100_{lat}_ms"] = stats["max"] * 1000
            for p in PERCENTILES:
                key = "median" if p == 50 else f"p{p:g}"
                out[f"{pre}.{key}_{lat}_ms"] = stats[key] * 1000
        tp = doc["successes"]["throughput"]
        out[f"{pre}.request_throughput"] = tp["requests_per_sec"]
        out[f"{pre}.output_throughput"] = tp["output_tokens_per_sec"]
        out[f"{pre}.total_token_throughput"] = tp["total_tokens_per_sec"]
        out[f"{pre}.completed"] = doc["successes"]["count"]
        out[f"{pre}.failed"] = doc["failures"]["count"]
        out[f"{pre}.total_input_tokens"] = doc["successes"]["prompt_tokens"]["total"]
    return out


def test_every_claim_from_inference_perfs_aggregates_is_confirmed(
    replayed: dict[str, Any],
) -> None:
    assert replayed["_exit"] == 0
    checks = {c["claim_id"]: c for c in replayed["claims"]["checks"]}
    expected = _expected()
    assert set(checks) == set(expected)
    bad = {k: c for k, c in checks.items() if c["status"] != "confirmed"}
    assert not bad, bad
    for key, c in checks.items():
        tool = expected[key]
        assert Fraction(c["exact"]) == pytest.approx(Fraction(tool), rel=1e-9, abs=1e-12), key
        assert Fraction(c["claimed"]) == pytest.approx(tool, abs=0.51 * 10 ** -c["decimals"])
    assert replayed["conformance"]["deviations"] == []
    assert replayed["_import"]["claims"] == len(expected)


def test_what_is_not_claimed_or_not_evidenced_is_said(replayed: dict[str, Any]) -> None:
    nc = (replayed["_camp"] / "not_claimed.jsonl").read_text()
    assert "normalized_time_per_output_token" in nc and "input_tokens_per_sec" in nc
    assert "successes.output_tokens.total" in nc  # server counts, not the client's
    ne = replayed["not_evidenced"]
    assert any("monotonic clock" in x for x in ne)
    serving = read_json(replayed["_camp"] / "serving.json")
    src = serving["sources"][0]
    assert src["format"] == "inference-perf"
    assert src["config_path"].endswith("/config.yaml")


# --- an independent derivation: plain numpy over the per-request report -----------


def _numpy_values(run: str) -> dict[str, np.ndarray]:
    """inference-perf's definitions (reportgen/base.py, compute_request_latency_metrics),
    applied with plain numpy to the report's entries."""
    vals: dict[str, list[float]] = {k: [] for k in ("ttft", "tpot", "itl", "e2el")}
    for e in _entries(run):
        if e["error"] is not None:
            continue
        vals["e2el"].append(e["end_time"] - e["start_time"])
        rm = e["info"]["response_metrics"]
        times = rm["output_token_times"]
        if len(times) > 1:
            vals["ttft"].append(times[0] - e["start_time"])
            if rm["output_tokens"] > 1:
                vals["tpot"].append((times[-1] - times[0]) / (rm["output_tokens"] - 1))
            vals["itl"] += list(np.diff(times))
    return {k: np.array(v) for k, v in vals.items()}


@pytest.mark.parametrize("run", RUNS)
def test_numpy_over_the_records_gives_the_tools_aggregates_and_replays(run: str) -> None:
    doc = _summary(run)
    vals = _numpy_values(run)
    stats = RunStats(_parse(run))
    for metric, lat in METRICS.items():
        tool = doc["successes"]["latency"][metric]
        x = vals[lat]
        assert np.mean(x) == pytest.approx(tool["mean"], rel=1e-12), (run, lat)
        assert float(Fraction(stats.latency(lat, "mean", None))) == pytest.approx(  # type: ignore[arg-type]
            np.mean(x), rel=1e-12
        )
        for p in PERCENTILES:
            key = "median" if p == 50 else f"p{p:g}"
            want = np.percentile(x, p, method="linear")
            assert want == pytest.approx(tool[key], rel=1e-12), (run, lat, key)
            got = stats.latency(lat, "percentile", Fraction(str(p)))
            assert float(got) == pytest.approx(want, rel=1e-12), (run, lat, key)
        assert np.min(x) == tool["min"] and np.max(x) == tool["max"]
    entries = _entries(run)
    ok = [e for e in entries if e["error"] is None]
    window = max(e["end_time"] for e in entries) - min(e["start_time"] for e in entries)
    assert window == doc["benchmark_time_seconds"]  # failed requests count in the window
    out = sum(e["info"]["response_metrics"]["output_tokens"] for e in ok)
    inp = sum(e["info"]["request_metrics"]["text"]["input_tokens"] for e in ok)
    tp = doc["successes"]["throughput"]
    assert len(ok) / window == tp["requests_per_sec"]
    assert out / window == tp["output_tokens_per_sec"]
    assert (inp + out) / window == tp["total_tokens_per_sec"]
    assert float(throughput(stats.run, "output_tokens")) == pytest.approx(out / window, rel=1e-15)


@pytest.mark.parametrize("run", RUNS)
def test_per_request_values_are_the_tools_computed_metrics(run: str) -> None:
    r = _parse(run)
    cm = [e.get("computed_metrics") for e in _entries(run)]
    tpots = [m["time_per_output_token"] for i, m in enumerate(cm) if m is not None and r.ok[i]]
    assert list(r.samples["tpot"]) == tpots
    for i, m in enumerate(cm):
        if m is None:
            assert not r.ok[i]
            continue
        assert r.ttfts[i] == m["time_to_first_token"]
        assert r.latencies is not None and r.latencies[i] == m["request_latency"]
        lo = int(r.itl_counts[:i].sum())
        assert list(r.itl[lo : lo + int(r.itl_counts[i])]) == m["inter_token_latencies"]


def test_tpot_is_inference_perfs_first_to_last_token_not_vllms() -> None:
    # vLLM's TPOT is (latency - ttft) / (n - 1); inference-perf's ends at the last token
    # time, not at the end of the response. Under vLLM's definition the same records give
    # a different mean, which a 2-decimal claim in ms would contradict.
    run = "base-constant-r8"
    r = _parse(run)
    tool_ms = _summary(run)["successes"]["latency"]["time_per_output_token"]["mean"] * 1000
    own = RunStats(r).latency("tpot", "mean", None)
    as_vllm = RunStats(dataclasses.replace(r, samples={})).latency("tpot", "mean", None)
    assert float(own) * 1000 == pytest.approx(tool_ms, rel=1e-12)
    assert abs(float(as_vllm) * 1000 - tool_ms) > 0.005


def test_the_arrival_process_is_read_from_the_config() -> None:
    want = {
        "constant-r8": (8.0, None, None),
        "poisson-r5": (5.0, None, None),
        # inference-perf writes a runtime rate and duration into a concurrent stage too:
        # the load point is its concurrency and request count, the rate "inf".
        "concurrent-c2": (math.inf, 2, 10),
    }
    for run in RUNS:
        r = _parse(run)
        lp = run.split("-", 1)[1]
        assert r.meta["arrival"] == lp.split("-")[0]
        assert (r.request_rate, r.max_concurrency, r.num_prompts) == want[lp]
        assert r.load_point == LOAD_POINT[lp]
        if r.num_prompts is not None:
            assert r.n == r.num_prompts


def test_a_request_with_one_token_time_has_no_ttft_tpot_or_gaps() -> None:
    entries = _entries("base-constant-r8")
    rm = entries[0]["info"]["response_metrics"]
    rm["output_token_times"] = rm["output_token_times"][:1]
    r = _parse("base-constant-r8", per=json.dumps(entries).encode())
    assert np.isnan(r.ttfts[0]) and r.samples["tpot"].size == r.completed - 1
    assert r.itl_counts[0] == 0
    ttft = RunStats(r).values("ttft")
    assert not isinstance(ttft, str) and ttft.size == r.completed - 1


# --- bad input: located problems, nothing written ---------------------------------


def _problem(run: str, **override: bytes) -> tuple[str, str | None, str | None, str]:
    with pytest.raises(SourceError) as ei:
        _parse(run, **override)
    p = ei.value.problems[0]
    return p.where, p.record, p.field, p.message


def _cfg(run: str, old: str, new: str) -> bytes:
    text = (REAL / run / ip.CONFIG_NAME).read_text()
    assert old in text
    return text.replace(old, new).encode()


def test_configs_it_cannot_split_or_does_not_read_are_refused() -> None:
    run = "base-constant-r8"
    two = _cfg(run, "  - rate: 8.0\n", "  - rate: 4.0\n    duration: 2\n  - rate: 8.0\n")
    where, _, field, msg = _problem(run, config=two)
    assert where.endswith(ip.CONFIG_NAME) and field == "load.stages"
    assert "exactly one stage" in msg
    trace = _cfg(run, "  type: constant\n", "  type: trace_replay\n")
    assert _problem(run, config=trace)[2] == "load.type"
    bomb = b"a: &x [1, 2]\nb: *x\n"
    assert "aliases" in _problem(run, config=bomb)[3]
    assert "not YAML" in _problem(run, config=b"load: [\n")[3]
    deep = _problem(run, config=b"a: " + b"[" * 5_000 + b"]" * 5_000)[3]
    assert "too deeply" in deep or "not YAML" in deep
    assert "larger than" in _problem(run, config=b"#" * (ip.CONFIG_MAX_BYTES + 1))[3]
    assert _problem(run, config=b"- 1\n")[3].startswith("expected a YAML mapping")


def test_a_summary_that_is_not_inference_perfs_is_refused() -> None:
    vllm = (support.REAL / "vllm-0.33.0" / "base-c2.json").read_bytes()
    where, _, field, _ = _problem("base-constant-r8", summary=vllm)
    assert where.endswith(ip.AGGREGATE_NAME) and field == "benchmark_time_seconds"
    assert _problem("base-constant-r8", summary=b"[]")[3].startswith("expected an object")


def test_hostile_entries_are_located() -> None:
    run = "cand-constant-r8"

    def bad(mutate: Any) -> tuple[str, str | None, str | None, str]:
        entries = _entries(run)
        mutate(entries)
        return _problem(run, per=json.dumps(entries).encode())

    def swap(es: list[dict[str, Any]]) -> None:
        es[3]["end_time"] = es[3]["start_time"] - 1

    def back(es: list[dict[str, Any]]) -> None:
        es[2]["info"]["response_metrics"]["output_token_times"][4] = 0.0

    def text(es: list[dict[str, Any]]) -> None:
        es[1]["info"]["response_metrics"]["output_tokens"] = "13"

    assert bad(swap)[1:3] == ("entry 3", "end_time")
    assert bad(back)[1:3] == ("entry 2", "info.response_metrics.output_token_times")
    where, rec, field, msg = bad(text)
    assert (rec, field) == ("entry 1", "info.response_metrics.output_tokens")
    assert where.endswith(ip.RECORDS_NAME) and "'13'" in msg
    assert "not JSON" in _problem(run, per=(REAL / run / ip.RECORDS_NAME).read_bytes()[:500])[3]


def test_a_run_without_the_per_request_report_is_refused_with_the_setting(
    tmp_path: Path,
) -> None:
    d = tmp_path / "run"
    d.mkdir()
    for name in (ip.AGGREGATE_NAME, ip.CONFIG_NAME):
        (d / name).write_bytes((REAL / "base-constant-r8" / name).read_bytes())
    res = _cli(
        "import", "inference-perf", "-o", tmp_path / "camp",
        "--arm", f"a={d}", "--arm", f"b={REAL / 'cand-constant-r8'}",
        "--commit", "a=aaaaaaa", "--commit", "b=bbbbbbb",
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "per_request: true" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "camp").exists()
