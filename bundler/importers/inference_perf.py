"""inference-perf reports (``per_request_lifecycle_metrics.json`` and a one-stage report).

Followed writer: ``inference-perf`` 0.7.0 from PyPI (``inference_perf/reportgen/base.py``:
``summarize_requests``, ``compute_request_latency_metrics``, ``summarize``),
checked against bytes it wrote (``tests/fixtures/real_writers/inference-perf-0.7.0/``).
A run with ``report.request_lifecycle.per_request`` on writes, into its report
directory, ``per_request_lifecycle_metrics.json`` (an array: per request
``start_time``, ``end_time`` (monotonic seconds), ``info.request_metrics.text.
input_tokens``, ``info.response_metrics.output_tokens`` and ``output_token_times``,
``error`` null or ``{error_type, error_msg}``) and per stage
``stage_<i>_lifecycle_metrics.json`` (``benchmark_time_seconds``,
``load_summary`` with ``requested_rate`` and, for a concurrent stage,
``concurrency``; ``successes.latency.<metric>.{mean, min, max, p0.1 .. p99.9,
median}`` in seconds; ``successes.throughput``; ``failures.count``).

inference-perf's definitions, which replay follows (they are vLLM's except TPOT):
TTFT = first output token time - start; request latency = end - start; ITL: every
gap between consecutive output token times, pooled; **TPOT = (last - first token
time) / (output_tokens - 1)** (not vLLM's ``(latency - ttft) / (n - 1)``); mean,
``numpy.percentile`` linear; throughputs divide by ``benchmark_time_seconds`` =
latest end - earliest start over **all** requests, failed ones included. No SD is
written. Only a one-stage run is imported (its stage report is the run's); the
stage's arrival process (``poisson``, ``constant``) is in ``config.yaml`` only,
so ``meta["arrival"]`` names the rate and says so.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from bundler._internal.jsonload import JsonLoadError, loads
from bundler.errors import Problem
from bundler.format.serving_run import MAX_COUNT, ServingRun, SourceError, load_point_id, shown

__all__ = ["AGGREGATE_NAME", "FORMAT", "RECORDS_NAME", "locate", "parse"]

FORMAT = "inference-perf"
RECORDS_NAME = "per_request_lifecycle_metrics.json"
AGGREGATE_NAME = "stage_0_lifecycle_metrics.json"
_LATENCY = {
    "time_to_first_token": "ttft",
    "request_latency": "e2el",
    "inter_token_latency": "itl",
    "time_per_output_token": "tpot",
}
_RATES = {
    "requests_per_sec": "request_throughput",
    "output_tokens_per_sec": "output_throughput",
    "total_tokens_per_sec": "total_token_throughput",
}
DEFINITIONS = {
    "tpot": "inference-perf's TPOT, (last - first output token time) / (output_tokens - 1)",
}


def _fail(where: str, field: str | None, message: str, record: str | None = None) -> SourceError:
    return SourceError(
        f"{where}: not a usable inference-perf report", [Problem(where, record, field, message)]
    )


def locate(path: Path) -> tuple[Path, Path]:
    """The per-request and stage reports of a run, given its report directory or either file.

    Raises:
        SourceError: one of the two files is not there.
    """
    if path.is_dir():
        records, aggregate = path / RECORDS_NAME, path / AGGREGATE_NAME
    elif path.name == RECORDS_NAME:
        records, aggregate = path, path.with_name(AGGREGATE_NAME)
    else:
        records, aggregate = path.with_name(RECORDS_NAME), path
    for p in (records, aggregate):
        if not p.is_file():
            raise _fail(
                str(path),
                None,
                f"no {p.name} at {p}: an inference-perf run is read from its report directory "
                f"({RECORDS_NAME}, with report.request_lifecycle.per_request on, and "
                f"{AGGREGATE_NAME})",
            )
    if (aggregate.parent / "stage_1_lifecycle_metrics.json").exists():
        raise _fail(
            str(aggregate.parent),
            None,
            "the run has several load stages, and its per-request report does not say which "
            "request belongs to which: import a one-stage run per load point",
        )
    return records, aggregate


def _load(data: bytes, where: str) -> Any:
    try:
        return loads(data.decode("utf-8"), constants="keep", surrogates=True, source=data)
    except UnicodeDecodeError as exc:
        raise _fail(where, None, f"not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    except JsonLoadError as exc:
        raise _fail(where, exc.field, str(exc)) from None
    except json.JSONDecodeError as exc:
        msg = f"not JSON (truncated?): {exc.msg} at line {exc.lineno} column {exc.colno}"
        raise _fail(where, None, msg) from exc


def _finite(v: Any) -> TypeGuard[float]:
    return not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v)


def _obj(v: Any) -> dict[str, Any]:
    """``v`` if it is a JSON object, else an empty one (a missing member is then None)."""
    return v if isinstance(v, dict) else {}


def _count(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_COUNT


Row = tuple[bool, int, int, float, float, list[float]]


def _record(r: Any, where: str, rec: str) -> Row:
    if not isinstance(r, dict):
        raise _fail(where, None, "expected a request object", rec)
    start, end = r.get("start_time"), r.get("end_time")
    if not _finite(start):
        raise _fail(where, "start_time", f"expected seconds, found {shown(start)}", rec)
    if not _finite(end):
        raise _fail(where, "end_time", f"expected seconds, found {shown(end)}", rec)
    if end < start:
        raise _fail(where, "end_time", f"before start_time ({end!r} < {start!r})", rec)
    info = _obj(r.get("info"))
    n_in = _obj(_obj(info.get("request_metrics")).get("text")).get("input_tokens")
    if r.get("error") is not None:
        return False, n_in if _count(n_in) else 0, 0, start, end, []
    if not _count(n_in):
        msg = f"expected a token count, found {shown(n_in)}"
        raise _fail(where, "info.request_metrics.text.input_tokens", msg, rec)
    resp = _obj(info.get("response_metrics"))
    times, n_out = resp.get("output_token_times"), resp.get("output_tokens")
    if not isinstance(times, list) or len(times) < 2:
        raise _fail(
            where,
            "info.response_metrics.output_token_times",
            "a successful request needs two output token times or more (only streaming runs "
            "are imported)",
            rec,
        )
    if not all(_finite(t) for t in times) or any(b < a for a, b in itertools.pairwise(times)):
        raise _fail(
            where,
            "info.response_metrics.output_token_times",
            "expected ascending finite seconds",
            rec,
        )
    if not _count(n_out):
        msg = f"expected a token count, found {shown(n_out)}"
        raise _fail(where, "info.response_metrics.output_tokens", msg, rec)
    return True, n_in, n_out, start, end, [float(t) for t in times]


def _load_point(doc: dict[str, Any], where: str) -> tuple[float, int | None, str]:
    ls = doc.get("load_summary")
    if not isinstance(ls, dict):
        raise _fail(where, "load_summary", "missing: not an inference-perf stage report")
    conc = ls.get("concurrency")
    if conc is not None:
        if not _count(conc) or conc < 1:
            msg = f"expected an integer from 1 to 2**53, found {shown(conc)}"
            raise _fail(where, "load_summary.concurrency", msg)
        return math.inf, conc, f"concurrent, {conc} requests in flight"
    rate = ls.get("requested_rate")
    if not _finite(rate) or rate <= 0:
        raise _fail(
            where,
            "load_summary.requested_rate",
            f"expected a number > 0, found {shown(rate)} (a stage report has one)",
        )
    return (
        float(rate),
        None,
        f"{rate!r} requests/s (poisson or constant: recorded in config.yaml only)",
    )


def _aggregates(doc: dict[str, Any], where: str) -> tuple[dict[str, float], dict[str, str]]:
    succ = doc.get("successes")
    if not isinstance(succ, dict):
        raise _fail(where, "successes", "missing: not an inference-perf stage report")
    out: dict[str, float] = {}
    names: dict[str, str] = {}
    lat = _obj(succ.get("latency"))
    for tag, short in _LATENCY.items():
        m = lat.get(tag)
        if not isinstance(m, dict):
            continue
        for stat, v in m.items():
            if stat in ("min", "max"):
                continue
            key = f"{stat}_{short}_ms"  # mean, median, p0.1 .. p99.9
            if not _finite(v):
                at = f"successes.latency.{tag}.{stat}"
                raise _fail(where, at, f"expected a finite number, found {shown(v)}")
            out[key], names[key] = float(v) * 1000.0, f"successes.latency.{tag}.{stat}"
    th = _obj(succ.get("throughput"))
    for tag, key in _RATES.items():
        v = th.get(tag)
        if _finite(v):
            out[key], names[key] = float(v), f"successes.throughput.{tag}"
    for k, key, part in (("count", "completed", succ), ("count", "failed", doc.get("failures"))):
        v = part.get(k) if isinstance(part, dict) else None
        if _count(v):
            out[key] = float(v)
            names[key] = f"{'successes' if key == 'completed' else 'failures'}.count"
    return out, names


def parse(
    records: bytes, records_where: str, aggregate: bytes, aggregate_where: str, arm: str
) -> ServingRun:
    """Parse one inference-perf run of ``arm`` (per-request report and its one stage report).

    Raises:
        SourceError: a file is not inference-perf's, truncated, a successful request
            without output token times or with a bad count or time.
    """
    doc = _load(aggregate, aggregate_where)
    if not isinstance(doc, dict) or not _finite(doc.get("benchmark_time_seconds")):
        raise _fail(
            aggregate_where,
            "benchmark_time_seconds",
            "missing: not an inference-perf stage report",
        )
    rate, conc, arrival = _load_point(doc, aggregate_where)
    aggregates, names = _aggregates(doc, aggregate_where)
    reqs = _load(records, records_where)
    if not isinstance(reqs, list) or not reqs:
        raise _fail(records_where, None, "expected a non-empty array of requests")
    rows = [_record(r, records_where, f"[{i}]") for i, r in enumerate(reqs)]
    ok = np.array([r[0] for r in rows], dtype=np.bool_)
    out = np.array([r[2] for r in rows], dtype=np.int64)
    starts = np.array([r[3] for r in rows])
    ends = np.array([r[4] for r in rows])
    times = [np.array(r[5]) for r in rows]
    ttfts = np.array([t[0] - s if t.size else math.nan for t, s in zip(times, starts, strict=True)])
    gaps = [np.diff(t) for t in times]
    per_tpot = [
        (t[-1] - t[0]) / (n - 1)
        for t, n, good in zip(times, out, ok, strict=True)
        if good and n > 1
    ]
    duration = float(ends.max() - starts.min())
    left = [
        f"{names.pop(k)} = {aggregates.pop(k)!r} (SD not written)"
        for k in [k for k in aggregates if k.startswith("std_")]
    ]
    if not duration > 0:
        raise _fail(records_where, "end_time", "the requests span no time: nothing to divide by")
    meta: dict[str, Any] = {
        "tool": FORMAT,
        "arrival": arrival,
        "aggregate_source": aggregate_where,
        "aggregate_names": names,
        "not_claimed_aggregates": [
            *left,
            "normalized_time_per_output_token, min/max, load_summary.schedule_delay, "
            "prompt_tokens/output_len/output_tokens distributions, request_size_bytes",
        ],
        "duration_from": "benchmark_time_seconds: latest end - earliest start of all requests",
        "benchmark_time_seconds": doc["benchmark_time_seconds"],
        "definitions": DEFINITIONS,
    }
    return ServingRun(
        source=records_where,
        arm=arm,
        load_point=load_point_id(rate, conc),
        request_rate=rate,
        max_concurrency=conc,
        num_prompts=None,
        duration_s=duration,
        detailed=True,
        ok=ok,
        input_lens=np.array([r[1] for r in rows], dtype=np.int64),
        output_lens=out,
        ttfts=ttfts,
        latencies=ends - starts,
        itl_counts=np.array([g.size for g in gaps], dtype=np.int64),
        itl=np.concatenate(gaps) if gaps else np.zeros(0),
        aggregates=aggregates,
        meta=meta,
        samples={"tpot": np.array(per_tpot, dtype=np.float64)},
    )
