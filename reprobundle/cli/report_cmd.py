"""``bundle report``: the click command (registered on ``bundle`` by ``reprobundle/cli/main.py``).

Parses, calls :func:`replay.html.render.render_report`, writes the file
atomically, prints one summary line, and exits with the replay's code (the
report is written whatever the outcome: a contradicted bundle deserves a
report most of all).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from bundler.errors import BundleError, CouldNotRunError, UsageError
from reprobundle.cli.common import fail, trust_options

__all__ = ["REPORT_EXIT_HELP", "report_command"]

REPORT_EXIT_HELP = """\b
Exit codes (the report is written for 0, 4 and 5):
  0  every claim confirmed, every gate passes, receipts conform to the plan
  1  integrity: tampered or malformed bundle; unsigned or untrusted without --allow-unsigned
  2  usage: bad arguments, unreadable key, a --media-result/--rerun-result that is not one
  3  could not run: I/O error, no single accepted attempt, matplotlib missing (HTML)
  4  written; a claim contradicted, a gate failed, a deviation from the plan, mixed attempts
  5  written; a claim unverifiable or a gate unattested (and nothing contradicted)
"""


def _read_json(path: Path, option: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise UsageError(f"{path}: {option}: no such file") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: {option}: not a JSON file ({exc})") from exc


def _run(
    *,
    bundle: Path,
    output: Path,
    fmt: str,
    key_paths: tuple[Path, ...],
    trusted_keys: Path | None,
    allow_unsigned: bool,
    media_result: Path | None,
    rerun_result: Path | None,
) -> int:
    from bundler._internal.atomic import atomic_write_bytes
    from bundler.keys import load_trusted_keys
    from replay.html.extras import normalize_media, normalize_rerun
    from replay.html.render import render_report

    keys: list[Any] = load_trusted_keys(key_paths, trusted_keys)
    if not keys and not allow_unsigned:
        raise UsageError(
            "give --key or --trusted-keys to check the signature, or --allow-unsigned to report "
            "on an unsigned or untrusted bundle (every section then says so)"
        )
    if output.exists() and output.is_dir():
        raise UsageError(f"{output}: -o names a folder; give a file name")
    if output.resolve() == bundle.resolve():
        raise UsageError(f"{output}: -o would overwrite the bundle itself")
    media = None
    if media_result is not None:
        media = normalize_media(_read_json(media_result, "--media-result"), str(media_result))
    rerun = None
    if rerun_result is not None:
        rerun = normalize_rerun(_read_json(rerun_result, "--rerun-result"), str(rerun_result))
    rendered = render_report(
        bundle,
        fmt,
        trusted=keys,
        allow_unsigned=allow_unsigned,
        media=media,
        rerun=rerun,
    )
    atomic_write_bytes(output, rendered.text.encode("utf-8"))
    r = rendered.result
    click.echo(
        f"wrote {output} ({fmt}, {len(rendered.text.encode('utf-8')):,} bytes): "
        f"{r.outcome} (exit {r.exit_code})"
    )
    for why in r.failures():
        click.echo(f"  ✗ {why}")
    for why in r.gaps():
        click.echo(f"  ? {why}")
    return r.exit_code


@click.command(name="report", epilog=REPORT_EXIT_HELP)
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
@trust_options("Report on a bundle no trusted key signed; every section says so.")
@click.option(
    "--media-result",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A media replay's JSON result of this bundle, to add its section.",
)
@click.option(
    "--rerun-result",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A rerun comparison's JSON result against this bundle, to add its section.",
)
def report_command(
    *,
    bundle: Path,
    output: Path,
    fmt: str,
    key_paths: tuple[Path, ...],
    trusted_keys: Path | None,
    allow_unsigned: bool,
    media_result: Path | None,
    rerun_result: Path | None,
) -> None:
    """Write a report of BUNDLE that people read: HTML with charts, or Markdown.

    The bundle is verified and replayed first (as `bundle replay` does); the
    report shows the headline with its derivation and each claim's status,
    every measured request per server and arm, the quality gates with their
    margins, sources, attempts, lifecycle, telemetry, scorer identity,
    signatures, external artifacts, what is not claimed, and the evidence limit
    of each section. The same bundle always gives the same bytes.
    """
    try:
        code = _run(
            bundle=bundle,
            output=output,
            fmt=fmt,
            key_paths=key_paths,
            trusted_keys=trusted_keys,
            allow_unsigned=allow_unsigned,
            media_result=media_result,
            rerun_result=rerun_result,
        )
    except BundleError as exc:
        fail(exc)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        fail(CouldNotRunError(f"{where}{exc.strerror or exc}"))
    except KeyboardInterrupt:
        click.echo("interrupted; nothing was written", err=True)
        sys.exit(130)
    sys.exit(code)
