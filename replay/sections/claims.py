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
from typing import Any, Final, Protocol

from bundler.format.vocabulary import STATISTICS
from replay.engine.exact import Exact, Root, round_half_even, shortest
from replay.engine.verdicts import ClaimStatus
from replay.inputs import ReplayInputs
from replay.sections.claim_stats import (
    EVALUATORS,
    Evaluator,
    Missing,
    Range,
    Recomputed,
    StatContext,
    Value,
)
from replay.sections.latency import compute_latency
from replay.sections.stats import StatsCache

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

# The names the views import; the words are :class:`ClaimStatus`'s.
CONFIRMED: Final = ClaimStatus.CONFIRMED
CONTRADICTED: Final = ClaimStatus.CONTRADICTED
UNVERIFIABLE: Final = ClaimStatus.UNVERIFIABLE

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


def _alternatives(ctx: StatContext) -> Iterator[tuple[str, StatContext]]:
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


def _matches(out: Recomputed, claimed: Decimal, d: int) -> bool:
    return isinstance(out, Value) and round_half_even(out.exact, d) == claimed


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


def _explain(ctx: StatContext, ev: Evaluator, claim: _Claim, claimed: Decimal, exact: Exact) -> str:
    d, params, unit = claim.decimals, claim.params, claim.unit
    hints = []
    rounding = _rounding_hint(claimed, exact, d)
    if rounding:
        hints.append(rounding)
    if claim.statistic in _SWAPPED:
        other, why = _SWAPPED[claim.statistic]
        if _matches(EVALUATORS[other](ctx, params, unit), claimed, d):
            hints.append(f"the claimed value matches {other}: {why}")
    if claim.statistic == "arm_mean_s":
        a = ctx.latency.arm(str(params.get("arm")))
        if (
            a is not None
            and a.pooled_mean_s is not None
            and _matches(Value(a.pooled_mean_s, ""), claimed, d)
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


def _verdict(ctx: StatContext, ev: Evaluator, claim: _Claim, claimed: Decimal) -> ClaimCheck:
    out = ev(ctx, claim.params, claim.unit)
    if isinstance(out, Missing):
        return claim.result(UNVERIFIABLE, out.reason)
    if isinstance(out, Range):
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


def _check(ctx_for: Callable[[str], StatContext | None], claim: _Claim) -> ClaimCheck:
    ctx = ctx_for(claim.attempt)
    ev = EVALUATORS.get(claim.statistic)
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

    def ctx_for(attempt: str) -> StatContext | None:
        if attempt not in cache.attempt_ids:
            return None
        stats = cache.get(attempt)
        return StatContext(inputs, stats, stats.latency)

    cols = ["claim_id", "statistic", "params", "value", "unit", "decimals", "text"]
    checks = tuple(
        _check(ctx_for, _Claim.parse(row, accepted)) for row in inputs.rows("claims", cols)
    )
    nc = tuple(
        NotClaimed(str(r["what"]), r["note"]) for r in inputs.rows("not_claimed", ["what", "note"])
    )
    return ClaimsResult(checks, nc)
