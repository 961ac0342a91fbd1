"""Re-score a bundle's quality comparisons from raw media instead of trusting recorded metrics.

For each ``comparisons`` row: find both media files by SHA-256 (the bundle's
``artifacts`` table; names may differ), verify them, decode each once, check
coverage on each arm against the frozen plan, re-derive every metric by its
frozen definition, compare with the recorded values, and re-evaluate every
gate on the re-derived values with the one gate evaluator (:mod:`replay.sections.gates`).
LPIPS runs only from attested weights; when they are missing or mismatch, the
gates that need an attested model are ``unattested`` and the rest runs.

This module orchestrates; the parts are :mod:`~replay.media.bundle_read`
(reading the bundle), :mod:`~replay.media.scoring` (one pair),
:mod:`~replay.media.judge` (metrics and gates), :mod:`~replay.media.result`
(result types, verdict) and :mod:`~replay.media.format` (text).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bundler.verified import VerifiedBundle
from replay.media.bundle_read import BundleContent, ComparisonRow, read_bundle
from replay.media.coverage import (
    FAIL,
    PASS,
    CoverageCheck,
    CoverageParams,
    check_coverage,
    coverage_params,
)
from replay.media.definitions import DEFAULT_DEFINITION, DEFINITIONS, canonical
from replay.media.execution import LOCAL, RAY, Execution
from replay.media.identity import OK, IdentityError, Location, locate, read_verified
from replay.media.judge import (
    Attestation,
    disagreements,
    gate_problems,
    gate_results,
    metric_checks,
    summaries,
)
from replay.media.lpips_attested import (
    LPIPS_DEFINITION,
    AttestedLpips,
    DeviceError,
    ScorerIdentity,
    check_device,
    load_attested_lpips,
)
from replay.media.probe import MediaDecodeError, MediaUnsupportedError
from replay.media.result import (
    NOT_COMPUTED,
    ArmMedia,
    ComparisonReplay,
    MediaProgress,
    MediaReplayResult,
    Role,
)
from replay.media.scoring import Computed, PairScores, score_pair
from replay.media.threads import plan_threads
from replay.sections.gates import Gate

__all__ = ["needs_scorer", "rescore_bundle", "rescore_comparison", "unscored_comparison"]


class _Progress:
    """Serializes progress callbacks from worker threads and counts comparisons."""

    def __init__(self, cb: Callable[[MediaProgress], None] | None, total: int) -> None:
        self._cb = cb
        self._lock = threading.Lock()
        self.total = total
        self.done = 0

    def emit(self, stage: str, cid: str | None = None, **kw: Any) -> None:
        if stage == "comparison-done":
            with self._lock:
                self.done += 1
        if self._cb is None:
            return
        with self._lock:
            self._cb(MediaProgress(stage, self.done, self.total, cid, **kw))


def _no_progress(stage: str, cid: str | None = None, **kw: Any) -> None:
    """Progress nowhere (a Ray task: the driver reports each comparison as it lands)."""


@dataclass(frozen=True)
class _Context:
    """What every comparison of one bundle shares."""

    gates: Sequence[Gate]
    locs: Mapping[str, Location]
    params: CoverageParams
    scorer: AttestedLpips | None
    attestation: Attestation
    threads: int
    """FFmpeg decoder threads per file."""
    emit: Callable[..., None] = _no_progress


def _arm(role: Role, request_id: str, sha: str | None, ctx: _Context) -> ArmMedia:
    return ArmMedia(role, request_id, sha, ctx.locs.get(sha) if sha else None)


def _read_arm(arm: ArmMedia, rep: ComparisonReplay) -> bytes | None:
    """The arm's verified bytes, or None with the reason in ``rep.problems``."""
    if arm.sha256 is None:
        rep.problems.append(f"{arm.role}: no media digest recorded for {arm.request_id}")
        return None
    loc = arm.location
    if loc is None or loc.status != OK or loc.path is None:
        st = loc.status if loc else "absent"
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


def _coverage(rep: ComparisonReplay, ctx: _Context) -> None:
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


def _score(rep: ComparisonReplay, cmp: ComparisonRow, ctx: _Context) -> Computed:
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


def rescore_comparison(cmp: ComparisonRow, ctx: _Context) -> ComparisonReplay:
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


def unscored_comparison(cmp: ComparisonRow, ctx: _Context, reason: str) -> ComparisonReplay:
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


def _rescore_all(cmps: Sequence[ComparisonRow], ctx: _Context, jobs: int) -> list[ComparisonReplay]:
    """Every comparison, ``jobs`` at a time (threads), in the bundle's order."""

    def one(c: ComparisonRow) -> ComparisonReplay:
        return rescore_comparison(c, ctx)

    if jobs <= 1:
        return [one(c) for c in cmps]
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="media-replay") as pool:
        return list(pool.map(one, cmps))


def needs_scorer(content: BundleContent, cmps: Sequence[ComparisonRow]) -> bool:
    """Some gate needs an attested model, or a record holds LPIPS.

    The requirement comes from the metric table (:mod:`replay.sections.gates`); no gate
    needing one and no recorded LPIPS: no identity is looked at.
    """
    return any(g.needs_scorer for g in content.gates) or any("lpips" in c.metrics for c in cmps)


def _scorer(
    content: BundleContent,
    cmps: Sequence[ComparisonRow],
    *,
    weights_dir: Path | None,
    device: str,
    jobs: int,
) -> tuple[AttestedLpips | None, ScorerIdentity | None]:
    """The attested scorer when :func:`needs_scorer`; else (None, None)."""
    if not needs_scorer(content, cmps):
        return None, None
    return load_attested_lpips(content.scorer, weights_dir, device, jobs=jobs)


def _select(
    cmps: list[ComparisonRow], ids: Collection[str] | None
) -> tuple[list[ComparisonRow], list[str]]:
    """The comparisons asked for (all when ``ids`` is None), and the ids the bundle lacks."""
    if ids is None:
        return cmps, []
    wanted = set(ids)
    missing = sorted(wanted - {c.comparison_id for c in cmps})
    return (
        [c for c in cmps if c.comparison_id in wanted],
        [f"no comparison {cid!r} in the bundle" for cid in missing],
    )


def _restore_torch_threads() -> Callable[[], None]:
    """Undo, after the re-score, the torch thread count the plan sets (torch loaded or not)."""
    import sys

    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None

    def restore() -> None:
        t = sys.modules.get("torch")
        if t is not None:
            t.set_num_threads(before if before is not None else t.get_num_threads())

    return restore


def rescore_bundle(
    bundle: VerifiedBundle,
    media_dirs: Sequence[Path],
    *,
    weights_dir: Path | None = None,
    jobs: int = 1,
    device: str | None = None,
    progress: Callable[[MediaProgress], None] | None = None,
    comparison_ids: Collection[str] | None = None,
    executor: str = LOCAL,
    ray_address: str | None = None,
    lpips_batch: int | None = None,
) -> MediaReplayResult:
    """Re-score every comparison of ``bundle`` from the media found under ``media_dirs``.

    Args:
        bundle: the verified bundle (:func:`bundler.verified.open_verified`).
        media_dirs: directories searched recursively for media, matched by
            SHA-256 against the bundle's ``artifacts`` table.
        weights_dir: the directory of the LPIPS weight files; None makes the
            gates that need an attested model ``unattested``.
        jobs: comparisons re-scored in parallel (threads; at most the cores
            available, see :mod:`replay.media.threads`), and hashing threads.
        device: torch device for LPIPS: ``cpu``, ``cuda[:N]`` or ``npu[:N]``;
            None: ``cpu`` locally, on Ray a GPU where the cluster has one.
        progress: called per hashing step, per comparison and per frame;
            calls are serialized.
        comparison_ids: re-score only these comparisons (None: all). An id
            the bundle does not have is reported in ``problems``.
        executor: ``local`` (threads in this process) or ``ray`` (one Ray task
            per comparison, :mod:`replay.media.ray_executor`; needs the
            ``[ray]`` extra).
        ray_address: with ``ray``: the cluster to join (None: the one this
            process already joined, else a local one started and stopped here).
        lpips_batch: frames per LPIPS forward pass (None: chosen by device
            and frame size, see :meth:`AttestedLpips.batch_for`).

    Returns:
        The result: per comparison recorded vs re-derived metrics, coverage,
        gate verdicts re-evaluated on re-derived values, disagreements, how
        it ran (:class:`~replay.media.execution.Execution`), and the verdict
        with its reasons.

    Raises:
        replay.media.lpips_attested.DeviceError: ``device`` is not available,
            or ``executor``/``lpips_batch`` is invalid (a usage error), raised
            before any media work.
        bundler.errors.BundleFormatError: a gate with an unknown operator.
    """
    t0 = time.perf_counter()
    jobs = max(1, int(jobs))
    if executor not in (LOCAL, RAY):
        raise DeviceError(f"--executor {executor}: expected local or ray")
    if lpips_batch is not None and lpips_batch < 1:
        raise DeviceError(f"--lpips-batch {lpips_batch}: expected a positive integer")
    if executor == LOCAL and ray_address is not None:
        raise DeviceError("--ray-address needs --executor ray")
    cluster = None
    if executor == RAY:
        from replay.media.ray_executor import RayCluster

        cluster = RayCluster.join(ray_address, device)  # DeviceError: no ray, no GPU
        device = cluster.device
    device = device or "cpu"
    if cluster is None:
        check_device(device)
    try:
        return _rescore(
            bundle,
            media_dirs,
            weights_dir=weights_dir,
            jobs=jobs,
            device=device,
            progress=progress,
            comparison_ids=comparison_ids,
            cluster=cluster,
            lpips_batch=lpips_batch,
            t0=t0,
        )
    finally:
        if cluster is not None:
            cluster.leave()


def _rescore(
    bundle: VerifiedBundle,
    media_dirs: Sequence[Path],
    *,
    weights_dir: Path | None,
    jobs: int,
    device: str,
    progress: Callable[[MediaProgress], None] | None,
    comparison_ids: Collection[str] | None,
    cluster: Any,
    lpips_batch: int | None,
    t0: float,
) -> MediaReplayResult:
    content = read_bundle(bundle)
    cmps, problems = _select(content.comparisons, comparison_ids)
    params = coverage_params(content.plan)
    prog = _Progress(progress, len(cmps))
    problems.extend(gate_problems(content.gates))
    # On Ray the driver verifies and loads the weights on its CPU (the identity
    # reported); every task loads and verifies them again where it runs.
    scorer, identity = _scorer(
        content, cmps, weights_dir=weights_dir, device="cpu" if cluster else device, jobs=jobs
    )
    if identity is not None and not identity.attested:
        problems.append(f"LPIPS unattested: {identity.reason}")
    if identity is not None and identity.attested and cluster is not None:
        identity = replace(identity, device=device)
    attestation = Attestation(
        recorded=content.scorer is not None,
        rederived=identity is not None and identity.attested,
        reason="" if identity is None or identity.attested else identity.reason,
    )
    wanted = {d for c in cmps for d in (c.baseline_sha256, c.candidate_sha256) if d}

    def hashed(n: int) -> None:
        prog.emit("hash", bytes_hashed=n)

    locs = locate(
        wanted,
        content.artifacts,
        list(media_dirs),
        jobs=jobs,
        progress=hashed if progress else None,
    )
    lpips_tol = DEFINITIONS[LPIPS_DEFINITION].tolerance
    if cluster is not None:
        ctx = _Context(content.gates, locs, params, None, attestation, 1, prog.emit)
        reps, execution = cluster.run(
            cmps,
            ctx,
            scorer_doc=content.scorer if scorer is not None else None,
            weights_dir=weights_dir,
            lpips_batch=lpips_batch,
            lpips_tolerance=lpips_tol,
        )
    else:
        plan = plan_threads(jobs, len(cmps))
        if scorer is not None:
            scorer.cpu_threads = plan.torch_threads
            scorer.batch = lpips_batch
        ctx = _Context(
            content.gates, locs, params, scorer, attestation, plan.decoder_threads, prog.emit
        )
        restore = _restore_torch_threads()
        try:
            reps = _rescore_all(cmps, ctx, plan.parallel)
        finally:
            restore()
        execution = Execution(
            LOCAL,
            device,
            plan,
            lpips_tol,
            dict(scorer.batch_plan) if scorer else {},
            scorer.batch_rule if scorer else "",
            sorted(scorer.threads_seen) if scorer else [],
        )
    for c in reps:
        problems.extend(f"{c.comparison_id}: {p}" for p in c.problems)
    return MediaReplayResult(
        comparisons=reps,
        gates=summaries(content.gates, reps),
        scorer=identity,
        coverage_params=params,
        disagreements=disagreements(reps),
        problems=problems,
        jobs=jobs,
        device=device,
        seconds=time.perf_counter() - t0,
        execution=execution,
    )
