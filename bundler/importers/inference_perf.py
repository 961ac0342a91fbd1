"""inference-perf (kubernetes-sigs/inference-perf) report directories.

Followed writer: inference-perf 0.7.0 from PyPI (``inference_perf/reportgen/base.py``:
``summarize_requests``, ``compute_request_latency_metrics``,
``build_per_request_lifecycle_entry``; ``inference_perf/config/``), checked
against bytes it wrote (``tests/fixtures/real_writers/inference-perf-0.7.0/``).
A run driven by ``inference-perf -c CONFIG`` writes, into its report directory:

- ``config.yaml``: the whole resolved config (``Config.model_dump``), with the
  arrival process in ``load.type`` (``constant``, ``poisson``, ``concurrent``, ...)
  and the stages in ``load.stages`` (``rate``, ``duration``; or
  ``num_requests``, ``concurrency_level``).
- ``summary_lifecycle_metrics.json``: ``benchmark_time_seconds``,
  ``successes`` (``count``; ``latency.<metric>`` with ``mean``, ``min``,
  ``max``, ``median``, ``p<P>``; ``throughput``; ``prompt_tokens``;
  ``output_tokens``; ...) and ``failures`` over every request of every stage.
- ``per_request_lifecycle_metrics.json`` (only with ``report.request_lifecycle.
  per_request: true``): a list, one entry per request, ``{start_time, end_time,
  request, response, info: {request_metrics: {text: {input_tokens}},
  response_metrics: {output_tokens, server_usage, output_token_times, ...}},
  error}``; times are seconds on the client's monotonic clock. The entry does
  not name its stage, so a run is read only when its config has one stage.

Definitions (inference-perf's own; ``specs/metrics.md``): a request failed when
its ``error`` is not null. Over the successful requests: E2EL = ``end_time -
start_time``; for a streamed response with more than one token time, TTFT =
``output_token_times[0] - start_time``, TPOT = ``(output_token_times[-1] -
output_token_times[0]) / (n - 1)`` with n the output token count (the client's
re-tokenized ``output_tokens``, or the server's ``usage`` count when
``use_server_output_tokens`` is set), and the ITL values are every gap between
consecutive token times, pooled; a request with one token time or fewer has
no TTFT, TPOT or gaps (it is left out, not counted as 0). Statistics:
``numpy.mean`` and ``numpy.percentile`` (linear); ``min`` and ``max`` are the
0th and 100th percentiles. Throughputs divide the successful requests' counts
by ``benchmark_time_seconds`` = the latest ``end_time`` minus the earliest
``start_time`` over every request, failed ones included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np
import numpy.typing as npt
import yaml  # type: ignore[import-untyped]

from bundler._internal.jsonload import MAX_INT_DIGITS, MAX_JSON_DEPTH
from bundler.errors import Problem
from bundler.format.serving_run import (
    MAX_COUNT,
    POISSON,
    ServingRun,
    SourceError,
    load_point_id,
    shown,
)
from bundler.importers import source_text

__all__ = [
    "AGGREGATE_NAME",
    "CONFIG_NAME",
    "FORMAT",
    "NOT_RECORDED",
    "RECORDS_NAME",
    "locate",
    "parse",
]

FORMAT = "inference-perf"
RECORDS_NAME = "per_request_lifecycle_metrics.json"
AGGREGATE_NAME = "summary_lifecycle_metrics.json"
CONFIG_NAME = "config.yaml"
NOT_RECORDED = (
    "warmup requests (inference-perf keeps none in its reports)",
    "wall-clock request times (inference-perf records a monotonic clock)",
)

_LATENCIES = {
    "time_to_first_token": "ttft",
    "time_per_output_token": "tpot",
    "inter_token_latency": "itl",
    "request_latency": "e2el",
}
_THROUGHPUTS = {
    "requests_per_sec": "request_throughput",
    "output_tokens_per_sec": "output_throughput",
    "total_tokens_per_sec": "total_token_throughput",
}
_ARRIVALS = ("constant", "poisson", "concurrent")


def _fail(where: str, field: str | None, message: str, record: str | None = None) -> SourceError:
    return SourceError(
        f"{where}: not a usable inference-perf report", [Problem(where, record, field, message)]
    )


def locate(path: Path) -> tuple[Path, Path, Path]:
    """The per-request, summary and config files of a run, given its report directory
    or one of the three files.

    Raises:
        SourceError: one of the files is not there.
    """
    base = path if path.is_dir() else path.parent
    files = (base / RECORDS_NAME, base / AGGREGATE_NAME, base / CONFIG_NAME)
    for p, what in zip(files, ("per-request report", "summary report", "config"), strict=True):
        if not p.is_file():
            hint = (
                " (set report.request_lifecycle.per_request: true in the config)"
                if p.name == RECORDS_NAME
                else ""
            )
            raise _fail(
                str(path),
                None,
                f"no {p.name} ({what}) at {p}: an inference-perf run is read from its report "
                f"directory ({', '.join(f.name for f in files)} side by side){hint}",
            )
    return files


def _json(data: bytes, where: str) -> Any:
    # The writer's json.dump writes NaN/Infinity as bare literals: kept, so the checks
    # below name the field.
    return source_text.load_json(data, where, _fail)


CONFIG_MAX_BYTES = 128 << 10
"""inference-perf's resolved config is a few KB; building YAML nodes takes about 15 us
each even with libyaml (a 1 MB flow list of 400,000 integers took 12 s), so a config is
bounded far below an import source: 128 KiB, about 1.5 s at worst."""
_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _config(data: bytes, where: str) -> dict[str, Any]:
    if len(data) > CONFIG_MAX_BYTES:
        raise _fail(where, None, f"{len(data)} bytes: larger than any inference-perf config")
    text = source_text.decode(data, where, _fail)
    try:
        loader = _YAML_LOADER(text)
        try:
            node = loader.get_single_node()
            if node is not None:
                _check_nodes(node, where)
            doc = None if node is None else loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise _fail(where, None, f"not YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise _fail(where, None, "nested too deeply for a config") from None
    if not isinstance(doc, dict):
        raise _fail(where, None, "expected a YAML mapping (inference-perf's config report)")
    return doc


def _yaml_path(path: tuple[str | int, ...]) -> str:
    return "".join(f"[{c}]" if isinstance(c, int) else f".{c[:80]}" for c in path).lstrip(".")


def _check_nodes(root: Any, where: str) -> None:
    """Refuse what the writer (``yaml.dump`` of a model) never writes, before anything is
    constructed: aliases (a "billion laughs" expands at construction), integers of more
    than 20 digits (Python refuses to convert one of over 4300, and a 400-digit rate
    overflows a double), duplicate keys (the file would read one way and import another)
    and nesting deeper than any config."""
    seen: set[int] = set()
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        field_ = _yaml_path(path) or None
        if id(node) in seen:
            raise _fail(where, field_, "YAML aliases are not written by inference-perf")
        seen.add(id(node))
        if len(path) > MAX_JSON_DEPTH:
            raise _fail(where, field_, f"nested deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(node, yaml.ScalarNode):
            digits = sum(c.isalnum() for c in node.value)
            if node.tag == "tag:yaml.org,2002:int" and digits > MAX_INT_DIGITS:
                raise _fail(
                    where,
                    field_,
                    f"an integer of {len(node.value):,} characters (at most "
                    f"{MAX_INT_DIGITS} digits)",
                )
        elif isinstance(node, yaml.SequenceNode):
            # Pushed last first: popped in document order, so an alias is named where
            # it is used, not where its anchor is.
            stack += [(v, (*path, i)) for i, v in reversed(list(enumerate(node.value)))]
        elif isinstance(node, yaml.MappingNode):
            keys: set[tuple[str, str]] = set()
            pairs: list[tuple[Any, tuple[str | int, ...]]] = []
            for k, v in node.value:
                name = k.value if isinstance(k, yaml.ScalarNode) else "?"
                if isinstance(k, yaml.ScalarNode):
                    if (k.tag, k.value) in keys:
                        raise _fail(
                            where, _yaml_path((*path, name)), "a key given twice in one mapping"
                        )
                    keys.add((k.tag, k.value))
                pairs += [(k, (*path, name)), (v, (*path, name))]
            stack += reversed(pairs)


def _obj(v: Any, where: str, field: str, record: str | None = None) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise _fail(where, field, f"expected an object, found {shown(v)}", record)
    return v


def _finite(v: Any) -> TypeGuard[int | float]:
    return not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v)


def _count(v: Any, where: str, field: str, record: str | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_COUNT:
        raise _fail(where, field, f"expected a count (0 to 2**53), found {shown(v)}", record)
    return v


def _load_point(cfg: dict[str, Any], where: str) -> tuple[float, int | None, int | None, str]:
    """Rate, concurrency cap, request count and arrival process (``load.type``)."""
    load = _obj(cfg.get("load"), where, "load")
    kind = load.get("type")
    if kind not in _ARRIVALS:
        raise _fail(
            where,
            "load.type",
            f"expected one of {', '.join(_ARRIVALS)} (trace replays are not read), "
            f"found {shown(kind)}",
        )
    if load.get("sweep") is not None:
        raise _fail(where, "load.sweep", "a sweep runs several stages: give one stage per run")
    stages = load.get("stages")
    if not isinstance(stages, list) or len(stages) != 1:
        found = len(stages) if isinstance(stages, list) else shown(stages)
        raise _fail(
            where,
            "load.stages",
            f"expected exactly one stage, found {found}: the per-request report does not "
            "say which stage a request belongs to",
        )
    stage = _obj(stages[0], where, "load.stages[0]")
    if kind == "concurrent":
        conc = stage.get("concurrency_level")
        n = stage.get("num_requests")
        for key, v in (("concurrency_level", conc), ("num_requests", n)):
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_COUNT:
                raise _fail(
                    where, f"load.stages[0].{key}", f"expected an integer >= 1, found {shown(v)}"
                )
        return math.inf, conc, n, kind
    rate = stage.get("rate")
    if not _finite(rate) or rate <= 0:
        raise _fail(where, "load.stages[0].rate", f"expected a number > 0, found {shown(rate)}")
    return float(rate), None, None, kind


def _latency_aggregates(lat: dict[str, Any], out: dict[str, float], names: dict[str, str]) -> None:
    for metric, kind in _LATENCIES.items():
        stats = lat.get(metric)
        if not isinstance(stats, dict):
            continue  # None: no value (e.g. no streamed response), nothing claimed
        for stat, v in stats.items():
            if not _finite(v):
                continue
            if stat in ("min", "max"):
                # numpy.percentile at 0 and 100 is exactly the minimum and maximum.
                key = f"p{0 if stat == 'min' else 100}_{kind}_ms"
            elif stat in ("mean", "median") or stat.startswith("p"):
                key = f"{stat}_{kind}_ms"
            else:
                continue
            out[key] = float(v) * 1000.0
            names[key] = f"successes.latency.{metric}.{stat} = {v!r} s, in ms"


def _aggregates(
    doc: dict[str, Any], where: str
) -> tuple[dict[str, float], dict[str, str], list[str]]:
    """The figures claimed, in the vocabulary's keys (ms for latencies), their names in
    the file, and the figures left unclaimed."""
    out: dict[str, float] = {}
    names: dict[str, str] = {}
    left: list[str] = []
    succ = _obj(doc.get("successes"), where, "successes")
    lat = succ.get("latency")
    lat = lat if isinstance(lat, dict) else {}
    _latency_aggregates(lat, out, names)
    for metric, v in _obj(succ.get("throughput", {}), where, "successes.throughput").items():
        if metric in _THROUGHPUTS and _finite(v):
            out[_THROUGHPUTS[metric]] = float(v)
            names[_THROUGHPUTS[metric]] = f"successes.throughput.{metric}"
        elif metric == "input_tokens_per_sec" and _finite(v):
            left.append(f"successes.throughput.{metric} = {v!r}")
    failures = _obj(doc.get("failures", {}), where, "failures")
    for key, path, v in (
        ("completed", "successes.count", succ.get("count")),
        ("failed", "failures.count", failures.get("count")),
        (
            "total_input_tokens",
            "successes.prompt_tokens.total",
            _get(succ, "prompt_tokens", "total"),
        ),
    ):
        if _finite(v):
            out[key] = float(v)
            names[key] = path
    total_out = _get(succ, "output_tokens", "total")
    if _finite(total_out):
        left.append(
            f"successes.output_tokens.total = {total_out!r} (the server-reported counts, where "
            "throughput and TPOT use the client's re-tokenized counts)"
        )
    if "normalized_time_per_output_token" in lat:
        left.append("successes.latency.normalized_time_per_output_token (latency / output tokens)")
    if isinstance(succ.get("goodput_metrics"), dict):
        left.append(
            "successes.goodput_metrics (divided by the successful requests' window, a request "
            "without TPOT is not good: not the vocabulary's goodput)"
        )
    return out, names, left


def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


@dataclass
class _Row:
    """One request as inference-perf defines its values (NaN: the tool has none)."""

    start: float
    end: float
    ok: bool = False
    inp: int = 0
    out: int = 0
    ttft: float = math.nan
    tpot: float = math.nan
    gaps: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))


def _times(rm: dict[str, Any], row: _Row, where: str, rec: str) -> None:
    times = rm.get("output_token_times")
    if times is None:
        return  # not streamed: no TTFT, TPOT or gaps
    field_ = "info.response_metrics.output_token_times"
    if not isinstance(times, list) or not all(_finite(t) for t in times):
        raise _fail(where, field_, "expected an array of finite numbers", rec)
    t = np.array(times, dtype=np.float64)
    if t.size < 2:
        return  # inference-perf computes TTFT, TPOT and gaps only past one token time
    d = t[1:] - t[:-1]
    if bool((d < 0).any()) or t[0] < row.start:
        raise _fail(where, field_, "token times must not decrease nor precede start_time", rec)
    row.ttft = float(t[0] - row.start)
    if row.out > 1:
        # inference-perf's TPOT: first to last token time over n - 1, in doubles.
        row.tpot = float((t[-1] - t[0]) / (row.out - 1))
    row.gaps = d


def _row(e: Any, where: str, rec: str, server_counts: bool) -> _Row:
    e = _obj(e, where, "", rec)
    ends = []
    for key in ("start_time", "end_time"):
        v = e.get(key)
        if not _finite(v):
            raise _fail(where, key, f"expected a finite number, found {shown(v)}", rec)
        ends.append(float(v))
    row = _Row(ends[0], ends[1])
    if row.end < row.start:
        raise _fail(where, "end_time", f"{row.end!r} is before start_time {row.start!r}", rec)
    if e.get("error") is not None:
        _obj(e["error"], where, "error", rec)
        return row
    row.ok = True
    info = _obj(e.get("info"), where, "info", rec)
    row.inp = _count(
        _get(info, "request_metrics", "text", "input_tokens"),
        where,
        "info.request_metrics.text.input_tokens",
        rec,
    )
    rm = info.get("response_metrics")
    if rm is None:
        return row
    rm = _obj(rm, where, "info.response_metrics", rec)
    row.out = _count(rm.get("output_tokens"), where, "info.response_metrics.output_tokens", rec)
    if server_counts:
        usage = rm.get("server_usage")
        for key in ("completion_tokens", "output_tokens"):
            v = usage.get(key) if isinstance(usage, dict) else None
            if v is not None:
                row.out = _count(v, where, f"info.response_metrics.server_usage.{key}", rec)
                break
    _times(rm, row, where, rec)
    return row


def parse_records(data: bytes, where: str, server_counts: bool) -> list[_Row]:
    """The requests, as inference-perf defines each value (see the module doc)."""
    doc = _json(data, where)
    if not isinstance(doc, list):
        raise _fail(where, None, "expected a list of per-request entries")
    if not doc:
        raise _fail(where, None, "no requests")
    return [_row(e, where, f"entry {i}", server_counts) for i, e in enumerate(doc)]


Source = tuple[bytes, str]
"""A file's bytes and where it was read (path or bundle member)."""


def parse(records: Source, aggregate: Source, config: Source, arm: str) -> ServingRun:
    """Parse one inference-perf run of ``arm``; its load point comes from its config.

    Raises:
        SourceError: a file is not inference-perf's, the config has more than one stage
            or a load type other than constant, poisson or concurrent, an entry lacks a
            field or has a bad time or count.
    """
    rdata, records_where = records
    adata, aggregate_where = aggregate
    cdata, config_where = config
    cfg = _config(cdata, config_where)
    rate, conc, n_req, arrival = _load_point(cfg, config_where)
    server_counts = _get(cfg, "report", "request_lifecycle", "use_server_output_tokens") is True
    doc = _obj(_json(adata, aggregate_where), aggregate_where, "")
    if not _finite(doc.get("benchmark_time_seconds")):
        raise _fail(
            aggregate_where,
            "benchmark_time_seconds",
            "missing: not inference-perf's summary_lifecycle_metrics.json",
        )
    aggregates, names, left = _aggregates(doc, aggregate_where)
    rows = parse_records(rdata, records_where, server_counts)
    duration = max(r.end for r in rows) - min(r.start for r in rows)
    if not duration > 0:
        raise _fail(records_where, "end_time", "every request starts and ends at one instant")
    ok = np.array([r.ok for r in rows], dtype=np.bool_)
    ttft = np.array([r.ttft for r in rows], dtype=np.float64)
    tpot = np.array([r.tpot for r in rows], dtype=np.float64)
    gaps = [r.gaps for r in rows]
    meta: dict[str, Any] = {
        "tool": FORMAT,
        "arrival": arrival,
        "aggregate_source": aggregate_where,
        "config_source": config_where,
        "aggregate_names": names,
        "not_claimed_aggregates": left,
        "benchmark_time_seconds": doc["benchmark_time_seconds"],
        "duration_from": "max(end_time) - min(start_time) over every request, as inference-perf's "
        "benchmark_time_seconds",
        "output_tokens_from": "server usage" if server_counts else "client re-tokenization",
    }
    server = cfg.get("server")
    if isinstance(server, dict) and isinstance(server.get("model_name"), str):
        meta["model_id"] = server["model_name"]
    api = cfg.get("api")
    if isinstance(api, dict) and api.get("type") == "chat":
        meta["backend"] = "openai-chat"
    # The arrival process is part of the load point (as for vLLM and AIPerf): constant
    # gaps and Poisson gaps at one rate are two load points; a concurrent stage sends
    # as fast as its cap allows, so no arrival process applies.
    process = "constant" if arrival == "constant" else POISSON
    return ServingRun(
        source=records_where,
        arm=arm,
        load_point=load_point_id(rate, conc, process),
        arrival=process,
        request_rate=rate,
        max_concurrency=conc,
        num_prompts=n_req,
        duration_s=duration,
        detailed=True,
        ok=ok,
        input_lens=np.array([r.inp for r in rows], dtype=np.int64),
        output_lens=np.array([r.out for r in rows], dtype=np.int64),
        ttfts=ttft,
        latencies=np.array([r.end - r.start if r.ok else math.nan for r in rows]),
        itl_counts=np.array([g.size for g in gaps], dtype=np.int64),
        itl=np.concatenate(gaps),
        aggregates=aggregates,
        meta=meta,
        # inference-perf's own TTFT and TPOT, of the successful requests that have one
        # (a request with at most one token time has neither).
        samples={
            "ttft": ttft[ok & ~np.isnan(ttft)],
            "tpot": tpot[ok & ~np.isnan(tpot)],
        },
    )
