"""Importers on bytes the real benchmark tools wrote (``tests/fixtures/real_writers/``).

``aiperf-0.13.0/`` holds ``profile_export.jsonl`` and ``profile_export_aiperf.json``
exactly as ``aiperf profile`` 0.13.0 (from PyPI) wrote them against
``fixtures/real_writers/server.py``: two arms (a slower and a faster server), two
load points each (concurrency 2 and 4), streaming chat, the candidate's server
failing every 12th request, warmup requests at concurrency 4
(``fixtures/real_writers/README.md`` says how). ``vllm-0.33.0/`` holds the
``--save-result --save-detailed`` files ``vllm bench serve`` 0.33.0 wrote, as a
client on a CPU-only machine, against the same servers and load points. Neither
tool is installed here: these are recorded outputs, like recorded ``npu-smi``
output.

The expected values are AIPerf's own aggregates, an independent computation by
the real tool: every claim the import makes from them must be confirmed by
replay's re-derivation from the records, and what the files do not evidence must
show as not evidenced.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from datetime import datetime
from fractions import Fraction
from typing import Any

import pytest

from bundler.format.serving_run import ServingRun, SourceError
from bundler.importers import aiperf
from bundler.importers.write import _stable_decimals
from replay.serving.stats import throughput
from tests.real_writers_support import REAL, import_runs, import_seal_replay, read_json
from tests.real_writers_support import cli as _cli

AIPERF = REAL / "aiperf-0.13.0"
RUNS = ("base-c2", "base-c4", "cand-c2", "cand-c4")
LATENCY_TAGS = {"time_to_first_token": "ttft", "request_latency": "e2el"}
LATENCY_TAGS |= {"inter_token_latency": "tpot"}
STATS = ("avg", "std", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99")


def _agg(run: str) -> dict[str, Any]:
    return read_json(AIPERF / run / aiperf.AGGREGATE_NAME)


def _records(run: str) -> list[dict[str, Any]]:
    text = (AIPERF / run / aiperf.RECORDS_NAME).read_text()
    return [json.loads(line) for line in text.splitlines()]


def _parse(run: str, arm: str = "x") -> ServingRun:
    d = AIPERF / run
    return aiperf.parse(
        (d / aiperf.RECORDS_NAME).read_bytes(),
        str(d / aiperf.RECORDS_NAME),
        (d / aiperf.AGGREGATE_NAME).read_bytes(),
        str(d / aiperf.AGGREGATE_NAME),
        arm,
    )


# --- the recorded files are what the README says -----------------------------------


def test_the_recording_is_aiperf_0_13_0_as_described() -> None:
    rec = read_json(AIPERF / "recording.json")
    assert rec["tool"] == "aiperf" and rec["version"] == "0.13.0"
    assert [r["dir"] for r in rec["runs"]] == list(RUNS)
    for run in RUNS:
        doc = _agg(run)
        assert doc["aiperf_version"] == "0.13.0"
        cmd = doc["run_info"]["cli_command"]
        assert "--streaming" in cmd and f"--concurrency {run[-1]}" in cmd
    size = sum(p.stat().st_size for p in AIPERF.rglob("*") if p.is_file())
    assert size < 330_000


# --- regressions: what the real bytes showed --------------------------------------


def test_load_point_is_read_from_input_config_phases() -> None:
    # AIPerf 0.13.0 writes no input_config.loadgen: the load point is the profiling
    # phase of input_config.phases (the warmup phase is a phase too).
    doc = _agg("base-c4")
    assert "loadgen" not in doc["input_config"]
    kinds = [p["kind"] for p in doc["input_config"]["phases"]]
    assert kinds == ["warmup", "profiling"]
    for run in RUNS:
        r = _parse(run)
        conc = int(run[-1])
        assert (r.load_point, r.max_concurrency, r.num_prompts) == (f"rinf-c{conc}", conc, 14)


def _with_phases(phases: list[dict[str, Any]]) -> bytes:
    doc = _agg("base-c2")
    doc["input_config"]["phases"] = phases
    return json.dumps(doc).encode()


def test_phase_kinds_rate_and_refusals() -> None:
    recs = (AIPERF / "base-c2" / aiperf.RECORDS_NAME).read_bytes()
    rate = [{"name": "profiling", "kind": "profiling", "type": "poisson", "rate": 2.5}]
    run = aiperf.parse(recs, "r", _with_phases(rate), "a", "x")
    assert (run.load_point, run.request_rate, run.max_concurrency) == ("r2.5-cnone", 2.5, None)
    capped = [rate[0] | {"type": "constant", "concurrency": 3, "requests": 14}]
    run = aiperf.parse(recs, "r", _with_phases(capped), "a", "x")
    # Constant gaps are another arrival process than Poisson: another load point.
    assert (run.load_point, run.num_prompts) == ("r2.5-c3-constant", 14)
    bad = {
        "input_config.phases[0].type": [rate[0] | {"type": "fixed_schedule"}],
        "input_config.phases[0].rate": [rate[0] | {"rate": None}],
        "input_config.phases[0].concurrency": [rate[0] | {"concurrency": 0}],
        "input_config.phases": [rate[0], rate[0] | {"name": "second"}],
    }
    for field, phases in bad.items():
        with pytest.raises(SourceError) as exc:
            aiperf.parse(recs, "r", _with_phases(phases), "a", "x")
        assert [p.field for p in exc.value.problems] == [field], exc.value.problems


def test_throughputs_divide_by_the_phase_window_not_benchmark_duration() -> None:
    # AIPerf 0.13.0: request_throughput = request_count / (phase end - phase start),
    # the window written as start_time/end_time (to the microsecond); benchmark_duration
    # (first request to last response) is shorter. Dividing by it, as the importer
    # did, gave throughputs 0.6 to 2.7 % above AIPerf's own: contradicted claims.
    for run in RUNS:
        doc = _agg(run)
        count = doc["request_count"]["avg"]
        window = (
            datetime.fromisoformat(doc["end_time"]) - datetime.fromisoformat(doc["start_time"])
        ).total_seconds()
        ours = count / window
        assert ours == pytest.approx(doc["request_throughput"]["avg"], rel=4e-6)
        wrong = count / doc["benchmark_duration"]["avg"]
        assert abs(wrong / doc["request_throughput"]["avg"] - 1) > 1e-3
        r = _parse(run)
        assert (
            r.duration_s == window
            and r.meta["benchmark_duration"] == doc["benchmark_duration"]["avg"]
        )
        v = throughput(r, "requests")
        assert not isinstance(v, str)
        assert float(v) == pytest.approx(doc["request_throughput"]["avg"], rel=4e-6)


def test_throughput_precision_follows_the_window_resolution() -> None:
    # Hand values (a figure of an earlier recording): 130.76485879948314 with a 1.9 s
    # window known to 2 us: 130.765 (a tie at 2 decimals) lies within reach, so the
    # claim is made at 1 decimal.
    rel = aiperf.WINDOW_UNCERTAINTY_S / 1.904181
    assert _stable_decimals(130.76485879948314, 2, rel) == 1
    assert _stable_decimals(10.503201509998647, 2, rel) == 2
    assert _stable_decimals(2.4999999, 2, 0.01) is None  # 2.47..2.55: not even "2" vs "3"
    assert _stable_decimals(130.76485879948314, 2, None) == 2  # no uncertainty recorded


def test_without_start_and_end_time_throughputs_are_not_claimed() -> None:
    doc = _agg("cand-c2")
    del doc["end_time"]
    d = AIPERF / "cand-c2"
    run = aiperf.parse(
        (d / aiperf.RECORDS_NAME).read_bytes(), "r", json.dumps(doc).encode(), "a", "x"
    )
    assert not {"request_throughput", "output_throughput"} & set(run.aggregates)
    left = " ".join(run.meta["not_claimed_aggregates"])
    assert "request_throughput (a records no end_time" in left


def test_real_records_shape() -> None:
    # What the writer does that the synthetic inputs did not: a successful record has
    # no "error" key at all; a failed one starts and ends at the same ns and has no
    # request_ack_ns; warmup records are in the same file with benchmark_phase
    # "warmup" and are left out, as AIPerf leaves them out of its aggregates.
    recs = _records("cand-c4")
    ok = [r for r in recs if "error" not in r]
    failed = [r for r in recs if r.get("error") is not None]
    assert ok and failed and len(ok) + len(failed) == len(recs)
    for r in failed:
        md = r["metadata"]
        assert md["request_start_ns"] == md["request_end_ns"] and "request_ack_ns" not in md
        assert set(r["metrics"]) == {"error_isl"}
    warm = [r for r in recs if r["metadata"]["benchmark_phase"] == "warmup"]
    assert len(warm) == 2
    run = _parse("cand-c4")
    doc = _agg("cand-c4")
    assert run.n == len(recs) - 2
    assert run.completed == doc["request_count"]["avg"]
    assert run.n - run.completed == doc["error_request_count"]["avg"]


# --- end to end: the real files through import, seal, replay ----------------------


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("real-aiperf")
    res = import_runs(tmp, "aiperf", [(run[:4], AIPERF / run) for run in RUNS])
    assert res.returncode == 0, res.stderr
    # A pooled-ITL claim added by hand: AIPerf records no inter-token gaps.
    with (tmp / "camp" / "claims.jsonl").open("a") as f:
        p = {"arm": "cand", "load_point": "rinf-c4", "latency": "itl"}
        row = {"claim_id": "itl", "statistic": "latency_mean", "params": p}
        f.write(json.dumps(row | {"value": "5.00", "unit": "ms"}) + "\n")
    assert _cli("keygen", "-o", tmp / "author").returncode == 0
    seal = _cli("seal", tmp / "camp", "-o", tmp / "x.bundle", "--key", tmp / "author")
    assert seal.returncode == 0, seal.stderr
    rep = _cli("replay", tmp / "x.bundle", "--key", tmp / "author.pub", "--json")
    doc: dict[str, Any] = json.loads(rep.stdout)
    doc["_exit"] = rep.returncode
    doc["_camp"] = tmp / "camp"
    return doc


def _expected() -> dict[str, tuple[float, float]]:
    """claim id -> (AIPerf's own figure, relative tolerance of the re-derivation)."""
    out: dict[str, tuple[float, float]] = {}
    for run in RUNS:
        doc = _agg(run)
        lp = f"{run[:4]}.rinf-c{run[-1]}"
        for tag, lat in LATENCY_TAGS.items():
            for s in STATS:
                key = {"avg": "mean", "std": "std"}.get(s, s)
                out[f"{lp}.{key}_{lat}_ms"] = (doc[tag][s], 1e-9)
        window = (
            datetime.fromisoformat(doc["end_time"]) - datetime.fromisoformat(doc["start_time"])
        ).total_seconds()
        rel = 2 * aiperf.WINDOW_UNCERTAINTY_S / window
        for tag, key in (
            ("request_throughput", "request_throughput"),
            ("output_token_throughput", "output_throughput"),
            ("total_token_throughput", "total_token_throughput"),
        ):
            out[f"{lp}.{key}"] = (doc[tag]["avg"], rel)
        for tag, key in (
            ("request_count", "completed"),
            ("error_request_count", "failed"),
            ("total_isl", "total_input_tokens"),
            ("total_osl", "total_output_tokens"),
        ):
            if tag in doc:
                out[f"{lp}.{key}"] = (doc[tag]["avg"], 0.0)
    return out


def test_every_claim_from_aiperfs_aggregates_is_confirmed(replayed: dict[str, Any]) -> None:
    checks = {c["claim_id"]: c for c in replayed["claims"]["checks"]}
    assert checks.pop("itl")["status"] == "unverifiable"
    assert replayed["_exit"] == 5  # the hand-added ITL claim only
    expected = _expected()
    assert set(checks) == set(expected)
    bad = {k: c for k, c in checks.items() if c["status"] != "confirmed"}
    assert not bad, bad
    for key, c in checks.items():
        tool, rel = expected[key]
        assert Fraction(c["exact"]) == pytest.approx(Fraction(tool), rel=rel, abs=1e-12), key
        assert Fraction(c["claimed"]) == pytest.approx(tool, abs=0.51 * 10 ** -c["decimals"])


def test_what_the_files_do_not_evidence_is_not_evidenced(replayed: dict[str, Any]) -> None:
    ne = replayed["not_evidenced"]
    assert any("inter-token gaps" in x for x in ne)
    assert any("worker_id" in x for x in ne)
    assert any(x.startswith("request order (AIPerf records") for x in ne)
    assert not any("timestamps" in x for x in ne)  # request_start_ns/end_ns are recorded
    conf = replayed["conformance"]
    assert conf["deviations"] == []
    inflight = [x for x in conf["checked_items"] if "in flight at once" in x]
    assert len(inflight) == 4, conf["checked_items"]
    nc = (replayed["_camp"] / "not_claimed.jsonl").read_text()
    assert "inter_chunk_latency" in nc and "time_to_first_token.count" in nc


# --- vLLM: vllm bench serve 0.33.0 as a client on a CPU-only machine ----------------

VLLM = REAL / "vllm-0.33.0"
VLLM_LATENCIES = ("ttft", "tpot", "itl")


@pytest.fixture(scope="module")
def vllm_replayed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("real-vllm")
    arms = [(run[:4], f"{VLLM / run}.json") for run in RUNS]
    return import_seal_replay(tmp, "vllm", arms, bundle="v.bundle")


def test_vllm_recording_is_0_33_0_with_failures() -> None:
    rec = read_json(VLLM / "recording.json")
    assert rec["version"] == "0.33.0" and [r["file"] for r in rec["runs"]] == [
        f"{r}.json" for r in RUNS
    ]
    for run in RUNS:
        doc = read_json(VLLM / f"{run}.json")
        assert doc["max_concurrency"] == int(run[-1]) and doc["num_prompts"] == 14
        assert doc["failed"] == (1 if run.startswith("cand") else 0)
        assert len(doc["ttfts"]) == len(doc["errors"]) == 14


def test_every_claim_from_vllms_aggregates_is_confirmed(vllm_replayed: dict[str, Any]) -> None:
    assert vllm_replayed["_exit"] == 0
    checks = {c["claim_id"]: c for c in vllm_replayed["claims"]["checks"]}
    expected: dict[str, float] = {}
    for run in RUNS:
        doc = read_json(VLLM / f"{run}.json")
        lp = f"{run[:4]}.rinf-c{run[-1]}"
        keys = [f"{s}_{lat}_ms" for lat in VLLM_LATENCIES for s in ("mean", "median", "std")]
        keys += [f"p99_{lat}_ms" for lat in VLLM_LATENCIES]
        keys += ["request_throughput", "output_throughput", "total_token_throughput"]
        keys += ["completed", "failed", "total_input_tokens", "total_output_tokens"]
        expected |= {f"{lp}.{k}": doc[k] for k in keys}
    assert set(checks) == set(expected)
    bad = {k: c for k, c in checks.items() if c["status"] != "confirmed"}
    assert not bad, bad
    for key, c in checks.items():
        assert Fraction(c["exact"]) == pytest.approx(Fraction(expected[key]), rel=1e-9), key


def test_vllm_what_is_not_evidenced(vllm_replayed: dict[str, Any]) -> None:
    ne = vllm_replayed["not_evidenced"]
    assert any(x.startswith("request order") for x in ne)
    assert any(x.startswith("per-request timestamps on a wall clock") for x in ne)
    assert any(x.startswith("server identity") for x in ne)
    assert any(x.startswith("warmup requests") for x in ne)
    assert vllm_replayed["conformance"]["deviations"] == []
    # vLLM 0.33.0 prints peaks counted per whole second: its "Peak concurrent requests"
    # exceeds --max-concurrency. No vocabulary statistic has that definition; it is
    # listed as not claimed rather than dropped silently.
    doc = read_json(VLLM / "base-c4.json")
    assert doc["max_concurrent_requests"] > doc["max_concurrency"]
    nc = (vllm_replayed["_camp"] / "not_claimed.jsonl").read_text()
    assert f"max_concurrent_requests = {doc['max_concurrent_requests']}" in nc
    assert "max_output_tokens_per_s" in nc


# --- the server the recordings were made against ----------------------------------


def test_fixture_server_streams_and_stops_by_itself() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(REAL / "server.py"),
            "--port=0",
            "--ttft-ms=5",
            "--token-ms=1",
            "--jitter-ms=0",
            "--fail-every=2",
            "--lifetime=20",
            "--idle-exit=0.5",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": "a b c"}],
            "stream": True,
            "max_completion_tokens": 4,
            "stream_options": {"include_usage": True},
        }
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        t0 = time.monotonic()
        with urllib.request.urlopen(req, timeout=10) as resp:
            events = [x for x in resp.read().decode().split("\n\n") if x]
        assert time.monotonic() - t0 >= 0.008  # 5 ms to the first token, 1 ms per next
        assert events[-1] == "data: [DONE]"
        chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
        text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1])
        assert text == "tok " * 4 and chunks[-1]["usage"]["completion_tokens"] == 4
        with pytest.raises(urllib.error.HTTPError) as exc:  # the 2nd request fails
            urllib.request.urlopen(req, timeout=10)
        assert exc.value.code == 500
        exc.value.close()
        assert proc.wait(timeout=15) == 0  # idle for 0.5 s after its last request
        assert proc.stdout.read().strip() == "SERVED 2"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
