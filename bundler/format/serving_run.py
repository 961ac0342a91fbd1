"""One load point of one arm, as a serving benchmark recorded it."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from bundler.errors import Problem, UsageError

__all__ = [
    "LATENCIES",
    "MAX_COUNT",
    "POISSON",
    "ServingRun",
    "SourceError",
    "arrival_text",
    "check_distinct",
    "load_point_id",
    "shown",
]

LATENCIES = ("ttft", "tpot", "itl", "e2el")
"""Per-request latency kinds: time to first token, time per output token (excluding the
first), inter-token latency (pooled gaps), end-to-end latency."""

MAX_COUNT = 2**53
"""The largest count (concurrency, prompts, tokens) a source may record: every integer up
to it is exact as a double and as an I-JSON number, and a concurrency stays a short part
of a load point id, which names files."""

_SHOWN = 60


def shown(value: Any) -> str:
    """``repr(value)`` cut to a message's length (a hostile file's value can be megabytes)."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _rate_text(rate: float) -> str:
    if math.isinf(rate):
        return "inf"
    return format(rate, "g")


POISSON = "poisson"
"""The arrival process of a load point unless a source records another: exponential
gaps between request sends (vLLM ``--burstiness 1``, AIPerf's ``poisson`` phase)."""


def arrival_text(shape: float | None) -> str:
    """The arrival process of a rate-limited run with gamma-distributed gaps of ``shape``
    (vLLM ``--burstiness``, AIPerf ``--arrival-smoothness``) at a fixed mean rate: shape 1
    is Poisson (exponential gaps), ``inf`` constant gaps; None: constant gaps as well."""
    if shape is None or math.isinf(shape):
        return "constant"
    if shape == 1:
        return POISSON
    return f"gamma{format(shape, 'g')}"


def load_point_id(request_rate: float, max_concurrency: int | None, arrival: str = POISSON) -> str:
    """The id of a load point: ``r<rate>-c<concurrency>`` (``rinf-c16``, ``r4-cnone``),
    with ``-<arrival>`` appended when the rate is finite and the arrival process is not
    Poisson (``r8-c4-gamma0.5``, ``r8-cnone-constant``): the same rate at another arrival
    process is another load point. At an infinite rate every request is sent at once, so
    no arrival process applies and none is named."""
    conc = "none" if max_concurrency is None else str(max_concurrency)
    base = f"r{_rate_text(request_rate)}-c{conc}"
    if math.isinf(request_rate) or arrival == POISSON:
        return base
    return f"{base}-{arrival}"


@dataclass(frozen=True)
class ServingRun:
    """Per-request arrays of one benchmark run (one arm at one load point).

    Attributes:
        source: the file it was read from (campaign-relative path, or bundle member).
        request_rate: requests/s the tool was asked for (``inf``: all at once).
        max_concurrency: the tool's concurrency cap, None when uncapped.
        num_prompts: prompts the tool was asked to send, as recorded.
        duration_s: the benchmark duration as the tool recorded it (vLLM: from the
            start of the main run to the completion of the last request, client clock).
        ok: per request, whether it succeeded (vLLM: its ``errors`` entry is empty).
        input_lens, output_lens: prompt and output tokens per request, as recorded.
        ttfts: seconds to the first token per request.
        latencies: end-to-end seconds per request; None when the tool did not record
            them (older ``benchmark_serving.py``).
        itl_counts: inter-token gaps per request; itl: all gaps, request after request.
        aggregates: the tool's own aggregate figures (finite numbers only), by key.
        detailed: False when the file holds only aggregates (no per-request arrays).
        meta: other recorded settings (backend, model, date, ...), as text.
        unrecorded: latency kind -> why the source cannot give its per-request
            values (AIPerf: ``itl``); claims on it are unverifiable.
        times_ns: per request, (start, end) on the client's wall clock in ns, when
            the source records both for every request (AIPerf); else None.
        arrival: the arrival process at a finite rate (``poisson``, ``gamma<shape>``,
            ``constant``; ``arrival_text``); part of the load point.
        recorded_ms: latency kind -> each request's value in ms exactly as the source
            recorded it, NaN where its record has none (AIPerf: ``ttft``, ``e2el`` and
            ``tpot``, its per-record ``inter_token_latency``), for the tool's own
            goodput definition.
        samples: latency kind -> the successful requests' values (seconds) as the tool
            defines and weights them, where that differs from the vocabulary's
            derivation (GuideLLM's TPOT: a request's value repeated once per token;
            inference-perf's TTFT and TPOT).
        percentiles: how the tool computes a percentile and median: ``linear``
            (numpy's default) or ``inverse_cdf`` (GuideLLM: the first value whose
            cumulative share, summed in doubles, reaches P/100).

    An aggregates-only file (``detailed`` False) may still hold per-request
    ``latencies`` (vLLM 0.33 keeps them without ``--save-detailed``): they are kept,
    and ``ok`` is then all True when the file records no failed request (the file
    names no failed request otherwise, so ``ok`` stays empty and E2EL is not
    re-derivable); the other arrays stay empty.
    """

    source: str
    arm: str
    load_point: str
    request_rate: float
    max_concurrency: int | None
    num_prompts: int | None
    duration_s: float
    detailed: bool
    ok: npt.NDArray[np.bool_]
    input_lens: npt.NDArray[np.int64]
    output_lens: npt.NDArray[np.int64]
    ttfts: npt.NDArray[np.float64]
    latencies: npt.NDArray[np.float64] | None
    itl_counts: npt.NDArray[np.int64]
    itl: npt.NDArray[np.float64]
    aggregates: dict[str, float] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    unrecorded: dict[str, str] = field(default_factory=dict)
    times_ns: npt.NDArray[np.int64] | None = None
    arrival: str = POISSON
    recorded_ms: dict[str, npt.NDArray[np.float64]] = field(default_factory=dict)
    samples: dict[str, npt.NDArray[np.float64]] = field(default_factory=dict)
    percentiles: str = "linear"

    @property
    def n(self) -> int:
        """Requests recorded (per-request arrays; 0 for an aggregates-only file)."""
        return int(self.ttfts.size)

    @property
    def completed(self) -> int:
        """Requests that succeeded."""
        return int(np.count_nonzero(self.ok))

    def ok_itl(self) -> npt.NDArray[np.float64]:
        """The inter-token gaps of the successful requests, pooled (as vLLM pools them)."""
        if bool(self.ok.all()):
            return self.itl
        return self.itl[np.repeat(self.ok, self.itl_counts)]


class SourceError(UsageError):
    """A source file is not what its format says (exit 2); ``problems`` name file and field."""


def check_distinct(runs: Sequence[ServingRun], where: str, record: Callable[[int], str]) -> None:
    """Refuse two runs of one source file (``record(i)`` names run ``i`` in it: a
    benchmark, a line) at one load point: the arm would have two figures for it.

    Raises:
        SourceError: each repeated run, located, with the one it repeats.
    """
    first: dict[str, int] = {}
    problems = []
    for i, r in enumerate(runs):
        j = first.setdefault(r.load_point, i)
        if j != i:
            problems.append(
                Problem(
                    where,
                    record(i),
                    None,
                    f"load point {r.load_point} again ({record(j)} is at it): two runs of "
                    "one arm at one load point",
                )
            )
    if problems:
        raise SourceError(f"{where}: runs repeat a load point", problems)
