"""A rerun bundle side by side with the sealed bundle it reran, on the replay engine.

Both bundles arrive verified (:class:`bundler.verified.VerifiedBundle`) and
decoded once by :mod:`replay.api` (:class:`SideInputs`: the
:class:`~replay.inputs.ReplayInputs` and the engine's
:class:`~replay.sections.stats.StatsCache` of each); nothing here reads a member
or a table of its own. Every statistic on either side comes from the replay
engine itself, exactly as
``bundle replay`` derives it for that bundle: the accepted attempt
(:func:`replay.sections.attempts.accepted_attempt`), then
:class:`replay.sections.stats.StatsCache` for its latency (server and arm means, the
speedup and percent lower of each baseline/candidate pair, exact), lifecycle
(clean exits by the claims-vocabulary rule, budgets from each bundle's frozen
plan) and telemetry (mean sampled peak HBM per arm). Nothing here computes a
mean, a clean exit or a peak of its own; what this module adds is the
comparison: ratios rerun / sealed, the reproduction rule, and the side-by-side
counts of request outcomes and output hashes that replay does not read.

**Reproduced** (default tolerance 10 %): the rerun's speedup is on the same
side of 1 as the sealed one and within ``tolerance`` of it, relatively:
``|speedup_rerun / speedup_sealed - 1| <= tolerance``, decided exactly on the
engine's fractions with the tolerance taken as the decimal written (0.10 is
1/10). Arm means themselves are not required to match (another machine,
another day); the effect is.

The verdict's reasons are :meth:`RerunComparison.failures` (an effect that did
not reproduce: exit 4) and :meth:`RerunComparison.gaps` (what could not be
judged: exit 5); :attr:`RerunComparison.limits` says what the comparison
proves and cannot. ``bundle replay RERUN.bundle --against X.bundle`` folds
them into the one replay verdict (:func:`replay.api.replay`);
:func:`format_comparison` gives the section's text lines.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from bundler.errors import CouldNotRunError, Problem, UsageError
from bundler.verified import VerifiedBundle
from replay.engine.arrow import equals, filter_table, rows
from replay.engine.exact import to_double
from replay.inputs import ReplayInputs
from replay.sections.against_result import Effect, RerunComparison, Side, double_or_none
from replay.sections.against_text import format_comparison
from replay.sections.attempts import accepted_attempt
from replay.sections.stats import StatsCache

__all__ = [
    "DEFAULT_TOLERANCE",
    "Effect",
    "RerunComparison",
    "Side",
    "SideInputs",
    "check_rerun_pair",
    "compare",
    "format_comparison",
]

# The result types and the text live in their own modules (against_result,
# against_text); their public names stay importable from here.

DEFAULT_TOLERANCE = 0.10


@dataclass(frozen=True)
class SideInputs:
    """One bundle as :mod:`replay.api` decoded it: ``inputs`` with the receipts' outcome
    columns (``ReplayInputs.from_bundle(b, outcomes=True)``), the engine's cache over them."""

    inputs: ReplayInputs
    stats: StatsCache
    trusted: bool


def _receipt_outcomes(inputs: ReplayInputs, attempt: str) -> list[dict[str, Any]]:
    """The accepted attempt's request outcomes and output hashes (replay reads neither)."""
    if (table := inputs.outcomes) is None:
        raise ValueError("compare needs ReplayInputs.from_bundle(..., outcomes=True)")
    if table.num_columns == 0:  # the bundle has no receipts table
        return []
    table = filter_table(table, equals(table, "attempt_id", attempt))
    return rows(table, table.column_names)


def _side(label: str, given: SideInputs) -> Side:
    inputs = given.inputs
    campaign = inputs.campaign
    of = campaign.get("rerun_of")
    side = Side(
        label=label,
        campaign_id=str(campaign.get("id", "?")),
        trusted=given.trusted,
        attempt=None,
        stats=None,
        problem=None,
        plan_name=inputs.plan_path,
        plan_bytes=inputs.plan_bytes,
        rerun_of=of if isinstance(of, Mapping) else None,
    )
    try:
        attempt = accepted_attempt(inputs)
    except CouldNotRunError as exc:
        return dataclasses.replace(side, problem=str(exc))
    receipts = _receipt_outcomes(inputs, attempt)
    return dataclasses.replace(
        side,
        attempt=attempt,
        stats=given.stats.get(attempt),
        statuses=_counts([r.get("status") for r in receipts]),
        timeout_levels=_counts([r.get("timeout_level") for r in receipts]),
        other_attempts={
            str(a["attempt_id"]): str(a["status"])
            for a in inputs.rows("attempts", ["attempt_id", "status"])
            if a["attempt_id"] != attempt
        },
        outputs={
            (str(r["server"]), int(r["seq"])): str(r["output_sha256"])
            for r in receipts
            if r.get("output_sha256")
        },
    )


def _counts(values: Sequence[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        if v:
            out[str(v)] = out.get(str(v), 0) + 1
    return out


def _ratio(a: Fraction | None, b: Fraction | None) -> Fraction | None:
    return None if a is None or b is None or b == 0 else a / b


def _mean(side: Side, arm: str) -> Fraction | None:
    a = side.arm(arm)
    return None if a is None else a.mean_s


def _unjudged(side: Side, base: str, cand: str) -> str | None:
    """Why ``side`` has no speedup for the pair, or None when it has one."""
    if side.stats is None:
        return f"the {side.label} bundle has no single accepted attempt"
    for arm in (base, cand):
        a = side.arm(arm)
        if a is None:
            return f"{arm} is not an arm of the {side.label} campaign"
        if a.mean_s is None:
            return f"arm {arm} has no measured request with status ok in the {side.label} bundle"
    pair = side.pair(base, cand)
    if pair is None or pair.speedup is None:
        return f"the {side.label} candidate mean is 0: no speedup"
    return None


def _effect(base: str, cand: str, sealed: Side, rerun: Side, tol: Fraction) -> Effect:
    sp, rp = sealed.pair(base, cand), rerun.pair(base, cand)
    s_speed = None if sp is None else sp.speedup
    r_speed = None if rp is None else rp.speedup
    ratio = _ratio(r_speed, s_speed)
    pct = tol * 100
    why: str | None
    if s_speed is None or r_speed is None or ratio is None:
        unjudged = (
            _unjudged(sealed, base, cand)
            or _unjudged(rerun, base, cand)
            or "the sealed speedup is 0"
        )
        reproduced, verdict = None, f"not judged: {unjudged}"
        why = f"the effect {base} → {cand} could not be judged: {unjudged}"
    else:
        same_side = (s_speed > 1) == (r_speed > 1)
        reproduced = same_side and abs(ratio - 1) <= tol
        numbers = (
            f"rerun speedup {to_double(r_speed):.3f}× vs sealed {to_double(s_speed):.3f}× "
            f"({to_double((ratio - 1) * 100):+.2f} %, tolerance {to_double(pct):g} %"
            + ("" if same_side else "; the effect vanished or changed direction")
            + ")"
        )
        verdict = f"{'reproduced' if reproduced else 'not reproduced'}: {numbers}"
        why = None if reproduced else f"the effect {base} → {cand} did not reproduce: {numbers}"
    return Effect(
        baseline=base,
        candidate=cand,
        sealed_baseline_s=double_or_none(_mean(sealed, base)),
        sealed_candidate_s=double_or_none(_mean(sealed, cand)),
        rerun_baseline_s=double_or_none(_mean(rerun, base)),
        rerun_candidate_s=double_or_none(_mean(rerun, cand)),
        sealed_speedup=double_or_none(s_speed),
        rerun_speedup=double_or_none(r_speed),
        sealed_percent_lower=double_or_none(None if sp is None else sp.percent_lower),
        rerun_percent_lower=double_or_none(None if rp is None else rp.percent_lower),
        baseline_ratio=double_or_none(_ratio(_mean(rerun, base), _mean(sealed, base))),
        candidate_ratio=double_or_none(_ratio(_mean(rerun, cand), _mean(sealed, cand))),
        speedup_ratio=double_or_none(ratio),
        reproduced=reproduced,
        verdict=verdict,
        why=why,
    )


def _pairs(side: Side) -> list[tuple[str, str]]:
    """Every (baseline, candidate) pair of arms of the sealed campaign, in campaign order."""
    if side.stats is None:
        return []
    arms = side.stats.latency.arms
    return [
        (b.arm, c.arm) for b in arms if b.role == "baseline" for c in arms if c.role == "candidate"
    ]


def _limits(sealed: Side) -> tuple[str, ...]:
    out = [
        "Only the effect is judged: each bundle's speedup is derived by the replay engine "
        "(mean of server means over the accepted attempt's measured ok requests), and the "
        "rerun's must be on the same side of 1 as the sealed one and within the tolerance. "
        "Arm means, worker exits, peak HBM and output hashes are shown side by side, not "
        "judged: another machine on another day shifts them.",
        "The rerun's numbers were measured by bundle rerun on the rerun host; the sealed ones "
        "are the author's receipts. Agreement supports the effect, not the absolute latencies.",
        "Outputs are matched by server and seq; the same SHA-256 is expected only with fixed "
        "seeds and a deterministic runtime. Media quality of the rerun's outputs is judged by "
        "media replay of the rerun bundle (--media), not here.",
    ]
    # The rerun bundle is the one replayed: its own trust is stated by the replay result
    # (and in ``rerun.trusted`` of the JSON form); the sealed one's only here.
    if not sealed.trusted:
        out.append(
            "The sealed bundle compared with was accepted unsigned or untrusted: its tables "
            "are intact as sealed, but anyone could have sealed them."
        )
    return tuple(out)


def _file_sha256(bundle: VerifiedBundle) -> str:
    """SHA-256 of the bundle file's bytes, streamed (as ``bundle rerun`` records it)."""
    h = hashlib.sha256()
    with bundle.path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def check_rerun_pair(rerun: VerifiedBundle, sealed: VerifiedBundle) -> None:
    """Refuse a pair that is not a rerun and the sealed bundle it reran.

    ``bundle replay --against`` and ``bundle report --against`` both come here (through
    :func:`replay.api.replay`): only then may a result say that the plan was re-run on
    hardware. The rerun's ``campaign.json`` must say ``"kind": "rerun"`` and name the
    sealed bundle's file SHA-256 in ``rerun_of.bundle_sha256``, exactly as
    ``bundle rerun`` writes them (``rerun/writer.py``), and the two must be two
    bundles (neither the same path nor the same bytes).

    Raises:
        UsageError: the pair is not a rerun of the sealed bundle; one Problem naming the
            rerun bundle (or the sealed one) and the field.
    """
    where = f"{rerun.path}: campaign.json"
    doc = rerun.document("campaign.json") or {}
    of = doc.get("rerun_of")
    want = _file_sha256(sealed)
    got = of.get("bundle_sha256") if isinstance(of, Mapping) else None
    problem: Problem | None = None
    if rerun.path.resolve() == sealed.path.resolve() or _file_sha256(rerun) == want:
        problem = Problem(
            str(sealed.path), None, None, f"is the same bundle as {rerun.path}: not a rerun of it"
        )
    elif doc.get("kind") != "rerun":
        problem = Problem(
            where, None, "kind", f"is {doc.get('kind')!r}, not 'rerun': not a rerun bundle"
        )
    elif not isinstance(of, Mapping) or not isinstance(got, str):
        problem = Problem(
            where, None, "rerun_of.bundle_sha256", "absent: the rerun names no sealed bundle"
        )
    elif got.lower() != want:
        problem = Problem(
            where,
            None,
            "rerun_of.bundle_sha256",
            f"names {got!r}, but {sealed.path} has SHA-256 {want}: a rerun of another bundle",
        )
    if problem is not None:
        raise UsageError(
            f"--against: {rerun.path} is not a rerun of {sealed.path}; nothing compared",
            [problem],
        )


def compare(
    rerun: SideInputs, sealed: SideInputs, *, tolerance: float = DEFAULT_TOLERANCE
) -> RerunComparison:
    """Compare a rerun bundle with the sealed bundle it reran, both already decoded.

    Args:
        rerun: the sealed rerun (campaign kind ``rerun``), verified and decoded.
        sealed: the original sealed campaign, verified and decoded.
        tolerance: relative tolerance on the speedup (0.10 = 10 %), taken as the
            decimal written (``repr``), so 0.10 is exactly 1/10.

    Raises:
        ValueError: ``tolerance`` is negative or not finite.
        ValueError: an input was decoded without its receipts' outcome columns.
    """
    if not math.isfinite(tolerance) or tolerance < 0:
        raise ValueError("tolerance must be a finite number >= 0")
    tol = Fraction(repr(float(tolerance)))
    s_side, r_side = _side("sealed", sealed), _side("rerun", rerun)
    effects = tuple(_effect(b, c, s_side, r_side, tol) for b, c in _pairs(s_side))
    compared = matching = 0
    for key, digest in r_side.outputs.items():
        want = s_side.outputs.get(key)
        if want:
            compared += 1
            matching += int(want == digest)
    plan_matches = (
        s_side.plan_name is not None
        and s_side.plan_name == r_side.plan_name
        and s_side.plan_bytes == r_side.plan_bytes
    )
    return RerunComparison(
        sealed=s_side,
        rerun=r_side,
        effects=effects,
        tolerance=tolerance,
        plan_matches=plan_matches,
        outputs_compared=compared,
        outputs_matching=matching,
        limits=_limits(s_side),
    )
