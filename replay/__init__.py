"""reprobundle replayer: re-derive every statistic, verdict and claim of a sealed bundle.

The public API is :func:`replay.api.replay_bundle`, returning a
:class:`replay.result.ReplayResult`; the CLI command is
:data:`reprobundle.cli.replay_cmd.replay_command` (``bundle replay``). Both names are also
available here, imported on first use so that ``import replay`` stays cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ReplayResult", "replay_bundle"]


def __getattr__(name: str) -> Any:
    if name == "replay_bundle":
        from replay.api import replay_bundle

        return replay_bundle
    if name == "ReplayResult":
        from replay.result import ReplayResult

        return ReplayResult
    raise AttributeError(f"module 'replay' has no attribute {name!r}")
