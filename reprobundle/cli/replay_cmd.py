"""``bundle replay``: the click command (registered on ``bundle`` by ``reprobundle/cli/main.py``).

Parses, calls :func:`replay.api.replay_bundle`, prints the terminal report or
``--json``, writes ``--markdown`` atomically, and exits with the result's code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from bundler.errors import BundleError, CouldNotRunError, UsageError
from reprobundle.cli.common import fail, trust_options

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
could not be judged as 5. With --media, media that differ from the sealed
digests count as 1, a failed gate or coverage check as 4, an unattested or
incomplete re-score as 5.
"""


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


def _worst(*codes: int) -> int:
    """Integrity (1) over contradicted (4) over unverifiable (5) over ok (0)."""
    for code in (1, 4, 5):
        if code in codes:
            return code
    return 0


def _media(bundle: Path, keys: list[Any], allow_unsigned: bool, opts: dict[str, Any]) -> Any:
    """Re-score the raw media (``--media``) with PyAV, and LPIPS from attested weights."""
    from bundler.errors import IntegrityError, UsageError
    from bundler.verify import open_bundle
    from replay.media import DeviceError, rescore_bundle

    opened = open_bundle(bundle, trusted=keys, allow_unsigned=allow_unsigned)
    if not opened.report.ok:
        raise IntegrityError(
            f"{bundle}: does not verify; refusing to re-score", opened.report.problems
        )
    bar = _MediaBar(enabled=opts["progress"] and not opts["as_json"])
    try:
        return rescore_bundle(
            opened,
            opts["media_dirs"],
            weights_dir=opts["weights_dir"],
            jobs=opts["jobs"],
            device=opts["device"],
            progress=bar.update,
        )
    except DeviceError as exc:
        raise UsageError(str(exc)) from exc
    finally:
        bar.close()


class _MediaBar:
    """Progress per comparison on stderr, only on a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self._bar: Any = None
        self._done = 0

    def update(self, ev: Any) -> None:
        if not self.enabled or not ev.comparisons_total:
            return
        if self._bar is None:
            self._bar = click.progressbar(
                length=ev.comparisons_total, label="re-scoring media", file=sys.stderr
            )
            self._bar.__enter__()
        if ev.comparisons_done > self._done:
            self._bar.update(ev.comparisons_done - self._done)
            self._done = ev.comparisons_done

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


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
    media: dict[str, Any] | None = None,
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
    rescored = _media(bundle, keys, allow_unsigned, media) if media else None
    if as_json:
        from replay.report_json import result_to_dict

        doc = result_to_dict(result)
        if comparison is not None:
            doc["against"] = comparison.to_dict()
        if rescored is not None:
            doc["media"] = rescored.to_dict(per_frame=False)
        click.echo(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False))
    else:
        from replay.report_text import render_text

        click.echo(render_text(result), nl=False)
        if comparison is not None:
            from replay.rerun.compare import format_comparison

            click.echo(f"\nRERUN VS SEALED ({against})")
            for line in format_comparison(comparison):
                click.echo(f"  {line}")
        if rescored is not None:
            from replay.media import format_report

            click.echo("\nMEDIA RE-SCORED")
            click.echo(format_report(rescored))
    if markdown is not None:
        from replay.report_markdown import render_markdown

        atomic_write_bytes(markdown, render_markdown(result).encode("utf-8"))
    code = result.exit_code
    if comparison is not None:
        code = _combine(code, comparison.reproduced)
    if rescored is not None:
        code = _worst(code, rescored.exit_code)
    return code


@click.command(name="replay", epilog=REPLAY_EXIT_HELP)
@click.argument("bundle", type=click.Path(exists=True, dir_okay=False, path_type=Path))
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
    "--media",
    "media_dirs",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    multiple=True,
    help="Folder with the raw media (found by SHA-256; repeatable): re-score every comparison.",
)
@click.option(
    "--scorer-weights",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="With --media: folder with the LPIPS weight files, verified against scorer.json.",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="With --media: comparisons re-scored in parallel.",
)
@click.option(
    "--device",
    default="cpu",
    show_default=True,
    help="With --media: torch device for LPIPS (cpu, cuda[:N], npu[:N]).",
)
@click.option("--progress/--no-progress", default=True, help="Progress on a terminal.")
@trust_options("Replay even if no trusted key verified the signature; every section says so.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@click.option(
    "--markdown",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the report as Markdown to this file (atomically).",
)
def replay_command(
    bundle: Path,
    key_paths: tuple[Path, ...],
    trusted_keys: Path | None,
    against: Path | None,
    tolerance: float,
    media_dirs: tuple[Path, ...],
    scorer_weights: Path | None,
    jobs: int,
    device: str,
    progress: bool,
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
        if scorer_weights is not None and not media_dirs:
            raise UsageError("--scorer-weights needs --media DIR (the raw media to re-score)")
        media = {
            "media_dirs": list(media_dirs),
            "weights_dir": scorer_weights,
            "jobs": jobs,
            "device": device,
            "progress": progress,
            "as_json": as_json,
        }
        code = _run(
            bundle,
            keys=keys,
            allow_unsigned=allow_unsigned,
            as_json=as_json,
            markdown=markdown,
            against=against,
            tolerance=tolerance,
            media=media if media_dirs else None,
        )
    except BundleError as exc:
        fail(exc, as_json)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        fail(CouldNotRunError(f"{where}{exc.strerror or exc}"), as_json)
    sys.exit(code)
