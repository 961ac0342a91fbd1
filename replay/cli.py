"""``bundle replay``: the click command (registered on ``bundle`` by ``bundler/cli.py``).

Parses, calls :func:`replay.api.replay_bundle`, prints the terminal report or
``--json``, writes ``--markdown`` atomically, and exits with the result's code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from bundler.errors import BundleError, CouldNotRunError, UsageError

__all__ = ["REPLAY_EXIT_HELP", "replay_command"]

REPLAY_EXIT_HELP = """\b
Exit codes:
  0  every claim confirmed, every gate passes, receipts conform to the plan
  1  integrity: tampered or malformed bundle; unsigned or untrusted without --allow-unsigned
  2  usage: bad arguments, unreadable key
  3  could not run: I/O error, no single accepted attempt
  4  a claim contradicted, a gate failed, a deviation from the frozen plan, or mixed attempts
  5  a claim unverifiable or a gate unattested (and nothing contradicted)
"""


def _fail(exc: BundleError, as_json: bool) -> NoReturn:
    if as_json:
        doc: dict[str, Any] = {
            "ok": False,
            "error": exc.message,
            "exit_code": exc.exit_code,
            "problems": [
                {"where": p.where, "record": p.record, "field": p.field, "message": p.message}
                for p in exc.problems
            ],
        }
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
    click.echo(f"error: {exc}", err=True)
    sys.exit(exc.exit_code)


def _run(
    bundle: Path,
    key_paths: tuple[Path, ...],
    allow_unsigned: bool,
    as_json: bool,
    markdown: Path | None,
) -> int:
    from bundler._internal.atomic import atomic_write_bytes
    from bundler.keys import load_public_key
    from replay.api import replay_bundle

    if not key_paths and not allow_unsigned:
        raise UsageError(
            "give --key PUB to check the signature, or --allow-unsigned to replay an "
            "unsigned or untrusted bundle (every section then says so)"
        )
    keys = [load_public_key(p) for p in key_paths]
    result = replay_bundle(bundle, trusted=keys, allow_unsigned=allow_unsigned)
    if as_json:
        from replay.report_json import result_to_dict

        click.echo(json.dumps(result_to_dict(result), indent=2, sort_keys=True, ensure_ascii=False))
    else:
        from replay.report_text import render_text

        click.echo(render_text(result), nl=False)
    if markdown is not None:
        from replay.report_markdown import render_markdown

        atomic_write_bytes(markdown, render_markdown(result).encode("utf-8"))
    return result.exit_code


@click.command(name="replay", epilog=REPLAY_EXIT_HELP)
@click.argument("bundle", type=click.Path(path_type=Path))
@click.option(
    "--key",
    "key_paths",
    type=click.Path(path_type=Path),
    multiple=True,
    help="Trusted public key of the signer (repeatable).",
)
@click.option(
    "--allow-unsigned",
    is_flag=True,
    help="Replay even if no trusted key verified the signature; every section says so.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@click.option(
    "--markdown",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the report as Markdown to this file (atomically).",
)
def replay_command(
    bundle: Path,
    key_paths: tuple[Path, ...],
    allow_unsigned: bool,
    as_json: bool,
    markdown: Path | None,
) -> None:
    """Re-derive every statistic, verdict and claim of BUNDLE, offline.

    Integrity first: a tampered bundle is refused, and an unsigned or untrusted
    one too unless --allow-unsigned. Then latency, plan conformance, attempts,
    lifecycle, telemetry and quality verdicts are recomputed from the tables,
    every claim is marked confirmed, contradicted or unverifiable, and each
    section states the limit of its evidence.
    """
    try:
        code = _run(bundle, key_paths, allow_unsigned, as_json, markdown)
    except BundleError as exc:
        _fail(exc, as_json)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        _fail(CouldNotRunError(f"{where}{exc.strerror or exc}"), as_json)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover - ``python -m replay.cli`` until registered
    replay_command()
