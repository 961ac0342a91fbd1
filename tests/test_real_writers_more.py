"""More importers on bytes the real benchmark tools wrote (``tests/fixtures/real_writers/``).

``guidellm-0.8.1/`` holds the JSON reports ``guidellm run`` 0.8.1 (from PyPI) wrote
against ``fixtures/real_writers/server.py``: two arms (the slower baseline, the
faster candidate failing every 12th request), each at ``concurrent`` 2 streams and
``constant`` 8 requests/s, one benchmark per file (``record_guidellm.py`` and the
README say how). GuideLLM is not installed here: these are recorded outputs.

The expected values are computed here with plain numpy from each file's per-request
timings, with GuideLLM's own definitions (read in its source: TTFT and latency from
``info.timings``; ITL weighted by output tokens - 1; TPOT including the first token,
weighted by output tokens; percentiles the first value whose cumulative share,
summed in doubles, reaches P/100); they must equal GuideLLM's own aggregates, and
every claim the import makes from those aggregates must be confirmed by replay.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from bundler.format.serving_run import ServingRun, SourceError
from bundler.importers import guidellm
from replay.serving.stats import RunStats
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

GUIDELLM = REAL / "guidellm-0.8.1"
RUNS = ("base-c2", "base-r8", "cand-c2", "cand-r8")
# GuideLLM's constant strategy: constant gaps are named in the load point (Poisson is not).
LOAD_POINT = {"c2": "rinf-c2", "r8": "r8-cnone-constant"}


def _doc(run: str) -> dict[str, Any]:
    return read_json(GUIDELLM / f"{run}.json")


def _bench(run: str) -> dict[str, Any]:
    b: dict[str, Any] = _doc(run)["benchmarks"][0]
    return b


def _parse_doc(doc: dict[str, Any]) -> ServingRun:
    return guidellm.parse(json.dumps(doc).encode(), "g.json", "x")


# --- GuideLLM's definitions, in plain numpy over the per-request records ----------


def test_recording_is_guidellm_0_8_1_as_described() -> None:
    rec = read_json(GUIDELLM / "recording.json")
    assert rec["tool"] == "guidellm" and rec["version"] == "0.8.1"
    assert [r["file"] for r in rec["runs"]] == [f"{r}.json" for r in RUNS]
    for run in RUNS:
        doc = _doc(run)
        assert doc["metadata"]["guidellm_version"] == "0.8.1" and len(doc["benchmarks"]) == 1
        totals = _bench(run)["metrics"]["request_totals"]
        assert totals["errored"] == (1 if run.startswith("cand") else 0)
        assert totals["successful"] + totals["errored"] == 14 and totals["incomplete"] == 0
    size = sum(p.stat().st_size for p in GUIDELLM.iterdir())
    assert size < 700_000


def test_numpy_with_guidellms_definitions_gives_its_aggregates() -> None:
    # Independent of the importer: the definitions read in GuideLLM's source, in numpy.
    for run in RUNS:
        m = _bench(run)["metrics"]
        for tag, (v, w) in guidellm_samples(_bench(run)).items():
            mine, tool = guidellm_summary(v, w), m[tag]["successful"]
            for stat, x in mine.items():
                y = tool[stat] if stat in tool else tool["percentiles"][stat]
                assert x == pytest.approx(y, rel=1e-12), (run, tag, stat)


def test_median_of_14_is_the_8th_value_by_the_doubles() -> None:
    # GuideLLM sums the shares 1/14 in doubles: after seven the sum is
    # 0.4999999999999999 < 0.5, so its median (and p50) is the 8th smallest value,
    # where the exact inverse CDF (numpy's "inverted_cdf") gives the 7th.
    v, _ = guidellm_samples(_bench("base-c2"))["time_to_first_token_ms"]
    s = np.sort(v)
    assert np.cumsum(np.full(14, 1 / 14))[6] < 0.5
    tool = _bench("base-c2")["metrics"]["time_to_first_token_ms"]["successful"]
    assert tool["median"] == s[7] != np.percentile(v, 50, method="inverted_cdf")
    assert tool["percentiles"]["p99"] == s[-1]  # p99 of 14 values is the maximum
    stats = RunStats(guidellm.parse((GUIDELLM / "base-c2.json").read_bytes(), "g", "x"))
    med = stats.latency("ttft", "median", Fraction(50))
    assert not isinstance(med, str)
    assert float(med) == pytest.approx(s[7] / 1000, rel=1e-12)


def test_tpot_includes_the_first_token_and_itl_is_token_weighted() -> None:
    m = _bench("base-c2")["metrics"]
    v, w = guidellm_samples(_bench("base-c2"))["inter_token_latency_ms"]
    assert m["inter_token_latency_ms"]["successful"]["mean"] == pytest.approx(
        float(np.sum(v * w) / np.sum(w)), rel=1e-12
    )
    assert m["inter_token_latency_ms"]["successful"]["mean"] != pytest.approx(
        float(np.mean(v)), rel=1e-6
    )
    # vLLM's TPOT (latency - ttft) / (n - 1) is another figure.
    run = _parse_doc(_doc("base-c2"))
    keep = run.ok & (run.output_lens > 1)
    assert run.latencies is not None
    vllm_tpot = (run.latencies[keep] - run.ttfts[keep]) / (run.output_lens[keep] - 1)
    tool = m["time_per_output_token_ms"]["successful"]["mean"]
    assert abs(float(np.mean(vllm_tpot)) * 1000 / tool - 1) > 0.05


def test_load_point_and_arrival_process() -> None:
    for run in RUNS:
        r = _parse_doc(_doc(run))
        assert r.load_point == LOAD_POINT[run[-2:]]
        if run.endswith("c2"):
            assert (r.request_rate, r.max_concurrency) == (float("inf"), 2)
            assert r.meta["arrival"] == "concurrent, 2 streams"
        else:
            # The strategy's max_concurrency (10240) is the scheduler's worker cap, not
            # a cap the profile asked for.
            assert _bench(run)["config"]["strategy"]["max_concurrency"] == 10240
            assert (r.request_rate, r.max_concurrency) == (8.0, None)
            assert r.meta["arrival"] == "constant arrivals at 8.0 requests/s"
            assert r.arrival == "constant"


# --- end to end: import, seal, replay ----------------------------------------------


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("real-guidellm")
    arms = [(run[:4], f"{GUIDELLM / run}.json") for run in RUNS]
    res = import_runs(tmp, "guidellm", arms, "--json")
    assert res.returncode == 0, res.stderr
    # A claim added by hand on a load point that was not run: unverifiable.
    with (tmp / "camp" / "claims.jsonl").open("a") as f:
        p = {"arm": "cand", "load_point": "r4-cnone", "latency": "ttft"}
        row = {"claim_id": "absent", "statistic": "latency_mean", "params": p}
        f.write(json.dumps(row | {"value": "5.00", "unit": "ms"}) + "\n")
    doc = replay_json(seal_unsigned(tmp, "g.bundle"))
    doc["_camp"] = tmp / "camp"
    doc["_import"] = json.loads(res.stdout)
    return doc


def _expected() -> dict[str, float]:
    """claim id -> the value from numpy over the records (GuideLLM's definitions)."""
    out: dict[str, float] = {}
    for run in RUNS:
        out |= guidellm_expected(_bench(run), f"{run[:4]}.{LOAD_POINT[run[-2:]]}")
    return out


def test_every_claim_from_guidellms_aggregates_is_confirmed(replayed: dict[str, Any]) -> None:
    checks = {c["claim_id"]: c for c in replayed["claims"]["checks"]}
    assert checks.pop("absent")["status"] == "unverifiable"
    assert replayed["_exit"] == 5  # the hand-added claim only
    expected = _expected()
    assert set(checks) == set(expected)
    bad = {k: c for k, c in checks.items() if c["status"] != "confirmed"}
    assert not bad, bad
    for key, c in checks.items():
        assert Fraction(c["exact"]) == pytest.approx(Fraction(expected[key]), rel=1e-9), key
    d = checks["base.rinf-c2.median_ttft_ms"]["derivation"]
    assert "median (inverse CDF)" in d and "GuideLLM's TTFT" in d
    assert "first token included" in checks["cand.r8-cnone-constant.mean_tpot_ms"]["derivation"]


def test_what_guidellm_does_not_evidence(replayed: dict[str, Any]) -> None:
    ne = replayed["not_evidenced"]
    assert any(x.startswith("individual inter-token gaps (GuideLLM") for x in ne)
    assert replayed["conformance"]["deviations"] == []
    nc = (replayed["_camp"] / "not_claimed.jsonl").read_text()
    assert "request_concurrency" in nc and "prompt_tokens_per_second" in nc
    plan = read_json(replayed["_camp"] / "plans" / "serving.json")
    assert plan["request"]["api"] == "openai-chat-completions"


# --- what the importer refuses or does not trust ------------------------------------


def _refused(doc: dict[str, Any] | bytes) -> list[tuple[str | None, str | None]]:
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    with pytest.raises(SourceError) as exc:
        guidellm.parse(data, "g.json", "x")
    return [(p.record, p.field) for p in exc.value.problems]


def test_refusals_are_located() -> None:
    raw = (GUIDELLM / "base-c2.json").read_bytes()
    assert _refused(raw[: len(raw) // 2]) == [(None, None)]  # truncated
    two = _doc("base-c2")
    two["benchmarks"] *= 2
    assert _refused(two) == [(None, "benchmarks")]
    back = _doc("base-c2")
    back["benchmarks"][0]["end_time"] = back["benchmarks"][0]["start_time"] - 1
    assert _refused(back) == [(None, "benchmarks[0].end_time")]
    odd = _doc("base-c2")
    odd["benchmarks"][0]["config"]["strategy"]["type_"] = "replay"
    assert _refused(odd) == [(None, "benchmarks[0].config.strategy.type_")]
    no_tok = _doc("cand-r8")
    no_tok["benchmarks"][0]["requests"]["successful"][3]["info"]["timings"][
        "first_token_iteration"
    ] = None
    rec = "benchmarks[0].requests.successful[3]"
    assert _refused(no_tok) == [(rec, "info.timings.first_token_iteration")]
    neg = _doc("cand-r8")
    neg["benchmarks"][0]["requests"]["successful"][2]["output_metrics"]["total_tokens"] = -1
    rec = "benchmarks[0].requests.successful[2]"
    assert _refused(neg) == [(rec, "output_metrics.total_tokens")]
    nan = _doc("base-r8")
    nan["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"]["mean"] = "x"
    assert _refused(nan) == [(None, "metrics.time_to_first_token_ms.successful.mean")]


def test_scheduler_inconsistency_is_reported_never_trusted() -> None:
    # Seen in a short GuideLLM run: the scheduler's start after its end, and its
    # dispatch-delay averages epoch timestamps (~1.8e9 s). Not claimed; named.
    doc = _doc("base-r8")
    sm = doc["benchmarks"][0]["scheduler_metrics"]
    sm["start_time"], sm["end_time"] = sm["end_time"] + 1, sm["start_time"]
    sm["request_start_delay_avg"] = 1.8e9
    run = _parse_doc(doc)
    left = " ".join(run.meta["not_claimed_aggregates"])
    assert "scheduler_metrics.start_time" in left and "after its end_time" in left
    assert "request_start_delay_avg = 1800000000.0 s: a timestamp, not a delay" in left
    assert "mean_ttft_ms" in run.aggregates  # the request-level figures are unaffected


def test_sampled_requests_make_latencies_unverifiable() -> None:
    doc = _doc("base-c2")
    doc["benchmarks"][0]["requests"]["successful"].pop()
    run = _parse_doc(doc)
    why = RunStats(run).latency("ttft", "mean", None)
    assert isinstance(why, str) and "sampled" in why
    assert "request_throughput" not in run.aggregates


def test_throughput_with_an_event_in_the_merge_window_is_not_claimed() -> None:
    # GuideLLM merges rate events within 0.1 ms, keeping the first: a last request
    # ending 50 us before end_time makes it divide by a shorter span.
    doc = _doc("base-c2")
    b = doc["benchmarks"][0]
    last = max(r["info"]["timings"]["request_end"] for r in b["requests"]["successful"])
    b["end_time"] = last + 5e-5
    run = _parse_doc(doc)
    assert "request_throughput" not in run.aggregates
    assert "output_throughput" in run.aggregates
    left = " ".join(run.meta["not_claimed_aggregates"])
    assert "requests_per_second.successful.mean (its last event lies" in left


# --- SGLang: python -m sglang.bench_serving --output-details, 0.5.23 -----------------

SGLANG = REAL / "sglang-0.5.23"
SGLANG_LP = {"c2": "rinf-c2", "r8": "r8-cnone"}


def _sgl(run: str) -> dict[str, Any]:
    return read_json(SGLANG / f"{run}.jsonl")


def test_sglang_recording_is_0_5_23_one_line_per_file() -> None:
    rec = read_json(SGLANG / "recording.json")
    assert rec["version"] == "0.5.23"
    assert [r["file"] for r in rec["runs"]] == [f"{r}.jsonl" for r in RUNS]
    for run in RUNS:
        text = (SGLANG / f"{run}.jsonl").read_text()
        assert text.count("\n") == 1 and text.endswith("\n")
        doc = _sgl(run)
        # What the file does not hold: a per-request latency, a failed count.
        assert "latencies" not in doc and "failed" not in doc
        assert len(doc["ttfts"]) == len(doc["errors"]) == 14
        failed = sum(1 for e in doc["errors"] if e)
        assert failed == (1 if run.startswith("cand") else 0) == 14 - doc["completed"]
    assert '"request_rate": Infinity' in (SGLANG / "base-c2.jsonl").read_text()


@pytest.fixture(scope="module")
def sglang_replayed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("real-sglang")
    arms = [(run[:4], f"{SGLANG / run}.jsonl") for run in RUNS]
    return import_seal_replay(tmp, "sglang", arms, bundle="s.bundle")


def _sgl_expected(run: str) -> dict[str, float]:
    """SGLang's definitions (vLLM's) in plain numpy over the file's arrays."""
    return sglang_expected(_sgl(run))


def test_sglang_every_derivable_claim_confirmed_the_rest_unverifiable(
    sglang_replayed: dict[str, Any],
) -> None:
    checks = {c["claim_id"]: c for c in sglang_replayed["claims"]["checks"]}
    assert sglang_replayed["_exit"] == 5  # E2E and TPOT: unverifiable
    derivable: dict[str, float] = {}
    for run in RUNS:
        lp = f"{run[:4]}.{SGLANG_LP[run[-2:]]}"
        doc = _sgl(run)
        for key, x in _sgl_expected(run).items():
            name = "total_throughput" if key == "total_token_throughput" else key
            name = {"completed": "completed"}.get(key, name)
            assert x == pytest.approx(doc[name], rel=1e-9), (run, key)  # SGLang's own
            derivable[f"{lp}.{key}"] = x
    for key, x in derivable.items():
        c = checks.pop(key)
        assert c["status"] == "confirmed", c
        assert Fraction(c["exact"]) == pytest.approx(Fraction(x), rel=1e-9), key
    # What is left: every E2E and TPOT aggregate SGLang wrote, unverifiable, and why.
    expected_left = {
        f"{run[:4]}.{SGLANG_LP[run[-2:]]}.{s}_{lat}_ms"
        for run in RUNS
        for lat in ("e2el", "tpot")
        for s in ("mean", "median", "std", "p90", "p95", "p99")
    }
    assert set(checks) == expected_left
    for c in checks.values():
        assert c["status"] == "unverifiable"
        assert "writes no per-request end-to-end latency" in c["explanation"]


def test_sglang_not_claimed_and_not_recorded(sglang_replayed: dict[str, Any]) -> None:
    nc = (sglang_replayed["_camp"] / "not_claimed.jsonl").read_text()
    assert "concurrency = " in nc and "max_concurrent_requests" in nc
    ne = sglang_replayed["not_evidenced"]
    assert any("per-request end-to-end latencies: SGLang" in x for x in ne)
    assert any(x.startswith("the failed count (SGLang writes none") for x in ne)
    assert not any("older writer" in x for x in ne)
    plan = read_json(sglang_replayed["_camp"] / "plans" / "serving.json")
    assert plan["request"]["api"] == "openai-chat-completions"


def test_sglang_load_point_and_arrival() -> None:
    from bundler.importers import sglang

    for run in RUNS:
        r = sglang.parse((SGLANG / f"{run}.jsonl").read_bytes(), "s.jsonl", "x")
        assert r.load_point == SGLANG_LP[run[-2:]]
        want = (
            "all requests at once (request rate inf), at most 2 in flight"
            if run.endswith("c2")
            else "poisson arrivals at 8.0 requests/s"
        )
        assert r.meta["arrival"] == want


def test_sglang_refusals_are_located() -> None:
    from bundler.importers import sglang

    line = (SGLANG / "cand-c2.jsonl").read_bytes()
    cases: dict[bytes, tuple[str | None, str | None]] = {
        line + line: (None, None),  # two runs appended to one file
        line[: len(line) // 2]: ("line 1", None),  # truncated
    }
    doc = _sgl("cand-c2")
    del doc["itls"]
    cases[json.dumps(doc).encode() + b"\n"] = ("line 1", "itls")  # no --output-details
    doc = _sgl("cand-c2")
    doc["ttfts"][2] = -1.0
    cases[json.dumps(doc).encode() + b"\n"] = (None, "ttfts[2]")
    for data, where in cases.items():
        with pytest.raises(SourceError) as exc:
            sglang.parse(data, "s.jsonl", "x")
        assert [(p.record, p.field) for p in exc.value.problems] == [where], exc.value.problems
        assert "sglang.bench_serving" in str(exc.value)


# inference-perf 0.7.0: tests/test_real_writers_infperf.py.


def test_guidellm_request_starting_at_zero_is_a_time() -> None:
    # 0.0 s is a time, not a missing one (the parser once read it as absent: NaN).
    doc = _doc("base-c2")
    b = doc["benchmarks"][0]
    b["start_time"] = 0.0
    b["requests"]["successful"][0]["info"]["timings"]["request_start"] = 0.0
    run = _parse_doc(doc)
    assert run.latencies is not None
    t = b["requests"]["successful"][0]["info"]["timings"]
    assert run.latencies[0] == t["request_end"]


def test_guidellm_request_times_are_checked_not_listed_as_missing(
    replayed: dict[str, Any],
) -> None:
    # GuideLLM records each request's start and end (an errored one: its scheduler's
    # resolve times, as GuideLLM's request_end_time has them): conformance checks the
    # concurrent runs never had more than 2 in flight, and does not call the
    # timestamps not evidenced.
    conf = replayed["conformance"]
    assert conf["deviations"] == []
    inflight = [x for x in conf["checked_items"] if "in flight at once (max_concurrency 2)" in x]
    assert len(inflight) == 2, conf["checked_items"]
    assert not any(x.startswith("per-request timestamps") for x in replayed["not_evidenced"])
    # A third stream's worth of overlap is a deviation.
    doc = _doc("base-c2")
    reqs = doc["benchmarks"][0]["requests"]["successful"]
    t0 = reqs[0]["info"]["timings"]
    for r in reqs[1:3]:
        t = r["info"]["timings"]
        t["request_start"], t["first_token_iteration"] = t0["request_start"], t0["request_start"]
    run = _parse_doc(doc)
    assert run.times_ns is not None
    from replay.serving.conformance import peak_in_flight

    assert peak_in_flight(run.times_ns) >= 3
