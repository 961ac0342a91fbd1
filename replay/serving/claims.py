"""Claim evaluators of the serving statistics (``specs/claims-vocabulary.md``).

Each takes the bundle's serving data, the claim's params and unit, and returns
the exact value with its derivation, or the reason it cannot be re-derived.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from replay.engine.exact import Exact, Root, display
from replay.serving.inputs import ServingData
from replay.serving.stats import (
    NO_ARRAYS,
    THROUGHPUTS,
    RunStats,
    good_requests,
    parse_percentile,
    parse_stat,
    throughput,
    to_unit,
)

__all__ = ["SERVING_EVALUATORS", "SLO_PARAMS", "ServingEval"]

Result = tuple[Exact, str] | str
ServingEval = Callable[[ServingData | None, Mapping[str, Any], str], Result]
SLO_PARAMS = {"ttft_ms": "ttft", "tpot_ms": "tpot", "e2el_ms": "e2el"}
_NOT_SERVING = "the bundle carries no serving sources (files/serving.json)"


def _run(data: ServingData | None, p: Mapping[str, Any], arm_key: str = "arm") -> RunStats | str:
    if data is None:
        return _NOT_SERVING
    return data.get(str(p.get(arm_key)), str(p.get("load_point")))


def _where(rs: RunStats) -> str:
    return f"{rs.run.source} (arm {rs.run.arm}, load point {rs.run.load_point})"


def _latency(rs: RunStats, latency: Any, kind: str, pct: Fraction | None, unit: str) -> Result:
    v = rs.latency(str(latency), kind, pct)
    if isinstance(v, str):
        return v
    n = rs.values(str(latency))
    count = 0 if isinstance(n, str) else n.size
    method = "inverse CDF" if rs.run.percentiles == "inverse_cdf" else "linear"
    what = {"mean": "mean", "sd": "population SD (n)", "median": f"median ({method})"}.get(
        kind, f"{pct}th percentile ({method})"
    )
    out = to_unit(v, unit)
    # An aggregates-only file names no failed request: its latencies count as successes
    # only because it records none (vllm._aggregates_only_latencies); say so.
    basis = "" if rs.run.detailed else " (every request's: the file records no failed one)"
    definition = rs.run.meta.get("definitions", {}).get(str(latency))
    named = f" ({definition})" if isinstance(definition, str) else ""
    return (
        out,
        f"{what} of {count} {str(latency).upper()} values{named}{basis} of {_where(rs)} = "
        f"{display(out)} {unit}",
    )


def _latency_stat(kind: str) -> ServingEval:
    def ev(data: ServingData | None, p: Mapping[str, Any], unit: str) -> Result:
        rs = _run(data, p)
        if isinstance(rs, str):
            return rs
        pct: Fraction | None = Fraction(50) if kind == "median" else None
        if kind == "percentile":
            pct = parse_percentile(p.get("percentile"))
            if pct is None:
                return f"percentile {p.get('percentile')!r} is not a number from 0 to 100"
        return _latency(rs, p.get("latency"), kind, pct, unit)

    return ev


def _throughput_stat(what: str) -> ServingEval:
    def ev(data: ServingData | None, p: Mapping[str, Any], unit: str) -> Result:
        rs = _run(data, p)
        if isinstance(rs, str):
            return rs
        v = throughput(rs.run, what)
        if isinstance(v, str):
            return v
        src = rs.run.meta.get("duration_from")
        dur = f"duration {rs.run.duration_s!r} s" + (f" ({src})" if src else "")
        return v, f"{what.replace('_', ' ')} / {dur} of {_where(rs)}"

    return ev


def _goodput(data: ServingData | None, p: Mapping[str, Any], unit: str) -> Result:
    rs = _run(data, p)
    if isinstance(rs, str):
        return rs
    slos: dict[str, Fraction] = {}
    for key, name in SLO_PARAMS.items():
        if key in p:
            v = _positive(p[key])
            if v is None:
                return f"SLO {key} {p[key]!r} is not a number > 0"
            slos[name] = v
    definition = str(p.get("definition", "vllm"))
    good = good_requests(rs, slos, definition)
    if isinstance(good, str):
        return good
    slo_text = ", ".join(f"{k} <= {v} ms" for k, v in slos.items())
    src = rs.run.meta.get("duration_from")
    dur = f"duration {rs.run.duration_s!r} s" + (f" ({src})" if src else "")
    return (
        good / Fraction(rs.run.duration_s),
        f"{good} requests within {slo_text} ({definition}'s goodput definition) / {dur} "
        f"of {_where(rs)}",
    )


def _positive(v: Any) -> Fraction | None:
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        return None
    try:
        f = Fraction(str(v))
    except (ValueError, ZeroDivisionError):
        return None
    return f if f > 0 else None


def _count(which: str) -> ServingEval:
    def ev(data: ServingData | None, p: Mapping[str, Any], unit: str) -> Result:
        rs = _run(data, p)
        if isinstance(rs, str):
            return rs
        r = rs.run
        if not r.detailed:
            return f"{r.source} {NO_ARRAYS}"
        n = {
            "completed": r.completed,
            "failed": r.n - r.completed,
            "input_tokens": int(r.input_lens[r.ok].sum()),
            "output_tokens": int(r.output_lens.sum()),
        }[which]
        return Fraction(n), f"{which.replace('_', ' ')} of {_where(rs)}"

    return ev


def _pair(data: ServingData | None, p: Mapping[str, Any]) -> tuple[RunStats, RunStats] | str:
    b = _run(data, p, "baseline")
    if isinstance(b, str):
        return b
    c = _run(data, p, "candidate")
    return c if isinstance(c, str) else (b, c)


def _latency_lower(data: ServingData | None, p: Mapping[str, Any], unit: str) -> Result:
    pair = _pair(data, p)
    if isinstance(pair, str):
        return pair
    st = parse_stat(p.get("stat"))
    if st is None or st[0] == "sd":
        return f"stat {p.get('stat')!r} is not mean, median or p<P>"
    vals = [rs.latency(str(p.get("latency")), st[0], st[1]) for rs in pair]
    b, c = vals
    if isinstance(b, str) or isinstance(c, str):
        return b if isinstance(b, str) else str(c)
    assert not isinstance(b, Root)
    assert not isinstance(c, Root)
    if b == 0:
        return "the baseline value is 0: a percentage of it is undefined"
    out = (1 - c / b) * 100
    return out, (
        f"(1 − {display(c)} / {display(b)}) × 100 ({p.get('stat')} {str(p.get('latency')).upper()}"
        f" s, candidate / baseline at {p.get('load_point')}) = {display(out)} %"
    )


def _throughput_cmp(ratio: bool) -> ServingEval:
    def ev(data: ServingData | None, p: Mapping[str, Any], unit: str) -> Result:
        pair = _pair(data, p)
        if isinstance(pair, str):
            return pair
        what = str(p.get("throughput"))
        if what not in THROUGHPUTS:
            return f"throughput {what!r} is not one of {', '.join(THROUGHPUTS)}"
        b, c = (throughput(rs.run, what) for rs in pair)
        if isinstance(b, str) or isinstance(c, str):
            return b if isinstance(b, str) else str(c)
        if b == 0:
            return "the baseline throughput is 0: a ratio to it is undefined"
        out = c / b if ratio else (c / b - 1) * 100
        form = "{c} / {b}" if ratio else "({c} / {b} − 1) × 100"
        return out, form.format(
            c=display(c), b=display(b)
        ) + f" ({what}/s at {p.get('load_point')})"

    return ev


SERVING_EVALUATORS: dict[str, ServingEval] = {
    "latency_mean": _latency_stat("mean"),
    "latency_median": _latency_stat("median"),
    "latency_sd": _latency_stat("sd"),
    "latency_percentile": _latency_stat("percentile"),
    "request_throughput": _throughput_stat("requests"),
    "output_token_throughput": _throughput_stat("output_tokens"),
    "total_token_throughput": _throughput_stat("total_tokens"),
    "request_goodput": _goodput,
    "requests_completed": _count("completed"),
    "requests_failed": _count("failed"),
    "input_tokens_total": _count("input_tokens"),
    "output_tokens_total": _count("output_tokens"),
    "latency_percent_lower": _latency_lower,
    "throughput_percent_higher": _throughput_cmp(ratio=False),
    "throughput_ratio": _throughput_cmp(ratio=True),
}
