"""Serving statistics and the vLLM importer, against independent computations.

Expected values come from plain numpy (``numpy.percentile`` default method,
``numpy.std`` population SD, as vLLM computes them) or are derived by hand in
comments; the vLLM-shaped inputs come from ``samples/vllm-serve-sweep/make_sweep.py``,
which reproduces the writer in ``vllm/benchmarks/serve.py``.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bundler.format.serving_run import SourceError
from bundler.importers import vllm
from replay.engine.exact import round_half_even, to_double
from replay.serving.stats import RunStats, good_requests, throughput

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "make_sweep", ROOT / "samples" / "vllm-serve-sweep" / "make_sweep.py"
)
assert _spec is not None and _spec.loader is not None
make_sweep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_sweep)


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reprobundle.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=cwd,
    )


def _run_of(doc: dict[str, Any], arm: str = "a") -> RunStats:
    return RunStats(vllm.parse(json.dumps(doc).encode(), "f.json", arm))


# --- statistics ----------------------------------------------------------------------


def test_percentiles_mean_sd_match_numpy() -> None:
    doc = make_sweep.make_result(seed=7, concurrency=8, speed=1.0, n=101, failures=3)
    rs = _run_of(doc)
    ok = [e == "" for e in doc["errors"]]
    ttft = np.array([t for t, k in zip(doc["ttfts"], ok, strict=True) if k])
    itl = np.array([g for gaps, k in zip(doc["itls"], ok, strict=True) if k for g in gaps])
    for values, name in ((ttft, "ttft"), (itl, "itl")):
        for p in (50, 90, 95, 99, 99.9):
            exact = rs.latency(name, "percentile", Fraction(Decimal(str(p))))
            assert not isinstance(exact, str)
            assert to_double(exact) == pytest.approx(np.percentile(values, p), rel=1e-14)
        mean = rs.latency(name, "mean", None)
        sd = rs.latency(name, "sd", None)
        assert not isinstance(mean, str) and not isinstance(sd, str)
        assert to_double(mean) == pytest.approx(np.mean(values), rel=1e-14)
        assert to_double(sd) == pytest.approx(np.std(values), rel=1e-12)  # population (n)


def test_hand_computed_percentile_sd_and_tpot() -> None:
    # ttfts 1, 2, 3, 4 s. p90: h = 3 * 0.9 = 2.7 -> 3 + 0.7 * (4 - 3) = 3.7 exactly.
    # population SD: mean 2.5, squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5, / 4 = 1.25.
    # TPOT: request 0 has 1 output token (excluded); request 1: (10 - 2) / (5 - 1) = 2.
    doc = {
        "duration": 10.0,
        "completed": 4,
        "request_throughput": 0.4,
        "input_lens": [1, 1, 1, 1],
        "output_lens": [1, 5, 0, 0],
        "ttfts": [1.0, 2.0, 3.0, 4.0],
        "itls": [[], [2.0, 2.0, 2.0, 2.0], [], []],
        "latencies": [1.0, 10.0, 3.0, 4.0],
        "errors": ["", "", "", ""],
    }
    rs = _run_of(doc)
    assert rs.latency("ttft", "percentile", Fraction(90)) == Fraction(37, 10)
    sd = rs.latency("ttft", "sd", None)
    assert not isinstance(sd, str)
    assert to_double(sd) == 1.25**0.5
    assert rs.latency("tpot", "mean", None) == 2
    # Goodput with TTFT <= 2500 ms: requests 0 and 1 -> 2 good.
    assert good_requests(rs, {"ttft": Fraction(2500)}) == 2
    # total tokens: inputs 4 + outputs 6 = 10 over 10 s -> 1 token/s.
    assert throughput(rs.run, "total_tokens") == 1


def test_half_to_even_in_ms() -> None:
    # The double 0.0125 is 0.01250000000000000069...; x1000 is nearest the double 12.5,
    # whose exact decimal is a tie: half to even gives 12, not 13.
    doc = {
        "duration": 1.0,
        "completed": 1,
        "request_throughput": 1.0,
        "input_lens": [1],
        "output_lens": [1],
        "ttfts": [0.0125],
        "itls": [[]],
        "errors": [""],
    }
    rs = _run_of(doc)
    v = rs.latency("ttft", "mean", None)
    assert isinstance(v, Fraction)
    assert round_half_even(v * 1000, 0) == Decimal(12)
    assert round_half_even(v * 1000, 1) == Decimal("12.5")


# --- the importer, end to end through the CLI ------------------------------------------


def _write(tmp: Path, name: str, doc: dict[str, Any] | str) -> Path:
    p = tmp / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return p


def _import(
    tmp: Path, pairs: list[tuple[str, Path]], *extra: str
) -> subprocess.CompletedProcess[str]:
    args = ["import", "vllm", "-o", str(tmp / "camp")]
    for arm, p in pairs:
        args += ["--arm", f"{arm}={p}"]
    return _cli(*args, "--commit", "base=aaaaaaa", "--commit", "cand=bbbbbbb", *extra)


def _good(seed: int, conc: int = 8) -> dict[str, Any]:
    doc: dict[str, Any] = make_sweep.make_result(seed=seed, concurrency=conc, speed=1.0, n=30)
    return doc


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: json.dumps(d)[:-40], "not JSON"),
        (lambda d: {**d, "ttfts": d["ttfts"][:-1]}, "'ttfts'"),
        (lambda d: {**d, "ttfts": [-1.0, *d["ttfts"][1:]]}, "'ttfts[0]'"),
        (lambda d: json.dumps(d).replace('"latencies": [', '"latencies": [NaN, ', 1), "latencies"),
        (lambda d: {"hello": 1}, "not written by vllm bench serve"),
    ],
)
def test_bad_sources_are_refused_naming_file_and_field(
    tmp_path: Path, mutate: Any, field: str
) -> None:
    bad = _write(tmp_path, "bad.json", mutate(_good(1)))
    res = _import(tmp_path, [("base", _write(tmp_path, "ok.json", _good(2))), ("cand", bad)])
    assert res.returncode == 2, res.stderr
    assert "bad.json" in res.stderr and field in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "camp").exists()
    assert not [p for p in tmp_path.iterdir() if "partial" in p.name]


def test_two_files_for_one_arm_and_load_point(tmp_path: Path) -> None:
    a, b = _write(tmp_path, "a.json", _good(1)), _write(tmp_path, "b.json", _good(2))
    c = _write(tmp_path, "c.json", _good(3))
    res = _import(tmp_path, [("base", a), ("base", b), ("cand", c)])
    assert res.returncode == 2
    assert "b.json" in res.stderr and "rinf-c8" in res.stderr and "a.json" in res.stderr
    assert not (tmp_path / "camp").exists()


def _seal_replay(tmp: Path, keys: Any = None) -> tuple[int, dict[str, Any]]:
    seal = _cli("seal", str(tmp / "camp"), "-o", str(tmp / "x.bundle"), "--unsigned")
    assert seal.returncode == 0, seal.stderr
    rep = _cli("replay", str(tmp / "x.bundle"), "--allow-unsigned", "--json")
    return rep.returncode, json.loads(rep.stdout)


def _claims(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {c["claim_id"]: c for c in doc["claims"]["checks"]}
    return out


def test_aggregate_that_does_not_follow_is_contradicted(tmp_path: Path) -> None:
    d = _good(4)
    d["p99_ttft_ms"] += 0.5  # not what the arrays give
    base = _write(tmp_path, "base.json", _good(5))
    res = _import(tmp_path, [("base", base), ("cand", _write(tmp_path, "cand.json", d))])
    assert res.returncode == 0, res.stderr
    code, doc = _seal_replay(tmp_path)
    assert code == 4
    c = _claims(doc)
    bad = [k for k, v in c.items() if v["status"] == "contradicted"]
    assert bad == ["cand.rinf-c8.p99_ttft_ms"]
    assert "sources/cand/rinf-c8.json" in c[bad[0]]["derivation"]


def test_aggregates_only_and_old_writer(tmp_path: Path) -> None:
    # Without --save-detailed the writer drops the per-request arrays (not 'latencies');
    # the older benchmark_serving.py has no 'latencies' and spells "request_goodput:".
    agg = {k: v for k, v in _good(6).items() if k not in vllm._PER_REQUEST and k != "latencies"}
    old = {k: v for k, v in _good(7).items() if k not in ("latencies", "failed", "start_times")}
    old["request_goodput:"] = old.pop("request_goodput")
    res = _import(
        tmp_path,
        [("base", _write(tmp_path, "agg.json", agg)), ("cand", _write(tmp_path, "old.json", old))],
    )
    assert res.returncode == 0, res.stderr
    assert "will be unverifiable at replay" in res.stderr
    assert "records no per-request" in res.stderr and "--save-detailed" in res.stderr
    code, doc = _seal_replay(tmp_path)
    assert code == 5
    c = _claims(doc)
    assert all(v["status"] == "unverifiable" for k, v in c.items() if k.startswith("base."))
    assert c["cand.rinf-c8.mean_ttft_ms"]["status"] == "confirmed"
    assert c["cand.rinf-c8.mean_e2el_ms"]["status"] == "unverifiable"
    assert "latencies" in c["cand.rinf-c8.p99_tpot_ms"]["explanation"]
    assert any("timestamps" in x for x in doc["not_evidenced"])


def test_sample_sweep_imports_seals_replays_confirmed(tmp_path: Path) -> None:
    results = tmp_path / "results"
    paths = make_sweep.main(results)
    committed = ROOT / "samples" / "vllm-serve-sweep" / "results"
    for p in paths:  # the committed sample is what the generator writes, byte for byte
        assert (committed / p.name).read_bytes() == p.read_bytes()
    args = ["import", "vllm", "-o", str(tmp_path / "camp"), "--goodput", "ttft:60"]
    for p in paths:
        args += ["--arm", f"{p.stem.rsplit('-', 1)[1]}={p}"]
    res = _cli(*args, "--commit", "baseline=aaaaaaa", "--commit", "candidate=bbbbbbb")
    assert res.returncode == 0, res.stderr
    # The generator writes request_goodput null; state a goodput claim by hand, with its
    # expected value computed independently: numpy over the file's arrays.
    doc = json.loads(paths[1].read_text())
    ok = np.array([e == "" for e in doc["errors"]])
    good = int(np.count_nonzero(ok & (np.array(doc["ttfts"]) <= 60 / 1000)))
    expected = Decimal(good / doc["duration"]).quantize(Decimal("0.0001"))
    # Comparisons at rinf-c8, also from numpy: p99 TTFT percent lower, throughput ratio.
    cand = json.loads(paths[4].read_text())
    b99 = np.percentile(np.array(doc["ttfts"])[ok], 99)
    c99 = np.percentile(np.array(cand["ttfts"])[[e == "" for e in cand["errors"]]], 99)
    lower = Decimal((1 - c99 / b99) * 100).quantize(Decimal("0.1"))
    ratio = Decimal(cand["output_throughput"] / doc["output_throughput"]).quantize(Decimal("0.01"))
    pair = {"baseline": "baseline", "candidate": "candidate", "load_point": "rinf-c8"}
    extra = [
        {
            "claim_id": "gp",
            "statistic": "request_goodput",
            "value": str(expected),
            "params": {"arm": "baseline", "load_point": "rinf-c8", "ttft_ms": 60},
            "unit": "requests/s",
        },
        {
            "claim_id": "lower",
            "statistic": "latency_percent_lower",
            "value": str(lower),
            "params": {**pair, "latency": "ttft", "stat": "p99"},
            "unit": "%",
        },
        {
            "claim_id": "ratio",
            "statistic": "throughput_ratio",
            "value": str(ratio),
            "params": {**pair, "throughput": "output_tokens"},
            "unit": "x",
        },
    ]
    with (tmp_path / "camp" / "claims.jsonl").open("a") as f:
        f.writelines(json.dumps(c) + "\n" for c in extra)
    code, rep = _seal_replay(tmp_path)
    assert code == 0, [c for c in rep["claims"]["checks"] if c["status"] != "confirmed"]
    checks = _claims(rep)
    assert {checks[k]["status"] for k in ("gp", "lower", "ratio")} == {"confirmed"}
    points = {(p["arm"], p["load_point"]): p for p in rep["serving"]}
    assert len(points) == 6
    assert points[("baseline", "rinf-c8")]["output_tokens_per_s"] == pytest.approx(
        doc["output_throughput"], rel=1e-12
    )
    assert len(checks) == 6 * 39 + 3
    assert (
        "server identity (the tool does not name the server instance that answered)"
        in rep["not_evidenced"]
    )


def test_parse_quirks() -> None:
    d = _good(9)
    d["request_goodput:"] = 3.5
    run = vllm.parse(json.dumps(d).encode(), "q.json", "a")
    assert run.load_point == "rinf-c8" and run.aggregates["request_goodput:"] == 3.5
    assert run.meta["date"] == "20251201-101500"
    with pytest.raises(SourceError, match="request_rate"):
        vllm.parse(json.dumps({**d, "request_rate": "fast"}).encode(), "q.json", "a")


def test_not_evidenced_in_all_four_views(tmp_path: Path) -> None:
    base, cand = _write(tmp_path, "b.json", _good(11)), _write(tmp_path, "c.json", _good(12))
    assert _import(tmp_path, [("base", base), ("cand", cand)]).returncode == 0
    code, doc = _seal_replay(tmp_path)
    assert code == 0
    what = "server identity (the tool does not name the server instance that answered)"
    assert what in doc["not_evidenced"]
    bundle = str(tmp_path / "x.bundle")
    text = _cli("replay", bundle, "--allow-unsigned")
    assert text.returncode == 0 and what in text.stdout
    assert "1 load point(s) in 2 arm(s)" in text.stdout
    full = _cli("replay", bundle, "--allow-unsigned", "-v")
    assert full.returncode == 0 and "SERVING (LATENCY AGAINST THROUGHPUT)" in full.stdout
    for fmt, name in (("md", "r.md"), ("html", "r.html")):
        out = tmp_path / name
        rep = _cli("report", bundle, "--allow-unsigned", "--format", fmt, "-o", str(out))
        assert rep.returncode == 0, rep.stderr
        body = out.read_text(encoding="utf-8")
        assert "server identity" in body and "per-request timestamps" in body


def test_conformance_deviation_when_plan_and_source_disagree(tmp_path: Path) -> None:
    base, cand = _write(tmp_path, "b.json", _good(13)), _write(tmp_path, "c.json", _good(14))
    assert _import(tmp_path, [("base", base), ("cand", cand)]).returncode == 0
    plan_path = tmp_path / "camp" / "plans" / "serving.json"
    plan = json.loads(plan_path.read_text())
    plan["load_points"][0]["num_prompts"] = 31  # the files hold 30 requests each
    plan_path.write_text(json.dumps(plan))
    code, doc = _seal_replay(tmp_path)
    assert code == 4
    devs = doc["conformance"]["deviations"]
    assert {d["kind"] for d in devs} == {"prompt-count"} and len(devs) == 2


def test_report_shows_latency_throughput_curve(tmp_path: Path) -> None:
    docs = {
        a: make_sweep.make_result(seed=20 + i, concurrency=8, speed=1.0, n=30)
        for i, a in enumerate(("base", "cand"))
    }
    pairs = [(a, _write(tmp_path, f"{a}.json", d)) for a, d in docs.items()]
    assert _import(tmp_path, pairs).returncode == 0
    _seal_replay(tmp_path)
    bundle = str(tmp_path / "x.bundle")
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    for fmt, out in (("html", html), ("md", md)):
        res = _cli("report", bundle, "--allow-unsigned", "--format", fmt, "-o", str(out))
        assert res.returncode == 0, res.stderr
    page = html.read_text(encoding="utf-8")
    section = page[page.index('<section id="serving">') :]
    assert "<svg" in section[: section.index("</section>")]
    assert 'id="serving-curve-figure_1"' in section
    text = md.read_text(encoding="utf-8")
    for d in docs.values():  # the writer's own output_throughput, printed at 2 decimals
        assert format(d["output_throughput"], ".2f") in text
    again = tmp_path / "r2.html"
    _cli("report", bundle, "--allow-unsigned", "--format", "html", "-o", str(again))
    assert again.read_bytes() == html.read_bytes()


def test_goodput_imported_with_its_slos(tmp_path: Path) -> None:
    # The value as vLLM computes it: successful requests with ttft <= 60 / 1000 s, per second.
    d = _good(30)
    ok = np.array([e == "" for e in d["errors"]])
    d["request_goodput"] = (
        int(np.count_nonzero(ok & (np.array(d["ttfts"]) <= 0.06))) / d["duration"]
    )
    old = _good(31)  # the older writer's key, with its trailing colon
    old.pop("request_goodput")
    old["request_goodput:"] = 0.0  # wrong on purpose: some requests meet the SLO
    base, cand = _write(tmp_path, "b.json", d), _write(tmp_path, "c.json", old)
    res = _import(tmp_path, [("base", base), ("cand", cand)], "--goodput", "ttft:60")
    assert res.returncode == 0, res.stderr
    code, doc = _seal_replay(tmp_path)
    c = _claims(doc)
    assert c["base.rinf-c8.request_goodput"]["status"] == "confirmed"
    assert c["cand.rinf-c8.request_goodput"]["status"] == "contradicted"
    assert code == 4
    # Without --goodput the figure is listed as not claimed, never dropped silently.
    res = _cli(
        "import",
        "vllm",
        "-o",
        str(tmp_path / "c2"),
        "--arm",
        f"base={base}",
        "--arm",
        f"cand={cand}",
        "--commit",
        "base=aaaaaaa",
        "--commit",
        "cand=bbbbbbb",
    )
    assert res.returncode == 0
    rows = [json.loads(r) for r in (tmp_path / "c2" / "not_claimed.jsonl").read_text().splitlines()]
    good = [r for r in rows if r["what"].startswith("request goodput")]
    assert len(good) == 2 and all("--goodput" in r["note"] for r in good)
    # The other rows: the per-second peaks the writer prints (max_concurrent_requests ...).
    assert all("max_concurrent_requests" in r["what"] for r in rows if r not in good)
