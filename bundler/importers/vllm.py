"""vLLM ``vllm bench serve --save-result [--save-detailed]`` result files.

Followed writers (read in the public code search, vllm-project/vllm):

- ``vllm/benchmarks/serve.py`` (``vllm bench serve``; the version read was commit
  009e6d4a): ``result_json`` holds ``date`` (``%Y%m%d-%H%M%S``, local time, no
  zone), ``backend``, ``model_id``, ``num_prompts``, ``request_rate`` (a number, or
  the string ``"inf"``), ``burstiness``, ``max_concurrency`` (null when uncapped),
  then ``duration``, ``completed``, ``failed``, token totals, ``request_throughput``,
  ``request_goodput`` (null without ``--goodput``), ``output_throughput``,
  ``total_token_throughput``, per-request ``input_lens``, ``output_lens``,
  ``ttfts``, ``itls``, ``latencies``, ``start_times``, ``errors`` (the per-request
  arrays other than ``latencies`` only with ``--save-detailed``), and
  ``{mean,median,std}_<m>_ms`` and ``p<P>_<m>_ms`` for each selected metric.
- ``benchmarks/benchmark_serving.py`` (older): the same, without ``failed``,
  ``latencies`` and ``start_times``, and with the goodput key spelled
  ``"request_goodput:"`` (trailing colon).

Checked against files ``vllm bench serve`` 0.33.0 (PyPI) wrote
(``tests/fixtures/real_writers/vllm-0.33.0/``): they add ``endpoint_type``,
``label``, ``tokenizer_id``, ``queue_times``, ``generated_texts`` and the
printed peaks ``max_output_tokens_per_s`` and ``max_concurrent_requests``
(per whole second of the run) and ``rtfx``; the peaks go to ``not_claimed``.

Without ``--save-detailed``, 0.33.0 drops ``errors``, ``ttfts``, ``itls``, the token
counts and ``start_times`` but keeps ``latencies`` (one per request, failed ones
included) and ``queue_times``: ``latencies`` is kept (see ``ServingRun``). The
arrival process is ``burstiness`` (gamma shape; 1: Poisson), part of the load point.
0.33.0 writes no ``vllm_commit``: such a key comes from ``--metadata KEY=VALUE``.

A request succeeded when its ``errors`` entry is empty (the writer stores ``""``).
The file is parsed as it is; nothing is converted or filled in.
"""

from __future__ import annotations

import itertools
import math
import operator
import re
from typing import Any

import numpy as np
import numpy.typing as npt

from bundler.errors import Problem
from bundler.format.serving_run import (
    MAX_COUNT,
    ServingRun,
    SourceError,
    arrival_text,
    load_point_id,
    shown,
)
from bundler.importers import source_text

__all__ = ["AGGREGATE_RE", "FORMAT", "looks_like", "parse"]

FORMAT = "vllm"
AGGREGATE_RE = re.compile(r"^(mean|median|std|p(\d+(?:\.\d+)?))_(ttft|tpot|itl|e2el)_ms$")
"""The latency aggregates the tool writes: ``mean_ttft_ms``, ``p99_e2el_ms``, ``p99.9_itl_ms``."""

_PER_REQUEST = ("input_lens", "output_lens", "ttfts", "itls", "errors")
_THROUGHPUT_KEYS = (
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "request_goodput",
    "request_goodput:",
)
_COUNT_KEYS = ("completed", "failed", "total_input_tokens", "total_output_tokens")
_PRINTED_NOT_CLAIMED = ("max_output_tokens_per_s", "max_concurrent_requests", "rtfx")
"""Figures newer writers print that no vocabulary statistic defines (vLLM 0.33.0:
"Peak output token throughput" and "Peak concurrent requests", counted per whole
second of the run, so the latter can exceed ``max_concurrency``; the ASR ``rtfx``)."""


def _fail(where: str, field: str | None, message: str, record: str | None = None) -> SourceError:
    return SourceError(
        f"{where}: not a usable vLLM bench serve result", [Problem(where, record, field, message)]
    )


def load_json(data: bytes, where: str) -> dict[str, Any]:
    """The file's one JSON object (``--append-result`` files hold several: refused)."""
    # The writer's json.dump writes NaN/Infinity as bare literals: kept, so the checks
    # below name the field.
    doc = source_text.load_json(data, where, _fail)
    if not isinstance(doc, dict):
        raise _fail(where, None, "expected one JSON object")
    return doc


def looks_like(doc: dict[str, Any]) -> bool:
    """True when ``doc`` has the shape of a vLLM serving result."""
    return (
        "duration" in doc and "completed" in doc and ("request_throughput" in doc or "ttfts" in doc)
    )


def _number(doc: dict[str, Any], key: str, where: str, *, positive: bool = False) -> float:
    v = doc.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise _fail(where, key, f"expected a finite number, found {shown(v)}")
    if positive and v <= 0:
        raise _fail(where, key, f"must be > 0, found {v!r}")
    return float(v)


def _rate(doc: dict[str, Any], where: str) -> float:
    v = doc.get("request_rate", "inf")
    if v == "inf" or (isinstance(v, float) and math.isinf(v) and v > 0):
        return math.inf
    if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
        raise _fail(where, "request_rate", f'expected a number > 0 or "inf", found {shown(v)}')
    return float(v)


def _arrival(doc: dict[str, Any], where: str) -> str:
    """The arrival process: vLLM draws each gap from a gamma distribution of shape
    ``burstiness`` (1: Poisson; ``inf``: constant gaps); files before it record none
    (Poisson)."""
    v = doc.get("burstiness", 1.0)
    if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:  # NaN too
        raise _fail(where, "burstiness", f"expected a number > 0, found {shown(v)}")
    return arrival_text(float(v))


def _opt_int(doc: dict[str, Any], key: str, where: str) -> int | None:
    v = doc.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_COUNT:
        # Bounded: the concurrency becomes part of a load point id and a file name.
        raise _fail(where, key, f"expected an integer from 1 to 2**53 or null, found {shown(v)}")
    return v


_NUMBER_TYPES = frozenset((int, float))
_LIST_TYPE = frozenset((list,))
_ERROR_TYPES = frozenset((str, type(None)))
"""A request's ``errors`` entry: a message, empty when it succeeded (or null)."""


def _first_non_number(values: list[Any]) -> int | None:
    """Index of the first entry that is not a JSON number (``true`` and ``"0.1"`` are not:
    numpy would silently turn them into 1.0 and 0.1)."""
    if _NUMBER_TYPES.issuperset(map(type, values)):
        return None
    return next(i for i, v in enumerate(values) if type(v) not in _NUMBER_TYPES)


def _floats(values: Any, where: str, key: str) -> npt.NDArray[np.float64]:
    if not isinstance(values, list):
        raise _fail(where, key, "expected an array")
    bad = _first_non_number(values)
    if bad is not None:
        raise _fail(where, f"{key}[{bad}]", f"expected a number, found {shown(values[bad])}")
    # The loader bounds integers to 20 digits, so every entry converts to a finite double.
    return np.array(values, dtype=np.float64)


def _ints(values: Any, where: str, key: str) -> npt.NDArray[np.int64]:
    arr = _floats(values, where, key)
    bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0) | (arr != np.floor(arr)) | (arr > MAX_COUNT))
    if bad.size:
        i = int(bad[0])
        raise _fail(
            where, f"{key}[{i}]", f"expected a token count (0 to 2**53), found {shown(values[i])}"
        )
    return arr.astype(np.int64)


def _check_times(
    arr: npt.NDArray[np.float64], ok: npt.NDArray[np.bool_], where: str, key: str
) -> None:
    bad = np.flatnonzero(ok & ~(np.isfinite(arr) & (arr >= 0)))
    if bad.size:
        i = int(bad[0])
        raise _fail(
            where,
            f"{key}[{i}]",
            f"a successful request's time must be a finite number >= 0, found {arr[i]!r}",
        )


def _itls(
    values: Any, ok: npt.NDArray[np.bool_], where: str
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    if not isinstance(values, list):
        raise _fail(where, "itls", "expected an array of arrays")
    # Type checks, lengths and flattening in C (map, chain): a Python step per request
    # cost as much as the JSON parse of the gaps.
    if not _LIST_TYPE.issuperset(map(type, values)):
        bad = next(i for i, v in enumerate(values) if type(v) is not list)
        raise _fail(where, f"itls[{bad}]", "expected an array of numbers")
    counts = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    flat: list[Any] = list(itertools.chain.from_iterable(values))
    odd = _first_non_number(flat)
    if odd is not None:
        req = int(np.searchsorted(np.cumsum(counts), odd, side="right"))
        at = odd - int(counts[:req].sum())
        raise _fail(where, f"itls[{req}][{at}]", f"expected a number, found {shown(flat[odd])}")
    arr = np.array(flat, dtype=np.float64)
    mask = np.repeat(ok, counts)
    bad_gaps = np.flatnonzero(mask & ~(np.isfinite(arr) & (arr >= 0)))
    if bad_gaps.size:
        first = int(bad_gaps[0])
        req = int(np.searchsorted(np.cumsum(counts), first, side="right"))
        raise _fail(
            where,
            f"itls[{req}]",
            f"a successful request's gap must be a finite number >= 0, found {arr[first]!r}",
        )
    return counts, arr


def _aggregates(doc: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in doc.items():
        if not (AGGREGATE_RE.match(k) or k in _THROUGHPUT_KEYS or k in _COUNT_KEYS):
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            continue
        out[k] = float(v)
    return out


def _aggregates_only_latencies(
    doc: dict[str, Any], where: str
) -> tuple[npt.NDArray[np.float64] | None, npt.NDArray[np.bool_]]:
    """The per-request ``latencies`` of a file written without ``--save-detailed``, and
    which requests succeeded.

    vLLM 0.33 drops ``errors`` (and ``ttfts``, ``itls``, ...) without ``--save-detailed``
    but keeps ``latencies``, one per request sent, failed ones included. Which requests
    failed is then not recorded: the successes are known only when the file records no
    failed request (``failed`` 0 and ``completed`` equal to the number of latencies);
    otherwise ``ok`` is empty and E2EL cannot be re-derived.
    """
    no_ok = np.zeros(0, dtype=np.bool_)
    if "latencies" not in doc:
        return None, no_ok
    latencies = _floats(doc["latencies"], where, "latencies")
    n = latencies.size
    failed, completed = doc.get("failed"), doc.get("completed")
    if type(failed) is int and failed == 0 and type(completed) is int and completed == n > 0:
        ok = np.ones(n, dtype=np.bool_)
        _check_times(latencies, ok, where, "latencies")
        return latencies, ok
    return latencies, no_ok


def parse(data: bytes, where: str, arm: str) -> ServingRun:
    """Parse one result file of ``arm``; the load point comes from its rate and concurrency.

    Raises:
        SourceError: not a vLLM result, truncated, arrays of different lengths, a
            successful request with a negative or non-finite time, a bad count.
    """
    doc = load_json(data, where)
    if not looks_like(doc):
        raise _fail(
            where,
            None,
            "no 'duration', 'completed' and 'request_throughput'/'ttfts': "
            "not written by vllm bench serve",
        )
    rate = _rate(doc, where)
    conc = _opt_int(doc, "max_concurrency", where)
    num_prompts = _opt_int(doc, "num_prompts", where)
    duration = _number(doc, "duration", where, positive=True)
    meta: dict[str, Any] = {
        k: doc[k]
        for k in (
            "date",
            "backend",
            "endpoint_type",
            "label",
            "model_id",
            "tokenizer_id",
            "burstiness",
        )
        if k in doc
    }
    left = [f"{k} = {doc[k]!r}" for k in _PRINTED_NOT_CLAIMED if k in doc]
    if left:
        meta["not_claimed_aggregates"] = left
    detailed = "ttfts" in doc
    arrival = _arrival(doc, where)
    lp = load_point_id(rate, conc, arrival)
    empty_f = np.zeros(0, dtype=np.float64)
    empty_i = np.zeros(0, dtype=np.int64)
    if not detailed:
        latencies, ok = _aggregates_only_latencies(doc, where)
        return ServingRun(
            source=where,
            arm=arm,
            load_point=lp,
            request_rate=rate,
            max_concurrency=conc,
            num_prompts=num_prompts,
            duration_s=duration,
            detailed=False,
            ok=ok,
            input_lens=empty_i,
            output_lens=empty_i,
            ttfts=empty_f,
            latencies=latencies,
            itl_counts=empty_i,
            itl=empty_f,
            aggregates=_aggregates(doc),
            meta=meta,
            arrival=arrival,
        )
    for key in _PER_REQUEST:
        if key not in doc:
            raise _fail(
                where,
                key,
                "missing: the file has 'ttfts' but not the other per-request arrays "
                "of --save-detailed",
            )
    errors = doc["errors"]
    if not isinstance(errors, list):
        raise _fail(where, "errors", "expected an array")
    n = len(errors)
    for key in (*_PER_REQUEST, *(("latencies",) if "latencies" in doc else ())):
        v = doc[key]
        if not isinstance(v, list) or len(v) != n:
            found = len(v) if isinstance(v, list) else type(v).__name__
            raise _fail(
                where,
                key,
                f"has {found} entries, 'errors' has {n}: arrays of one run must be equally long",
            )
    if not _ERROR_TYPES.issuperset(map(type, errors)):
        bad_err = next(i for i, e in enumerate(errors) if type(e) not in _ERROR_TYPES)
        raise _fail(where, f"errors[{bad_err}]", "expected a string")
    ok = np.fromiter(map(operator.not_, errors), dtype=np.bool_, count=n)
    ttfts = _floats(doc["ttfts"], where, "ttfts")
    _check_times(ttfts, ok, where, "ttfts")
    latencies = None
    if "latencies" in doc:
        latencies = _floats(doc["latencies"], where, "latencies")
        _check_times(latencies, ok, where, "latencies")
    counts, itl = _itls(doc["itls"], ok, where)
    return ServingRun(
        source=where,
        arm=arm,
        load_point=lp,
        request_rate=rate,
        max_concurrency=conc,
        num_prompts=num_prompts,
        duration_s=duration,
        detailed=True,
        ok=ok,
        input_lens=_ints(doc["input_lens"], where, "input_lens"),
        output_lens=_ints(doc["output_lens"], where, "output_lens"),
        ttfts=ttfts,
        latencies=latencies,
        itl_counts=counts,
        itl=itl,
        aggregates=_aggregates(doc),
        meta=meta,
        arrival=arrival,
    )
