"""Every statistic a claim may name, recomputed exactly from one attempt's tables.

:data:`EVALUATORS` maps each statistic of the closed vocabulary
(``bundler/format/vocabulary.py``) to a function of the attempt's figures, the
claim's parameters and its unit; each returns the exact value with its
derivation, the reason it cannot be computed, or (for verdicts that need an
absent scorer) the range it lies in. :mod:`replay.sections.claims` compares
these with the claimed figures.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from replay.engine.exact import Exact, Root, display
from replay.inputs import ReplayInputs
from replay.sections.latency import ArmLatency, LatencyResult
from replay.sections.quality import UNATTESTED, MetricSummary
from replay.sections.stats import AttemptStats
from replay.serving.claims import SERVING_EVALUATORS, ServingEval

__all__ = [
    "EVALUATORS",
    "Evaluator",
    "Missing",
    "Range",
    "Recomputed",
    "StatContext",
    "Value",
]


# --- outcomes of recomputing one statistic -------------------------------------------


@dataclass(frozen=True)
class Value:
    """The exact value of a statistic and the derivation shown beside it."""

    exact: Exact
    derivation: str


@dataclass(frozen=True)
class Missing:
    """Why the statistic cannot be computed from this bundle."""

    reason: str


@dataclass(frozen=True)
class Range:
    """An integer known only within [low, high] (verdicts that need an absent scorer)."""

    low: int
    high: int
    derivation: str
    reason: str


Recomputed = Value | Missing | Range


@dataclass(frozen=True)
class StatContext:
    """What an evaluator reads: the bundle's inputs, one attempt's figures, its latency."""

    inputs: ReplayInputs
    stats: AttemptStats
    latency: LatencyResult  # the attempt's, or an alternative when diagnosing

    @property
    def attempt(self) -> str:
        return self.stats.attempt


Evaluator = Callable[[StatContext, Mapping[str, Any], str], Recomputed]


# --- latency statistics --------------------------------------------------------------


def _arm(ctx: StatContext, p: Mapping[str, Any]) -> ArmLatency | Missing:
    a = ctx.latency.arm(str(p.get("arm")))
    if a is None or a.mean_s is None:
        return Missing(
            f"arm {p.get('arm')!r} has no measured request with status ok in attempt "
            f"{ctx.attempt!r}"
        )
    return a


def _means_text(a: ArmLatency) -> str:
    return ", ".join(f"{s.server} {display(s.mean_s)} (n={s.n})" for s in a.servers)


def _server_mean(ctx: StatContext, p: Mapping[str, Any], unit: str) -> Recomputed:
    server = str(p.get("server"))
    for s in ctx.latency.servers():
        if s.server == server and s.arm == p.get("arm"):
            return Value(
                s.mean_s,
                f"mean of the {s.n} measured ok requests of server {server} "
                f"(arm {s.arm}) = {display(s.mean_s)} s",
            )
    return Missing(
        f"server {server!r} of arm {p.get('arm')!r} has no measured ok request in attempt "
        f"{ctx.attempt!r}"
    )


def _arm_mean(ctx: StatContext, p: Mapping[str, Any], unit: str) -> Recomputed:
    a = _arm(ctx, p)
    if isinstance(a, Missing) or a.mean_s is None:
        return a if isinstance(a, Missing) else Missing("no samples")
    return Value(
        a.mean_s,
        f"mean of the {len(a.servers)} server means [{_means_text(a)}] = {display(a.mean_s)} s",
    )


def _sd_server_means(ctx: StatContext, p: Mapping[str, Any], unit: str) -> Recomputed:
    a = _arm(ctx, p)
    if isinstance(a, Missing):
        return a
    if a.sd_server_means_s is None:
        return Missing(f"a sample SD needs at least 2 server means; arm {a.arm} has 1")
    return Value(
        a.sd_server_means_s,
        f"sample SD (n − 1) across the {len(a.servers)} server means [{_means_text(a)}] = "
        f"{display(a.sd_server_means_s)} s",
    )


def _sd_requests(ctx: StatContext, p: Mapping[str, Any], unit: str) -> Recomputed:
    a = _arm(ctx, p)
    if isinstance(a, Missing):
        return a
    if a.sd_requests_s is None:
        return Missing(f"a sample SD needs at least 2 requests; arm {a.arm} has 1")
    return Value(
        a.sd_requests_s,
        f"sample SD (n − 1) across the {a.n_requests} individual measured requests of arm "
        f"{a.arm} (not across server means) = {display(a.sd_requests_s)} s",
    )


def _cv(ctx: StatContext, p: Mapping[str, Any], unit: str) -> Recomputed:
    a = _arm(ctx, p)
    if isinstance(a, Missing):
        return a
    if a.cv_server_means is None:
        return Missing(f"needs at least 2 server means and a non-zero mean for arm {a.arm}")
    v = Root(a.cv_server_means.square * 10_000) if unit == "%" else a.cv_server_means
    scale = " × 100" if unit == "%" else ""
    return Value(
        v,
        f"SD across server means / arm mean{scale} = "
        f"{display(a.sd_server_means_s or Root(Fraction(0)))}"
        f" / {display(a.mean_s or Fraction(0))}{scale} = {display(v)}",
    )


def _pair_stat(which: str) -> Evaluator:
    def ev(ctx: StatContext, p: Mapping[str, Any], unit: str) -> Recomputed:
        b, c = str(p.get("baseline")), str(p.get("candidate"))
        pair = ctx.latency.pair(b, c)
        if pair is None:
            return Missing(
                f"arm {b!r} or {c!r} has no measured ok request in attempt {ctx.attempt!r}"
            )
        bm = ctx.latency.arm(b)
        cm = ctx.latency.arm(c)
        assert bm is not None
        assert cm is not None
        assert bm.mean_s is not None
        assert cm.mean_s is not None
        if which == "percent_lower":
            if pair.percent_lower is None:
                return Missing(f"arm {b} has a zero mean")
            return Value(
                pair.percent_lower,
                f"(1 − {display(cm.mean_s)} / {display(bm.mean_s)}) × 100 = "
                f"{display(pair.percent_lower)} %",
            )
        if pair.speedup is None:
            return Missing(f"arm {c} has a zero mean")
        return Value(
            pair.speedup,
            f"{display(bm.mean_s)} / {display(cm.mean_s)} = {display(pair.speedup)}×",
        )

    return ev


# --- counts ---------------------------------------------------------------------------


def _requests(ok: bool) -> Evaluator:
    def ev(ctx: StatContext, p: Mapping[str, Any], unit: str) -> Recomputed:
        r = ctx.stats.requests
        phases = ", ".join(f"{k} {v}" for k, v in sorted(r.by_phase.items()))
        n = r.ok if ok else r.total
        what = "with status ok" if ok else "all phases"
        return Value(Fraction(n), f"receipts of attempt {ctx.attempt} ({phases}), {what}: {n}")

    return ev


def _requests_measured(ctx: StatContext, p: Mapping[str, Any], unit: str) -> Recomputed:
    n = ctx.stats.requests.by_phase.get("measured", 0)
    return Value(Fraction(n), f"receipts of attempt {ctx.attempt} in phase measured: {n}")


def _comparisons_total(ctx: StatContext, p: Mapping[str, Any], unit: str) -> Recomputed:
    n = ctx.stats.quality.comparisons_total
    return Value(Fraction(n), f"comparisons of attempt {ctx.attempt}: {n}")


def _comparisons_passed(ctx: StatContext, p: Mapping[str, Any], unit: str) -> Recomputed:
    q = ctx.stats.quality
    text = (
        f"{q.comparisons_passed} of {q.comparisons_total} comparisons pass every gate whose "
        f"metric they record ({q.comparisons_failed} fail, {q.comparisons_unattested} unattested)"
    )
    if q.comparisons_unattested:
        return Range(
            q.comparisons_passed,
            q.comparisons_passed_if_attested,
            text,
            f"{q.comparisons_unattested} comparison(s) rest on unattested LPIPS verdicts "
            "(no scorer identity in the bundle)",
        )
    return Value(Fraction(q.comparisons_passed), text)


def _gate_checks_passed(ctx: StatContext, p: Mapping[str, Any], unit: str) -> Recomputed:
    q = ctx.stats.quality
    passed = q.count("pass")
    text = f"{passed} of {len(q.checks)} (comparison, gate) checks pass"
    unatt = [c for c in q.checks if c.verdict == UNATTESTED]
    if unatt:
        return Range(
            passed,
            passed + sum(c.passes_recorded for c in unatt),
            text,
            f"{len(unatt)} check(s) are unattested LPIPS verdicts (no scorer identity)",
        )
    return Value(Fraction(passed), text)


def _exits(clean: bool) -> Evaluator:
    def ev(ctx: StatContext, p: Mapping[str, Any], unit: str) -> Recomputed:
        lc = ctx.stats.lifecycle
        if not clean:
            return Value(Fraction(lc.total), f"worker exits of attempt {ctx.attempt}: {lc.total}")
        if lc.missing_budgets:
            return Missing(f"the plan has no teardown budget for arm(s) {lc.missing_budgets}")
        budgets = "; ".join(f"{a.arm} TERM wait {a.term_wait_s:g} s" for a in lc.arms if a.total)
        return Value(
            Fraction(lc.clean),
            f"{lc.clean} of {lc.total} exits with code 0, no signal, within budget ({budgets})",
        )

    return ev


# --- telemetry ------------------------------------------------------------------------


def _hbm_mean(ctx: StatContext, p: Mapping[str, Any], unit: str) -> Recomputed:
    a = ctx.stats.telemetry.arm(str(p.get("arm")))
    if a is None or a.mean_peak_mb is None:
        return Missing(f"no telemetry samples for arm {p.get('arm')!r} in attempt {ctx.attempt!r}")
    return Value(
        a.mean_peak_mb,
        f"mean of {a.devices} sampled (server, device) peaks of arm {a.arm} = "
        f"{display(a.mean_peak_mb)} MB",
    )


def _hbm_change(ctx: StatContext, p: Mapping[str, Any], unit: str) -> Recomputed:
    t = ctx.stats.telemetry
    b, c = str(p.get("baseline")), str(p.get("candidate"))
    pair = t.pair(b, c)
    bm, cm = t.arm(b), t.arm(c)
    if pair is None or pair.change_pct is None or bm is None or cm is None:
        return Missing(f"no telemetry samples for arm {b!r} or {c!r} in attempt {ctx.attempt!r}")
    assert bm.mean_peak_mb is not None
    assert cm.mean_peak_mb is not None
    return Value(
        pair.change_pct,
        f"({display(cm.mean_peak_mb)} / {display(bm.mean_peak_mb)} − 1) × 100 = "
        f"{display(pair.change_pct)} %",
    )


# --- quality metrics ------------------------------------------------------------------


def _metric(ctx: StatContext, p: Mapping[str, Any]) -> MetricSummary | Missing:
    m = ctx.stats.quality.metric(str(p.get("metric")))
    if m is None:
        return Missing(
            f"metric {p.get('metric')!r} is not recorded by any comparison of attempt "
            f"{ctx.attempt!r}"
        )
    return m


def _scorer_note(ctx: StatContext, m: MetricSummary) -> str:
    if m.needs_scorer and not ctx.stats.quality.scorer_attested:
        return " (recorded by a scorer whose identity the bundle does not record)"
    return ""


def _metric_extreme(which: str) -> Evaluator:
    def ev(ctx: StatContext, p: Mapping[str, Any], unit: str) -> Recomputed:
        m = _metric(ctx, p)
        if isinstance(m, Missing):
            return m
        v = m.min_value if which == "min" else m.max_value
        word = "smallest" if which == "min" else "largest"
        return Value(
            v,
            f"{word} of {m.recorded} recorded {m.metric} values = {display(v)}"
            f"{_scorer_note(ctx, m)}",
        )

    return ev


def _gate_closest(margin: bool) -> Evaluator:
    def ev(ctx: StatContext, p: Mapping[str, Any], unit: str) -> Recomputed:
        m = _metric(ctx, p)
        if isinstance(m, Missing):
            return m
        c = m.closest
        if c is None:
            return Missing(f"metric {m.metric!r} has no frozen gate to measure a margin to")
        g = next(s.gate for s in ctx.stats.quality.gates if s.gate.gate_id == c.gate_id)
        text = (
            f"comparison {c.comparison_id}: {m.metric} = {c.value!r}, "
            f"margin {display(c.margin)} to "
            f"gate {g.gate_id} ({g.op} {g.threshold!r}), the smallest of its checks"
            f"{_scorer_note(ctx, m)}"
        )
        return Value(c.margin if margin else Fraction(repr(c.value)), text)

    return ev


EVALUATORS: dict[str, Evaluator] = {
    "server_mean_s": _server_mean,
    "arm_mean_s": _arm_mean,
    "arm_sd_server_means_s": _sd_server_means,
    "arm_sd_requests_s": _sd_requests,
    "arm_cv_server_means": _cv,
    "percent_lower": _pair_stat("percent_lower"),
    "speedup": _pair_stat("speedup"),
    "requests_total": _requests(ok=False),
    "requests_passed": _requests(ok=True),
    "requests_measured": _requests_measured,
    "comparisons_total": _comparisons_total,
    "comparisons_passed": _comparisons_passed,
    "gate_checks_passed": _gate_checks_passed,
    "worker_exits_total": _exits(clean=False),
    "worker_exits_clean": _exits(clean=True),
    "hbm_peak_mean_mb": _hbm_mean,
    "hbm_peak_mean_change_pct": _hbm_change,
    "metric_min": _metric_extreme("min"),
    "metric_max": _metric_extreme("max"),
    "closest_to_gate": _gate_closest(margin=False),
    "smallest_margin": _gate_closest(margin=True),
}


def _serving(fn: ServingEval) -> Evaluator:
    def ev(ctx: StatContext, p: Mapping[str, Any], unit: str) -> Recomputed:
        out = fn(ctx.inputs.serving, p, unit)
        return Missing(out) if isinstance(out, str) else Value(out[0], out[1])

    return ev


EVALUATORS.update({name: _serving(fn) for name, fn in SERVING_EVALUATORS.items()})
