"""Hardware rerun: execute a sealed bundle's frozen plan again and compare with the seal.

- :mod:`replay.rerun.runner`: :func:`run_rerun` (one attempt, end to end)
- :mod:`replay.rerun.options`: options, progress events, the stop handle
- :mod:`replay.rerun.source`: reading the verified sealed bundle (plan, gates, pairing, inputs)
- :mod:`replay.rerun.targets`: launch templates and endpoints, the endpoint commit check
- :mod:`replay.rerun.prepare`: :func:`prepare_rerun`, everything resolved before a device
- :mod:`replay.rerun.slots`: executing the arm positions of one attempt
- :mod:`replay.rerun.records`: the rows and attempt record an attempt writes
- :mod:`replay.rerun.schedule`: the frozen plan as slots and requests, and the estimate
- :mod:`replay.rerun.client`: the vLLM-Omni video API client and deadlines
- :mod:`replay.rerun.launcher`: server launch, worker discovery, TERM/KILL teardown
- :mod:`replay.rerun.telemetry`: ``npu-smi`` / ``nvidia-smi`` parsers and the sampler
- :mod:`replay.rerun.watchdog`: the reservation watchdog
- :mod:`replay.rerun.writer`: the rerun campaign directory
- :mod:`replay.rerun.compare`: a rerun bundle side by side with the sealed one, on the
  replay engine

See ``docs/rerun.md``.
"""

from __future__ import annotations

from replay.rerun.compare import RerunComparison, compare_bundles, format_comparison
from replay.rerun.options import RerunControl, RerunEvent, RerunOptions
from replay.rerun.prepare import PreparedRerun, prepare_rerun
from replay.rerun.runner import RerunResult, run_rerun

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
