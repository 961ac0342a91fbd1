"""What every ``bundle`` subcommand shares: errors, JSON, options, text output, one progress bar.

One place maps the error tree to messages and exit codes, so that
``bundle seal``, ``verify``, ``replay``, ``report``, ``plan`` and ``rerun``
fail the same way: a message naming the file, record and field, a JSON
document with ``--json``, never a traceback.

It is also the one text output path: every line a command prints goes through
:func:`say`, which escapes it (:func:`bundler._internal.textsafe.safe`) and only
then colours our own verdict words. Author text (names, ids, reasons read from a
bundle or campaign) is therefore never escaped call site by call site: a command
builds plain lines, and nothing in them can move the cursor, clear the screen or
reverse text, while our colour codes survive.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from bundler._internal.textsafe import json_safe, safe
from bundler.errors import BundleError, CouldNotRunError, UsageError

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar as ClickProgressBar

    from bundler.format.trust import Trust
    from replay.media.result import MediaProgress

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


class JsonAwareGroup(click.Group):
    """The ``bundle`` group: click's own usage errors become JSON under ``--json``.

    Click reports a bad option, a missing file or a bad value itself, before any
    command runs, as text on stderr. With ``--json`` anywhere on the command line
    the same error is also printed as our error document on stdout (the shape of
    :func:`fail`), with the same exit code 2, so a script reading stdout always
    gets JSON.
    """

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        wants_json = "--json" in (argv[: argv.index("--")] if "--" in argv else argv)
        try:
            rv = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as exc:
            if not standalone_mode:
                raise
            if wants_json:
                emit_json(usage_error_doc(exc))
            exc.show()
            sys.exit(exc.exit_code)
        except click.Abort:
            if not standalone_mode:
                raise
            say("interrupted; nothing was written", err=True)
            sys.exit(130)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


def usage_error_doc(exc: click.ClickException) -> dict[str, Any]:
    """Click's usage error ``exc`` as our ``--json`` error document."""
    param = getattr(exc, "param", None)
    field = None
    if param is not None:
        field = param.opts[0] if getattr(param, "opts", None) else param.name
    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None else None
    message = exc.format_message()
    return {
        "ok": False,
        "error": message,
        "exit_code": exc.exit_code,
        "problems": [{"where": where, "record": None, "field": field, "message": message}],
    }


def error_lines(exc: BundleError) -> list[str]:
    """``exc`` as printed: ``error: message``, then one ``  - problem`` line each.

    Messages name files and bundle members, which may be hostile; :func:`say`
    escapes each line, so a newline or an escape sequence in one cannot draw a
    line of its own.
    """
    return [f"error: {exc.message}", *(f"  - {p}" for p in exc.problems)]


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
    say_lines(error_lines(exc), err=True)
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
        say("interrupted; nothing was written", err=True)
        sys.exit(130)


def exits(*lines: str) -> str:
    """A command's own exit codes, as an unwrapped help epilog."""
    return "\b\nExit codes:\n" + "\n".join(f"  {line}" for line in lines) + "\n"


def examples(*commands: str) -> str:
    """An unwrapped ``Examples:`` help block; each command line is run by the tests.

    Each entry is ``"bundle ... # what it does"``; ``tests/test_cli_help_examples.py``
    extracts every ``$ bundle`` line from ``--help`` and runs it on a small sample.
    """
    return "\b\nExamples:\n" + "\n".join(f"  $ {c}" for c in commands) + "\n\n"


QUIET, NORMAL, VERBOSE = -1, 0, 1

json_option = click.option("--json", "as_json", is_flag=True, help="Print a JSON result on stdout.")


def verbosity_options(f: F) -> F:
    """``-q/--quiet`` (the verdict line only) and ``-v/--verbose`` (more detail).

    Every command takes both, with the same meaning (``tests/test_cli_conventions.py``
    checks each command the group registers): ``-q`` prints the verdict or result
    line (and, for a failure, what failed), ``-v`` the full listing where the
    default is a summary. Both write one ``verbosity`` value (-1, 0 or 1);
    ``--json`` output is the same at every level.
    """
    f = click.option(
        "-v",
        "--verbose",
        "verbosity",
        flag_value=VERBOSE,
        help="More detail: the full listing (every member, section or event), not the summary.",
    )(f)
    return click.option(
        "-q",
        "--quiet",
        "verbosity",
        flag_value=QUIET,
        default=NORMAL,
        help="Print the verdict line only (errors still go to stderr).",
    )(f)


def colour_enabled(err: bool = False) -> bool:
    """Colour only on a terminal, and never when ``NO_COLOR`` is set (no-color.org)."""
    stream = sys.stderr if err else sys.stdout
    return stream.isatty() and not os.environ.get("NO_COLOR")


_TONES = {"good": "green", "bad": "red", "warn": "yellow"}


@dataclass(frozen=True)
class Styled:
    """One of our own words, coloured by ``tone`` (good, bad, warn) when :func:`say` prints it."""

    text: str
    tone: str


def verdict(word: str, tone: str) -> Styled:
    """A verdict word for :func:`say`, coloured by ``tone`` (good, bad, warn) where enabled."""
    return Styled(word, tone)


def text_line(*parts: str | Styled, colour: bool = False) -> str:
    """``parts`` as one printable line: each escaped with ``safe()``, then ours coloured.

    Escaping comes first so that an author's ESC, CR, newline or bidi control is
    shown as ``\\x1b``, ``\\r``, ``\\n``, ``\\u202e`` and cannot draw or recolour
    anything; the colour codes added afterwards are the only ones on the line.
    """
    out = []
    for p in parts:
        if isinstance(p, Styled):
            word = safe(p.text)
            out.append(click.style(word, fg=_TONES[p.tone], bold=True) if colour else word)
        else:
            out.append(safe(p))
    return "".join(out)


def say(*parts: str | Styled, err: bool = False) -> None:
    """Print one line (stdout, or stderr with ``err``) through :func:`text_line`.

    Every text line a command prints goes through here; a line break inside a
    part is escaped, so a command prints several lines by calling this once each.
    """
    click.echo(text_line(*parts, colour=colour_enabled(err)), err=err)


def say_lines(lines: Iterable[str], err: bool = False) -> None:
    """Print each of ``lines`` through :func:`say`."""
    for line in lines:
        say(line, err=err)


def external_groups(externals: list[dict[str, Any]]) -> list[tuple[int, str, str, str]]:
    """Externals grouped by (status, kind, availability): one line per group, not per file."""
    counts: dict[tuple[str, str, str], int] = {}
    for e in externals:
        key = (e.get("status", "external"), e["kind"], e.get("availability") or "")
        counts[key] = counts.get(key, 0) + 1
    return [(n, st, kind, avail) for (st, kind, avail), n in counts.items()]


def trust_options(allow_unsigned_help: str) -> Callable[[F], F]:
    """``--key`` (repeatable), ``--trusted-keys FILE`` and ``--allow-unsigned``."""

    def decorate(f: F) -> F:
        f = click.option("--allow-unsigned", is_flag=True, help=allow_unsigned_help)(f)
        f = click.option(
            "--trusted-keys",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="Trusted keys: a list of PEM paths and 'ssh-ed25519 ...' lines, or an OpenSSH "
            "allowed_signers file (principals are shown).",
        )(f)
        return click.option(
            "--key",
            "key_paths",
            type=click.Path(path_type=Path),
            multiple=True,
            help="Trusted public key of the signer: PEM, an ssh-ed25519 line (.pub) or a key list "
            "(repeatable).",
        )(f)

    return decorate


def load_trust(
    key_paths: Sequence[Path],
    trusted_keys: Path | None,
    allow_unsigned: bool,
    *,
    refusal: str | None = None,
) -> Trust:
    """The trust :func:`trust_options` asked for: their keys, and ``--allow-unsigned``.

    ``refusal`` is the usage message for options that trust nobody and accept
    nothing (no key, no ``--allow-unsigned``): every bundle would be refused, so
    the command is refused before it reads one.

    Raises:
        UsageError: a key file cannot be read; or ``refusal`` applies.
    """
    from bundler.format.keys import load_trusted_keys
    from bundler.format.trust import Trust

    trust = Trust.keys(load_trusted_keys(key_paths, trusted_keys), allow_unsigned=allow_unsigned)
    if refusal is not None and trust.refuses_all:
        raise UsageError(refusal)
    return trust


class ProgressBar:
    """The one progress bar: click's, on stderr, shown only on a terminal; thread-safe.

    Seal reports stages (:meth:`update`), verify hashed bytes (:meth:`bytes_callback`),
    a media re-score comparisons (:meth:`media`); the first report sizes the bar.
    """

    def __init__(self, label: str, enabled: bool) -> None:
        self.label = label
        self.enabled = enabled and sys.stderr.isatty()
        self._bar: ClickProgressBar[int] | None = None
        self._lock = threading.Lock()
        self._last = 0

    def update(self, stage: str, done: int, total: int) -> None:
        """``done`` of ``total`` in ``stage`` (seal's ``progress`` callback)."""
        # A new stage counts from zero again, so the bar may move back.
        self._move(f"{self.label} ({stage})", done, total, backwards=True)

    def bytes_callback(self, total: int) -> Callable[[int], None]:
        """A callback adding hashed bytes, out of ``total``, to the ``hash`` stage."""
        seen = [0]

        def cb(n: int) -> None:
            seen[0] += n
            self.update("hash", seen[0], total)

        return cb

    def media(self, ev: MediaProgress) -> None:
        """A media re-score event: comparisons done out of their total; never moves back."""
        self._move(self.label, ev.comparisons_done, ev.comparisons_total, backwards=False)

    def _move(self, label: str, done: int, total: int, *, backwards: bool) -> None:
        if not self.enabled or total <= 0:
            return
        with self._lock:
            if self._bar is None:
                self._bar = click.progressbar(length=total, label=label, file=sys.stderr)
                self._bar.__enter__()
            if backwards or done > self._last:
                self._bar.update(done - self._last)
                self._last = done

    def close(self) -> None:
        """Finish the bar (its last line) if one was shown."""
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
