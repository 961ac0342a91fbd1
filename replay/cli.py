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
With --against, a rerun whose effect did not reproduce counts as 4, one that
could not be judged as 5.
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


def _against(
    bundle: Path, against: Path, keys: list[Any], allow_unsigned: bool, tolerance: float
) -> Any:
    """Compare the rerun ``bundle`` with the sealed bundle it reran (both verified first)."""
    from bundler.errors import IntegrityError
    from bundler.verify import open_bundle
    from replay.rerun.compare import compare_bundles

    opened = []
    for p in (bundle, against):
        ob = open_bundle(p, trusted=keys, allow_unsigned=allow_unsigned)
        if not ob.report.ok:
            raise IntegrityError(f"{p}: does not verify; refusing to compare", ob.report.problems)
        opened.append(ob)
    return compare_bundles(opened[0], opened[1], tolerance=tolerance)


def _combine(code: int, reproduced: bool | None) -> int:
    """A rerun that did not reproduce the sealed effect is a contradiction (4); unjudged is 5."""
    from bundler.errors import EXIT_CLAIM_CONTRADICTED, EXIT_OK, EXIT_UNVERIFIABLE

    extra = {True: EXIT_OK, False: EXIT_CLAIM_CONTRADICTED, None: EXIT_UNVERIFIABLE}[reproduced]
    if EXIT_CLAIM_CONTRADICTED in (code, extra):
        return EXIT_CLAIM_CONTRADICTED
    return max(code, extra)


def _run(
    bundle: Path,
    *,
    keys: list[Any],
    allow_unsigned: bool,
    as_json: bool,
    markdown: Path | None,
    against: Path | None = None,
    tolerance: float = 0.10,
) -> int:
    from bundler._internal.atomic import atomic_write_bytes
    from replay.api import replay_bundle

    if not keys and not allow_unsigned:
        raise UsageError(
            "give --key PUB (or --trusted-keys FILE) to check the signature, or "
            "--allow-unsigned to replay an unsigned or untrusted bundle (every section then "
            "says so)"
        )
    result = replay_bundle(bundle, trusted=keys, allow_unsigned=allow_unsigned)
    comparison = _against(bundle, against, keys, allow_unsigned, tolerance) if against else None
    if as_json:
        from replay.report_json import result_to_dict

        doc = result_to_dict(result)
        if comparison is not None:
            doc["against"] = comparison.to_dict()
        click.echo(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False))
    else:
        from replay.report_text import render_text

        click.echo(render_text(result), nl=False)
        if comparison is not None:
            from replay.rerun.compare import format_comparison

            click.echo(f"\nRERUN VS SEALED ({against})")
            for line in format_comparison(comparison):
                click.echo(f"  {line}")
    if markdown is not None:
        from replay.report_markdown import render_markdown

        atomic_write_bytes(markdown, render_markdown(result).encode("utf-8"))
    if comparison is None:
        return result.exit_code
    return _combine(result.exit_code, comparison.reproduced)


@click.command(name="replay", epilog=REPLAY_EXIT_HELP)
@click.argument("bundle", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--key",
    "key_paths",
    type=click.Path(path_type=Path),
    multiple=True,
    help="Trusted public key of the signer (repeatable).",
)
@click.option(
    "--trusted-keys",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="File listing trusted keys: one PEM path or 'ssh-ed25519 ...' line each.",
)
@click.option(
    "--against",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="BUNDLE is a rerun: compare it side by side with this sealed bundle.",
)
@click.option(
    "--tolerance",
    type=click.FloatRange(min=0),
    default=0.10,
    show_default=True,
    help="With --against: relative tolerance on the speedup for 'reproduced'.",
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
def replay_command(  # noqa: PLR0917 - click passes every option positionally
    bundle: Path,
    key_paths: tuple[Path, ...],
    trusted_keys: Path | None,
    against: Path | None,
    tolerance: float,
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
        from bundler.keys import load_trusted_keys

        keys: list[Any] = load_trusted_keys(key_paths, trusted_keys)
        code = _run(
            bundle,
            keys=keys,
            allow_unsigned=allow_unsigned,
            as_json=as_json,
            markdown=markdown,
            against=against,
            tolerance=tolerance,
        )
    except BundleError as exc:
        _fail(exc, as_json)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        _fail(CouldNotRunError(f"{where}{exc.strerror or exc}"), as_json)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover - ``python -m replay.cli`` until registered
    replay_command()
