"""NVIDIA AIPerf ``aiperf profile`` exports (``profile_export.jsonl`` and its aggregate JSON).

Followed writer (read in the public code search): ai-dynamo/aiperf at commit
3a4b58d5 (``docs/metrics_reference.md``, the ``MetricArray.to_result``
aggregation) and its mirror nvda-ci/aiperf at commit 8e6a033d
(``docs/tutorials/working-with-profile-exports.md``, the record and export
models); checked against bytes written by ``aiperf profile`` 0.13.0 from PyPI
(``tests/fixtures/real_writers/aiperf-0.13.0/``). One run writes, into its
artifact directory:

- ``profile_export.jsonl``: one JSON object per request,
  ``{"metadata": {session_num, x_request_id, request_start_ns, request_ack_ns,
  request_end_ns, worker_id, record_processor_id, benchmark_phase,
  was_cancelled, ...}, "metrics": {<tag>: {"value": .., "unit": ..}, ...},
  "error": null | {code, type, message}}``. A failed request has an ``error``
  and at most ``error_isl`` among its metrics (0.13.0: its ``request_end_ns``
  equals its ``request_start_ns``, and it has no ``request_ack_ns``); 0.13.0
  leaves ``error`` out of a successful record. Warmup requests are in the same
  file with ``benchmark_phase`` ``"warmup"``.
- ``profile_export_aiperf.json``: one object; per metric tag
  ``{"unit": .., "avg": .., "p1" .. "p99": .., "min", "max", "std"}`` (0.13.0
  adds ``count`` and ``sum``) (``numpy.percentile`` linear and population
  ``numpy.std`` over the per-record values), single-value metrics
  (``request_throughput``, ``benchmark_duration``, ``request_count``,
  ``total_isl``, ``total_osl``) with only ``avg``, ``start_time`` and
  ``end_time``, and ``input_config``: the load point is in
  ``input_config.phases`` (0.13.0: the phase whose ``kind`` is ``profiling``,
  ``type`` ``concurrency`` with ``concurrency``, or ``poisson``/``gamma``/
  ``constant`` with ``rate`` and an optional ``concurrency`` cap; ``requests``)
  or, as the followed docs describe, ``input_config.loadgen``
  (``concurrency``, ``request_rate``, ``request_count``).

The arrival process of a rate phase (``poisson``; ``gamma`` with ``smoothness``, the
gamma shape as vLLM's ``burstiness``; ``constant``) is part of the load point. The
goodput SLOs are ``input_config.slos`` (tag -> ms); AIPerf's ``goodput`` is
``good_request_count`` over the phase window, a record good when it has every
SLO'd metric within its threshold.

Definitions used here (``specs/claims-vocabulary.md``): AIPerf's per-record
``inter_token_latency`` is ``(request_latency - time_to_first_token) /
(output_sequence_length - 1)``, which is the vocabulary's TPOT, so its
aggregates become TPOT claims. AIPerf records no individual inter-token gaps
(``inter_chunk_latency`` holds gaps between response *chunks*), so ITL is
not recorded: ITL claims are unverifiable. The duration throughputs divide by:
with ``input_config.phases`` (0.13.0), the profiling phase's window, which
AIPerf divides its throughputs by and records only as ``end_time - start_time``
(naive local ``datetime.fromtimestamp`` text, to the microsecond; its
``benchmark_duration``, first request to last response, is shorter); with
``input_config.loadgen``, the recorded ``benchmark_duration``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bundler._internal.jsonload import JsonLoadError, line_loader, loads
from bundler.errors import Problem
from bundler.format.serving_run import (
    MAX_COUNT,
    POISSON,
    ServingRun,
    SourceError,
    arrival_text,
    load_point_id,
    shown,
)
from bundler.importers import source_text

__all__ = ["AGGREGATE_NAME", "FORMAT", "RECORDS_NAME", "locate", "parse"]

FORMAT = "aiperf"
RECORDS_NAME = "profile_export.jsonl"
AGGREGATE_NAME = "profile_export_aiperf.json"

_LATENCY_TAGS = {
    "time_to_first_token": "ttft",
    "request_latency": "e2el",
    "inter_token_latency": "tpot",
}
_STATS = {"avg": "mean", "std": "std"}
_SINGLE = {
    "request_throughput": "request_throughput",
    "output_token_throughput": "output_throughput",
    "total_token_throughput": "total_token_throughput",
    "request_count": "completed",
    "error_request_count": "failed",
    "total_isl": "total_input_tokens",
    "total_osl": "total_output_tokens",
    "goodput": "request_goodput",
}
GOODPUT_SLO_TAGS = {
    "time_to_first_token": "ttft_ms",
    "request_latency": "e2el_ms",
    "inter_token_latency": "tpot_ms",
}
"""AIPerf SLO tags whose per-record values the records carry, as goodput claim params.
AIPerf's goodput (``good_request_count`` / the phase window) counts a request good when
its record has every SLO'd metric and each is <= its threshold (ms), so a one-token
response (no ``inter_token_latency``) is never good under an inter_token_latency SLO,
where vLLM counts its TPOT as 0."""
_NEEDED = (
    "time_to_first_token",
    "request_latency",
    "input_sequence_length",
    "output_sequence_length",
)
ITL_NOT_RECORDED = (
    "AIPerf records no individual inter-token gaps (its inter_token_latency is a per-request "
    "average, inter_chunk_latency holds gaps between response chunks): ITL cannot be re-derived"
)


def _fail(where: str, field: str | None, message: str, record: str | None = None) -> SourceError:
    return SourceError(
        f"{where}: not a usable AIPerf export", [Problem(where, record, field, message)]
    )


def locate(path: Path) -> tuple[Path, Path]:
    """The records and aggregate files of a run, given its directory or either file.

    Raises:
        SourceError: one of the two files is not there.
    """
    if path.is_dir():
        records, aggregate = path / RECORDS_NAME, path / AGGREGATE_NAME
    elif path.name.endswith(".jsonl"):
        records, aggregate = path, path.with_name(AGGREGATE_NAME)
    else:
        records, aggregate = path.with_name(RECORDS_NAME), path
    for p, what in ((records, "per-request records"), (aggregate, "aggregate statistics")):
        if not p.is_file():
            raise _fail(
                str(path),
                None,
                f"no {p.name} ({what}) at {p}: an AIPerf run is read from its artifact "
                f"directory ({RECORDS_NAME} and {AGGREGATE_NAME} side by side)",
            )
    return records, aggregate


def _load(
    text: str, where: str, record: str | None, load: Callable[[str], Any] | None = None
) -> Any:
    try:
        if load is not None:
            return load(text)
        # Bare NaN/Infinity literals are kept so the checks can name the field.
        return loads(text, constants="keep", surrogates=True)
    except JsonLoadError as exc:
        raise _fail(where, exc.field, str(exc), record) from None
    except json.JSONDecodeError as exc:
        msg = f"not JSON (truncated?): {exc.msg} at column {exc.colno}"
        raise _fail(where, None, msg, record) from exc


def _finite(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v)


def _metric(metrics: dict[str, Any], tag: str, unit: str, where: str, record: str) -> float | None:
    m = metrics.get(tag)
    if m is None:
        return None
    if not isinstance(m, dict) or "value" not in m:
        raise _fail(where, f"metrics.{tag}", 'expected {"value": .., "unit": ..}', record)
    if m.get("unit") != unit:
        raise _fail(
            where, f"metrics.{tag}.unit", f"expected {unit!r}, found {shown(m.get('unit'))}", record
        )
    v = m["value"]
    if not _finite(v) or v < 0:
        raise _fail(
            where,
            f"metrics.{tag}.value",
            f"expected a finite number >= 0, found {shown(v)}",
            record,
        )
    if unit == "tokens" and (v != int(v) or v > MAX_COUNT):
        raise _fail(
            where,
            f"metrics.{tag}.value",
            f"expected a token count (0 to 2**53), found {shown(v)}",
            record,
        )
    return float(v)


def _aggregate_doc(data: bytes, where: str) -> dict[str, Any]:
    doc = _load(source_text.decode(data, where, _fail), where, None)
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmark_duration"), dict):
        raise _fail(
            where,
            "benchmark_duration",
            "missing: not the aggregate export of aiperf profile (profile_export_aiperf.json)",
        )
    return doc


_RATE_PHASES = ("poisson", "gamma", "constant")


def _int_at_least_1(v: Any) -> bool:
    # Bounded above: a concurrency becomes part of a load point id, which names files.
    return isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_COUNT


LoadPoint = tuple[float, int | None, int | None, str]
"""Request rate, concurrency cap, requests asked for, arrival process."""


def _phase_arrival(ph: dict[str, Any], kind: Any, at: str, where: str) -> str:
    """AIPerf's arrival process: ``poisson``; ``gamma`` of shape ``smoothness`` (absent:
    1, Poisson; AIPerf draws gaps as vLLM does for ``--burstiness``); ``constant``."""
    if kind == "constant":
        return arrival_text(None)
    if kind == "gamma":
        shape = ph.get("smoothness")
        if shape is None:
            return POISSON
        if not _finite(shape) or shape <= 0:
            raise _fail(where, f"{at}.smoothness", f"expected a number > 0, found {shown(shape)}")
        return arrival_text(float(shape))
    return POISSON


def _phase_load_point(phases: list[Any], where: str) -> LoadPoint:
    """The load point of AIPerf 0.13's ``input_config.phases`` (its one profiling phase)."""
    prof = [
        (i, ph)
        for i, ph in enumerate(phases)
        if isinstance(ph, dict) and (ph.get("kind") or ph.get("name")) == "profiling"
    ]
    if len(prof) != 1:
        raise _fail(
            where,
            "input_config.phases",
            f"expected one profiling phase, found {len(prof)}: a run's load point is its "
            "profiling phase's",
        )
    i, ph = prof[0]
    at = f"input_config.phases[{i}]"
    kind = ph.get("type")
    conc = ph.get("concurrency")
    if conc is not None and not _int_at_least_1(conc):
        raise _fail(
            where, f"{at}.concurrency", f"expected an integer from 1 to 2**53, found {shown(conc)}"
        )
    if kind == "concurrency":
        rate_f = math.inf  # no rate limit: a request goes out whenever a slot is free
        if conc is None:
            conc = 1  # the writer's default for a concurrency phase
    elif kind in _RATE_PHASES:
        rate: Any = ph.get("rate")
        if not _finite(rate) or rate <= 0:
            raise _fail(
                where,
                f"{at}.rate",
                f"expected a number > 0, found {shown(rate)} (a rate series is not a load point)",
            )
        rate_f = float(rate)
    else:
        raise _fail(
            where,
            f"{at}.type",
            f"expected 'concurrency', 'poisson', 'gamma' or 'constant', found {shown(kind)}: "
            "no (rate, concurrency) load point describes it",
        )
    count = ph.get("requests")
    arrival = _phase_arrival(ph, kind, at, where)
    return rate_f, conc, count if _int_at_least_1(count) else None, arrival


def _load_point(doc: dict[str, Any], where: str) -> LoadPoint:
    cfg = doc.get("input_config")
    if isinstance(cfg, dict) and isinstance(cfg.get("phases"), list):
        return _phase_load_point(cfg["phases"], where)
    loadgen = cfg.get("loadgen") if isinstance(cfg, dict) else None
    if not isinstance(loadgen, dict):
        raise _fail(
            where,
            "input_config.phases",
            "missing (and no input_config.loadgen): the load point (concurrency, rate) is "
            "recorded only there",
        )
    conc = loadgen.get("concurrency")
    if conc is not None and not _int_at_least_1(conc):
        raise _fail(
            where,
            "input_config.loadgen.concurrency",
            f"expected an integer from 1 to 2**53, found {shown(conc)}",
        )
    rate = loadgen.get("request_rate")
    if rate is None:
        rate_f = math.inf  # no rate limit configured: requests go out as concurrency allows
    elif not _finite(rate) or rate <= 0:
        raise _fail(
            where,
            "input_config.loadgen.request_rate",
            f"expected a number > 0, found {shown(rate)}",
        )
    else:
        rate_f = float(rate)
    count = loadgen.get("request_count")
    # The followed docs' loadgen names no arrival pattern: AIPerf's default, Poisson.
    return rate_f, conc, count if _int_at_least_1(count) else None, POISSON


def _latency_aggregates(
    tag: str, m: dict[str, Any], where: str, out: dict[str, float], names: dict[str, str]
) -> list[str]:
    if m["unit"] != "ms":
        raise _fail(where, f"{tag}.unit", f"expected 'ms', found {shown(m['unit'])}")
    lat = _LATENCY_TAGS[tag]
    left: list[str] = []
    for stat, v in m.items():
        if stat == "unit":
            continue
        if stat in _STATS:
            key = f"{_STATS[stat]}_{lat}_ms"
        elif stat.startswith("p") and stat[1:].replace(".", "", 1).isdigit():
            key = f"{stat}_{lat}_ms"
        else:
            left.append(f"{tag}.{stat}")
            continue
        if not _finite(v):
            raise _fail(where, f"{tag}.{stat}", f"expected a finite number, found {shown(v)}")
        out[key] = float(v)
        names[key] = f"{tag}.{stat}"
    return left


def _aggregates(
    doc: dict[str, Any], where: str
) -> tuple[dict[str, float], dict[str, str], list[str]]:
    """Canonical (vLLM-style) key -> value, canonical key -> AIPerf name, names left out."""
    out: dict[str, float] = {}
    names: dict[str, str] = {}
    left: list[str] = []
    for tag, m in sorted(doc.items()):
        if not isinstance(m, dict) or "unit" not in m:
            continue
        if tag in _LATENCY_TAGS:
            left += _latency_aggregates(tag, m, where, out, names)
        elif tag in _SINGLE and "avg" in m:
            v = m["avg"]
            if not _finite(v):
                raise _fail(where, f"{tag}.avg", f"expected a finite number, found {shown(v)}")
            out[_SINGLE[tag]] = float(v)
            names[_SINGLE[tag]] = f"{tag}.avg"
        elif tag != "benchmark_duration":
            left.append(tag)
    return out, names, left


Row = tuple[bool, float, float, float, float, bool, float, float, float]
"""One request: ok, input tokens, output tokens, TTFT s, latency s, TPOT recorded if due,
then the recorded time_to_first_token, request_latency and inter_token_latency in ms
(NaN where the record has none)."""


def _record(r: Any, where: str, rec: str) -> Row | None:
    if not isinstance(r, dict) or not isinstance(r.get("metadata"), dict):
        raise _fail(where, "metadata", "expected a record {metadata, metrics, error}", rec)
    if r["metadata"].get("benchmark_phase", "profiling") != "profiling":
        return None  # warmup: not part of the measured run, as in AIPerf's own aggregates
    metrics = r.get("metrics") or {}
    if not isinstance(metrics, dict):
        raise _fail(where, "metrics", "expected an object or null", rec)
    error = r.get("error")
    if error is not None and not isinstance(error, dict):
        raise _fail(where, "error", "expected null or an object", rec)
    if error is not None:
        isl = _metric(metrics, "error_isl", "tokens", where, rec)
        return False, isl or 0.0, 0.0, math.nan, math.nan, True, math.nan, math.nan, math.nan
    vals = {
        t: _metric(metrics, t, "ms" if t in _LATENCY_TAGS else "tokens", where, rec)
        for t in _NEEDED
    }
    missing = [t for t, v in vals.items() if v is None]
    if missing:
        raise _fail(
            where,
            f"metrics.{missing[0]}",
            "missing in a successful record (a non-streaming run has no time_to_first_token; "
            "only streaming runs are imported)",
            rec,
        )
    osl = vals["output_sequence_length"] or 0.0
    itl = _metric(metrics, "inter_token_latency", "ms", where, rec)
    return (
        True,
        vals["input_sequence_length"] or 0.0,
        osl,
        (vals["time_to_first_token"] or 0.0) / 1000.0,
        (vals["request_latency"] or 0.0) / 1000.0,
        osl <= 1 or itl is not None,
        vals["time_to_first_token"] or 0.0,
        vals["request_latency"] or 0.0,
        math.nan if itl is None else itl,
    )


_NS_END = 2**63
"""Request times are kept as int64 nanoseconds."""


def _ns(metadata: dict[str, Any], key: str, where: str, rec: str) -> int | None:
    v = metadata.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        return None
    if v >= _NS_END:
        raise _fail(
            where, f"metadata.{key}", f"expected nanoseconds below 2**63, found {shown(v)}", rec
        )
    return v


Records = tuple[
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool, np.ndarray | None, np.ndarray
]


def parse_records(data: bytes, where: str) -> Records:
    """ok, input_lens, output_lens, ttfts (s), latencies (s), whether every successful
    request with more than one output token has its inter_token_latency, the
    (start, end) ns of every request (None unless every record has both), and the
    recorded (time_to_first_token, request_latency, inter_token_latency) ms per
    request (NaN where absent)."""
    rows: list[Row] = []
    times: list[tuple[int, int]] | None = []
    text = source_text.decode(data, where, _fail)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        # The writer ends every record with a newline: a last line without one was cut off.
        raise _fail(
            where, None, "the last line has no newline: the file was cut off", f"line {len(lines)}"
        )
    load = line_loader(text, constants="keep", surrogates=True, source=data)
    for i, line in enumerate(lines, start=1):
        rec = f"line {i}"
        if not line.strip():
            raise _fail(where, None, "empty line", rec)
        r = _load(line, where, rec, load)
        row = _record(r, where, rec)
        if row is None:
            continue
        rows.append(row)
        start, end = (
            _ns(r["metadata"], "request_start_ns", where, rec),
            _ns(r["metadata"], "request_end_ns", where, rec),
        )
        if times is not None and start is not None and end is not None:
            times.append((start, end))
        else:
            times = None
    if not rows:
        raise _fail(where, None, "no profiling records")
    ok, inp, out, ttft, lat, due, *ms = zip(*rows, strict=True)
    return (
        np.array(ok, dtype=np.bool_),
        np.array(inp, dtype=np.int64),
        np.array(out, dtype=np.int64),
        np.array(ttft, dtype=np.float64),
        np.array(lat, dtype=np.float64),
        all(due),
        None if times is None else np.array(times, dtype=np.int64),
        np.array(ms, dtype=np.float64),
    )


WINDOW_UNCERTAINTY_S = 2e-6
"""How far ``end_time - start_time`` can be from the writer's window in ns: each end is
``datetime.fromtimestamp(ns / 1e9)``, rounded to the microsecond (<= 0.5 us) after the
double division (<= 0.25 us at today's epoch), so the difference is off by < 1.5 us."""

_THROUGHPUT_TAGS = (
    "request_throughput",
    "output_token_throughput",
    "total_token_throughput",
    "goodput",
)


def _phase_window(doc: dict[str, Any], where: str) -> float | str:
    """Seconds from ``start_time`` to ``end_time`` (AIPerf 0.13's profiling-phase window,
    which its throughputs divide by), or why it cannot be read."""
    ends: list[dt.datetime] = []
    for k in ("start_time", "end_time"):
        v = doc.get(k)
        if not isinstance(v, str):
            return f"{where} records no {k}"
        try:
            t = dt.datetime.fromisoformat(v)
        except ValueError:
            raise _fail(where, k, f"expected an ISO 8601 date and time, found {shown(v)}") from None
        if t.tzinfo is not None:
            try:
                t = t.replace(tzinfo=None) - t.utcoffset()  # type: ignore[operator]
            except OverflowError:  # 0001-01-01T00:00+01:00 has no UTC time
                raise _fail(where, k, f"out of range in UTC: {shown(v)}") from None
        ends.append(t)
    w = (ends[1] - ends[0]).total_seconds()
    if not w > WINDOW_UNCERTAINTY_S:
        raise _fail(where, "end_time", f"expected a time after start_time, {w!r} s apart")
    return w


def _goodput_slos(
    doc: dict[str, Any],
    where: str,
    aggregates: dict[str, float],
    names: dict[str, str],
    left: list[str],
) -> dict[str, float] | None:
    """The goodput SLOs AIPerf recorded (``input_config.slos``) as claim params
    (``ttft_ms``, ``tpot_ms``, ``e2el_ms``); None, with AIPerf's goodput moved from
    ``aggregates`` to ``left`` with the reason, when it cannot be re-derived."""
    why = _slos(doc, where)
    if isinstance(why, dict):
        return why
    if aggregates.pop("request_goodput", None) is not None:
        names.pop("request_goodput", None)
        left.append(f"goodput ({why})")
    return None


def _slos(doc: dict[str, Any], where: str) -> dict[str, float] | str:
    cfg = doc.get("input_config")
    slos = cfg.get("slos") if isinstance(cfg, dict) else None
    if not isinstance(slos, dict) or not slos:
        return f"{where} records no goodput SLOs (input_config.slos)"
    out: dict[str, float] = {}
    for tag, v in sorted(slos.items()):
        if tag not in GOODPUT_SLO_TAGS:
            return (
                f"{where}: the SLO on {shown(tag)} (input_config.slos) is on a metric the "
                "records do not carry per request for this check"
            )
        if not _finite(v) or v <= 0:
            raise _fail(
                where, f"input_config.slos.{tag}", f"expected a number > 0, found {shown(v)}"
            )
        out[GOODPUT_SLO_TAGS[tag]] = float(v)
    return out


def parse(
    records: bytes, records_where: str, aggregate: bytes, aggregate_where: str, arm: str
) -> ServingRun:
    """Parse one AIPerf run of ``arm``; the load point comes from its aggregate's input_config.

    Raises:
        SourceError: a file is not AIPerf's, a line is truncated or not a record,
            a successful record misses a metric or has a negative or non-finite one.
    """
    doc = _aggregate_doc(aggregate, aggregate_where)
    rate, conc, n_req, arrival = _load_point(doc, aggregate_where)
    dur = doc["benchmark_duration"]
    if dur.get("unit") not in ("sec", "s"):
        raise _fail(
            aggregate_where,
            "benchmark_duration.unit",
            f"expected 'sec', found {shown(dur.get('unit'))}",
        )
    d = dur.get("avg")
    if not _finite(d) or d <= 0:
        raise _fail(
            aggregate_where, "benchmark_duration.avg", f"expected a number > 0, found {shown(d)}"
        )
    aggregates, names, left = _aggregates(doc, aggregate_where)
    duration = float(d)
    cfg = doc.get("input_config")
    extra: dict[str, Any] = {}
    if isinstance(cfg, dict) and isinstance(cfg.get("phases"), list):
        # AIPerf 0.13 divides its throughputs by the profiling phase's window (phase start
        # to the end of its last request), not by benchmark_duration; the window is
        # recorded only as start_time and end_time, to the microsecond.
        window = _phase_window(doc, aggregate_where)
        if isinstance(window, str):
            for key, tag in ((_SINGLE[t], t) for t in _THROUGHPUT_TAGS):
                if aggregates.pop(key, None) is not None:
                    names.pop(key, None)
                    left.append(f"{tag} ({window}: its window is unknown)")
        else:
            duration = window
            extra = {
                "duration_from": "the profiling phase's window, end_time - start_time",
                "duration_rel_uncertainty": WINDOW_UNCERTAINTY_S / window,
            }
    slos = _goodput_slos(doc, aggregate_where, aggregates, names, left)
    ok, inp, out, ttft, lat, tpot_complete, times, ms = parse_records(records, records_where)
    unrecorded = {"itl": f"{records_where}: {ITL_NOT_RECORDED}"}
    if not tpot_complete:
        unrecorded["tpot"] = (
            f"{records_where}: a successful request with more than one output token has no "
            "inter_token_latency (its tokens came in one chunk), so AIPerf's TPOT set differs "
            "from the records' and cannot be re-derived"
        )
    meta: dict[str, Any] = {
        "tool": FORMAT,
        "aggregate_source": aggregate_where,
        "aggregate_names": names,
        "not_claimed_aggregates": left,
        "benchmark_duration": float(d),
        **extra,
    }
    if slos is not None:
        meta["goodput_slos"] = slos
    for k in ("aiperf_version", "start_time", "end_time", "was_cancelled"):
        if k in doc:
            meta[k] = doc[k]
    if isinstance(cfg, dict) and isinstance(cfg.get("endpoint"), dict):
        meta["endpoint_type"] = cfg["endpoint"].get("type")
    return ServingRun(
        source=records_where,
        arm=arm,
        load_point=load_point_id(rate, conc, arrival),
        request_rate=rate,
        max_concurrency=conc,
        num_prompts=n_req,
        duration_s=duration,
        detailed=True,
        ok=ok,
        input_lens=inp,
        output_lens=out,
        ttfts=ttft,
        latencies=lat,
        itl_counts=np.zeros(ok.size, dtype=np.int64),
        itl=np.zeros(0, dtype=np.float64),
        aggregates=aggregates,
        meta=meta,
        unrecorded=unrecorded,
        times_ns=times,
        arrival=arrival,
        recorded_ms={"ttft": ms[0], "e2el": ms[1], "tpot": ms[2]},
    )
