"""Where each arm position's server is: a launch command from the plan, or a running endpoint.

Everything here is resolved before any server is touched; :func:`check_endpoints`
refuses endpoint mode (whose runtime commit cannot be verified) before anything is
written, unless unverified runtimes are accepted.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bundler._internal.textsafe import safe
from bundler.errors import Problem, UsageError
from bundler.format.plan_model import Plan
from rerun.launcher import LaunchError, expand_command
from rerun.options import RerunOptions
from rerun.plan_env import env_refusal
from rerun.runtime import ENDPOINT_REASON
from rerun.schedule import SlotPlan

__all__ = [
    "VERSION_TIMEOUT_S",
    "Target",
    "check_endpoints",
    "check_launch_consent",
    "check_plan_env",
    "placeholders",
    "resolve_targets",
]

VERSION_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Target:
    """Where one slot's server is: a URL, or a command to start it."""

    url: str | None
    argv_template: tuple[str, ...] | str | None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)


def placeholders(sp: SlotPlan, port: str, host: str, plan: Plan) -> dict[str, str]:
    """The launch template's placeholder values for slot ``sp``."""
    payload = plan.request.payload
    return {
        "port": port,
        "host": host,
        "arm": sp.arm,
        "server": sp.server,
        "commit": sp.commit,
        "python": sys.executable,
        "model": "" if payload is None else str(payload.get("model", "")),
    }


def _launch(plan: Plan) -> Mapping[str, Any]:
    # ``launch`` is one of the sections Plan keeps as JSON; the schema made it an object.
    launch = plan.unknown.get("launch")
    return launch if isinstance(launch, Mapping) else {}


def _launch_target(
    plan: Plan, sp: SlotPlan, options: RerunOptions
) -> tuple[Target | None, str | None]:
    launch = _launch(plan)
    per_arm = launch.get(sp.arm)
    per_arm = per_arm if isinstance(per_arm, Mapping) else {}
    template = options.launch_command or per_arm.get("command") or launch.get("command")
    if not template:
        return None, f"no launch command for arm {sp.arm!r}"
    if not isinstance(template, str | list):
        return None, f"launch command of arm {sp.arm!r} must be a string or a list"
    args = per_arm.get("args") or []
    env = per_arm.get("env") or {}
    if not isinstance(args, list) or not isinstance(env, Mapping):
        return None, f"launch.{sp.arm}: args must be a list and env an object"
    env_all = {**{str(k): str(v) for k, v in env.items()}, **options.env}
    tmpl = template if isinstance(template, str) else tuple(str(t) for t in template)
    try:
        expand_command(tmpl, placeholders(sp, "0", options.host, plan), [str(a) for a in args])
    except LaunchError as exc:
        return None, f"arm {sp.arm!r}: {exc}"
    return Target(None, tmpl, tuple(str(a) for a in args), env_all), None


def check_launch_consent(options: RerunOptions, *, dry_run: bool = False) -> None:
    """Refuse to run a launch command from the bundle without the explicit opt-in.

    The plan's ``launch`` templates are the bundle author's commands: with
    ``--launch`` they run only under ``run_bundle_launch_command``; otherwise the
    caller names the command (``launch_command``). A dry run starts nothing, so
    it may show the plan's commands without the opt-in.

    Raises:
        UsageError: launch mode without either, both at once, or the opt-in without launch mode.
    """
    if options.launch_command and options.run_bundle_launch_command:
        raise UsageError(
            "give either --launch-command TEMPLATE or --run-bundle-launch-command, not both"
        )
    if options.run_bundle_launch_command and not options.launch:
        raise UsageError("--run-bundle-launch-command needs --launch")
    consented = bool(options.launch_command) or options.run_bundle_launch_command
    if options.launch and not consented and not dry_run:
        raise UsageError(
            "--launch needs --launch-command TEMPLATE (a server command of your own), or "
            "--run-bundle-launch-command to run the launch command written in the bundle's "
            "plan (printed before it runs; --dry-run shows it without running it)"
        )


def _unsettable(name: str, value: str) -> bool:
    # No process can be given such a variable (exec refuses it): refused with or without opt-in.
    return not name or "=" in name or "\0" in name or "\0" in value


def check_plan_env(
    plan: Plan,
    schedule: Sequence[SlotPlan],
    options: RerunOptions,
    *,
    plan_name: str = "plan",
) -> None:
    """Refuse a plan environment variable that would run the author's code in the auditor's command.

    In launch mode without ``run_bundle_launch_command``, every name in
    ``launch.<arm>.env`` of an arm the schedule launches must be a valid name
    and not on :data:`~rerun.plan_env.AUTHOR_ENV_DENYLIST`, unless the
    auditor sets that name with ``--env`` (then the plan's value never reaches
    the process). With the opt-in only a variable no process can be given
    (empty name, ``=`` or NUL) is refused. Nothing has run when this raises.

    Raises:
        UsageError: one :class:`~bundler.errors.Problem` per refused variable,
            located at ``launch.<arm>.env.<NAME>`` of ``plan_name``.
    """
    if not options.launch:
        return
    launch = _launch(plan)
    problems: list[Problem] = []
    for arm in dict.fromkeys(sp.arm for sp in schedule):
        per_arm = launch.get(arm)
        env = per_arm.get("env") if isinstance(per_arm, Mapping) else None
        if not isinstance(env, Mapping):
            continue
        for key, value in env.items():
            name = str(key)
            if _unsettable(name, str(value)):
                why: str | None = "no process can be given it (empty name, '=' or NUL)"
            elif options.run_bundle_launch_command or name in options.env:
                why = None
            else:
                why = env_refusal(name)
            if why is not None:
                problems.append(Problem(plan_name, None, f"launch.{arm}.env.{safe(name)}", why))
    if problems:
        raise UsageError(
            f"{plan_name}: the plan's launch environment is refused, nothing was run: without "
            "--run-bundle-launch-command a plan may not set a variable that would run the "
            "bundle author's code in your --launch-command. Set such a variable yourself with "
            "--env NAME=VALUE, or pass --run-bundle-launch-command (instead of --launch-command) "
            "to run the bundle's own launch command and environment as written, printed first",
            problems,
        )


def resolve_targets(
    plan: Plan,
    schedule: Sequence[SlotPlan],
    options: RerunOptions,
    *,
    plan_name: str = "plan",
) -> tuple[Target, ...]:
    """One target per slot, from ``--launch`` (the plan's templates) or ``--endpoint``.

    In launch mode the plan's environment is checked first (:func:`check_plan_env`).

    Raises:
        UsageError: both or neither mode, a slot with no target, a plan environment
            variable refused, or an endpoint name that is neither a server nor an arm
            of the plan.
    """
    if options.launch == bool(options.endpoints):
        raise UsageError("give either --launch or one --endpoint NAME=URL per arm or server")
    check_plan_env(plan, schedule, options, plan_name=plan_name)
    out: list[Target] = []
    problems: list[str] = []
    for sp in schedule:
        if options.launch:
            target, err = _launch_target(plan, sp, options)
        else:
            url = options.endpoints.get(sp.server) or options.endpoints.get(sp.arm)
            target, err = (
                (Target(url, None), None) if url else (None, f"no endpoint for {sp.server}")
            )
        if err:
            problems.append(err)
        elif target is not None:
            out.append(target)
    if problems:
        hint = (
            "give --launch-command TEMPLATE or add launch.command to the plan"
            if options.launch
            else "give --endpoint SERVER=URL or --endpoint ARM=URL"
        )
        raise UsageError(f"cannot reach every server ({hint}): " + "; ".join(problems))
    for name in options.endpoints:
        if name not in {sp.server for sp in schedule} | {sp.arm for sp in schedule}:
            raise UsageError(f"--endpoint {name}: neither a server nor an arm of the plan")
    return tuple(out)


def check_endpoints(
    schedule: Sequence[SlotPlan], targets: Sequence[Target], options: RerunOptions
) -> None:
    """Refuse endpoint mode before any run unless unverified runtimes are accepted.

    vLLM-Omni reports no runtime commit over HTTP (``GET /version`` is vLLM's
    version), so a running endpoint's commit cannot be verified from here
    (:mod:`rerun.runtime`); only ``allow_unverified_commit`` lets it run,
    recorded as unverified.

    Raises:
        UsageError: an endpoint target without ``allow_unverified_commit``.
    """
    if options.allow_unverified_commit:
        return
    servers = [sp.server for sp, t in zip(schedule, targets, strict=True) if t.url is not None]
    if servers:
        raise UsageError(
            "endpoint runtime check failed (nothing was run): "
            + ", ".join(servers)
            + ": runtime commit unverified: "
            + ENDPOINT_REASON
            + " (--allow-unverified-commit runs anyway, recorded as unverified; "
            "--launch verifies it from the launch environment)"
        )
