"""The per-comparison pipeline of media re-scoring: verify, decode, cover, measure, judge.

Every executor (:mod:`replay.media.executors`) runs exactly this code for each
comparison, in this process's threads or in a Ray task; :mod:`replay.media.rescore`
only orchestrates. A :class:`Context` is what the comparisons of one re-score share.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replay.engine.verdicts import FileStatus
from replay.media.bundle_read import ComparisonRow
from replay.media.coverage import FAIL, PASS, CoverageCheck, CoverageParams, check_coverage
from replay.media.definitions import DEFAULT_DEFINITION, DEFINITIONS, canonical
from replay.media.identity import OK, IdentityError, Location, read_verified
from replay.media.judge import Attestation, gate_results, metric_checks
from replay.media.lpips_net import AttestedLpips
from replay.media.probe import MediaDecodeError, MediaUnsupportedError
from replay.media.result import NOT_COMPUTED, ArmMedia, ComparisonReplay, Role
from replay.media.scoring import Computed, PairScores, score_pair
from replay.sections.gates import Gate

__all__ = ["Context", "no_progress", "rescore_comparison", "unscored_comparison"]


def no_progress(stage: str, cid: str | None = None, **kw: Any) -> None:
    """Progress nowhere (a Ray task: the driver reports each comparison as it lands)."""


@dataclass(frozen=True)
class Context:
    """What every comparison of one bundle shares."""

    gates: Sequence[Gate]
    locs: Mapping[str, Location]
    params: CoverageParams
    scorer: AttestedLpips | None
    attestation: Attestation
    threads: int
    """FFmpeg decoder threads per file."""
    emit: Callable[..., None] = no_progress


def _arm(role: Role, request_id: str, sha: str | None, ctx: Context) -> ArmMedia:
    return ArmMedia(role, request_id, sha, ctx.locs.get(sha) if sha else None)


def _read_arm(arm: ArmMedia, rep: ComparisonReplay) -> bytes | None:
    """The arm's verified bytes, or None with the reason in ``rep.problems``."""
    if arm.sha256 is None:
        rep.problems.append(f"{arm.role}: no media digest recorded for {arm.request_id}")
        return None
    loc = arm.location
    if loc is None or loc.status != OK or loc.path is None:
        st = loc.status if loc else FileStatus.ABSENT
        rep.problems.append(
            f"{arm.role} media {st} (request {arm.request_id})"
            + (f": {loc.detail}" if loc and loc.detail else "")
        )
        return None
    try:
        return read_verified(Path(loc.path), arm.sha256)
    except (OSError, IdentityError) as exc:
        rep.problems.append(f"{arm.role} media (request {arm.request_id}): {exc}")
        return None


def _coverage(rep: ComparisonReplay, ctx: Context) -> None:
    """Each decoded arm against the plan, and both arms' frame counts against each other."""
    for arm in rep.arms:
        if arm.probe is not None:
            rep.coverage.extend(check_coverage(arm.probe, ctx.params, arm.role))
    pa, pb = rep.baseline.probe, rep.candidate.probe
    fa = pa.video.frames if pa is not None and pa.video else None
    fb = pb.video.frames if pb is not None and pb.video else None
    if fa is not None and fb is not None:
        rep.coverage.append(
            CoverageCheck(
                "video/frames-equal",
                "both",
                PASS if fa == fb else FAIL,
                f"{fa} vs {fb}",
                "baseline frames == candidate frames",
                "metrics cover the frames both arms have; a mismatch is judged here",
            )
        )


def _record_decode(rep: ComparisonReplay, ps: PairScores) -> None:
    """Each arm's probe, or why it does not decode (corrupt: failed; unsupported: a gap)."""
    for arm, decoded in ((rep.baseline, ps.baseline), (rep.candidate, ps.candidate)):
        err = ps.errors.get(arm.role)
        if decoded is not None:
            arm.probe, arm.decode = decoded.probe, "ok"
        elif isinstance(err, MediaUnsupportedError):
            arm.decode, arm.decode_error = "unsupported", str(err)
            rep.problems.append(f"{arm.label} cannot be scored: {err}")
        elif err is not None:
            arm.decode, arm.decode_error = "does-not-decode", str(err)


def _score(rep: ComparisonReplay, cmp: ComparisonRow, ctx: Context) -> Computed:
    """Decode and score the pair when both files verified; else say why nothing was."""
    comp = Computed()
    data_a = _read_arm(rep.baseline, rep)
    data_b = _read_arm(rep.candidate, rep)
    if data_a is not None and data_b is not None:
        defs = {c for g in ctx.gates if (c := canonical(g.definition))}
        defs |= {DEFAULT_DEFINITION[m] for m in cmp.metrics if m in DEFAULT_DEFINITION}

        def on_frame(n: int) -> None:
            ctx.emit("frame", cmp.comparison_id, frames_done=n, frames_total=ctx.params.num_frames)

        try:
            ps = score_pair(
                data_a,
                data_b,
                definitions=defs,
                scorer=ctx.scorer,
                threads=ctx.threads,
                on_frame=on_frame,
            )
        except (MediaDecodeError, ValueError) as exc:
            rep.problems.append(f"cannot be scored: {exc}")
        else:
            comp = Computed(ps.values, ps.why)
            rep.frames_compared = ps.frames_compared
            rep.per_frame = ps.per_frame
            rep.problems.extend(ps.problems)
            _record_decode(rep, ps)
            _coverage(rep, ctx)
    for d in DEFINITIONS:
        if d not in comp.values and d not in comp.why:
            comp.why[d] = (
                "media not available" if data_a is None or data_b is None else NOT_COMPUTED
            )
    return comp


def rescore_comparison(cmp: ComparisonRow, ctx: Context) -> ComparisonReplay:
    """Re-score one comparison: verify, decode, cover, measure and judge it."""
    t0 = time.perf_counter()
    rep = ComparisonReplay(
        cmp.comparison_id,
        cmp.attempt_id,
        _arm("baseline", cmp.baseline_request_id, cmp.baseline_sha256, ctx),
        _arm("candidate", cmp.candidate_request_id, cmp.candidate_sha256, ctx),
    )
    ctx.emit("comparison-start", cmp.comparison_id, frames_total=ctx.params.num_frames)
    comp = _score(rep, cmp, ctx)
    rep.gates = gate_results(cmp, ctx.gates, comp, ctx.attestation)
    rep.metrics = metric_checks(cmp, ctx.gates, comp, ctx.attestation, rep.gates)
    rep.seconds = time.perf_counter() - t0
    ctx.emit("comparison-done", cmp.comparison_id)
    return rep


def unscored_comparison(cmp: ComparisonRow, ctx: Context, reason: str) -> ComparisonReplay:
    """A comparison that could not be scored at all (its task died every time): every
    metric not computed, with ``reason`` - reported INCOMPLETE, never dropped."""
    rep = ComparisonReplay(
        cmp.comparison_id,
        cmp.attempt_id,
        _arm("baseline", cmp.baseline_request_id, cmp.baseline_sha256, ctx),
        _arm("candidate", cmp.candidate_request_id, cmp.candidate_sha256, ctx),
    )
    rep.problems.append(reason)
    comp = Computed(why=dict.fromkeys(DEFINITIONS, reason))
    rep.gates = gate_results(cmp, ctx.gates, comp, ctx.attestation)
    rep.metrics = metric_checks(cmp, ctx.gates, comp, ctx.attestation, rep.gates)
    return rep
