"""What every ``bundle`` subcommand shares: error mapping, JSON output and trust options.

One place maps the error tree to messages and exit codes, so that
``bundle seal``, ``verify``, ``replay``, ``report``, ``plan`` and ``rerun``
fail the same way: a message naming the file, record and field, a JSON
document with ``--json``, never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from bundler._internal.textsafe import json_safe, safe
from bundler.errors import BundleError, CouldNotRunError

F = TypeVar("F", bound=Callable[..., Any])


def emit_json(doc: Any) -> None:
    """Print ``doc`` as indented, key-sorted JSON on stdout.

    Control, bidi and other invisible characters inside strings (and the lone
    surrogates of non-UTF-8 file names) are written as ``\\uXXXX`` escapes: the
    same JSON, but nothing in it can move a terminal's cursor or fail to encode.
    """
    click.echo(
        json_safe(json.dumps(doc, indent=2, sort_keys=True, default=str, ensure_ascii=False))
    )


def error_text(exc: BundleError) -> str:
    """``exc`` as printed: the message, then one ``  - problem`` line each, all escaped.

    Messages name files and bundle members, which may be hostile: a newline or
    an escape sequence in one must not draw a line of its own.
    """
    return "\n".join([safe(exc.message), *(f"  - {safe(str(p))}" for p in exc.problems)])


def fail(exc: BundleError, as_json: bool = False) -> NoReturn:
    """Report ``exc`` (JSON on stdout with ``--json``, text on stderr) and exit with its code."""
    if as_json:
        emit_json(
            {
                "ok": False,
                "error": exc.message,
                "exit_code": exc.exit_code,
                "problems": [
                    {"where": p.where, "record": p.record, "field": p.field, "message": p.message}
                    for p in exc.problems
                ],
            }
        )
    click.echo(f"error: {error_text(exc)}", err=True)
    sys.exit(exc.exit_code)


@contextmanager
def cli_errors(as_json: bool = False) -> Iterator[None]:
    """Map our error tree (and stray OS errors) to messages and exit codes, never tracebacks."""
    try:
        yield
    except BundleError as exc:
        fail(exc, as_json)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        fail(CouldNotRunError(f"{where}{exc.strerror or exc}"), as_json)
    except KeyboardInterrupt:
        click.echo("interrupted; nothing was written", err=True)
        sys.exit(130)


def trust_options(allow_unsigned_help: str) -> Callable[[F], F]:
    """``--key`` (repeatable), ``--trusted-keys FILE`` and ``--allow-unsigned``."""

    def decorate(f: F) -> F:
        f = click.option("--allow-unsigned", is_flag=True, help=allow_unsigned_help)(f)
        f = click.option(
            "--trusted-keys",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="File listing trusted keys: one PEM path or 'ssh-ed25519 ...' line each.",
        )(f)
        return click.option(
            "--key",
            "key_paths",
            type=click.Path(path_type=Path),
            multiple=True,
            help="Trusted public key of the signer (repeatable).",
        )(f)

    return decorate
