"""The closed vocabulary of claim statistics (``specs/claims-vocabulary.md``).

A claim names one statistic below with its parameters. Seal checks the names
and parameters; replay recomputes each one from the bundle's tables. The
definitions are data, never evaluated code: a claim cannot smuggle a formula.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["STATISTICS", "Statistic"]


@dataclass(frozen=True)
class Statistic:
    """One statistic of the vocabulary: its parameters, unit and definition."""

    name: str
    params: tuple[str, ...]
    units: tuple[str, ...]
    definition: str
    optional: tuple[str, ...] = ()


_ARM = ("arm",)
_PAIR = ("baseline", "candidate")
_METRIC = ("metric",)

STATISTICS: dict[str, Statistic] = {
    s.name: s
    for s in (
        Statistic(
            "server_mean_s",
            ("arm", "server"),
            ("s",),
            "mean e2e_s of the server's measured requests with status ok in the accepted attempt",
        ),
        Statistic(
            "arm_mean_s",
            _ARM,
            ("s",),
            "mean over the arm's servers of server_mean_s (not the mean of pooled requests)",
        ),
        Statistic(
            "arm_sd_server_means_s",
            _ARM,
            ("s",),
            "sample standard deviation (n - 1) across the arm's server means",
        ),
        Statistic(
            "arm_sd_requests_s",
            _ARM,
            ("s",),
            "sample standard deviation (n - 1) across the arm's individual measured requests",
        ),
        Statistic(
            "arm_cv_server_means",
            _ARM,
            ("ratio", "%"),
            "arm_sd_server_means_s / arm_mean_s (x100 when the unit is %)",
        ),
        Statistic(
            "percent_lower",
            _PAIR,
            ("%",),
            "(1 - arm_mean_s(candidate) / arm_mean_s(baseline)) x 100",
        ),
        Statistic(
            "speedup",
            _PAIR,
            ("x",),
            "inverse-latency speedup arm_mean_s(baseline) / arm_mean_s(candidate)",
        ),
        Statistic("requests_total", (), ("count",), "receipts of the accepted attempt, all phases"),
        Statistic(
            "requests_passed",
            (),
            ("count",),
            "receipts of the accepted attempt with status ok, all phases",
        ),
        Statistic(
            "requests_measured",
            (),
            ("count",),
            "receipts of the accepted attempt in phase measured, any status",
        ),
        Statistic("comparisons_total", (), ("count",), "comparisons of the accepted attempt"),
        Statistic(
            "comparisons_passed",
            (),
            ("count",),
            "comparisons of the accepted attempt for which every gate whose metric they record "
            "passes, with an attested scorer where the gate needs one",
        ),
        Statistic(
            "gate_checks_passed",
            (),
            ("count",),
            "(comparison, gate) evaluations that pass, accepted attempt",
        ),
        Statistic("worker_exits_total", (), ("count",), "worker exits of the accepted attempt"),
        Statistic(
            "worker_exits_clean",
            (),
            ("count",),
            "worker exits with exit code 0, no signal, and exit_s within the plan's TERM-wait "
            "budget for the arm",
        ),
        Statistic(
            "hbm_peak_mean_mb",
            _ARM,
            ("MB",),
            "mean over the arm's (server, device) pairs of the sampled peak hbm_used_mb",
        ),
        Statistic(
            "hbm_peak_mean_change_pct",
            _PAIR,
            ("%",),
            "(hbm_peak_mean_mb(candidate) / hbm_peak_mean_mb(baseline) - 1) x 100",
        ),
        Statistic("metric_min", _METRIC, ("1", "ratio", "count"), "smallest recorded value"),
        Statistic("metric_max", _METRIC, ("1", "ratio", "count"), "largest recorded value"),
        Statistic(
            "closest_to_gate",
            _METRIC,
            ("1", "ratio", "count"),
            "the recorded value whose margin to the metric's gate is smallest",
        ),
        Statistic(
            "smallest_margin",
            _METRIC,
            ("1", "ratio", "count"),
            "the smallest margin (distance on the passing side, negative if failing) to the gate",
        ),
    )
}
_LP = ("arm", "load_point")
_LAT = (*_LP, "latency")
_PAIR_LP = ("baseline", "candidate", "load_point")
_LATENCY_UNITS = ("s", "ms")
_SERVING = (
    Statistic("latency_mean", _LAT, _LATENCY_UNITS, "mean of the latency's values"),
    Statistic("latency_median", _LAT, _LATENCY_UNITS, "median (50th percentile, linear)"),
    Statistic("latency_sd", _LAT, _LATENCY_UNITS, "population standard deviation (divides by n)"),
    Statistic(
        "latency_percentile",
        (*_LAT, "percentile"),
        _LATENCY_UNITS,
        "percentile with numpy.percentile's default linear interpolation",
    ),
    Statistic("request_throughput", _LP, ("requests/s",), "completed requests / duration"),
    Statistic("output_token_throughput", _LP, ("tokens/s",), "output tokens / duration"),
    Statistic(
        "total_token_throughput",
        _LP,
        ("tokens/s",),
        "(prompt tokens of completed requests + output tokens) / duration",
    ),
    Statistic(
        "request_goodput",
        _LP,
        ("requests/s",),
        "completed requests within every stated SLO / duration (definition: vllm, the "
        "default, or aiperf)",
        optional=("ttft_ms", "tpot_ms", "e2el_ms", "definition"),
    ),
    Statistic("requests_completed", _LP, ("count",), "successful requests of the load point"),
    Statistic("requests_failed", _LP, ("count",), "failed requests of the load point"),
    Statistic("input_tokens_total", _LP, ("count",), "prompt tokens of successful requests"),
    Statistic("output_tokens_total", _LP, ("count",), "output tokens of all requests"),
    Statistic(
        "latency_percent_lower",
        (*_PAIR_LP, "latency", "stat"),
        ("%",),
        "(1 - candidate / baseline) x 100 of the latency statistic (mean, median, p<P>)",
    ),
    Statistic(
        "throughput_percent_higher",
        (*_PAIR_LP, "throughput"),
        ("%",),
        "(candidate / baseline - 1) x 100 of the throughput",
    ),
    Statistic(
        "throughput_ratio", (*_PAIR_LP, "throughput"), ("x",), "candidate / baseline throughput"
    ),
)
STATISTICS.update({s.name: s for s in _SERVING})
"""Every statistic a claim may name. ``attempt`` is an optional parameter of all of them."""
