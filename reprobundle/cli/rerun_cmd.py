"""``bundle rerun``: execute a bundle's frozen plan against real servers.

Parses, calls :func:`rerun.runner.run_rerun`, and prints text or ``--json``. The
bundle is opened once, through :func:`bundler.verified.open_verified`.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import click

from bundler.errors import UsageError
from reprobundle.cli.common import (
    cli_errors,
    examples,
    json_option,
    load_trust,
    trust_options,
    verbosity_options,
)
from reprobundle.cli.runner_options import pairs, server_options
from reprobundle.cli.runner_output import run_and_report, show_dry_run

if TYPE_CHECKING:
    from bundler.verified import VerifiedBundle
    from rerun.options import RerunOptions
    from rerun.prepare import PreparedRerun

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
    from rerun.runner import RerunOptions, prepare_rerun
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
            endpoints=pairs(endpoints, "--endpoint"),
            launch=launch,
            launch_command=launch_command,
            run_bundle_launch_command=run_bundle_launch_command,
            launch_cwd=launch_cwd,
            env=pairs(env, "--env"),
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
            show_dry_run(prepare_rerun(verified, options), as_json, verbosity)
            return
        prepared = prepare_rerun(verified, options)
        if run_bundle_launch_command:
            _announce_bundle_commands(prepared)
        next_step = "bundle seal {out_dir} -o RERUN.bundle --key KEY"
        run_and_report(verified, out_dir, options, prepared, as_json, verbosity, "rerun", next_step)
