"""Serving statistics (LLM benchmarks): latency distributions, throughput, goodput.

Definitions (``specs/claims-vocabulary.md``, "Serving statistics"), as vLLM's
``vllm bench serve`` computes them, but exactly:

- Only successful requests enter a latency or throughput statistic.
- TTFT: the recorded seconds to the first token. E2EL: the recorded end-to-end
  seconds. ITL: every recorded gap between tokens of every successful request,
  pooled. TPOT (time per output token, first token excluded): per request with
  more than one output token, the double ``fl(fl(latency - ttft) / (output_len - 1))``
  (IEEE-754, as the tool computes it); a request with 0 or 1 output token has no
  TPOT and is left out (vLLM does the same; for goodput it counts its TPOT as 0).
- Mean; median = 50th percentile; SD is the *population* SD (divides by n, as
  ``numpy.std``); percentile P: ``numpy.percentile``'s default "linear" method,
  ``h = (n - 1) P / 100``, ``x[floor h] + (h - floor h)(x[floor h + 1] - x[floor h])``
  over the sorted values. All computed exactly over the recorded doubles
  (``replay/engine/exact.py``), then ×1000 for a claim in ms.
- Throughput: completed requests, output tokens (all requests; a failed one
  records 0), or prompt tokens of successful requests plus output tokens, each
  divided by the recorded duration.
- Goodput: successful requests whose TTFT, TPOT and E2EL are each at most the
  stated SLO (only the SLOs given; the SLO in ms is converted to the double
  nearest ``slo / 1000`` seconds, as vLLM does), divided by the duration.
  With ``definition`` ``aiperf``, AIPerf's own: each record's metric in ms as
  recorded against the SLO in ms, a record without the metric not good.

A tool whose own definition differs says so in its run: ``ServingRun.samples``
holds a latency's values as the tool defines and weights them (GuideLLM's
token-weighted TPOT, inference-perf's TPOT), ``ServingRun.percentiles`` its
percentile method (GuideLLM: ``inverse_cdf``, :func:`percentile_inverse_cdf`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from bundler.format.serving_run import LATENCIES, ServingRun
from replay.engine.exact import Exact, Root, group_sums

__all__ = [
    "THROUGHPUTS",
    "RunStats",
    "goodput",
    "parse_percentile",
    "parse_stat",
    "percentile_inverse_cdf",
    "throughput",
]

THROUGHPUTS = ("requests", "output_tokens", "total_tokens")
_MS = Fraction(1000)
Floats = npt.NDArray[np.float64]


def parse_percentile(v: Any) -> Fraction | None:
    """A percentile parameter (``99``, ``"99.9"``) as an exact fraction in [0, 100]."""
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        return None
    try:
        d = Decimal(str(v))
    except InvalidOperation:
        return None
    if not d.is_finite() or d < 0 or d > 100:
        return None
    return Fraction(d)


def parse_stat(v: Any) -> tuple[str, Fraction | None] | None:
    """``mean``, ``median``, ``sd`` or ``p<P>`` (``p99``, ``p99.9``) as (kind, P)."""
    if not isinstance(v, str):
        return None
    if v in ("mean", "median", "sd"):
        return v, (Fraction(50) if v == "median" else None)
    if v.startswith("p"):
        p = parse_percentile(v[1:])
        return None if p is None else ("percentile", p)
    return None


def _exact_sums(x: Floats) -> tuple[int, Fraction, Fraction]:
    g = group_sums(np.zeros(x.size, dtype=np.int64), x).get(0)
    return (0, Fraction(0), Fraction(0)) if g is None else (g.n, g.total, g.squares)


@dataclass
class RunStats:
    """The statistics of one run, each latency's values sorted once on first use."""

    run: ServingRun
    _values: dict[str, Floats | str] = field(default_factory=dict)
    _sorted: dict[str, Floats] = field(default_factory=dict)
    _sums: dict[str, tuple[int, Fraction, Fraction]] = field(default_factory=dict)

    def values(self, latency: str) -> Floats | str:
        """The latency's per-request values (seconds), or why the source lacks them."""
        if latency not in self._values:
            self._values[latency] = self._compute(latency)
        return self._values[latency]

    def _compute(self, latency: str) -> Floats | str:
        r = self.run
        why = _missing(r, latency)
        if why is not None:
            return why
        if latency in r.samples:  # the tool's own definition (GuideLLM's weighted TPOT)
            return r.samples[latency]
        if latency == "ttft":
            return r.ttfts[r.ok]
        if latency == "itl":
            return r.ok_itl()
        assert r.latencies is not None
        if latency == "e2el":
            return r.latencies[r.ok]
        keep = r.ok & (r.output_lens > 1)
        return (r.latencies[keep] - r.ttfts[keep]) / (r.output_lens[keep] - 1).astype(np.float64)

    def sorted(self, latency: str) -> Floats:
        """The latency's values in ascending order (``values`` must not be a reason)."""
        if latency not in self._sorted:
            v = self.values(latency)
            assert not isinstance(v, str)
            self._sorted[latency] = np.sort(v)
        return self._sorted[latency]

    def sums(self, latency: str) -> tuple[int, Fraction, Fraction]:
        """Count, exact sum and exact sum of squares of the latency's values, computed once
        (a mean and an SD claim of one latency share them; ``values`` must not be a reason)."""
        if latency not in self._sums:
            v = self.values(latency)
            assert not isinstance(v, str)
            self._sums[latency] = _exact_sums(v)
        return self._sums[latency]

    def with_sums(self) -> RunStats:
        """This, with the exact sums of every latency it has values of computed now (in a
        parse worker: the claims' means and SDs then cost nothing in the caller)."""
        for name in LATENCIES:
            v = self.values(name)
            if not isinstance(v, str):
                self.sums(name)
        # The selected values are cheap to select again and would double what is sent
        # back from a worker: only the sums are kept.
        self._values.clear()
        return self

    def latency(self, latency: str, kind: str, p: Fraction | None) -> Exact | str:
        """Statistic ``kind`` (mean, median, sd, percentile) of ``latency`` in seconds."""
        v = self.values(latency)
        if isinstance(v, str):
            return v
        if v.size == 0:
            what = "request with more than one output token" if latency == "tpot" else "value"
            return f"{self.run.source}: no successful {what} for {latency.upper()}"
        if kind == "mean":
            n, total, _ = self.sums(latency)
            return total / n
        if kind == "sd":
            n, total, squares = self.sums(latency)
            return Root((n * squares - total * total) / (n * n))
        assert p is not None
        if self.run.percentiles == "inverse_cdf":
            return percentile_inverse_cdf(self.sorted(latency), p)
        return percentile_sorted(self.sorted(latency), p)


def _missing(r: ServingRun, latency: str) -> str | None:
    if latency not in LATENCIES:
        return f"{latency!r} is not a latency (one of {', '.join(LATENCIES)})"
    if not r.detailed:
        return _aggregates_only(r, latency)
    if latency in r.unrecorded:
        return r.unrecorded[latency]
    if latency in ("tpot", "e2el") and r.latencies is None:
        return (
            f"{r.source} records no per-request end-to-end latency ('latencies'; older "
            f"benchmark_serving.py): {latency.upper()} cannot be re-derived"
        )
    return None


NO_ARRAYS = (
    "records no per-request successes or token counts (written without "
    "--save-detailed; run with --save-detailed to have them re-derived)"
)


def _aggregates_only(r: ServingRun, latency: str) -> str | None:
    """Why an aggregates-only file cannot give ``latency``; None for E2EL when its
    ``latencies`` are recorded and every request is known to have succeeded."""
    if latency != "e2el" or r.latencies is None:
        return (
            f"{r.source} records no per-request {latency.upper()} values (written without "
            "--save-detailed; run with --save-detailed to have them re-derived)"
        )
    if r.ok.size != r.latencies.size:
        return (
            f"{r.source} records {r.latencies.size} per-request latencies but not which "
            "requests failed (no 'errors': run with --save-detailed), so the successful "
            "requests' E2EL cannot be re-derived"
        )
    return None


def percentile_sorted(x: Floats, p: Fraction) -> Fraction:
    """``numpy.percentile(x, p)`` (method "linear") exactly, over ascending ``x``."""
    h = (x.size - 1) * p / 100
    lo = math.floor(h)
    frac = h - lo
    a = Fraction(float(x[lo]))
    if frac == 0:
        return a
    b = Fraction(float(x[lo + 1]))
    return a + frac * (b - a)


def percentile_inverse_cdf(x: Floats, p: Fraction) -> Fraction:
    """GuideLLM's percentile over ascending ``x`` (a value repeated once per unit of
    weight): equal values merged with their counts as weights, the weights divided by
    their sum and summed in doubles (``numpy.cumsum``), then the first value whose
    cumulative share reaches the double nearest P/100 (``numpy.searchsorted``, left).
    The doubles are the definition: at an exact tie (P/100 = k/n) their rounding
    decides which of two neighbours is the percentile, as it does in the tool."""
    values, counts = np.unique(x, return_counts=True)
    weights = counts.astype(np.float64)
    cdf = np.cumsum(weights / np.sum(weights))
    i = int(np.searchsorted(cdf, float(p / 100), side="left"))
    return Fraction(float(values[min(i, values.size - 1)]))


def throughput(run: ServingRun, what: str) -> Fraction | str:
    """Requests/s or tokens/s over the recorded duration (``THROUGHPUTS``)."""
    if not run.detailed:
        return f"{run.source} {NO_ARRAYS}"
    dur = Fraction(run.duration_s)
    if what == "requests":
        return run.completed / dur
    out = int(run.output_lens.sum())
    if what == "output_tokens":
        return out / dur
    if what == "total_tokens":
        return (int(run.input_lens[run.ok].sum()) + out) / dur
    return f"{what!r} is not a throughput (one of {', '.join(THROUGHPUTS)})"


GOODPUT_DEFINITIONS = ("vllm", "aiperf")


def good_requests(
    stats: RunStats, slo_ms: dict[str, Fraction], definition: str = "vllm"
) -> int | str:
    """Successful requests within every stated SLO (``ttft``, ``tpot``, ``e2el`` in ms).

    ``definition`` names whose goodput: ``vllm`` (``vllm bench serve --goodput``: the
    SLO in seconds against the recorded seconds; a request with at most one output
    token has TPOT 0) or ``aiperf`` (AIPerf's ``good_request_count``: each SLO'd
    metric as its record gives it in ms, against the SLO in ms; a record without
    the metric, such as a one-token response's ``inter_token_latency``, is not good).
    """
    r = stats.run
    if not slo_ms:
        return "goodput needs at least one SLO (ttft_ms, tpot_ms, e2el_ms)"
    if definition not in GOODPUT_DEFINITIONS:
        return f"goodput definition {definition!r} is not one of {', '.join(GOODPUT_DEFINITIONS)}"
    if not r.detailed:
        return f"{r.source} {NO_ARRAYS}"
    if definition == "aiperf":
        return _aiperf_good(r, slo_ms)
    return _vllm_good(r, slo_ms)


def _vllm_good(r: ServingRun, slo_ms: dict[str, Fraction]) -> int | str:
    good = r.ok.copy()
    for name, slo in slo_ms.items():
        limit = float(slo) / 1000.0  # the double the tool compares with
        if name in r.unrecorded:
            return r.unrecorded[name]
        if name == "ttft":
            good &= r.ttfts <= limit
            continue
        if r.latencies is None:
            return f"{r.source} records no per-request latencies: the {name} SLO cannot be checked"
        if name == "e2el":
            good &= r.latencies <= limit
        else:
            tpot = np.zeros(r.n, dtype=np.float64)
            many = r.ok & (r.output_lens > 1)
            tpot[many] = (r.latencies[many] - r.ttfts[many]) / (r.output_lens[many] - 1)
            good &= tpot <= limit
    return int(np.count_nonzero(good))


def _aiperf_good(r: ServingRun, slo_ms: dict[str, Fraction]) -> int | str:
    good = r.ok.copy()
    for name, slo in slo_ms.items():
        values = r.recorded_ms.get(name)
        if values is None or values.size != r.n:
            return (
                f"{r.source} does not carry each record's {name.upper()} in ms: AIPerf's "
                "goodput cannot be re-derived from it"
            )
        # NaN (the record has no such metric) compares False: not good, as in AIPerf.
        good &= values <= float(slo)
    return int(np.count_nonzero(good))


def goodput(
    stats: RunStats, slo_ms: dict[str, Fraction], definition: str = "vllm"
) -> Fraction | str:
    """Good requests (``good_requests``) per second of the recorded duration."""
    n = good_requests(stats, slo_ms, definition)
    return n if isinstance(n, str) else n / Fraction(stats.run.duration_s)


def to_unit(value: Exact, unit: str) -> Exact:
    """Seconds to ``unit`` (``s`` or ``ms``), exactly."""
    if unit != "ms":
        return value
    if isinstance(value, Root):
        return Root(value.square * _MS * _MS)
    return value * _MS
