"""``bundle seal``: validate a campaign directory and seal it into one signed bundle."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from bundler.errors import UsageError
from reprobundle.cli.common import (
    QUIET,
    VERBOSE,
    ProgressBar,
    cli_errors,
    emit_json,
    examples,
    exits,
    json_option,
    say,
    verbosity_options,
    verdict,
)

if TYPE_CHECKING:
    from bundler.seal import SealResult

__all__ = ["SEAL_EXIT_HELP", "seal_command"]


SEAL_EXIT_HELP = exits(
    "0  bundle written",
    "2  campaign missing or invalid (each problem named by file, record, field), key",
    "   unreadable, --key/--unsigned missing or both, output exists (no --force)",
    "3  cannot read a carried file or write the output",
)


@click.command(
    name="seal",
    epilog=examples(
        "bundle seal campaign -o sealed.bundle --key author",
        "bundle seal campaign -o draft.bundle --unsigned --json",
    )
    + SEAL_EXIT_HELP,
)
@click.argument("campaign_dir", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    required=True,
    help="Bundle file to write (atomically).",
)
@click.option(
    "--key",
    "key_paths",
    type=click.Path(path_type=Path),
    multiple=True,
    help="Private key to sign with (repeatable).",
)
@click.option("--unsigned", is_flag=True, help="Seal without any signature (explicit opt-out).")
@click.option(
    "--passphrase-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Passphrase of an encrypted key.",
)
@click.option(
    "--media",
    "artifact_dirs",
    type=click.Path(file_okay=False, path_type=Path),
    multiple=True,
    help="Folder where external artifacts (media) may be found to hash (repeatable).",
)
@click.option("--jobs", type=click.IntRange(min=1), help="Hashing threads (default: cores).")
@click.option("--force", is_flag=True, help="Replace an existing output file.")
@click.option("--progress/--no-progress", default=True, help="Progress bar on a terminal.")
@verbosity_options
@json_option
def seal_command(
    campaign_dir: Path,
    output: Path,
    key_paths: tuple[Path, ...],
    unsigned: bool,
    passphrase_file: Path | None,
    artifact_dirs: tuple[Path, ...],
    jobs: int | None,
    force: bool,
    progress: bool,
    verbosity: int,
    as_json: bool,
) -> None:
    """Validate CAMPAIGN_DIR and seal it into one signed bundle."""
    from bundler.format.keys import load_private_key, read_passphrase_file
    from bundler.seal import seal_campaign

    with cli_errors(as_json):
        if not key_paths and not unsigned:
            raise UsageError("give --key KEY to sign, or --unsigned to seal without a signature")
        if key_paths and unsigned:
            raise UsageError("--key and --unsigned exclude each other")
        pw = read_passphrase_file(passphrase_file) if passphrase_file else None
        keys = [load_private_key(p, pw) for p in key_paths]
        bar = ProgressBar("sealing", progress and not as_json)
        try:
            res = seal_campaign(
                campaign_dir,
                output,
                keys=keys,
                artifact_dirs=artifact_dirs,
                jobs=jobs,
                progress=bar.update,
                force=force,
            )
        finally:
            bar.close()
        if as_json:
            emit_json({"ok": True, **res.__dict__})
            return
        _print_seal(res, verbosity, campaign_dir)


def _plan_warnings(warnings: list[str], verbosity: int, campaign_dir: Path) -> list[str]:
    """Seal's warnings, each plan's plan-check warnings in one line unless -v.

    Seal's plan warnings read ``PLAN, field 'F': plan check warning [CODE]: WHY``
    (``bundler.campaign.plan_check.seal_plan_findings``); WHY runs to hundreds of
    characters and ``bundle plan check`` prints it with the schedule that explains it,
    so the default view names each plan's codes once and where to read more.
    """
    if verbosity >= VERBOSE:
        return list(warnings)
    out: list[str] = []
    codes: dict[str, list[str]] = {}
    for w in warnings:
        head, sep, _ = w.partition("]: ")
        plan, field_sep, rest = head.partition(", field ")
        code = rest.rpartition("[")[2]
        if not sep or not field_sep or not code:
            out.append(w)
            continue
        if plan not in codes:
            codes[plan] = []
            out.append(plan)  # a place holder, filled below, keeps the first position
        codes[plan].append(code)
    return [
        f"{w}: {len(codes[w])} plan check warning(s) [{', '.join(codes[w])}]; details: "
        f"bundle plan check {campaign_dir / w} (or seal -v)"
        if w in codes
        else w
        for w in out
    ]


def _print_seal(res: SealResult, verbosity: int, campaign_dir: Path) -> None:
    say(
        verdict("SEALED", "good"),
        f" {res.campaign_id} -> {res.output} ({res.bundle_bytes:,} bytes; "
        + (f"signed by {len(res.signers)} key(s))" if res.signers else "UNSIGNED)"),
    )
    if verbosity <= QUIET:
        return
    say(f"  sha256   {res.bundle_sha256}")
    say(
        f"  members  {res.members - 2} files in the manifest (+ manifest and signature "
        "envelope); rows: " + ", ".join(f"{k} {v}" for k, v in res.tables.items() if v)
    )
    hashed = sum(1 for e in res.external if e["hashed_at_seal"])
    say(f"  external {len(res.external)} artifact(s), {hashed} hashed here")
    scrubbed = sum(r["count"] for r in res.sanitization)
    say(f"  scrubbed {scrubbed} value(s) in {len(res.sanitization)} field(s)")
    say("  signers  " + (", ".join(res.signers) if res.signers else "none (unsigned)"))
    for w in _plan_warnings(list(res.warnings), verbosity, campaign_dir):
        say(f"  warning: {w}", err=True)
    findings = res.findings if verbosity >= VERBOSE else res.findings[:5]
    for f in findings:
        say(
            f"  warning: {f['member']} line {f['line']}: looks like a {f['rule']} "
            "(file carried verbatim, not scrubbed)",
            err=True,
        )
    if len(findings) < len(res.findings):
        say(
            f"  warning: {len(res.findings) - len(findings)} more such finding(s) (-v lists all)",
            err=True,
        )
