"""The options `bundle run` and `bundle rerun` share: where the servers are, what they run with.

One definition, so that an author's first run and a third party's rerun are
configured (and documented) alike.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from bundler.errors import UsageError

__all__ = ["pairs", "server_options"]

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS = (
    click.option(
        "--endpoint",
        "endpoints",
        multiple=True,
        metavar="NAME=URL",
        help="A running server for a server name or an arm id (repeatable).",
    ),
    click.option(
        "--launch-cwd",
        type=click.Path(file_okay=False, exists=True, path_type=Path),
        help="Working directory of launched servers (default: the current one).",
    ),
    click.option(
        "--env", "env", multiple=True, metavar="KEY=VALUE", help="Environment of launched servers."
    ),
    click.option(
        "--telemetry",
        type=click.Choice(["npu-smi", "nvidia-smi", "none"]),
        help="Telemetry source (default: the plan's telemetry.source).",
    ),
    click.option(
        "--telemetry-command",
        metavar="CMD",
        help="Command line replacing the telemetry tool's (same output format).",
    ),
    click.option(
        "--allow-unverified-commit",
        is_flag=True,
        help=(
            "Run where the runtime commit cannot be verified: every endpoint, or a launch "
            "environment whose vllm-omni records no commit (recorded as unverified)."
        ),
    ),
)


def server_options(f: F) -> F:
    """Add the shared server options (endpoints, launch folder and environment,
    telemetry, the unverified-commit override) to a command."""
    for option in reversed(_OPTIONS):
        f = option(f)
    return f


def pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    """Repeated ``option NAME=VALUE`` values as a dict; a malformed one is a usage error."""
    out = {}
    for v in values:
        name, sep, rest = v.partition("=")
        if not sep or not name or not rest:
            raise UsageError(f"{option} {v!r}: expected NAME=VALUE")
        out[name] = rest
    return out
