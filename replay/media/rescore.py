"""Re-score a bundle's quality comparisons from raw media instead of trusting recorded metrics.

For each ``comparisons`` row: find both media files by SHA-256 (the bundle's
``artifacts`` table; names may differ), verify them, decode each once, check
coverage on each arm against the frozen plan, re-derive every metric by its
frozen definition, compare with the recorded values, and re-evaluate every
gate on the re-derived values with the one gate evaluator (:mod:`replay.sections.gates`).
LPIPS runs only from attested weights; when they are missing or mismatch, the
gates that need an attested model are ``unattested`` and the rest runs.

This module orchestrates; the parts are :mod:`~replay.media.bundle_read`
(reading the bundle), :mod:`~replay.media.pipeline` (one comparison, what every
executor runs), :mod:`~replay.media.executors` (where the comparisons run: local
threads or Ray tasks), :mod:`~replay.media.scoring` (one pair),
:mod:`~replay.media.judge` (metrics and gates), :mod:`~replay.media.result`
(result types, verdict) and :mod:`~replay.media.format` (text).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from bundler.verified import VerifiedBundle
from replay.media.bundle_read import BundleContent, ComparisonRow, read_bundle
from replay.media.coverage import coverage_params
from replay.media.definitions import DEFINITIONS
from replay.media.device import DeviceError
from replay.media.execution import LOCAL, RAY
from replay.media.executors import Executor, Job
from replay.media.executors.local import LocalExecutor
from replay.media.identity import locate
from replay.media.judge import Attestation, disagreements, gate_problems, summaries
from replay.media.lpips_attested import load_attested_lpips
from replay.media.lpips_identity import LPIPS_DEFINITION, ScorerIdentity
from replay.media.lpips_net import AttestedLpips
from replay.media.result import MediaProgress, MediaReplayResult

__all__ = ["needs_scorer", "rescore_bundle"]


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
            per comparison, :mod:`replay.media.executors.ray`; needs the
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
        replay.media.device.DeviceError: ``device`` is not available,
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
    ex: Executor
    if executor == RAY:
        from replay.media.executors.ray import RayCluster

        ex = RayCluster.join(ray_address, device)  # DeviceError: no ray, no GPU
    else:
        ex = LocalExecutor(device or "cpu")
    try:
        return _rescore(
            bundle,
            media_dirs,
            weights_dir=weights_dir,
            jobs=jobs,
            progress=progress,
            comparison_ids=comparison_ids,
            executor=ex,
            lpips_batch=lpips_batch,
            t0=t0,
        )
    finally:
        ex.close()


def _rescore(
    bundle: VerifiedBundle,
    media_dirs: Sequence[Path],
    *,
    weights_dir: Path | None,
    jobs: int,
    progress: Callable[[MediaProgress], None] | None,
    comparison_ids: Collection[str] | None,
    executor: Executor,
    lpips_batch: int | None,
    t0: float,
) -> MediaReplayResult:
    content = read_bundle(bundle)
    cmps, problems = _select(content.comparisons, comparison_ids)
    params = coverage_params(content.plan)
    prog = _Progress(progress, len(cmps))
    problems.extend(gate_problems(content.gates))
    device = executor.device
    # On a remote executor the driver verifies and loads the weights on its CPU (the
    # identity reported); every task loads and verifies them again where it runs.
    scorer, identity = _scorer(
        content,
        cmps,
        weights_dir=weights_dir,
        device="cpu" if executor.remote else device,
        jobs=jobs,
    )
    if identity is not None and not identity.attested:
        problems.append(f"LPIPS unattested: {identity.reason}")
    if identity is not None and identity.attested and executor.remote:
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
    job = Job(
        gates=content.gates,
        locs=locs,
        params=params,
        attestation=attestation,
        scorer=scorer,
        scorer_doc=content.scorer,
        weights_dir=weights_dir,
        lpips_batch=lpips_batch,
        lpips_tolerance=DEFINITIONS[LPIPS_DEFINITION].tolerance,
        jobs=jobs,
        emit=prog.emit,
    )
    reps, execution = executor.run(cmps, job)
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
