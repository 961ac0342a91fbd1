"""Hardware rerun: execute a sealed bundle's frozen plan again and record what happened.

A recorder, not a replayer: it imports :mod:`bundler` only, never :mod:`replay`
(``tests/test_import_graph.py``). The rerun is sealed like any campaign; comparing it
with the seal is replay's job (``bundle replay RERUN.bundle --against X.bundle``).

- :mod:`rerun.runner`: :func:`run_rerun` (one attempt, end to end)
- :mod:`rerun.options`: options, progress events, the stop handle
- :mod:`rerun.source`: reading the verified sealed bundle (plan, gates, pairing, inputs)
- :mod:`rerun.targets`: launch templates and endpoints, the endpoint commit check
- :mod:`rerun.prepare`: :func:`prepare_rerun`, everything resolved before a device
- :mod:`rerun.slots`: executing the arm positions of one attempt
- :mod:`rerun.records`: the rows and attempt record an attempt writes
- :mod:`rerun.schedule`: the frozen plan as slots and requests, and the estimate
- :mod:`rerun.client`: the vLLM-Omni video API client and deadlines
- :mod:`rerun.launcher`: server launch, worker discovery, TERM/KILL teardown
- :mod:`rerun.telemetry`: ``npu-smi`` / ``nvidia-smi`` parsers and the sampler
- :mod:`rerun.watchdog`: the reservation watchdog
- :mod:`rerun.writer`: the rerun campaign directory

The comparison with the seal lives in :mod:`replay.sections.against`.

See ``docs/rerun.md``.
"""

from __future__ import annotations

from rerun.options import RerunControl, RerunEvent, RerunOptions
from rerun.prepare import PreparedRerun, prepare_rerun
from rerun.runner import RerunResult, run_rerun

__all__ = [
    "PreparedRerun",
    "RerunControl",
    "RerunEvent",
    "RerunOptions",
    "RerunResult",
    "prepare_rerun",
    "run_rerun",
]
