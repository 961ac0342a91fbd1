"""``bundle lint-text``: find closing syntax ("fixes #123") in summary text."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from bundler.errors import EXIT_INTEGRITY, EXIT_OK
from reprobundle.cli.common import (
    QUIET,
    cli_errors,
    emit_json,
    examples,
    exits,
    json_option,
    say,
    verbosity_options,
    verdict,
)

__all__ = ["LINT_EXIT_HELP", "lint_text_command"]


LINT_EXIT_HELP = exits(
    "0  no closing syntax in any file",
    "1  closing syntax found (each printed as FILE:LINE:COLUMN)",
    "2  a file is missing, bad arguments",
    "3  a file cannot be read",
)


@click.command(
    name="lint-text",
    epilog=examples(
        "bundle lint-text summary.md",
    )
    + LINT_EXIT_HELP,
)
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@verbosity_options
@json_option
def lint_text_command(files: tuple[Path, ...], verbosity: int, as_json: bool) -> None:
    """Find closing syntax ("fixes #123") in summary text (exit 1 if any is found)."""
    from bundler._internal.userfile import DOCUMENT_MAX_BYTES, read_user_file
    from bundler.lint_text import find_closing_references

    with cli_errors(as_json):
        found = []
        for f in files:
            data = read_user_file(f, what="text file", max_bytes=DOCUMENT_MAX_BYTES)
            text = data.decode("utf-8", errors="replace")
            found += [{"file": str(f), **r.__dict__} for r in find_closing_references(text)]
        if as_json:
            emit_json({"ok": not found, "findings": found})
        else:
            if verbosity <= QUIET:
                found_text = f"closing syntax found: {len(found)}" if found else "clean"
                say(verdict(found_text, "bad" if found else "good"))
                sys.exit(EXIT_INTEGRITY if found else EXIT_OK)
            for r in found:
                say(
                    f"{r['file']}:{r['line']}:{r['column']}: closing keyword "
                    f"{r['keyword']!r} before {r['reference']} ({r['text']!r}); cite "
                    "the source without it, e.g. 'vLLM-Omni PR 9241'"
                )
            if not found:
                say(f"no closing syntax in {len(files)} file(s)")
        sys.exit(EXIT_INTEGRITY if found else EXIT_OK)
