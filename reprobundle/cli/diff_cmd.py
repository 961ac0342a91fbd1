"""``bundle diff OLD NEW``: what changed between two sealed revisions, for a reviewer.

Verifies both (the trust options of ``verify``), computes one
:class:`replay.diff.BundleDiff` and prints it as text, ``--json`` or ``--format md``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from bundler.errors import EXIT_DIFFERS, EXIT_OK
from reprobundle.cli.common import (
    QUIET,
    cli_errors,
    emit_json,
    examples,
    exits,
    json_option,
    load_trust,
    say,
    say_lines,
    trust_options,
    verbosity_options,
    verdict,
)

__all__ = ["DIFF_EXIT_HELP", "diff_command"]

DIFF_EXIT_HELP = exits(
    "0  both verified; identical content (a change of signers alone is reported)",
    f"{EXIT_DIFFERS}  both verified; the content differs (verdict, tables, members, externals)",
    "1  either bundle fails to verify, is unsigned/untrusted without --allow-unsigned,",
    "   or its tables break the table contract or the content limits",
    "2  usage: bad arguments, no --key/--trusted-keys and no --allow-unsigned",
    "3  could not run: I/O error; a bundle with no single accepted attempt",
)


@click.command(
    name="diff",
    epilog=examples(
        "bundle diff run.bundle evidence/run.bundle --key author.pub",
        "bundle diff run.bundle evidence/run.bundle --key author.pub --format md",
    )
    + DIFF_EXIT_HELP,
)
@click.argument("old", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("new", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@trust_options("Diff bundles no trusted key signed (integrity only; each side says so).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "md"]),
    default="text",
    show_default=True,
    help="text for a terminal; md for a pull-request comment.",
)
@verbosity_options
@json_option
def diff_command(
    old: Path,
    new: Path,
    key_paths: tuple[Path, ...],
    trusted_keys: Path | None,
    allow_unsigned: bool,
    fmt: str,
    verbosity: int,
    as_json: bool,
) -> None:
    """Show what changed from OLD to NEW: verdict, gates and plan, tables, members,
    externals, signers. Both bundles are verified first; a loosened gate is shown first."""
    from bundler.verified import open_verified
    from replay.diff import diff_bundles
    from replay.diff.render import diff_to_dict, headline, render_markdown, render_text

    code = EXIT_OK
    with cli_errors(as_json):
        trust = load_trust(
            key_paths,
            trusted_keys,
            allow_unsigned,
            refusal="give --key or --trusted-keys to check signatures, "
            "or --allow-unsigned to diff by integrity alone",
        )
        result = diff_bundles(open_verified(old, trust=trust), open_verified(new, trust=trust))
        code = EXIT_DIFFERS if result.content_differs else EXIT_OK
        if as_json:
            emit_json(diff_to_dict(result, code))
        elif fmt == "md":
            # Already inert Markdown (replay.report.escape); printed as is, not re-escaped.
            click.echo(render_markdown(result), nl=False)
        else:
            lines = render_text(result)
            first = len(result.alerts)
            for line in lines[:first]:
                say(verdict(line, "bad"))
            tone = "good" if result.identical else "bad" if result.content_differs else "warn"
            head = lines[first]
            word = headline(result)
            say(head[: len(head) - len(word)], verdict(word, tone))
            # -q: a loosened gate (an alert) and the headline only; -v adds nothing,
            # the default already lists every change up to the diff's limits.
            if verbosity > QUIET:
                say_lines(lines[first + 1 :])
    sys.exit(code)
