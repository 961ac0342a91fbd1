"""``bundle init``: write a campaign skeleton (:mod:`bundler.campaign.scaffold` writes it)."""

from __future__ import annotations

from pathlib import Path

import click

from reprobundle.cli.common import (
    QUIET,
    cli_errors,
    emit_json,
    examples,
    json_option,
    say,
    verbosity_options,
    verdict,
)

__all__ = ["INIT_EXIT_HELP", "init_command"]

INIT_EXIT_HELP = """\b
Exit codes:
  0  skeleton written
  2  DIR exists and is not empty; the campaign id is not valid
  3  cannot write
"""


@click.command(
    name="init",
    epilog=examples(
        "bundle init my-campaign                 # then fill in the FILL-IN values",
        "bundle init runs/h3-kv --id h3-kv-2026 --json",
    )
    + INIT_EXIT_HELP,
)
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--id", "campaign_id", help="Campaign id (default: the folder name).")
@verbosity_options
@json_option
def init_command(directory: Path, campaign_id: str | None, verbosity: int, as_json: bool) -> None:
    """Write a campaign skeleton into DIRECTORY: every file, minimal and annotated.

    The skeleton does not seal until you fill it in: `bundle seal` names each
    FILL-IN value still there (the runtime commits); receipts.jsonl and
    claims.json start empty (sealed so, replay says NOT EVIDENCED). README.md
    in the skeleton explains every file and the commands to run, from the
    folder that holds DIRECTORY.
    """
    from bundler.campaign.scaffold import scaffold_campaign

    with cli_errors(as_json):
        res = scaffold_campaign(directory, campaign_id)
        if as_json:
            emit_json(
                {
                    "ok": True,
                    "directory": str(res.directory),
                    "files": res.files,
                    "to_fill": res.to_fill,
                }
            )
            return
        say(verdict("CREATED", "good"), f" {res.directory}: {len(res.files)} files")
        if verbosity <= QUIET:
            return
        for f in res.files:
            say(f"  {f}")
        say("to fill in (seal refuses FILL-IN values; the rest is what replay can check):")
        for item in res.to_fill:
            say(f"  - {item}")
        say(f"then: bundle plan check {res.directory / 'plans' / 'plan.json'}")
