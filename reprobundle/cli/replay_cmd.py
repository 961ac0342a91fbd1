"""``bundle replay`` (registered on ``bundle`` by ``reprobundle/cli/main.py``).

Parses, verifies and replays once (:func:`reprobundle.cli.replay_options.run_replay`),
prints the one result as terminal text or ``--json``, writes ``--markdown``
atomically (the same pipeline as ``bundle report --format md``), and exits with
the result's code.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from reprobundle.cli.common import (
    QUIET,
    VERBOSE,
    cli_errors,
    emit_json,
    examples,
    say,
    say_lines,
    verbosity_options,
)
from reprobundle.cli.replay_options import ReplayArgs, replay_args, replay_options, run_replay

__all__ = ["REPLAY_EXIT_HELP", "replay_command"]

REPLAY_EXIT_HELP = """\b
Exit codes:
  0  CONFIRMED: every claim confirmed, every gate passes, receipts conform to the plan
  1  integrity: tampered or malformed bundle, or tables that break the table
     contract; unsigned or untrusted without --allow-unsigned; with --media,
     media that differ from their sealed digests
  2  usage: bad arguments, bundle missing, no --key/--trusted-keys and no
     --allow-unsigned, unreadable key
  3  could not run: I/O error
  4  CONTRADICTED: a claim contradicted, a gate failed, a deviation from the frozen
     plan, mixed attempts; a re-scored output failing or not decoding; a rerun
     that did not reproduce the effect
  5  UNVERIFIED: a claim unverifiable, a gate unattested, media not at hand, a rerun
     that could not be judged; NOT EVIDENCED: the bundle states no claim
"""


def _run(args: ReplayArgs, *, as_json: bool, markdown: Path | None, verbosity: int) -> int:
    from bundler._internal.atomic import atomic_write_bytes

    verified, result = run_replay(args)
    if as_json:
        from replay.report.json_view import result_to_dict

        emit_json(result_to_dict(result))
    elif verbosity <= QUIET:
        say(f"{args.bundle}: {result.outcome} (exit {result.exit_code})")
    else:
        from replay.report.text import render_lines

        say_lines(render_lines(result, verbose=verbosity >= VERBOSE))
    if markdown is not None:
        # The same pipeline as `bundle report --format md`: one report, author text
        # neutralised (closing syntax, @-mentions) before it reaches a PR body.
        from replay.report.html.render import render_report

        atomic_write_bytes(markdown, render_report(verified, result, "md").encode("utf-8"))
    return int(result.exit_code)


@click.command(
    name="replay",
    epilog=examples(
        "bundle replay run.bundle --key author.pub",
        "bundle replay run.bundle --key author.pub --json --markdown replay.md",
    )
    + REPLAY_EXIT_HELP,
)
@click.argument("bundle", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@replay_options("Replay even if no trusted key verified the signature; every section says so.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@click.option(
    "--markdown",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the report as Markdown to this file (atomically).",
)
@verbosity_options
def replay_command(
    bundle: Path,
    as_json: bool,
    markdown: Path | None,
    verbosity: int,
    **shared: Any,  # the options of replay_options, for replay_args
) -> None:
    """Re-derive every statistic, verdict and claim of BUNDLE, offline.

    Integrity first: a tampered bundle is refused, and an unsigned or untrusted
    one too unless --allow-unsigned. Then latency, plan conformance, attempts,
    lifecycle, telemetry and quality verdicts are recomputed from the tables,
    every claim is marked confirmed, contradicted or unverifiable, and each
    section states the limit of its evidence. With --media the raw media are
    re-scored, with --against a rerun is compared; both count in the one verdict.
    """
    code = 0
    with cli_errors(as_json):
        args = replay_args(bundle, as_json=as_json, **shared)
        code = _run(args, as_json=as_json, markdown=markdown, verbosity=verbosity)
    sys.exit(code)
