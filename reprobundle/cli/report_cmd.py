"""``bundle report`` (registered on ``bundle`` by ``reprobundle/cli/main.py``).

Verifies and replays once, exactly as ``bundle replay`` does (the same options
for media re-scoring and rerun comparison), renders the one result as HTML or
Markdown, writes the file atomically, prints a summary (or ``--json``), and
exits with the result's code. The report is written whatever the outcome: a
contradicted bundle deserves a report most of all.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from bundler.errors import UsageError
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

__all__ = ["REPORT_EXIT_HELP", "report_command"]

REPORT_EXIT_HELP = """\b
Exit codes (the report is written for 0, 1 with --media, 4 and 5):
  0  CONFIRMED: every claim confirmed, every gate passes, receipts conform to the plan
  1  integrity: tampered or malformed bundle, or tables that break the table
     contract (nothing written); unsigned or untrusted without --allow-unsigned
     (nothing written); with --media, media that differ from their sealed
     digests (written)
  2  usage: bad arguments, bundle missing, no --key/--trusted-keys and no
     --allow-unsigned, unreadable key
  3  could not run: I/O error, matplotlib missing (HTML)
  4  written; CONTRADICTED: a claim contradicted, a gate failed, a deviation from the
     plan, mixed attempts, a re-scored output failing, a rerun not reproducing
  5  written; UNVERIFIED or NOT EVIDENCED (see bundle replay --help)
"""


def _run(args: ReplayArgs, *, output: Path, fmt: str, as_json: bool, verbosity: int) -> int:
    from bundler._internal.atomic import atomic_write_bytes
    from replay.report.html.render import render_report

    if output.exists() and output.is_dir():
        raise UsageError(f"{output}: -o names a folder; give a file name")
    if output.resolve() == args.bundle.resolve():
        raise UsageError(f"{output}: -o would overwrite the bundle itself")
    verified, r = run_replay(args)
    data = render_report(verified, r, fmt).encode("utf-8")
    atomic_write_bytes(output, data)
    if as_json:
        emit_json(
            {
                "ok": True,
                "output": str(output),
                "format": fmt,
                "bytes": len(data),
                "outcome": str(r.outcome),
                "exit_code": r.exit_code,
                "checks_done": list(r.checks_done()),
                "integrity_failures": r.integrity_failures(),
                "failures": r.failures(),
                "gaps": r.gaps(),
                "not_evidenced": list(r.not_evidenced()),
            }
        )
        return int(r.exit_code)
    if verbosity <= QUIET:
        say(f"wrote {output}: {r.outcome} (exit {r.exit_code})")
        return int(r.exit_code)
    say(
        f"wrote {output} ({fmt}, {len(data):,} bytes): {r.outcome} (exit {r.exit_code}) — "
        + "; ".join(r.checks_done())
    )
    for why in (*r.integrity_failures(), *r.failures()):
        say(f"  ✗ {why}")
    for why in r.gaps():
        say(f"  ? {why}")
    if r.not_evidenced():
        say(f"  - not evidenced: {', '.join(r.not_evidenced())}")
    if verbosity >= VERBOSE:
        from replay.report.text import render_lines

        # The report's content as terminal text: every section, as `bundle replay -v` prints it.
        say("")
        say_lines(render_lines(r, verbose=True))
    return int(r.exit_code)


@click.command(
    name="report",
    epilog=examples(
        "bundle report run.bundle --key author.pub -o report.html",
        "bundle report run.bundle --key author.pub -o pr.md --format md --json",
    )
    + REPORT_EXIT_HELP,
)
@click.argument("bundle", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    required=True,
    help="File to write (atomically): report.html or report.md.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "md"]),
    default="html",
    show_default=True,
    help="html: one self-contained page with charts; md: Markdown for a pull-request body.",
)
@replay_options("Report on a bundle no trusted key signed; every section says so.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
@verbosity_options
def report_command(
    bundle: Path,
    output: Path,
    fmt: str,
    as_json: bool,
    verbosity: int,
    **shared: Any,  # the options of replay_options, for replay_args
) -> None:
    """Write a report of BUNDLE that people read: HTML with charts, or Markdown.

    The bundle is verified and replayed first, exactly as `bundle replay` does
    (with --media and --against too); the report renders that one result: the
    headline with its derivation and each claim's status, every measured request
    per server and arm, the quality gates with their margins, sources, attempts,
    lifecycle, telemetry, scorer identity, signatures, external artifacts, what is
    not claimed, the media re-score and rerun comparison when done, and the
    evidence limit of each section. The same inputs always give the same bytes.
    """
    code = 0
    with cli_errors(as_json):
        args = replay_args(bundle, as_json=as_json, **shared)
        code = _run(args, output=output, fmt=fmt, as_json=as_json, verbosity=verbosity)
    sys.exit(code)
