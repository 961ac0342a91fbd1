"""``bundle run``: an author's first run of a frozen plan, with the runner ``bundle rerun`` uses.

Parses, calls :func:`rerun.first_run.prepare_first_run` and
:func:`rerun.runner.run_rerun`, and prints text or ``--json``.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from bundler.errors import UsageError
from reprobundle.cli.common import cli_errors, examples, json_option, verbosity_options
from reprobundle.cli.runner_options import pairs, server_options
from reprobundle.cli.runner_output import run_and_report, show_dry_run

__all__ = ["RUN_EXIT_HELP", "run_command"]

RUN_EXIT_HELP = """\b
Exit codes:
  0  the attempt was accepted: every arm position ran and every request succeeded
  2  usage: bad arguments, a plan that breaks the plan schema or (--kind campaign)
     has plan-check errors, --arm not naming every arm, a missing target or input,
     endpoint mode without --allow-unverified-commit (nothing was started or written)
  3  the attempt was interrupted (reservation watchdog, SIGTERM, SIGINT), or I/O error
  4  the attempt was rejected: a request failed or timed out, a server did not start,
     or a runtime commit did not match (or was unverified without the override)
"""


@click.command(
    "run",
    epilog=examples(
        "bundle run campaign/plans/reference-ab.json -o first-run --arm baseline=c7f56f0 "
        "--arm candidate=098b51f --campaign-id h3-cache --launch --inputs campaign --dry-run",
    )
    + RUN_EXIT_HELP,
)
@click.argument("plan", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Campaign directory (created, or an earlier run of the same plan to add to).",
)
@click.option(
    "--arm", "arms", multiple=True, metavar="ARM=COMMIT", help="Each arm's runtime commit."
)
@click.option("--campaign-id", required=True, help="The campaign's id (campaign.json).")
@click.option("--title", help="The campaign's title (default: from the id and the plan).")
@click.option(
    "--kind",
    type=click.Choice(["campaign", "pilot"]),
    default="campaign",
    show_default=True,
    help="campaign: plan-check errors refuse the run (they would block bundle seal).",
)
@click.option("--baseline", help="The baseline arm (default: the first of arm_order).")
@click.option(
    "--launch",
    is_flag=True,
    help="Start each server here: from --launch-command, else from the plan's own launch "
    "template (your plan: printed as it runs).",
)
@click.option("--launch-command", metavar="TEMPLATE", help="As for bundle rerun.")
@click.option(
    "--inputs",
    "inputs",
    multiple=True,
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Folder holding the input files the payload names.",
)
@click.option(
    "--reservation-used",
    type=click.FloatRange(min=0),
    default=0.0,
    help="Seconds of the device reservation already used before the run starts.",
)
@click.option("--accelerator", help="What the run ran on, for campaign.json.")
@click.option("--dry-run", is_flag=True, help="Show the schedule and commands; run nothing.")
@server_options
@verbosity_options
@json_option
def run_command(
    plan: Path,
    out_dir: Path | None,
    arms: tuple[str, ...],
    campaign_id: str,
    title: str | None,
    kind: str,
    baseline: str | None,
    endpoints: tuple[str, ...],
    launch: bool,
    launch_command: str | None,
    launch_cwd: Path | None,
    env: tuple[str, ...],
    inputs: tuple[Path, ...],
    telemetry: str | None,
    telemetry_command: str | None,
    allow_unverified_commit: bool,
    reservation_used: float,
    accelerator: str | None,
    dry_run: bool,
    verbosity: int,
    as_json: bool,
) -> None:
    """Run PLAN (a frozen plan file) for the first time; write a campaign directory into -o.

    The same runner as bundle rerun: its timing boundary, deadlines, runtime commit
    check, teardown and records, so the author's numbers and a third party's rerun
    are measured alike. The directory holds no claims: write claims.json, then
    bundle seal it.
    """
    from rerun.first_run import RunSpec, prepare_first_run
    from rerun.runner import RerunOptions

    with cli_errors(as_json):
        if out_dir is None:
            raise UsageError("give -o/--output DIR: the campaign directory to write")
        options = RerunOptions(
            endpoints=pairs(endpoints, "--endpoint"),
            launch=launch,
            launch_command=launch_command,
            # The plan is the caller's own file, not a bundle's: its template is theirs.
            run_bundle_launch_command=launch and not launch_command,
            launch_cwd=launch_cwd,
            env=pairs(env, "--env"),
            inputs=inputs,
            telemetry=telemetry,
            telemetry_command=shlex.split(telemetry_command) if telemetry_command else None,
            allow_unverified_commit=allow_unverified_commit,
            reservation_used_s=reservation_used,
            accelerator=accelerator,
        )
        spec = RunSpec(campaign_id, pairs(arms, "--arm"), title, kind, baseline)
        prepared = prepare_first_run(plan, spec, options)
        if dry_run:
            show_dry_run(prepared, as_json, verbosity)
            return
        next_step = "write claims.json, then bundle seal {out_dir} -o RUN.bundle"
        run_and_report(plan, out_dir, options, prepared, as_json, verbosity, "run", next_step)
