"""The AIPerf importer, against independent computations.

The inputs are written here the way AIPerf's exporters write them (ai-dynamo/aiperf
3a4b58d5, nvda-ci/aiperf 8e6a033d: ``profile_export.jsonl`` records
``{"metadata": {...}, "metrics": {tag: {"value", "unit"}}, "error"}`` and
``profile_export_aiperf.json`` with ``{tag: {"unit", "avg", "p1".."p99", "min",
"max", "std"}}``). The aggregates are computed as AIPerf computes them, with plain
numpy over the per-record millisecond values (``numpy.percentile`` default,
``numpy.std`` population, ``numpy.mean``): an independent computation of what
replay re-derives exactly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bundler.format.serving_run import SourceError
from bundler.importers import aiperf
from replay.engine.exact import to_double
from replay.serving.conformance import peak_in_flight
from replay.serving.stats import RunStats, throughput

_PCTS = (1, 5, 10, 25, 50, 75, 90, 95, 99)
T0 = 1_759_813_207_532_900_363  # an epoch in ns, as request_start_ns holds


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reprobundle.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _dist(values: list[float], unit: str) -> dict[str, Any]:
    a = np.array(values, dtype=np.float64)
    out: dict[str, Any] = {"unit": unit, "avg": float(np.mean(a))}
    out |= {f"p{p}": float(v) for p, v in zip(_PCTS, np.percentile(a, _PCTS), strict=True)}
    return out | {"min": float(a.min()), "max": float(a.max()), "std": float(np.std(a))}


def make_run(
    seed: int, n: int = 40, conc: int = 4, failures: int = 2, workers: int | None = None
) -> tuple[str, str]:
    """(profile_export.jsonl text, profile_export_aiperf.json text) of one synthetic run.

    ``workers`` clients (default ``conc``, as AIPerf's concurrency mode) each send
    their next request once the previous one has ended.
    """
    rng = np.random.default_rng(seed)
    free = [T0 + w * 5_000_000 for w in range(workers or conc)]
    lines: list[str] = []
    ttft: list[float] = []
    lat: list[float] = []
    itl: list[float] = []
    chunks: list[float] = []
    isl: list[int] = []
    osl: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    for i in range(n):
        w = i % len(free)
        start = free[w] + int(rng.integers(0, 1_000_000))
        md = {
            "session_num": i,
            "x_request_id": f"req-{seed}-{i}",
            "x_correlation_id": f"corr-{seed}-{i}",
            "conversation_id": f"conv-{i}",
            "turn_index": 0,
            "request_start_ns": start,
            "request_ack_ns": None,
            "request_end_ns": None,
            "worker_id": f"worker_{i % len(free):08x}",
            "record_processor_id": "record_processor_1fa47cd7",
            "benchmark_phase": "profiling",
            "was_cancelled": False,
            "cancellation_time_ns": None,
        }
        in_len = int(rng.integers(100, 600))
        if i % (n // max(failures, 1)) == 3 and failures:
            end = start + 600_000
            free[w] = end
            md["request_end_ns"] = end
            starts.append(start)
            rec = {
                "metadata": md,
                "metrics": {"error_isl": {"value": in_len, "unit": "tokens"}},
                "error": {"code": 500, "type": "InternalServerError", "message": "boom"},
            }
            lines.append(json.dumps(rec))
            continue
        out_len = int(rng.integers(1, 40)) if i % 7 else 1
        gaps = [float(g) for g in rng.gamma(4.0, 1.3, size=out_len - 1)]
        t_first = float(rng.gamma(6.0, 9.0))
        latency = t_first + float(sum(gaps))
        end = start + int(latency * 1e6)
        free[w] = end
        md["request_ack_ns"] = start + 1000
        md["request_end_ns"] = end
        metrics: dict[str, Any] = {
            "input_sequence_length": {"value": in_len, "unit": "tokens"},
            "time_to_first_token": {"value": t_first, "unit": "ms"},
            "request_latency": {"value": latency, "unit": "ms"},
            "output_token_count": {"value": out_len, "unit": "tokens"},
            "output_sequence_length": {"value": out_len, "unit": "tokens"},
        }
        if out_len > 1:
            per_req = (latency - t_first) / (out_len - 1)
            metrics["inter_chunk_latency"] = {"value": gaps, "unit": "ms"}
            metrics["inter_token_latency"] = {"value": per_req, "unit": "ms"}
            metrics["output_token_throughput_per_user"] = {
                "value": 1000.0 / per_req,
                "unit": "tokens/sec/user",
            }
            itl.append(per_req)
            chunks += gaps
        lines.append(json.dumps({"metadata": md, "metrics": metrics, "error": None}))
        ttft.append(t_first)
        lat.append(latency)
        isl.append(in_len)
        osl.append(out_len)
        starts.append(start)
        ends.append(end)
    duration = (max(ends) - min(starts)) / 1e9
    done = len(ttft)
    agg: dict[str, Any] = {
        "request_throughput": {"unit": "requests/sec", "avg": done / duration},
        "request_latency": _dist(lat, "ms"),
        "time_to_first_token": _dist(ttft, "ms"),
        "inter_token_latency": _dist(itl, "ms"),
        "inter_chunk_latency": _dist(chunks, "ms"),
        "output_sequence_length": _dist([float(x) for x in osl], "tokens"),
        "input_sequence_length": _dist([float(x) for x in isl], "tokens"),
        "output_token_throughput": {"unit": "tokens/sec", "avg": sum(osl) / duration},
        "total_token_throughput": {"unit": "tokens/sec", "avg": (sum(osl) + sum(isl)) / duration},
        "benchmark_duration": {"unit": "sec", "avg": duration},
        "request_count": {"unit": "requests", "avg": float(done)},
        "error_request_count": {"unit": "requests", "avg": float(n - done)},
        "total_isl": {"unit": "tokens", "avg": float(sum(isl))},
        "total_osl": {"unit": "tokens", "avg": float(sum(osl))},
        "was_cancelled": False,
        "start_time": "2025-10-17T20:22:08.939332",
        "end_time": "2025-10-17T20:22:24.967633",
        "error_summary": [],
        "goodput": None,
        "input_config": {
            "endpoint": {"model_names": ["m"], "type": "chat", "streaming": True},
            "loadgen": {"concurrency": conc, "request_count": n},
            "cli_command": f"aiperf profile -m m --streaming --concurrency {conc}",
        },
    }
    return "".join(line + "\n" for line in lines), json.dumps(agg, indent=2)


def _write_run(d: Path, jsonl: str, agg: str) -> Path:
    d.mkdir(parents=True)
    (d / aiperf.RECORDS_NAME).write_text(jsonl, encoding="utf-8")
    (d / aiperf.AGGREGATE_NAME).write_text(agg, encoding="utf-8")
    return d


def _parse(jsonl: str, agg: str) -> RunStats:
    run = aiperf.parse(jsonl.encode(), "r.jsonl", agg.encode(), "a.json", "x")
    return RunStats(run)


# --- statistics ----------------------------------------------------------------------


def test_hand_values() -> None:
    # TTFT 10, 20, 30, 40 ms: p90 h = 3 * 0.9 = 2.7 -> 30 + 0.7 * 10 = 37 ms; population
    # SD = 10 * sqrt(1.25) = 11.180339887... ms. TPOT (AIPerf's inter_token_latency):
    # request 0 has 1 token (none); request 1 (100 - 20) / (5 - 1) = 20 ms.
    recs = []
    for i, (t, lat_ms, out) in enumerate(((10, 50, 1), (20, 100, 5), (30, 60, 2), (40, 70, 4))):
        m: dict[str, Any] = {
            "input_sequence_length": {"value": 10, "unit": "tokens"},
            "time_to_first_token": {"value": t, "unit": "ms"},
            "request_latency": {"value": lat_ms, "unit": "ms"},
            "output_sequence_length": {"value": out, "unit": "tokens"},
        }
        if out > 1:
            m["inter_token_latency"] = {"value": (lat_ms - t) / (out - 1), "unit": "ms"}
        recs.append({"metadata": {"session_num": i}, "metrics": m, "error": None})
    jsonl = "".join(json.dumps(r) + "\n" for r in recs)
    agg = json.dumps(
        {
            "benchmark_duration": {"unit": "sec", "avg": 2.0},
            "input_config": {"loadgen": {"concurrency": 2}},
        }
    )
    rs = _parse(jsonl, agg)
    assert rs.run.load_point == "rinf-c2"
    p90 = rs.latency("ttft", "percentile", Fraction(90))
    sd = rs.latency("ttft", "sd", None)
    tpot = rs.latency("tpot", "percentile", Fraction(0))
    assert not isinstance(p90, str) and not isinstance(sd, str) and not isinstance(tpot, str)
    assert to_double(p90) * 1000 == pytest.approx(37.0, rel=1e-13)
    assert to_double(sd) * 1000 == pytest.approx(11.180339887498949, rel=1e-12)
    assert to_double(tpot) * 1000 == pytest.approx(10.0, rel=1e-13)  # min of 20, 30, 10
    # 4 requests, 12 output tokens in 2 s.
    assert throughput(rs.run, "requests") == 2 and throughput(rs.run, "output_tokens") == 6
    itl = rs.latency("itl", "mean", None)
    assert isinstance(itl, str) and "inter-token gaps" in itl


def test_statistics_match_numpy_over_the_records() -> None:
    jsonl, agg_text = make_run(seed=3, n=101, failures=4)
    agg = json.loads(agg_text)
    rs = _parse(jsonl, agg_text)
    assert rs.run.n == 101 and rs.run.completed == int(agg["request_count"]["avg"])
    for tag, lat in (("time_to_first_token", "ttft"), ("request_latency", "e2el")):
        for p in _PCTS:
            exact = rs.latency(lat, "percentile", Fraction(p))
            assert not isinstance(exact, str)
            assert to_double(exact) * 1000 == pytest.approx(agg[tag][f"p{p}"], rel=1e-12)
        sd = rs.latency(lat, "sd", None)
        assert not isinstance(sd, str)
        assert to_double(sd) * 1000 == pytest.approx(agg[tag]["std"], rel=1e-10)
    mean = rs.latency("tpot", "mean", None)
    assert not isinstance(mean, str)
    assert to_double(mean) * 1000 == pytest.approx(agg["inter_token_latency"]["avg"], rel=1e-12)
    out = throughput(rs.run, "output_tokens")
    assert not isinstance(out, str)
    assert float(out) == pytest.approx(agg["output_token_throughput"]["avg"], rel=1e-14)


# --- end to end through the CLI --------------------------------------------------------


def _import(tmp: Path, base: Path, cand: Path) -> subprocess.CompletedProcess[str]:
    return _cli(
        "import",
        "aiperf",
        "-o",
        str(tmp / "camp"),
        "--arm",
        f"base={base}",
        "--arm",
        f"cand={cand}",
        "--commit",
        "base=aaaaaaa",
        "--commit",
        "cand=bbbbbbb",
    )


def _seal_replay(tmp: Path) -> tuple[int, dict[str, Any]]:
    seal = _cli("seal", str(tmp / "camp"), "-o", str(tmp / "x.bundle"), "--unsigned")
    assert seal.returncode == 0, seal.stderr
    rep = _cli("replay", str(tmp / "x.bundle"), "--allow-unsigned", "--json")
    return rep.returncode, json.loads(rep.stdout)


def test_import_seal_replay_confirms_every_aggregate(tmp_path: Path) -> None:
    base = _write_run(tmp_path / "base-run", *make_run(seed=1, conc=8))
    cand = _write_run(tmp_path / "cand-run", *make_run(seed=2, conc=8))
    # A directory or the JSONL inside one: both name the run.
    res = _import(tmp_path, base, cand / aiperf.RECORDS_NAME)
    assert res.returncode == 0, res.stderr
    camp = tmp_path / "camp"
    index = json.loads((camp / "serving.json").read_text())
    by_arm = {s["arm"]: s for s in index["sources"]}
    assert by_arm["cand"]["load_point"] == "rinf-c8"
    for arm, run in (("base", base), ("cand", cand)):  # carried byte for byte
        s = by_arm[arm]
        assert (camp / s["path"]).read_bytes() == (run / aiperf.RECORDS_NAME).read_bytes()
        agg_bytes = (run / aiperf.AGGREGATE_NAME).read_bytes()
        assert (camp / s["aggregate_path"]).read_bytes() == agg_bytes
    nc = (camp / "not_claimed.jsonl").read_text()
    assert "inter_chunk_latency" in nc and "output_sequence_length" in nc
    # A pooled-ITL claim added by hand cannot be re-derived from AIPerf's records.
    with (camp / "claims.jsonl").open("a") as f:
        itl = {"arm": "base", "load_point": "rinf-c8", "latency": "itl"}
        row = {"claim_id": "itl", "statistic": "latency_mean", "params": itl}
        f.write(json.dumps(row | {"value": "5.00", "unit": "ms"}) + "\n")
    code, doc = _seal_replay(tmp_path)
    checks = {c["claim_id"]: c for c in doc["claims"]["checks"]}
    assert checks.pop("itl")["status"] == "unverifiable"
    assert code == 5
    # Per run: 3 latencies x (avg, std, 9 percentiles) + 3 throughputs + 4 counts.
    assert len(checks) == 2 * (3 * 11 + 3 + 4)
    assert {c["status"] for c in checks.values()} == {"confirmed"}, [
        c for c in checks.values() if c["status"] != "confirmed"
    ]
    assert any("worker_id" in x for x in doc["not_evidenced"])
    assert any("inter-token gaps" in x for x in doc["not_evidenced"])
    assert any(x.startswith("request order (AIPerf records") for x in doc["not_evidenced"])
    assert not any("timestamps" in x for x in doc["not_evidenced"])
    ok = doc["conformance"]["checked_items"]
    assert doc["conformance"]["deviations"] == []
    assert len([x for x in ok if "in flight at once (max_concurrency 8)" in x]) == 2, ok


def _peak(times: list[tuple[int, int]]) -> int:
    # Independent of peak_in_flight: at every start, count the requests under way.
    return max(sum(1 for s, e in times if s <= t < e) for t, _ in times)


def test_peak_in_flight_hand_values() -> None:
    # [0,10) and [5,15) overlap; [10,20) starts when the first has ended: 2 at once.
    hand = [(0, 10), (5, 15), (10, 20)]
    assert peak_in_flight(np.array(hand, dtype=np.int64)) == 2 == _peak(hand)
    same = [(0, 10), (0, 10), (0, 10)]
    assert peak_in_flight(np.array(same, dtype=np.int64)) == 3 == _peak(same)


def test_more_in_flight_than_planned_is_a_deviation(tmp_path: Path) -> None:
    # The candidate's aggregate says concurrency 2; its records show 8 clients at once.
    jsonl, agg = make_run(seed=21, conc=2, workers=8)
    times = [
        (r["metadata"]["request_start_ns"], r["metadata"]["request_end_ns"])
        for r in map(json.loads, jsonl.splitlines())
    ]
    peak = _peak(times)
    assert peak > 2
    base = _write_run(tmp_path / "b", *make_run(seed=22, conc=2))
    cand = _write_run(tmp_path / "c", jsonl, agg)
    assert _import(tmp_path, base, cand).returncode == 0
    code, doc = _seal_replay(tmp_path)
    assert code == 4
    devs = doc["conformance"]["deviations"]
    assert [(d["kind"], d["message"].split(" ")[0]) for d in devs] == [("concurrency", str(peak))]
    assert "sources/cand/rinf-c2/profile_export.jsonl" in devs[0]["where"]


def test_aggregate_that_does_not_follow_is_contradicted(tmp_path: Path) -> None:
    jsonl, agg_text = make_run(seed=5)
    agg = json.loads(agg_text)
    agg["time_to_first_token"]["p99"] += 0.5
    base = _write_run(tmp_path / "b", *make_run(seed=6))
    cand = _write_run(tmp_path / "c", jsonl, json.dumps(agg))
    assert _import(tmp_path, base, cand).returncode == 0
    code, doc = _seal_replay(tmp_path)
    assert code == 4
    bad = [c for c in doc["claims"]["checks"] if c["status"] == "contradicted"]
    assert [c["claim_id"] for c in bad] == ["cand.rinf-c4.p99_ttft_ms"]
    claims = (tmp_path / "camp" / "claims.jsonl").read_text()
    row = next(json.loads(x) for x in claims.splitlines() if "cand.rinf-c4.p99_ttft" in x)
    assert "time_to_first_token.p99" in row["text"]
    assert "sources/cand/rinf-c4/profile_export_aiperf.json" in row["text"]
    assert "sources/cand/rinf-c4/profile_export.jsonl" in bad[0]["derivation"]


def _cut_last(j: str, a: str) -> tuple[str, str]:
    return j[:-30], a


def _negative_ttft(j: str, a: str) -> tuple[str, str]:
    rec = json.loads(j.splitlines()[0])
    rec["metrics"]["time_to_first_token"]["value"] = -1.5
    return json.dumps(rec) + "\n" + j.split("\n", 1)[1], a


def _nan_latency(j: str, a: str) -> tuple[str, str]:
    first, rest = j.split("\n", 1)
    rec = json.loads(first)
    rec["metrics"]["request_latency"]["value"] = float("nan")
    return json.dumps(rec) + "\n" + rest, a  # json.dumps writes a bare NaN


def _not_aiperf(j: str, a: str) -> tuple[str, str]:
    return j, json.dumps({"duration": 1.0, "completed": 3})


def _seconds(j: str, a: str) -> tuple[str, str]:
    return j.replace('"unit": "ms"', '"unit": "s"', 1), a


@pytest.mark.parametrize(
    ("mutate", "file", "needle"),
    [
        (_cut_last, "profile_export.jsonl", "line 40"),
        (_negative_ttft, "profile_export.jsonl", "metrics.time_to_first_token.value"),
        (_nan_latency, "profile_export.jsonl", "metrics.request_latency.value"),
        (_not_aiperf, "profile_export_aiperf.json", "benchmark_duration"),
        (_seconds, "profile_export.jsonl", "metrics.time_to_first_token.unit"),
    ],
)
def test_bad_sources_are_refused_naming_file_and_field(
    tmp_path: Path, mutate: Any, file: str, needle: str
) -> None:
    base = _write_run(tmp_path / "b", *make_run(seed=7))
    cand = _write_run(tmp_path / "c", *mutate(*make_run(seed=8)))
    res = _import(tmp_path, base, cand)
    assert res.returncode == 2, res.stderr
    assert str(cand / file) in res.stderr and needle in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "camp").exists()
    assert not [p for p in tmp_path.iterdir() if "partial" in p.name]


def test_missing_aggregate_file_is_refused(tmp_path: Path) -> None:
    base = _write_run(tmp_path / "b", *make_run(seed=9))
    cand = _write_run(tmp_path / "c", *make_run(seed=10))
    (cand / aiperf.AGGREGATE_NAME).unlink()
    res = _import(tmp_path, base, cand)
    assert res.returncode == 2 and aiperf.AGGREGATE_NAME in res.stderr, res.stderr
    assert not (tmp_path / "camp").exists()


def test_parse_refuses_non_streaming_record() -> None:
    jsonl, agg = make_run(seed=11, failures=0)
    first, rest = jsonl.split("\n", 1)
    rec = json.loads(first)
    del rec["metrics"]["time_to_first_token"]
    with pytest.raises(SourceError, match="streaming"):
        aiperf.parse((json.dumps(rec) + "\n" + rest).encode(), "r", agg.encode(), "a", "x")
