"""Claims: every published number recomputed and compared at its stated precision.

Each claim names a statistic of the closed vocabulary (``bundler/format/vocabulary.py``)
with its parameters. Replay recomputes it exactly from the tables, rounds half
to even at the claim's ``decimals`` (or, when absent, at the number of
decimals its value text shows) and compares the two as decimals:

- ``confirmed``: equal;
- ``contradicted``: different; the claimed and recomputed values are shown
  with the derivation, and, when the claimed figure matches a known mistake
  (warmups counted, attempts mixed, SD across requests, rounding up), so;
- ``unverifiable``: the bundle lacks what the statistic needs; the reason
  says what is missing.

Replay never invents claims: statistics the author explicitly did not claim
(``not_claimed``) are listed as such, and nothing else is asserted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any, Final, Literal, Protocol

from bundler.format.vocabulary import STATISTICS
from replay.engine.exact import Exact, Root, display, round_half_even, shortest
from replay.inputs import ReplayInputs
from replay.sections.latency import ArmLatency, LatencyResult, compute_latency
from replay.sections.quality import UNATTESTED, MetricSummary
from replay.sections.stats import AttemptStats, StatsCache
from replay.serving.claims import SERVING_EVALUATORS, ServingEval

__all__ = [
    "CONFIRMED",
    "CONTRADICTED",
    "MEDIA_DEPENDENT",
    "UNVERIFIABLE",
    "ClaimCheck",
    "ClaimStatus",
    "ClaimsResult",
    "NotClaimed",
    "check_claims",
]

ClaimStatus = Literal["confirmed", "contradicted", "unverifiable"]
CONFIRMED: Final = "confirmed"
CONTRADICTED: Final = "contradicted"
UNVERIFIABLE: Final = "unverifiable"

LIMITS = (
    "Each claim is recomputed from the tables of this bundle; a confirmed claim is exactly "
    "as strong as the evidence under it (see the other sections' limits).",
    "Each statistic is computed exactly over the recorded doubles; its nearest double is "
    "rounded half to even, from its exact decimal expansion, at the claim's precision.",
)


@dataclass(frozen=True)
class ClaimCheck:
    """One claim and what replay made of it."""

    claim_id: str
    statistic: str
    params: Mapping[str, Any]
    attempt: str
    unit: str
    claimed: str
    decimals: int
    status: ClaimStatus
    recomputed: str | None  # rounded at ``decimals``
    exact: str | None  # the exact recomputed value (``≈`` when it does not terminate)
    derivation: str
    explanation: str | None  # contradicted: the likely cause; unverifiable: what is missing
    text: str | None


@dataclass(frozen=True)
class NotClaimed:
    """A statistic the author explicitly does not claim."""

    what: str
    note: str | None


@dataclass(frozen=True)
class ClaimsResult:
    """Every claim checked, and what was explicitly not claimed."""

    checks: tuple[ClaimCheck, ...]
    not_claimed: tuple[NotClaimed, ...]
    limits: tuple[str, ...] = LIMITS

    def count(self, status: str) -> int:
        """Claims with ``status``."""
        return sum(1 for c in self.checks if c.status == status)

    def by_id(self, claim_id: str) -> ClaimCheck:
        """The check of claim ``claim_id``."""
        return next(c for c in self.checks if c.claim_id == claim_id)


MEDIA_DEPENDENT = frozenset(
    {
        "comparisons_passed",
        "gate_checks_passed",
        "metric_min",
        "metric_max",
        "closest_to_gate",
        "smallest_margin",
    }
)
"""Statistics of recorded quality metrics: what re-scoring the raw media can contradict."""


class _MediaVerdict(Protocol):
    def integrity_failures(self) -> list[str]: ...
    def failures(self) -> list[str]: ...


def contradict_by_media(claims: ClaimsResult, media: _MediaVerdict) -> ClaimsResult:
    """Claims about recorded quality metrics, re-judged after the media were re-scored.

    A claim confirmed from the recorded values is contradicted when the re-scored
    media differ from their sealed digests or fail a gate or coverage check: the
    recorded numbers it restates are then not what the media give.
    """
    reasons = [*media.integrity_failures(), *media.failures()]
    if not reasons:
        return claims
    why = "the re-scored media contradict the recorded values: " + "; ".join(reasons[:3])
    if len(reasons) > 3:
        why += f"; and {len(reasons) - 3} more (media section)"
    checks = tuple(
        replace(c, status=CONTRADICTED, explanation=why)
        if c.statistic in MEDIA_DEPENDENT and c.status == CONFIRMED
        else c
        for c in claims.checks
    )
    return replace(claims, checks=checks)


# --- outcomes of recomputing one statistic -------------------------------------------


@dataclass(frozen=True)
class _Value:
    exact: Exact
    derivation: str


@dataclass(frozen=True)
class _Missing:
    reason: str


@dataclass(frozen=True)
class _Range:
    """An integer known only within [low, high] (verdicts that need an absent scorer)."""

    low: int
    high: int
    derivation: str
    reason: str


_Outcome = _Value | _Missing | _Range


@dataclass(frozen=True)
class _Ctx:
    inputs: ReplayInputs
    stats: AttemptStats
    latency: LatencyResult  # the attempt's, or an alternative when diagnosing

    @property
    def attempt(self) -> str:
        return self.stats.attempt


_Eval = Callable[[_Ctx, Mapping[str, Any], str], _Outcome]


# --- latency statistics --------------------------------------------------------------


def _arm(ctx: _Ctx, p: Mapping[str, Any]) -> ArmLatency | _Missing:
    a = ctx.latency.arm(str(p.get("arm")))
    if a is None or a.mean_s is None:
        return _Missing(
            f"arm {p.get('arm')!r} has no measured request with status ok in attempt "
            f"{ctx.attempt!r}"
        )
    return a


def _means_text(a: ArmLatency) -> str:
    return ", ".join(f"{s.server} {display(s.mean_s)} (n={s.n})" for s in a.servers)


def _server_mean(ctx: _Ctx, p: Mapping[str, Any], unit: str) -> _Outcome:
    server = str(p.get("server"))
    for s in ctx.latency.servers():
        if s.server == server and s.arm == p.get("arm"):
            return _Value(
                s.mean_s,
                f"mean of the {s.n} measured ok requests of server {server} "
                f"(arm {s.arm}) = {display(s.mean_s)} s",
            )
    return _Missing(
        f"server {server!r} of arm {p.get('arm')!r} has no measured ok request in attempt "
        f"{ctx.attempt!r}"
    )


def _arm_mean(ctx: _Ctx, p: Mapping[str, Any], unit: str) -> _Outcome:
    a = _arm(ctx, p)
    if isinstance(a, _Missing) or a.mean_s is None:
        return a if isinstance(a, _Missing) else _Missing("no samples")
    return _Value(
        a.mean_s,
        f"mean of the {len(a.servers)} server means [{_means_text(a)}] = {display(a.mean_s)} s",
    )


def _sd_server_means(ctx: _Ctx, p: Mapping[str, Any], unit: str) -> _Outcome:
    a = _arm(ctx, p)
    if isinstance(a, _Missing):
        return a
    if a.sd_server_means_s is None:
        return _Missing(f"a sample SD needs at least 2 server means; arm {a.arm} has 1")
    return _Value(
        a.sd_server_means_s,
        f"sample SD (n − 1) across the {len(a.servers)} server means [{_means_text(a)}] = "
        f"{display(a.sd_server_means_s)} s",
    )


def _sd_requests(ctx: _Ctx, p: Mapping[str, Any], unit: str) -> _Outcome:
    a = _arm(ctx, p)
    if isinstance(a, _Missing):
        return a
    if a.sd_requests_s is None:
        return _Missing(f"a sample SD needs at least 2 requests; arm {a.arm} has 1")
    return _Value(
        a.sd_requests_s,
        f"sample SD (n − 1) across the {a.n_requests} individual measured requests of arm "
        f"{a.arm} (not across server means) = {display(a.sd_requests_s)} s",
    )


def _cv(ctx: _Ctx, p: Mapping[str, Any], unit: str) -> _Outcome:
    a = _arm(ctx, p)
    if isinstance(a, _Missing):
        return a
    if a.cv_server_means is None:
        return _Missing(f"needs at least 2 server means and a non-zero mean for arm {a.arm}")
    v = Root(a.cv_server_means.square * 10_000) if unit == "%" else a.cv_server_means
    scale = " × 100" if unit == "%" else ""
    return _Value(
        v,
        f"SD across server means / arm mean{scale} = "
        f"{display(a.sd_server_means_s or Root(Fraction(0)))}"
        f" / {display(a.mean_s or Fraction(0))}{scale} = {display(v)}",
    )


def _pair_stat(which: str) -> _Eval:
    def ev(ctx: _Ctx, p: Mapping[str, Any], unit: str) -> _Outcome:
        b, c = str(p.get("baseline")), str(p.get("candidate"))
        pair = ctx.latency.pair(b, c)
        if pair is None:
            return _Missing(
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
                return _Missing(f"arm {b} has a zero mean")
            return _Value(
                pair.percent_lower,
                f"(1 − {display(cm.mean_s)} / {display(bm.mean_s)}) × 100 = "
                f"{display(pair.percent_lower)} %",
            )
        if pair.speedup is None:
            return _Missing(f"arm {c} has a zero mean")
        return _Value(
            pair.speedup,
            f"{display(bm.mean_s)} / {display(cm.mean_s)} = {display(pair.speedup)}×",
        )

    return ev


# --- counts ---------------------------------------------------------------------------


def _requests(ok: bool) -> _Eval:
    def ev(ctx: _Ctx, p: Mapping[str, Any], unit: str) -> _Outcome:
        r = ctx.stats.requests
        phases = ", ".join(f"{k} {v}" for k, v in sorted(r.by_phase.items()))
        n = r.ok if ok else r.total
        what = "with status ok" if ok else "all phases"
        return _Value(Fraction(n), f"receipts of attempt {ctx.attempt} ({phases}), {what}: {n}")

    return ev


def _requests_measured(ctx: _Ctx, p: Mapping[str, Any], unit: str) -> _Outcome:
    n = ctx.stats.requests.by_phase.get("measured", 0)
    return _Value(Fraction(n), f"receipts of attempt {ctx.attempt} in phase measured: {n}")


def _comparisons_total(ctx: _Ctx, p: Mapping[str, Any], unit: str) -> _Outcome:
    n = ctx.stats.quality.comparisons_total
    return _Value(Fraction(n), f"comparisons of attempt {ctx.attempt}: {n}")


def _comparisons_passed(ctx: _Ctx, p: Mapping[str, Any], unit: str) -> _Outcome:
    q = ctx.stats.quality
    text = (
        f"{q.comparisons_passed} of {q.comparisons_total} comparisons pass every gate whose "
        f"metric they record ({q.comparisons_failed} fail, {q.comparisons_unattested} unattested)"
    )
    if q.comparisons_unattested:
        return _Range(
            q.comparisons_passed,
            q.comparisons_passed_if_attested,
            text,
            f"{q.comparisons_unattested} comparison(s) rest on unattested LPIPS verdicts "
            "(no scorer identity in the bundle)",
        )
    return _Value(Fraction(q.comparisons_passed), text)


def _gate_checks_passed(ctx: _Ctx, p: Mapping[str, Any], unit: str) -> _Outcome:
    q = ctx.stats.quality
    passed = q.count("pass")
    text = f"{passed} of {len(q.checks)} (comparison, gate) checks pass"
    unatt = [c for c in q.checks if c.verdict == UNATTESTED]
    if unatt:
        return _Range(
            passed,
            passed + sum(c.passes_recorded for c in unatt),
            text,
            f"{len(unatt)} check(s) are unattested LPIPS verdicts (no scorer identity)",
        )
    return _Value(Fraction(passed), text)


def _exits(clean: bool) -> _Eval:
    def ev(ctx: _Ctx, p: Mapping[str, Any], unit: str) -> _Outcome:
        lc = ctx.stats.lifecycle
        if not clean:
            return _Value(Fraction(lc.total), f"worker exits of attempt {ctx.attempt}: {lc.total}")
        if lc.missing_budgets:
            return _Missing(f"the plan has no teardown budget for arm(s) {lc.missing_budgets}")
        budgets = "; ".join(f"{a.arm} TERM wait {a.term_wait_s:g} s" for a in lc.arms if a.total)
        return _Value(
            Fraction(lc.clean),
            f"{lc.clean} of {lc.total} exits with code 0, no signal, within budget ({budgets})",
        )

    return ev


# --- telemetry ------------------------------------------------------------------------


def _hbm_mean(ctx: _Ctx, p: Mapping[str, Any], unit: str) -> _Outcome:
    a = ctx.stats.telemetry.arm(str(p.get("arm")))
    if a is None or a.mean_peak_mb is None:
        return _Missing(f"no telemetry samples for arm {p.get('arm')!r} in attempt {ctx.attempt!r}")
    return _Value(
        a.mean_peak_mb,
        f"mean of {a.devices} sampled (server, device) peaks of arm {a.arm} = "
        f"{display(a.mean_peak_mb)} MB",
    )


def _hbm_change(ctx: _Ctx, p: Mapping[str, Any], unit: str) -> _Outcome:
    t = ctx.stats.telemetry
    b, c = str(p.get("baseline")), str(p.get("candidate"))
    pair = t.pair(b, c)
    bm, cm = t.arm(b), t.arm(c)
    if pair is None or pair.change_pct is None or bm is None or cm is None:
        return _Missing(f"no telemetry samples for arm {b!r} or {c!r} in attempt {ctx.attempt!r}")
    assert bm.mean_peak_mb is not None
    assert cm.mean_peak_mb is not None
    return _Value(
        pair.change_pct,
        f"({display(cm.mean_peak_mb)} / {display(bm.mean_peak_mb)} − 1) × 100 = "
        f"{display(pair.change_pct)} %",
    )


# --- quality metrics ------------------------------------------------------------------


def _metric(ctx: _Ctx, p: Mapping[str, Any]) -> MetricSummary | _Missing:
    m = ctx.stats.quality.metric(str(p.get("metric")))
    if m is None:
        return _Missing(
            f"metric {p.get('metric')!r} is not recorded by any comparison of attempt "
            f"{ctx.attempt!r}"
        )
    return m


def _scorer_note(ctx: _Ctx, m: MetricSummary) -> str:
    if m.needs_scorer and not ctx.stats.quality.scorer_attested:
        return " (recorded by a scorer whose identity the bundle does not record)"
    return ""


def _metric_extreme(which: str) -> _Eval:
    def ev(ctx: _Ctx, p: Mapping[str, Any], unit: str) -> _Outcome:
        m = _metric(ctx, p)
        if isinstance(m, _Missing):
            return m
        v = m.min_value if which == "min" else m.max_value
        word = "smallest" if which == "min" else "largest"
        return _Value(
            v,
            f"{word} of {m.recorded} recorded {m.metric} values = {display(v)}"
            f"{_scorer_note(ctx, m)}",
        )

    return ev


def _gate_closest(margin: bool) -> _Eval:
    def ev(ctx: _Ctx, p: Mapping[str, Any], unit: str) -> _Outcome:
        m = _metric(ctx, p)
        if isinstance(m, _Missing):
            return m
        c = m.closest
        if c is None:
            return _Missing(f"metric {m.metric!r} has no frozen gate to measure a margin to")
        g = next(s.gate for s in ctx.stats.quality.gates if s.gate.gate_id == c.gate_id)
        text = (
            f"comparison {c.comparison_id}: {m.metric} = {c.value!r}, "
            f"margin {display(c.margin)} to "
            f"gate {g.gate_id} ({g.op} {g.threshold!r}), the smallest of its checks"
            f"{_scorer_note(ctx, m)}"
        )
        return _Value(c.margin if margin else Fraction(repr(c.value)), text)

    return ev


_EVALUATORS: dict[str, _Eval] = {
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


def _serving(fn: ServingEval) -> _Eval:
    def ev(ctx: _Ctx, p: Mapping[str, Any], unit: str) -> _Outcome:
        out = fn(ctx.inputs.serving, p, unit)
        return _Missing(out) if isinstance(out, str) else _Value(out[0], out[1])

    return ev


_EVALUATORS.update({name: _serving(fn) for name, fn in SERVING_EVALUATORS.items()})
_LATENCY_STATS = frozenset(
    {
        "server_mean_s",
        "arm_mean_s",
        "arm_sd_server_means_s",
        "arm_sd_requests_s",
        "arm_cv_server_means",
        "percent_lower",
        "speedup",
    }
)
_SWAPPED = {
    "arm_sd_server_means_s": (
        "arm_sd_requests_s",
        "it is the SD across individual requests, not across server means",
    ),
    "arm_sd_requests_s": (
        "arm_sd_server_means_s",
        "it is the SD across server means, not across individual requests",
    ),
}


# --- diagnosing a contradiction ---------------------------------------------------------


def _rounding_hint(claimed: Decimal, exact: Exact, d: int) -> str | None:
    """Whether ``claimed`` is ``exact`` rounded up or down (not to the nearest) at ``d``."""
    unit = Fraction(1, 10**d)
    nearest = round_half_even(exact, d)
    c = Fraction(claimed)
    # nearest < exact < nearest + unit: the ceiling is nearest + unit (and the mirror case).
    if c == Fraction(nearest) + unit and _below(Fraction(nearest), exact):
        direction = "up"
    elif c == Fraction(nearest) - unit and _below(exact, Fraction(nearest)):
        direction = "down"
    else:
        return None
    return (
        f"rounded {direction}: {shortest(exact)} is {nearest} at {d} decimal(s) "
        f"(half to even), claimed {claimed}"
    )


def _below(a: Exact | Fraction, b: Exact | Fraction) -> bool:
    """a < b for exact values (rationals or roots of rationals)."""
    return _sort_key(a) < _sort_key(b)


def _sort_key(v: Exact) -> tuple[int, Fraction]:
    # Order by sign, then by signed square: exact for rationals and roots alike.
    sq = v.square if isinstance(v, Root) else v * v
    sign = (1 if sq else 0) if isinstance(v, Root) else (v > 0) - (v < 0)
    return (sign, sq * sign)


def _alternatives(ctx: _Ctx) -> Iterator[tuple[str, _Ctx]]:
    """Latency computed the wrong ways a published figure is often computed."""
    inputs = ctx.inputs
    r = inputs.receipts
    att = r.attempt.mask(ctx.attempt)
    meas, warm = r.phase.mask("measured"), r.phase.mask("warmup")
    yield (
        "warmups counted as measured requests",
        replace(ctx, latency=compute_latency(inputs, ctx.attempt, att & (meas | warm) & r.ok)),
    )
    for other in r.attempt.values:
        if other == ctx.attempt:
            continue
        mixed = (att | r.attempt.mask(other)) & meas & r.ok
        yield (
            f"the measured rows of attempt {other!r} mixed into attempt {ctx.attempt!r}",
            replace(ctx, latency=compute_latency(inputs, ctx.attempt, mixed)),
        )
    yield (
        "failed measured requests included",
        replace(ctx, latency=compute_latency(inputs, ctx.attempt, att & meas)),
    )


def _matches(out: _Outcome, claimed: Decimal, d: int) -> bool:
    return isinstance(out, _Value) and round_half_even(out.exact, d) == claimed


# --- checking one claim -----------------------------------------------------------------


@dataclass(frozen=True)
class _Claim:
    """A claim row, parsed."""

    claim_id: str
    statistic: str
    params: dict[str, Any]
    attempt: str
    unit: str
    value: str
    decimals: int
    text: str | None

    @property
    def claimed(self) -> Decimal | None:
        try:
            d = Decimal(self.value)
        except InvalidOperation:
            return None
        return d if d.is_finite() else None

    @classmethod
    def parse(cls, row: Mapping[str, Any], accepted: str) -> _Claim:
        params: dict[str, Any] = json.loads(row["params"]) if row.get("params") else {}
        value = str(row["value"])
        decimals = row.get("decimals")
        if decimals is None:
            decimals = len(value.split(".", 1)[1]) if "." in value else 0
        return cls(
            claim_id=str(row["claim_id"]),
            statistic=str(row["statistic"]),
            params=params,
            attempt=str(params.get("attempt", accepted)),
            unit=str(row["unit"]),
            value=value,
            decimals=int(decimals),
            text=row.get("text"),
        )

    def result(
        self,
        status: ClaimStatus,
        explanation: str | None,
        derivation: str = "",
        recomputed: str | None = None,
        exact: str | None = None,
    ) -> ClaimCheck:
        return ClaimCheck(
            claim_id=self.claim_id,
            statistic=self.statistic,
            params=self.params,
            attempt=self.attempt,
            unit=self.unit,
            claimed=self.value,
            decimals=self.decimals,
            status=status,
            recomputed=recomputed,
            exact=exact,
            derivation=derivation,
            explanation=explanation,
            text=self.text,
        )


def _unclean_exit(u: Any) -> str:
    code = "no exit code" if u.exit_code is None else f"exit code {u.exit_code}"
    signal = f", signal {u.signal}" if u.signal else ""
    return (
        f"worker {u.worker} on server {u.server} (arm {u.arm}) is not clean: {code}{signal}, "
        f"exited after {u.exit_s:g} s ({'; '.join(u.reasons)})"
    )


def _explain(ctx: _Ctx, ev: _Eval, claim: _Claim, claimed: Decimal, exact: Exact) -> str:
    d, params, unit = claim.decimals, claim.params, claim.unit
    hints = []
    rounding = _rounding_hint(claimed, exact, d)
    if rounding:
        hints.append(rounding)
    if claim.statistic in _SWAPPED:
        other, why = _SWAPPED[claim.statistic]
        if _matches(_EVALUATORS[other](ctx, params, unit), claimed, d):
            hints.append(f"the claimed value matches {other}: {why}")
    if claim.statistic == "arm_mean_s":
        a = ctx.latency.arm(str(params.get("arm")))
        if (
            a is not None
            and a.pooled_mean_s is not None
            and _matches(_Value(a.pooled_mean_s, ""), claimed, d)
        ):
            hints.append("the claimed value is the mean of pooled requests, not of server means")
    if claim.statistic == "worker_exits_clean":
        hints += [_unclean_exit(u) for u in ctx.stats.lifecycle.unclean[:5]]
    if claim.statistic in _LATENCY_STATS and not hints:
        for label, alt in _alternatives(ctx):
            if _matches(ev(alt, params, unit), claimed, d):
                hints.append(f"the claimed value is what you get with {label}")
                break
    return "; ".join(hints) if hints else "the claimed value does not follow from the tables"


def _verdict(ctx: _Ctx, ev: _Eval, claim: _Claim, claimed: Decimal) -> ClaimCheck:
    out = ev(ctx, claim.params, claim.unit)
    if isinstance(out, _Missing):
        return claim.result(UNVERIFIABLE, out.reason)
    if isinstance(out, _Range):
        lo, hi = out.low, out.high
        span = f"{lo}–{hi}" if lo != hi else str(lo)
        if lo <= claimed <= hi:
            why = f"{out.reason}: the true count is between {lo} and {hi}"
            return claim.result(UNVERIFIABLE, why, out.derivation)
        why = f"even counting every unattested verdict as recorded, the count is {span}"
        return claim.result(CONTRADICTED, why, out.derivation, span, span)
    rounded = round_half_even(out.exact, claim.decimals)
    exact = shortest(out.exact)
    if rounded == claimed:
        return claim.result(CONFIRMED, None, out.derivation, str(rounded), exact)
    why = _explain(ctx, ev, claim, claimed, out.exact)
    return claim.result(CONTRADICTED, why, out.derivation, str(rounded), exact)


def _check(ctx_for: Callable[[str], _Ctx | None], claim: _Claim) -> ClaimCheck:
    ctx = ctx_for(claim.attempt)
    ev = _EVALUATORS.get(claim.statistic)
    claimed = claim.claimed
    if ctx is None:
        return claim.result(UNVERIFIABLE, f"attempt {claim.attempt!r} is not in the attempts table")
    if ev is None or claim.statistic not in STATISTICS:
        return claim.result(
            UNVERIFIABLE, f"{claim.statistic!r} is not in this replayer's vocabulary"
        )
    if claimed is None:
        return claim.result(UNVERIFIABLE, f"{claim.value!r} is not a decimal number")
    return _verdict(ctx, ev, claim, claimed)


def check_claims(inputs: ReplayInputs, cache: StatsCache, accepted: str) -> ClaimsResult:
    """Recompute every claim of the bundle and list what is explicitly not claimed."""

    def ctx_for(attempt: str) -> _Ctx | None:
        if attempt not in cache.attempt_ids:
            return None
        stats = cache.get(attempt)
        return _Ctx(inputs, stats, stats.latency)

    cols = ["claim_id", "statistic", "params", "value", "unit", "decimals", "text"]
    checks = tuple(
        _check(ctx_for, _Claim.parse(row, accepted)) for row in inputs.rows("claims", cols)
    )
    nc = tuple(
        NotClaimed(str(r["what"]), r["note"]) for r in inputs.rows("not_claimed", ["what", "note"])
    )
    return ClaimsResult(checks, nc)
