"""``bundle rerun``: execute a bundle's frozen plan against real servers.

Parses, calls :func:`rerun.runner.run_rerun`, and prints text or ``--json``. The
bundle is opened once, through :func:`bundler.verified.open_verified`.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from bundler.errors import UsageError
from reprobundle.cli.common import (
    QUIET,
    cli_errors,
    emit_json,
    examples,
    json_option,
    load_trust,
    say,
    trust_options,
    verbosity_options,
)
from reprobundle.cli.runner_options import server_options

if TYPE_CHECKING:
    from bundler.verified import VerifiedBundle
    from rerun.options import RerunEvent, RerunOptions
    from rerun.prepare import PreparedRerun
    from rerun.runner import RerunResult

__all__ = ["RERUN_EXIT_HELP", "rerun_command"]

RERUN_EXIT_HELP = """\b
Exit codes:
  0  the attempt was accepted: every arm position ran and every request succeeded
  1  integrity: the bundle does not verify, or is not trusted (--key / --allow-unsigned)
  2  usage: bad arguments, bundle missing, a missing target or input, an input path
     outside --inputs, --launch without --launch-command or --run-bundle-launch-command,
     a plan launch.<arm>.env variable refused for your --launch-command, endpoint mode
     (whose runtime commit cannot be verified) without --allow-unverified-commit
     (nothing was started or written)
  3  the attempt was interrupted (reservation watchdog, SIGTERM, SIGINT), or I/O error
  4  the attempt was rejected: a request failed or timed out, a server did not start,
     or the launch environment's vllm-omni is at another commit (or records none,
     without --allow-unverified-commit)
"""

_EXIT_REJECTED = 4


def _open_bundle(bundle: Path, options: RerunOptions) -> VerifiedBundle:
    """Open and verify BUNDLE once (``open_verified``), adding the trust options to a refusal."""
    from bundler.errors import UntrustedError
    from bundler.verified import open_verified

    try:
        return open_verified(bundle, trust=options.trust)
    except UntrustedError as exc:
        # Key advice only where a key is what is missing; a damaged bundle says what is damaged.
        raise UntrustedError(
            f"{exc.message}; give a trusted --key or --allow-unsigned", exc.problems
        ) from exc


def _pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    out = {}
    for v in values:
        name, sep, rest = v.partition("=")
        if not sep or not name or not rest:
            raise UsageError(f"{option} {v!r}: expected NAME=VALUE")
        out[name] = rest
    return out


def _print_dry_run(prep: PreparedRerun, verbosity: int) -> None:
    status = "passes" if prep.check.ok else "FAILS"
    if verbosity <= QUIET:
        say(
            f"dry run: {len(prep.schedule)} arm positions, {prep.total_requests} requests; "
            f"plan check {status}"
        )
        return
    say(
        f"frozen plan {prep.source.plan_name} of {prep.source.campaign.get('id')}: "
        f"{len(prep.schedule)} arm positions, {prep.total_requests} requests, api {prep.api}, "
        f"boundary {prep.timing_boundary}, poll every {prep.poll_interval_s:g} s"
    )
    low = high = 0.0
    known = True
    for sp, est in zip(prep.schedule, prep.estimates, strict=True):
        phases = ", ".join(f"{r.phase} #{r.seq}" for r in sp.requests)
        say(f"  {sp.slot.position}. {sp.arm} on {sp.server} ({sp.commit[:12]}): {phases}")
        if est.sealed_requests_s is None:
            known = False
        else:
            low += est.sealed_requests_s
            high += est.sealed_requests_s + est.startup_budget_s + est.teardown_budget_s
    for argv in prep.launch_commands():
        say(f"  launch: {shlex.join(argv)}")
    if known:
        say(
            f"  expected duration: {low:,.0f} s of requests as sealed "
            f"({low / 3600:.2f} h); at most {high:,.0f} s ({high / 3600:.2f} h) with every "
            "start-up and teardown budget used"
        )
    say(
        f"  plan check {status}: {len(prep.check.errors)} error(s), "
        f"{len(prep.check.warnings)} warning(s) (bundle plan check for details)"
    )


def _show_dry_run(prep: PreparedRerun, as_json: bool, verbosity: int) -> None:
    if not as_json:
        _print_dry_run(prep, verbosity)
        return
    emit_json(
        {
            "ok": True,
            "slots": [
                {"arm": s.arm, "server": s.server, "requests": len(s.requests)}
                for s in prep.schedule
            ],
            "launch": prep.launch_commands(),
            "estimates": [e.__dict__ for e in prep.estimates],
            "plan_check": prep.check.to_dict(),
        }
    )


def _announce_bundle_commands(prep: PreparedRerun) -> None:
    """Print, before anything runs, each command from the bundle that is about to run."""
    from bundler._internal.textsafe import safe

    slots = [(sp, t) for sp, t in zip(prep.schedule, prep.targets, strict=True) if t.argv_template]
    for (sp, target), argv in zip(slots, prep.launch_commands(), strict=True):
        env = shlex.join(f"{k}={v}" for k, v in target.env.items()) or "(none added)"
        click.echo(
            f"--run-bundle-launch-command: will run the bundle's launch command for "
            f"{safe(sp.arm)} on {safe(sp.server)} (PORT chosen at start): {safe(shlex.join(argv))}"
            f"; environment added: {safe(env)}",
            err=True,
        )


def _show_event(e: RerunEvent) -> None:
    count = f"[{e.done}/{e.total}] " if e.total else ""
    say(f"{count}{e.kind}: {e.message}", err=True)


def _no_event(e: RerunEvent) -> None:
    del e


def _show_result(result: RerunResult, as_json: bool, verbosity: int) -> None:
    if as_json:
        emit_json({"ok": result.status == "accepted", **result.to_dict()})
        return
    say(f"rerun {result.attempt_id} -> {result.out_dir}: {result.status.upper()}")
    if verbosity <= QUIET:
        return
    if result.reason:
        say(f"  reason   {result.reason}")
    say("  rows     " + ", ".join(f"{k} {v}" for k, v in result.counts.items()))
    if result.status == "accepted":
        say(f"  next     bundle seal {result.out_dir} -o RERUN.bundle --key KEY")
    else:
        say("  next     run again with the same -o to add an attempt; this one stays recorded")


@click.command(
    "rerun",
    epilog=examples(
        "bundle rerun run.bundle --key author.pub -o rerun-campaign --launch --dry-run",
        "bundle rerun run.bundle --key author.pub -o rerun-campaign --launch "
        "--launch-command '/opt/vllm/bin/vllm serve --port {port} {args}' --dry-run",
    )
    + RERUN_EXIT_HELP,
)
@click.argument("bundle", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Rerun campaign directory (created, or an earlier rerun of the same bundle to add to).",
)
@click.option(
    "--launch",
    is_flag=True,
    help="Start each server here: from --launch-command, or from the plan's own launch "
    "template with --run-bundle-launch-command.",
)
@click.option(
    "--launch-command",
    metavar="TEMPLATE",
    help="Your server command (no shell); placeholders {port} {host} {arm} {server} "
    "{commit} {python} {model}, and {args} for the arm's launch.<arm>.args: each value "
    "one argument, shell-quoted inside a 'sh -c SCRIPT'. The plan's launch.<arm>.env "
    "applies, except variables that would run code (LD_*, PATH, PYTHONPATH, BASH_ENV, "
    "...: refused unless you set them with --env).",
)
@click.option(
    "--run-bundle-launch-command",
    is_flag=True,
    help="With --launch: run the launch command and environment written in the bundle's "
    "plan (the author's code, printed before it runs). Without it, --launch needs "
    "--launch-command.",
)
@click.option(
    "--inputs",
    "inputs",
    multiple=True,
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Folder holding input files the payload names and the bundle does not carry.",
)
@trust_options("Rerun a bundle no trusted key signed.")
@click.option(
    "--reservation-used",
    type=click.FloatRange(min=0),
    default=0.0,
    help="Seconds of the device reservation already used (set-up) before the rerun starts.",
)
@click.option(
    "--accelerator", help="What the rerun ran on, for campaign.json (e.g. 'Ascend 910B1')."
)
@click.option(
    "--dry-run", is_flag=True, help="Show the schedule, commands and estimate; run nothing."
)
@server_options
@verbosity_options
@json_option
def rerun_command(
    bundle: Path,
    out_dir: Path | None,
    endpoints: tuple[str, ...],
    launch: bool,
    launch_command: str | None,
    run_bundle_launch_command: bool,
    launch_cwd: Path | None,
    env: tuple[str, ...],
    inputs: tuple[Path, ...],
    telemetry: str | None,
    telemetry_command: str | None,
    allow_unverified_commit: bool,
    key_paths: tuple[Path, ...],
    trusted_keys: Path | None,
    allow_unsigned: bool,
    reservation_used: float,
    accelerator: str | None,
    dry_run: bool,
    verbosity: int,
    as_json: bool,
) -> None:
    """Execute BUNDLE's frozen plan against real servers; write a rerun campaign into -o.

    BUNDLE is untrusted even when it verifies: input files are read only from
    inside --inputs (or the bundle), files are written only under -o, and the
    plan's own launch command, or an environment variable of the plan that would
    run code, runs only with --run-bundle-launch-command.
    """
    from rerun.runner import RerunControl, RerunOptions, prepare_rerun, run_rerun
    from rerun.targets import check_launch_consent

    with cli_errors(as_json):
        if out_dir is None:
            raise UsageError("give -o/--output DIR: the rerun campaign directory to write")
        trust = load_trust(
            key_paths,
            trusted_keys,
            allow_unsigned,
            refusal="give --key PUB or --trusted-keys FILE to check the bundle's signature, "
            "or --allow-unsigned",
        )
        options = RerunOptions(
            endpoints=_pairs(endpoints, "--endpoint"),
            launch=launch,
            launch_command=launch_command,
            run_bundle_launch_command=run_bundle_launch_command,
            launch_cwd=launch_cwd,
            env=_pairs(env, "--env"),
            inputs=inputs,
            telemetry=telemetry,
            telemetry_command=shlex.split(telemetry_command) if telemetry_command else None,
            allow_unverified_commit=allow_unverified_commit,
            reservation_used_s=reservation_used,
            accelerator=accelerator,
            trust=trust,
        )
        check_launch_consent(options, dry_run=dry_run)
        verified = _open_bundle(bundle, options)
        if dry_run:
            _show_dry_run(prepare_rerun(verified, options), as_json, verbosity)
            return
        prepared = prepare_rerun(verified, options)
        if run_bundle_launch_command:
            _announce_bundle_commands(prepared)
        control = RerunControl()
        restore = control.install_signal_handlers()
        try:
            result = run_rerun(
                verified,
                out_dir,
                options,
                # -q: the result line only; progress events are detail.
                progress=_show_event if verbosity > QUIET else _no_event,
                control=control,
                prepared=prepared,
            )
        finally:
            restore()
        _show_result(result, as_json, verbosity)
        codes = {"accepted": 0, "rejected": _EXIT_REJECTED, "interrupted": 3}
        sys.exit(codes[result.status])
