"""The local executor: the comparisons in this process, ``jobs`` at a time (threads)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from replay.media.bundle_read import ComparisonRow
from replay.media.device import check_device
from replay.media.execution import LOCAL, Execution
from replay.media.executors import Job
from replay.media.pipeline import Context, rescore_comparison
from replay.media.result import ComparisonReplay
from replay.media.threads import plan_threads

__all__ = ["LocalExecutor"]


def _rescore_all(cmps: Sequence[ComparisonRow], ctx: Context, jobs: int) -> list[ComparisonReplay]:
    """Every comparison, ``jobs`` at a time (threads), in the bundle's order."""

    def one(c: ComparisonRow) -> ComparisonReplay:
        return rescore_comparison(c, ctx)

    if jobs <= 1:
        return [one(c) for c in cmps]
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="media-replay") as pool:
        return list(pool.map(one, cmps))


def _restore_torch_threads() -> Callable[[], None]:
    """Undo, after the re-score, the torch thread count the plan sets (torch loaded or not)."""
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None

    def restore() -> None:
        t = sys.modules.get("torch")
        if t is not None:
            t.set_num_threads(before if before is not None else t.get_num_threads())

    return restore


class LocalExecutor:
    """Threads in this process (:mod:`replay.media.threads` plans them)."""

    remote = False

    def __init__(self, device: str) -> None:
        """Use ``device`` for LPIPS.

        Raises:
            replay.media.device.DeviceError: ``device`` is not available here.
        """
        check_device(device)
        self.device = device

    def run(
        self, cmps: Sequence[ComparisonRow], job: Job
    ) -> tuple[list[ComparisonReplay], Execution]:
        """Every comparison re-scored here, in ``cmps``' order, and how they ran."""
        plan = plan_threads(job.jobs, len(cmps))
        scorer = job.scorer
        if scorer is not None:
            scorer.cpu_threads = plan.torch_threads
            scorer.batch = job.lpips_batch
        ctx = Context(
            job.gates,
            job.locs,
            job.params,
            scorer,
            job.attestation,
            plan.decoder_threads,
            job.emit,
        )
        restore = _restore_torch_threads()
        try:
            reps = _rescore_all(cmps, ctx, plan.parallel)
        finally:
            restore()
        execution = Execution(
            LOCAL,
            self.device,
            plan,
            job.lpips_tolerance,
            dict(scorer.batch_plan) if scorer else {},
            scorer.batch_rule if scorer else "",
            sorted(scorer.threads_seen) if scorer else [],
        )
        return reps, execution

    def close(self) -> None:
        """Nothing to release."""
