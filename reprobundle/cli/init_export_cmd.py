"""``bundle init`` and ``bundle export`` (registered on ``bundle`` by ``reprobundle/cli/main.py``).

Thin commands: :mod:`bundler.campaign.scaffold` writes the skeleton, :mod:`bundler.export`
verifies and writes the export; here only parsing and printing.
"""

from __future__ import annotations

from pathlib import Path

import click

from reprobundle.cli.common import (
    QUIET,
    cli_errors,
    emit_json,
    examples,
    load_trust,
    say,
    trust_options,
    verbosity_options,
    verdict,
)

__all__ = ["export_command", "init_command"]

INIT_EXIT_HELP = """\b
Exit codes:
  0  skeleton written
  2  DIR exists and is not empty; the campaign id is not valid
  3  cannot write
"""

EXPORT_EXIT_HELP = """\b
Exit codes:
  0  verified, then exported
  1  the bundle does not verify, or no trusted key verified it (without
     --allow-unsigned); nothing written
  2  DIR exists and is not empty; no --key/--trusted-keys and no --allow-unsigned
  3  cannot read the bundle or write DIR
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
@click.option("--json", "as_json", is_flag=True, help="Print a JSON result on stdout.")
def init_command(directory: Path, campaign_id: str | None, verbosity: int, as_json: bool) -> None:
    """Write a campaign skeleton into DIRECTORY: every file, minimal and annotated.

    The skeleton does not seal until you fill it in: `bundle seal` names each
    FILL-IN value still there (the runtime commits); receipts.jsonl and
    claims.json start empty. README.md in the skeleton explains every file.
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
        say("to fill in before `bundle seal` accepts it:")
        for item in res.to_fill:
            say(f"  - {item}")
        say(f"then: bundle plan check {res.directory / 'plans' / 'plan.json'}")


@click.command(
    name="export",
    epilog=examples(
        "bundle export run.bundle exported --key author.pub",
        "bundle export run.bundle exported-csv --key author.pub --format csv --json",
    )
    + EXPORT_EXIT_HELP,
)
@click.argument("bundle", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("directory", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["parquet", "csv"]),
    default="parquet",
    show_default=True,
    help="parquet: the sealed tables' bytes unchanged; csv: one CSV per table.",
)
@trust_options("Export a bundle no trusted key signed (integrity only; EXPORT.json says so).")
@verbosity_options
@click.option("--json", "as_json", is_flag=True, help="Print a JSON result on stdout.")
def export_command(
    bundle: Path,
    directory: Path,
    fmt: str,
    key_paths: tuple[Path, ...],
    trusted_keys: Path | None,
    allow_unsigned: bool,
    verbosity: int,
    as_json: bool,
) -> None:
    """Verify BUNDLE, then write its tables and carried files into DIRECTORY.

    Verification is the same as `bundle verify`'s; a bundle that does not verify
    is refused and nothing is written. DIRECTORY (new, or empty) gets tables/
    (Parquet or CSV), campaign.json, plans/, logs/, files/, scorer.json and
    EXPORT.json (source bundle, its SHA-256, signature status), all at once.
    """
    from bundler.export import export_bundle

    with cli_errors(as_json):
        given = load_trust(
            key_paths,
            trusted_keys,
            allow_unsigned,
            refusal="give --key or --trusted-keys to check the signature, "
            "or --allow-unsigned to export on integrity alone",
        )
        res = export_bundle(bundle, directory, fmt=fmt, trust=given)
        if as_json:
            emit_json(res.to_dict())
            return
        trust = "signature verified" if res.trusted else "UNTRUSTED: integrity only"
        say(verdict("EXPORTED", "good"), f" {bundle} -> {res.directory} ({fmt}; {trust})")
        if verbosity <= QUIET:
            return
        say(
            f"  tables   {len(res.tables)}: "
            + ", ".join(f"{k} {v}" for k, v in res.tables.items() if v)
        )
        say(f"  files    {len(res.files)} (documents, plans, logs, carried files)")
