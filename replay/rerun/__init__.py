"""Hardware rerun: execute a sealed bundle's frozen plan again and compare with the seal.

- :mod:`replay.rerun.runner`: :func:`run_rerun` / :func:`prepare_rerun`
- :mod:`replay.rerun.client`: the vLLM-Omni video API client and deadlines
- :mod:`replay.rerun.launcher`: server launch, worker discovery, TERM/KILL teardown
- :mod:`replay.rerun.telemetry`: ``npu-smi`` / ``nvidia-smi`` parsers and the sampler
- :mod:`replay.rerun.watchdog`: the reservation watchdog
- :mod:`replay.rerun.writer`: the rerun campaign directory
- :mod:`replay.rerun.compare`: a rerun bundle side by side with the sealed one

See ``docs/rerun.md``.
"""

from __future__ import annotations

from replay.rerun.compare import RerunComparison, compare_bundles, format_comparison
from replay.rerun.runner import (
    PreparedRerun,
    RerunControl,
    RerunEvent,
    RerunOptions,
    RerunResult,
    prepare_rerun,
    run_rerun,
)

__all__ = [
    "PreparedRerun",
    "RerunComparison",
    "RerunControl",
    "RerunEvent",
    "RerunOptions",
    "RerunResult",
    "compare_bundles",
    "format_comparison",
    "prepare_rerun",
    "run_rerun",
]
