"""SGLang ``python -m sglang.bench_serving --output-details`` result files (JSON Lines).

Followed writer: ``sglang`` 0.5.23 from PyPI (``sglang/benchmark/serving.py``:
``calculate_metrics`` and the result dump), checked against bytes it wrote
(``tests/fixtures/real_writers/sglang-0.5.23/``). Each run *appends* one JSON
object as a line to ``--output-file``: the settings (``backend``,
``request_rate``, a number or ``Infinity``; ``max_concurrency``), ``duration``,
``completed``, token totals, throughputs, ``{mean,median,std,p90,p95,p99}`` of
``ttft``, ``tpot``, ``itl`` (``_ms``) and ``e2e_latency`` (``_ms``), and with
``--output-details`` the per-request ``input_lens``, ``output_lens``,
``ttfts``, ``itls``, ``generated_texts`` and ``errors`` (vLLM's names).

SGLang's definitions are vLLM's (``numpy`` mean, median, population std,
linear percentiles; pooled ITL; throughputs over ``duration``; a failed
request's output length 0), so replay reads the per-request arrays as a vLLM
file's. What the file does **not** record: a per-request end-to-end latency
(SGLang computes E2E and TPOT from it but does not write it) and a failed count.
E2E and TPOT claims are therefore unverifiable, with the reason; ``concurrency``
(sum of latencies / duration), goodput and the per-second peaks are not
claimed. The arrival process: ``request_rate`` inf sends everything at once
(within ``max_concurrency``), a finite rate draws exponential intervals
(Poisson); 0.5.23 has no burstiness setting.

Runs of one arm at several load points usually share an ``--output-file``:
``parse_all`` gives one run per (non-empty) line; ``parse`` one (by index, or the
only one).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any

from bundler.errors import Problem
from bundler.format.serving_run import ServingRun, SourceError, check_distinct
from bundler.importers import source_text, vllm

__all__ = ["FORMAT", "MAX_RUNS", "NO_LATENCY", "parse", "parse_all"]

FORMAT = "sglang"
_E2E_RE = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_e2e_latency_ms$")
_DETAILS = ("input_lens", "output_lens", "ttfts", "itls", "errors")
_RENAMED = {"total_throughput": "total_token_throughput"}
"""SGLang's name -> the vocabulary's (vLLM's) name, where they differ."""
_CHAT = ("sglang-oai-chat", "vllm-chat", "lmdeploy-chat")
_NOT_CLAIMED = (
    "concurrency",
    "input_throughput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "max_itl_ms",
    "output_throughput_retokenized",
    "total_throughput_retokenized",
    "total_output_tokens_retokenized",
    "request_goodput",
)
NO_LATENCY = (
    "SGLang's bench_serving writes no per-request end-to-end latency (it computes E2E, "
    "TPOT and concurrency from one it does not record): {} cannot be re-derived"
)


def _fail(where: str, field: str | None, message: str, record: str | None = None) -> SourceError:
    return SourceError(
        f"{where}: not a usable sglang.bench_serving result",
        [Problem(where, record, field, message)],
    )


MAX_RUNS = 100
"""The most runs (lines) one result file may hold: a larger one is refused before any
line is parsed."""


def _lines(data: bytes, where: str) -> list[tuple[int, str]]:
    """The file's non-empty lines with their 1-based numbers (one run each)."""
    text = source_text.decode(data, where, _fail)
    lines = [(i, x) for i, x in enumerate(text.split("\n"), start=1) if x.strip()]
    if not lines:
        raise _fail(where, None, "holds no run (an empty file)")
    if len(lines) > MAX_RUNS:
        raise _fail(
            where,
            None,
            f"holds {len(lines)} runs, more than the {MAX_RUNS} one file may hold: split it",
        )
    return lines


def _one_line(data: bytes, where: str) -> dict[str, Any]:
    lines = _lines(data, where)
    if len(lines) != 1:
        raise _fail(
            where,
            None,
            f"holds {len(lines)} runs (bench_serving appends one line per run to "
            "--output-file): import it with bundle import (one load point per line), whose "
            "serving.json names each run's index",
        )
    return _doc(*lines[0], where)


def _doc(i: int, line: str, where: str) -> dict[str, Any]:
    doc = source_text.parse_json(line, where, _fail, record=f"line {i}", at_line=False)
    if not isinstance(doc, dict) or "duration" not in doc or "completed" not in doc:
        raise _fail(where, "duration", "missing: not written by sglang.bench_serving", f"line {i}")
    missing = [k for k in _DETAILS if k not in doc]
    if missing:
        raise _fail(
            where,
            missing[0],
            "missing: run with --output-details (without it the file holds only "
            "aggregates, nothing to re-derive them from)",
            f"line {i}",
        )
    return doc


def _arrival(rate: float, conc: int | None) -> str:
    cap = f", at most {conc} in flight" if conc is not None else ""
    if math.isinf(rate):
        return f"all requests at once (request rate inf){cap}"
    return f"poisson arrivals at {rate!r} requests/s{cap}"


def parse_all(data: bytes, where: str, arm: str) -> list[ServingRun]:
    """Parse every run (line) of one SGLang result file of ``arm``, in the file's order:
    bench_serving appends one line per run to the same ``--output-file``, each its own
    load point.

    Raises:
        SourceError: what ``parse`` refuses, located at its line (record ``line N``);
            more than ``MAX_RUNS`` lines, or two lines at one load point.
    """
    lines = _lines(data, where)
    if len(lines) == 1:
        return [_run(_doc(*lines[0], where), where, arm)]
    runs = []
    for i, line in lines:
        try:
            runs.append(_run(_doc(i, line, where), where, arm))
        except SourceError as exc:
            located = [dataclasses.replace(p, record=p.record or f"line {i}") for p in exc.problems]
            raise SourceError(exc.message, located) from None
    check_distinct(runs, where, lambda k: f"line {lines[k][0]}")
    return runs


def parse(data: bytes, where: str, arm: str, index: int | None = None) -> ServingRun:
    """Parse one SGLang result line of ``arm``; the load point is its rate and concurrency.

    ``index`` None: the file must hold one run; otherwise run ``index`` (from 0, over
    its non-empty lines) of ``parse_all``.

    Raises:
        SourceError: not SGLang's, several runs in the file (``index`` None), no
            ``--output-details`` arrays, truncated, arrays of different lengths, a bad
            time or count.
    """
    if index is not None:
        runs = parse_all(data, where, arm)
        if not 0 <= index < len(runs):
            raise _fail(where, None, f"has no run {index} (holds {len(runs)})")
        return runs[index]
    return _run(_one_line(data, where), where, arm)


def _run(doc: dict[str, Any], where: str, arm: str) -> ServingRun:
    # The per-request arrays and settings have vLLM's names and meanings: vLLM's
    # checks apply as they are, with this file named in every problem.
    try:
        run = vllm.parse(json.dumps(doc).encode(), where, arm)
    except SourceError as exc:
        raise SourceError(
            f"{where}: not a usable sglang.bench_serving result", exc.problems
        ) from None
    aggregates = {k: v for k, v in run.aggregates.items() if k != "failed"}
    names: dict[str, str] = {k: k for k in aggregates}
    for k, v in doc.items():
        m = _E2E_RE.match(k)
        if m and isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            aggregates[f"{m.group(1)}_e2el_ms"], names[f"{m.group(1)}_e2el_ms"] = float(v), k
    for theirs, ours in _RENAMED.items():
        v = doc.get(theirs)
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            aggregates[ours], names[ours] = float(v), theirs
    left = [f"{k} = {doc[k]!r}" for k in _NOT_CLAIMED if doc.get(k) is not None]
    meta: dict[str, Any] = {
        "tool": FORMAT,
        "arrival": _arrival(run.request_rate, run.max_concurrency),
        "aggregate_names": names,
        "not_claimed_aggregates": left,
        **{k: doc[k] for k in ("backend", "dataset_name", "tag") if doc.get(k) is not None},
    }
    if doc.get("backend") in _CHAT:
        meta["backend"] = "openai-chat"
    return dataclasses.replace(
        run,
        latencies=None,
        aggregates=aggregates,
        meta=meta,
        unrecorded={k: NO_LATENCY.format(k.upper()) for k in ("e2el", "tpot")},
    )
