"""GuideLLM ``guidellm run`` JSON reports (``--output kind=json``; one run per benchmark).

Followed writer: ``guidellm`` 0.8.1 from PyPI (its source, read in the installed
package), checked against bytes it wrote (``tests/fixtures/real_writers/guidellm-0.8.1/``).
The report is one object: ``metadata`` (``guidellm_version``), ``config`` (the
scenario) and ``benchmarks``, each ``{config: {strategy, profile, ...},
scheduler_metrics, metrics, requests: {successful, errored, incomplete},
start_time, end_time, duration, ...}``. A request record holds ``info.timings``
(wall-clock seconds: ``request_start``, ``first_token_iteration``,
``last_token_iteration``, ``request_end``, ``token_iterations``),
``input_metrics.total_tokens`` and ``output_metrics.total_tokens``.

GuideLLM's own definitions (``schemas/base/request_stats.py``,
``benchmark/schemas/metrics.py``, ``schemas/base/statistics.py``), which replay
follows for a GuideLLM source:

- A request is *successful* when the response completed, *errored* when it raised
  (an HTTP 500 here), *incomplete* when it was cancelled at the end of the run.
  Every aggregate claimed here is the ``successful`` one.
- TTFT = ``first_token_iteration - request_start``; request latency =
  ``request_end - request_start``.
- ITL (per request, first token excluded) = ``(last_token_iteration -
  first_token_iteration) / (output_tokens - 1)``, aggregated **weighted by
  ``output_tokens - 1``**: the same as pooling that average once per gap.
- TPOT (per request, **first token included**) = ``(last_token_iteration -
  request_start) / output_tokens``, aggregated **weighted by ``output_tokens``**.
- Mean, population SD over the weighted values; median and percentiles are
  **inverse CDF**: duplicates merged, weights normalized, ``numpy.cumsum``, the
  first value whose cumulative share reaches P/100 (``numpy.searchsorted``, left),
  so p99 of 14 values is the maximum.
- Throughput (``requests_per_second``, ``output_tokens_per_second``,
  ``tokens_per_second``; ``successful.mean``): the events' count divided by the
  benchmark window ``end_time - start_time``, as long as no counted event lies
  within the 0.1 ms GuideLLM merges at the window's end (then the figure divides by
  a shorter span and is not claimed).
- The load point is the benchmark's strategy: ``synchronous`` (one at a time),
  ``concurrent`` (``streams``), ``throughput``, ``constant`` / ``poisson``
  (``rate``); its arrival process goes to ``meta["arrival"]``.

A report holds one benchmark per strategy run (a ``sweep`` profile, several
``rate`` or ``streams`` values, a built-in scenario): ``parse_all`` gives one run
per benchmark, each its own load point; ``parse`` one (by index, or the only one).
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

import numpy as np

from bundler.errors import Problem
from bundler.format.serving_run import (
    MAX_COUNT,
    POISSON,
    ServingRun,
    SourceError,
    check_distinct,
    load_point_id,
    shown,
)
from bundler.importers import source_text

__all__ = ["FORMAT", "MAX_BENCHMARKS", "MERGE_S", "PERCENTILES", "parse", "parse_all"]

FORMAT = "guidellm"
PERCENTILES = {
    "p001": "0.1",
    "p01": "1",
    "p05": "5",
    "p10": "10",
    "p25": "25",
    "p50": "50",
    "p75": "75",
    "p90": "90",
    "p95": "95",
    "p99": "99",
    "p999": "99.9",
}
"""GuideLLM's percentile keys and the percentile each stands for."""
_LATENCY = {
    "time_to_first_token_ms": ("ttft", 1.0),
    "request_latency": ("e2el", 1000.0),  # written in seconds
    "inter_token_latency_ms": ("itl", 1.0),
    "time_per_output_token_ms": ("tpot", 1.0),
}
_STATS = {"mean": "mean", "median": "median", "std_dev": "std"}
_RATES = {
    "requests_per_second": "request_throughput",
    "output_tokens_per_second": "output_throughput",
    "tokens_per_second": "total_token_throughput",
}
MERGE_S = 1e-4
"""GuideLLM merges rate events closer than this (``threshold=1e-4``), keeping the first."""
DEFINITIONS = {
    "ttft": "GuideLLM's TTFT, first_token_iteration - request_start",
    "e2el": "GuideLLM's request latency, request_end - request_start",
    "itl": "GuideLLM's ITL, (last - first token) / (output_tokens - 1) per request, "
    "weighted by output_tokens - 1",
    "tpot": "GuideLLM's TPOT, first token included: (last token - request_start) / "
    "output_tokens per request, weighted by output_tokens",
}
_NS_LIMIT_S = 9e9
"""Wall-clock seconds below this fit int64 nanoseconds (2**63 ns is 9.2e9 s)."""
MAX_BENCHMARKS = 100
"""The most benchmarks one report may hold (a default sweep has 10; GuideLLM's built-in
scenarios 5): a larger one is refused before any benchmark is read."""
_STRATEGIES = ("synchronous", "concurrent", "throughput", "constant", "poisson")


def _fail(where: str, field: str | None, message: str, record: str | None = None) -> SourceError:
    return SourceError(
        f"{where}: not a usable GuideLLM report", [Problem(where, record, field, message)]
    )


def _load(data: bytes, where: str) -> dict[str, Any]:
    doc = source_text.load_json(data, where, _fail)
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise _fail(where, "benchmarks", "missing: not a guidellm run JSON report")
    return doc


def _finite(v: Any) -> TypeGuard[float]:
    return not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v)


def _dict(v: Any, where: str, field: str, record: str | None = None) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise _fail(where, field, f"expected an object, found {shown(v)}", record)
    return v


def _load_point(
    b: dict[str, Any], where: str, bat: str = "benchmarks[0]"
) -> tuple[float, int | None, str, str]:
    """(rate, max concurrency, arrival text, arrival process) of the benchmark's strategy.

    The process is part of the load point's id (``serving_run.load_point_id``):
    ``constant`` gaps and ``poisson`` gaps at one rate are two load points; the other
    strategies send as fast as their cap allows (rate ``inf``), so none applies.
    """
    cfg = _dict(b.get("config"), where, f"{bat}.config")
    st = _dict(cfg.get("strategy"), where, f"{bat}.config.strategy")
    at = f"{bat}.config.strategy"
    kind = st.get("type_")
    if kind not in _STRATEGIES:
        raise _fail(
            where,
            f"{at}.type_",
            f"expected one of {', '.join(_STRATEGIES)}, found {shown(kind)}: no (rate, "
            "concurrency) load point describes it",
        )
    ramp = st.get("rampup_duration")
    ramp_text = f", ramp-up {ramp!r} s" if _finite(ramp) and ramp > 0 else ""

    def count(key: str, v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_COUNT:
            raise _fail(
                where, f"{at}.{key}", f"expected an integer from 1 to 2**53, found {shown(v)}"
            )
        return v

    if kind == "synchronous":
        return math.inf, 1, "synchronous (one request at a time)", POISSON
    if kind == "concurrent":
        streams = count("streams", st.get("streams"))
        return math.inf, streams, f"concurrent, {streams} streams{ramp_text}", POISSON
    if kind == "throughput":
        cap = st.get("max_concurrency")
        conc = None if cap is None else count("max_concurrency", cap)
        return math.inf, conc, f"throughput (all requests at once){ramp_text}", POISSON
    rate = st.get("rate")
    if not _finite(rate) or rate <= 0:
        raise _fail(where, f"{at}.rate", f"expected a number > 0, found {shown(rate)}")
    # The strategy's max_concurrency is the scheduler's worker cap (10240 by default);
    # the load point's cap is the one the profile asked for, if any.
    prof = cfg.get("profile")
    cap = prof.get("max_concurrency") if isinstance(prof, dict) else None
    conc = None if cap is None else count("max_concurrency", cap)
    process = "constant" if kind == "constant" else POISSON
    return float(rate), conc, f"{kind} arrivals at {rate!r} requests/s{ramp_text}", process


class _Req:
    """One request's timings and token counts, checked."""

    def __init__(self, r: Any, where: str, rec: str, ok: bool) -> None:
        r = _dict(r, where, "request", rec)
        info = _dict(r.get("info"), where, "info", rec)
        t = _dict(info.get("timings"), where, "info.timings", rec)

        def time(key: str, required: bool) -> float | None:
            v = t.get(key)
            if v is None and not required:
                return None
            if not _finite(v) or v < 0:
                raise _fail(
                    where, f"info.timings.{key}", f"expected seconds >= 0, found {shown(v)}", rec
                )
            return float(v)

        def tokens(key: str) -> int | None:
            m = r.get(key)
            v = m.get("total_tokens") if isinstance(m, dict) else None
            if v is None:
                return None
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_COUNT:
                raise _fail(
                    where, f"{key}.total_tokens", f"expected a token count, found {shown(v)}", rec
                )
            return v

        start, end = time("request_start", ok), time("request_end", ok)
        self.start = math.nan if start is None else start
        self.end = math.nan if end is None else end
        # GuideLLM's own request_start_time / request_end_time: an errored request has
        # no request_end, and its scheduler's resolve times stand in.
        s0 = start if start is not None else time("resolve_start", False)
        e0 = end if end is not None else time("resolve_end", False)
        self.span = None if s0 is None or e0 is None else (s0, e0)
        self.first = time("first_token_iteration", False)
        self.last = time("last_token_iteration", False)
        self.input = tokens("input_metrics") or 0
        out = tokens("output_metrics")
        if out is None:  # the tool's fallback: one token per streamed iteration
            it = t.get("token_iterations")
            out = it if isinstance(it, int) and not isinstance(it, bool) and it >= 0 else 0
        self.output = out if ok else 0
        if not ok:
            return
        if self.first is None or self.last is None:
            raise _fail(
                where,
                "info.timings.first_token_iteration",
                "missing in a successful request (a non-streaming run has no token "
                "timings; only streaming runs are imported)",
                rec,
            )
        if not self.start <= self.first <= self.last <= self.end:
            raise _fail(
                where,
                "info.timings",
                "expected request_start <= first_token_iteration <= last_token_iteration "
                f"<= request_end, found {self.start!r}, {self.first!r}, {self.last!r}, "
                f"{self.end!r}",
                rec,
            )


def _requests(b: dict[str, Any], where: str, bat: str) -> tuple[list[_Req], int, int, int]:
    reqs = _dict(b.get("requests"), where, f"{bat}.requests")
    out: list[_Req] = []
    counts = []
    for status in ("successful", "errored", "incomplete"):
        items = reqs.get(status) or []
        if not isinstance(items, list):
            raise _fail(where, f"{bat}.requests.{status}", "expected an array")
        for i, r in enumerate(items):
            rec = f"{bat}.requests.{status}[{i}]"
            out.append(_Req(r, where, rec, status == "successful"))
        counts.append(len(items))
    return out, counts[0], counts[1], counts[2]


def _window(b: dict[str, Any], where: str, bat: str) -> tuple[float, float]:
    ends = []
    for key in ("start_time", "end_time"):
        v = b.get(key)
        if not _finite(v) or v < 0:
            raise _fail(where, f"{bat}.{key}", f"expected seconds >= 0, found {shown(v)}")
        ends.append(float(v))
    s, e = ends
    if not e > s:
        raise _fail(
            where,
            f"{bat}.end_time",
            f"the benchmark ends ({e!r}) before it starts ({s!r}): no window to divide by",
        )
    return s, e


def _latency_aggregates(
    tag: str,
    succ: dict[str, Any],
    where: str,
    out: dict[str, float],
    names: dict[str, str],
    *,
    mat: str,
) -> None:
    lat, scale = _LATENCY[tag]
    at = f"{mat}metrics.{tag}.successful"
    stats = [(f"{_STATS[s]}_{lat}_ms", succ.get(s), f"{at}.{s}") for s in _STATS]
    pct = succ.get("percentiles")
    if isinstance(pct, dict):
        stats += [
            (f"p{p}_{lat}_ms", pct.get(k), f"{at}.percentiles.{k}") for k, p in PERCENTILES.items()
        ]
    for key, v, name in stats:
        if not _finite(v):
            raise _fail(where, name, f"expected a finite number, found {shown(v)}")
        out[key], names[key] = float(v) * scale, name


def _totals(m: dict[str, Any], out: dict[str, float], names: dict[str, str], mat: str) -> list[str]:
    for k, key in (("successful", "completed"), ("errored", "failed")):
        v = m.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            out[key], names[key] = float(v), f"{mat}metrics.request_totals.{k}"
    if m.get("incomplete"):
        # The vocabulary's failed count is every request not successful.
        out.pop("failed", None)
        return ["request_totals.errored (there are incomplete requests too)"]
    return []


def _aggregates(
    metrics: dict[str, Any], where: str, mat: str = ""
) -> tuple[dict[str, float], dict[str, str], list[str]]:
    """Canonical (vLLM-style) key -> value, key -> GuideLLM's name, names left out
    (``mat``: the benchmark's prefix in the names, empty in a one-benchmark report)."""
    out: dict[str, float] = {}
    names: dict[str, str] = {}
    left: list[str] = []
    for tag, m in sorted(metrics.items()):
        succ = m.get("successful") if isinstance(m, dict) else None
        if tag == "request_totals" and isinstance(m, dict):
            left += _totals(m, out, names, mat)
        elif not isinstance(succ, dict):
            if m is not None:
                left.append(tag)
        elif tag in _LATENCY:
            _latency_aggregates(tag, succ, where, out, names, mat=mat)
            left.append(f"{tag}.successful mode/variance/min/max")
        elif tag in _RATES:
            v = succ.get("mean")
            if not _finite(v):
                at = f"{mat}metrics.{tag}.successful.mean"
                raise _fail(where, at, f"expected a finite number, found {shown(v)}")
            out[_RATES[tag]], names[_RATES[tag]] = float(v), f"{mat}metrics.{tag}.successful.mean"
        else:
            left.append(tag)
    return out, names, left


def _last_event_gaps(ok_reqs: list[_Req], end: float) -> dict[str, float]:
    """Per claimed throughput, how far before the window's end its last event lies
    (a request's end; its last token, which is also the last of its prompt and output
    token events)."""
    if not ok_reqs:
        return {}
    last_tok = max(r.last if r.last is not None else r.end for r in ok_reqs)
    return {
        "request_throughput": end - max(r.end for r in ok_reqs),
        "output_throughput": end - last_tok,
        "total_token_throughput": end - last_tok,
    }


def _scheduler_notes(b: dict[str, Any], mat: str = "") -> list[str]:
    """Inconsistencies of the scheduler's own figures (not claimed, never trusted)."""
    sm = b.get("scheduler_metrics")
    if not isinstance(sm, dict):
        return []
    notes = []
    s, e = sm.get("start_time"), sm.get("end_time")
    if _finite(s) and _finite(e) and s > e:
        notes.append(
            f"{mat}scheduler_metrics.start_time ({s!r}) after its end_time ({e!r}): the "
            "scheduler's figures are inconsistent"
        )
    for k, v in sorted(sm.items()):
        if k.endswith("_delay_avg") and _finite(v) and abs(v) > 1e6:
            notes.append(f"{mat}scheduler_metrics.{k} = {v!r} s: a timestamp, not a delay")
    return notes


def _arrays(reqs: list[_Req], n_ok: int) -> dict[str, Any]:
    """The ServingRun arrays: GuideLLM's ITL and TPOT per request, each repeated once per
    unit of its weight (ITL: output tokens - 1, TPOT: output tokens), so pooled values
    carry the tool's token weighting."""
    n = len(reqs)
    ok = np.zeros(n, dtype=np.bool_)
    ok[:n_ok] = True
    out = np.array([r.output for r in reqs], dtype=np.int64)
    first = np.array([r.first if r.first is not None else math.nan for r in reqs])
    last = np.array([r.last if r.last is not None else math.nan for r in reqs])
    starts = np.array([r.start for r in reqs], dtype=np.float64)
    ends = np.array([r.end for r in reqs], dtype=np.float64)
    many = ok & (out > 1)
    itl_counts = np.where(many, out - 1, 0).astype(np.int64)
    per_itl = np.zeros(n, dtype=np.float64)
    per_itl[many] = (last[many] - first[many]) / (out[many] - 1)
    some = ok & (out > 0)
    per_tpot = np.zeros(n, dtype=np.float64)
    per_tpot[some] = (last[some] - starts[some]) / out[some]
    spans = [r.span for r in reqs]
    times_ns = None
    if all(sp is not None and max(sp) < _NS_LIMIT_S for sp in spans):
        # Seconds (doubles) to integer ns: monotone, so the order of ends and starts
        # that the in-flight check reads is kept.
        times_ns = np.rint(np.array(spans, dtype=np.float64) * 1e9).astype(np.int64)
    return {
        "times_ns": times_ns,
        "ok": ok,
        "input_lens": np.array([r.input for r in reqs], dtype=np.int64),
        "output_lens": out,
        "ttfts": first - starts,
        "latencies": ends - starts,
        "itl_counts": itl_counts,
        "itl": np.repeat(per_itl, itl_counts),
        "samples": {"tpot": np.repeat(per_tpot[some], out[some])},
    }


def parse_all(data: bytes, where: str, arm: str) -> list[ServingRun]:
    """Parse every benchmark of one GuideLLM report of ``arm`` (a sweep, or a scenario's
    several rates or stream counts): one run per benchmark, in the report's order, each
    its own load point (its strategy).

    Raises:
        SourceError: what ``parse`` refuses, located at its benchmark; no benchmark, more
            than ``MAX_BENCHMARKS``, or two benchmarks at one load point.
    """
    doc = _load(data, where)
    benches = doc["benchmarks"]
    if not benches:
        raise _fail(where, "benchmarks", "holds no benchmark")
    if len(benches) > MAX_BENCHMARKS:
        # Checked before any benchmark is read: the cost stays bounded.
        raise _fail(
            where,
            "benchmarks",
            f"holds {len(benches)} benchmarks, more than the {MAX_BENCHMARKS} one report may "
            "hold: split the run",
        )
    runs = [_benchmark(doc, i, where, arm) for i in range(len(benches))]
    check_distinct(runs, where, lambda i: f"benchmarks[{i}]")
    return runs


def parse(data: bytes, where: str, arm: str, index: int | None = None) -> ServingRun:
    """Parse one GuideLLM report of ``arm``; the load point is its benchmark's strategy.

    ``index`` None: the report must hold exactly one benchmark. Otherwise the run of
    benchmark ``index`` (``parse_all``'s, checks of the whole report included).

    Raises:
        SourceError: not a GuideLLM report, truncated, several benchmarks (``index``
            None), a strategy with no load point, a successful request without token
            timings or with timings out of order, a bad token count, a window that ends
            before it starts.
    """
    if index is not None:
        runs = parse_all(data, where, arm)
        if not 0 <= index < len(runs):
            raise _fail(where, "benchmarks", f"has no benchmark {index} (holds {len(runs)})")
        return runs[index]
    doc = _load(data, where)
    benches = doc["benchmarks"]
    if len(benches) != 1:
        raise _fail(
            where,
            "benchmarks",
            f"holds {len(benches)} benchmarks: import it with bundle import (one load point "
            "per benchmark), whose serving.json names each benchmark's index",
        )
    return _benchmark(doc, 0, where, arm)


def _benchmark(doc: dict[str, Any], i: int, where: str, arm: str) -> ServingRun:
    """The run of benchmark ``i``: a report of one benchmark keeps its names (fields
    ``metrics...`` unprefixed, as imports before sweeps wrote them); in a report of
    several, every name says its benchmark (``benchmarks[2].metrics...``)."""
    single = len(doc["benchmarks"]) == 1
    bat = f"benchmarks[{i}]"
    mat = "" if single else f"{bat}."
    at = where if single else f"{where} {bat}"
    b = _dict(doc["benchmarks"][i], where, bat)
    rate, conc, arrival, process = _load_point(b, where, bat)
    start, end = _window(b, where, bat)
    reqs, n_ok, n_err, n_inc = _requests(b, where, bat)
    metrics = _dict(b.get("metrics"), where, f"{bat}.metrics")
    aggregates, names, left = _aggregates(metrics, where, mat)
    totals = metrics.get("request_totals")
    unrecorded: dict[str, str] = {}
    recorded = (n_ok, n_err, n_inc)
    if (
        isinstance(totals, dict)
        and tuple(totals.get(k) for k in ("successful", "errored", "incomplete")) != recorded
    ):
        why = (
            f"{at}: its requests lists ({n_ok} successful, {n_err} errored, {n_inc} "
            f"incomplete) are not the {totals.get('successful')!r}/{totals.get('errored')!r}/"
            f"{totals.get('incomplete')!r} its aggregates counted (sampled with "
            "sample_size?): GuideLLM's aggregates cannot be re-derived from them"
        )
        unrecorded = dict.fromkeys(("ttft", "tpot", "itl", "e2el"), why)
        for key in [k for k in aggregates if not k.endswith("_ms")]:
            left.append(f"{names.pop(key)} (not re-derivable: sampled requests)")
            del aggregates[key]
    ok_reqs = reqs[:n_ok]
    outside = [i for i, r in enumerate(ok_reqs) if r.start < start or r.end > end]
    if outside and not unrecorded:
        why = (
            f"{at}: successful request {outside[0]} lies outside the benchmark window "
            "(warmup or cooldown): GuideLLM's windowing is not re-derived"
        )
        unrecorded = dict.fromkeys(("ttft", "tpot", "itl", "e2el"), why)
    for key, gap in _last_event_gaps(ok_reqs, end).items():
        if key in aggregates and 0 < gap <= MERGE_S:
            aggregates.pop(key)
            left.append(
                f"{names.pop(key)} (its last event lies {gap!r} s before end_time, within "
                "the 0.1 ms GuideLLM merges: it divides by a shorter span)"
            )
    left += _scheduler_notes(b, mat)
    arrays = _arrays(reqs, n_ok)
    meta: dict[str, Any] = {
        "tool": FORMAT,
        "arrival": arrival,
        "aggregate_names": names,
        "not_claimed_aggregates": left,
        "duration_from": "the benchmark window, end_time - start_time",
        "definitions": DEFINITIONS,
    }
    md = doc.get("metadata")
    if isinstance(md, dict) and isinstance(md.get("guidellm_version"), str):
        meta["guidellm_version"] = md["guidellm_version"]
    spec = doc.get("config", {}).get("spec") if isinstance(doc.get("config"), dict) else None
    backend = spec.get("backend") if isinstance(spec, dict) else None
    if isinstance(backend, dict) and "chat" in str(backend.get("request_format", "")):
        meta["backend"] = "openai-chat"
    return ServingRun(
        source=where,
        arm=arm,
        load_point=load_point_id(rate, conc, process),
        arrival=process,
        request_rate=rate,
        max_concurrency=conc,
        num_prompts=None,
        duration_s=end - start,
        detailed=True,
        aggregates=aggregates,
        meta=meta,
        unrecorded=unrecorded,
        percentiles="inverse_cdf",
        **arrays,
    )
