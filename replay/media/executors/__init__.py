"""Where the comparisons of one media re-score run: the :class:`Executor` protocol.

:mod:`replay.media.rescore` orchestrates (reads the bundle, finds the media, loads
the scorer, judges the whole) and hands the comparisons to one executor, which
runs the per-comparison pipeline (:mod:`replay.media.pipeline`) on each:
:class:`~replay.media.executors.local.LocalExecutor` in this process's threads,
:class:`~replay.media.executors.ray.RayCluster` as one Ray task per comparison
(``ray``, the ``[ray]`` extra, is imported only by that module, and that module
only when ``--executor ray`` is asked for).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bundler.format.plan_model import ScorerDoc
from replay.media.bundle_read import ComparisonRow
from replay.media.coverage import CoverageParams
from replay.media.execution import Execution
from replay.media.identity import Location
from replay.media.judge import Attestation
from replay.media.lpips_net import AttestedLpips
from replay.media.result import ComparisonReplay
from replay.sections.gates import Gate

__all__ = ["Executor", "Job"]


@dataclass(frozen=True)
class Job:
    """What the comparisons of one re-score share, as the orchestration prepared it.

    ``scorer`` is the attested LPIPS model the driver loaded (None: no gate needs
    one, or it is unattested); ``scorer_doc`` is the bundle's ``scorer.json``, from
    which a remote executor's tasks load and verify the weights again where they run.
    """

    gates: Sequence[Gate]
    locs: Mapping[str, Location]
    params: CoverageParams
    attestation: Attestation
    scorer: AttestedLpips | None
    scorer_doc: ScorerDoc | None
    weights_dir: Path | None
    lpips_batch: int | None
    lpips_tolerance: float
    jobs: int
    emit: Callable[..., None]


class Executor(Protocol):
    """Runs the per-comparison pipeline on every comparison of one re-score."""

    @property
    def device(self) -> str:
        """The torch device LPIPS runs on (``cpu``, ``cuda[:N]``, ``npu[:N]``)."""
        ...

    @property
    def remote(self) -> bool:
        """True when the comparisons run elsewhere: the driver then loads the scorer on
        its CPU for the identity only, and each task loads it again where it runs."""
        ...

    def run(
        self, cmps: Sequence[ComparisonRow], job: Job
    ) -> tuple[list[ComparisonReplay], Execution]:
        """Every comparison re-scored, in ``cmps``' order, and how they ran."""
        ...

    def close(self) -> None:
        """Release what the executor holds (a cluster joined for this re-score)."""
        ...
