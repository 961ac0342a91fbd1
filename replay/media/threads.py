"""How many threads a media re-score may keep busy: from ``--jobs`` and the cores it may use.

A comparison keeps three kinds of threads busy: two decoders (one per arm,
in lockstep) and the scoring thread (SSIM, PSNR, and LPIPS through torch's
intra-op pool). Left alone, torch starts one OpenMP thread per core in every
comparison and FFmpeg one decoder thread per core (plus one) per file, so
``--jobs 2`` on 2 cores ran 2 × 2 torch threads beside 4 × 3 decoder threads,
and two OpenMP pools spinning on each other's barriers made LPIPS 2× slower
than one thread (issue 11). The plan below keeps the total at most the cores
available:

- cores: ``os.sched_getaffinity`` (the CPUs this process may run on: a
  container's or ``taskset``'s limit, not the machine's), else
  ``os.cpu_count``; ``OMP_NUM_THREADS``, when set to a positive integer,
  caps it (the user's statement of how many threads to use);
- comparisons at once: ``min(jobs, comparisons, cores)``; more would only
  share the same cores;
- per comparison: ``cores // parallel`` threads (at least 1): that many torch
  intra-op threads, and half of them (at least 1) per decoder.

The one excess is that floor: two decoders per comparison run one thread
each even when a comparison's share is a single core. They do not spin: a
decoder blocks when it is 4 frames ahead of the scorer (``probe.prefetch``),
whereas an idle OpenMP thread busy-waits.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["ThreadPlan", "available_cores", "plan_threads"]


@dataclass(frozen=True)
class ThreadPlan:
    """The thread counts a re-score runs with, and where the core count came from."""

    cores: int
    """Threads the whole re-score may keep busy."""
    cores_source: str
    """``sched_getaffinity``, ``cpu_count`` or ``OMP_NUM_THREADS``."""
    jobs: int
    """What ``--jobs`` asked for."""
    parallel: int
    """Comparisons scored at once."""
    torch_threads: int
    """torch intra-op threads in each comparison's LPIPS forward passes."""
    decoder_threads: int
    """FFmpeg decoder threads per file (two files per comparison)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return asdict(self)


def available_cores(environ: dict[str, str] | None = None) -> tuple[int, str]:
    """The cores this process may keep busy, and where that number came from.

    ``OMP_NUM_THREADS`` (a positive integer; anything else is ignored) caps the
    CPUs of this process's affinity mask.
    """
    env = os.environ if environ is None else environ
    try:
        cores, source = len(os.sched_getaffinity(0)), "sched_getaffinity"
    except (AttributeError, OSError):  # not Linux
        cores, source = os.cpu_count() or 1, "cpu_count"
    omp = env.get("OMP_NUM_THREADS", "").strip()
    if omp.isdigit() and 0 < int(omp) < cores:
        cores, source = int(omp), "OMP_NUM_THREADS"
    return max(1, cores), source


def plan_threads(
    jobs: int, comparisons: int, *, cores: int | None = None, source: str = "given"
) -> ThreadPlan:
    """Thread counts for ``comparisons`` re-scored ``jobs`` at a time.

    Args:
        jobs: ``--jobs``.
        comparisons: how many comparisons there are (fewer than ``jobs`` run
            fewer at once).
        cores: the cores to plan for; None: :func:`available_cores`.
        source: where ``cores`` came from, when given.
    """
    if cores is None:
        cores, source = available_cores()
    cores = max(1, cores)
    jobs = max(1, jobs)
    parallel = max(1, min(jobs, comparisons, cores))
    per = max(1, cores // parallel)
    return ThreadPlan(
        cores=cores,
        cores_source=source,
        jobs=jobs,
        parallel=parallel,
        torch_threads=per,
        decoder_threads=max(1, per // 2),
    )
