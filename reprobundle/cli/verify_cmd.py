"""``bundle verify``: check a bundle's signatures, every member's digest and external artifacts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bundler.errors import EXIT_INTEGRITY, EXIT_OK, UsageError
from reprobundle.cli.common import (
    QUIET,
    VERBOSE,
    ProgressBar,
    cli_errors,
    emit_json,
    examples,
    exits,
    external_groups,
    json_option,
    load_trust,
    say,
    say_lines,
    trust_options,
    verbosity_options,
    verdict,
)

if TYPE_CHECKING:
    from bundler.verify import VerifyReport

__all__ = ["VERIFY_EXIT_HELP", "verify_command", "verify_verdict"]


VERIFY_EXIT_HELP = exits(
    "0  intact, and a trusted key verified a signature (VERIFIED); with",
    "   --allow-unsigned also intact but untrusted (UNTRUSTED)",
    "1  any integrity problem, or unsigned/untrusted without --allow-unsigned (a",
    "   key given that verifies no signature: NOT VERIFIED, the key named)",
    "2  bundle missing; no --key/--trusted-keys and no --allow-unsigned; unreadable",
    "   key; bad --media",
    "3  the bundle exists but cannot be read",
)


@click.command(
    name="verify",
    epilog=examples(
        "bundle verify run.bundle --key author.pub",
        "bundle verify run.bundle --trusted-keys trusted.txt --json",
        "bundle verify run.bundle evidence/run.bundle --key author.pub",
    )
    + VERIFY_EXIT_HELP,
)
@click.argument(
    "bundles",
    metavar="BUNDLE...",
    nargs=-1,
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
)
@trust_options("Accept a bundle no trusted key signed (integrity only; says so).")
@click.option(
    "--media",
    "media_dirs",
    type=click.Path(file_okay=False, path_type=Path),
    multiple=True,
    help="Folder holding external artifacts (media) to check (repeatable).",
)
@click.option("--jobs", type=click.IntRange(min=1), help="Hashing threads (default: cores).")
@click.option("--progress/--no-progress", default=True, help="Progress bar on a terminal.")
@verbosity_options
@json_option
def verify_command(
    bundles: tuple[Path, ...],
    key_paths: tuple[Path, ...],
    trusted_keys: Path | None,
    allow_unsigned: bool,
    media_dirs: tuple[Path, ...],
    jobs: int | None,
    progress: bool,
    verbosity: int,
    as_json: bool,
) -> None:
    """Check each BUNDLE's signatures, every member's digest and external artifacts.

    Several bundles (a pre-commit hook passes every staged ``*.bundle``) are
    checked in turn; the exit code is 1 if any of them fails.
    """
    from bundler.verify import check_bundle

    with cli_errors(as_json):
        if as_json and len(bundles) > 1:
            raise UsageError("--json reports one bundle: give a single BUNDLE")
        trust = load_trust(
            key_paths,
            trusted_keys,
            allow_unsigned,
            refusal="give --key or --trusted-keys to check signatures, "
            "or --allow-unsigned to check integrity alone",
        )
        for d in media_dirs:
            if not d.is_dir():
                raise UsageError(f"{d}: --media must be an existing folder")
        all_ok = True
        for bundle in bundles:
            bar = ProgressBar("verifying", progress and not as_json)
            try:
                rep = check_bundle(
                    bundle,
                    trust=trust,
                    media_dirs=media_dirs,
                    jobs=jobs,
                    # Sizing the bar walks the media folders: only when a bar is shown.
                    progress=bar.bytes_callback(_media_total(media_dirs))
                    if media_dirs and bar.enabled
                    else None,
                )
            finally:
                bar.close()
            if as_json:
                emit_json({**rep.to_dict(), **verify_verdict(rep)})
            else:
                _print_verify(rep, verbosity)
            all_ok = all_ok and rep.ok
        sys.exit(EXIT_OK if all_ok else EXIT_INTEGRITY)


def _media_total(dirs: tuple[Path, ...]) -> int:
    # An upper bound for the bar; only files the manifest names are hashed.
    return sum(p.stat().st_size for d in dirs for p in d.rglob("*") if p.is_file())


def verify_verdict(rep: VerifyReport) -> dict[str, Any]:
    """``trusted`` and ``verdict`` of a verify report (added to its ``--json`` form).

    ``verified`` only when nothing is wrong and a trusted key verified a
    signature; ``untrusted`` when the bundle is intact but no trusted key
    verified it (passes only with ``--allow-unsigned``: integrity only);
    ``failed`` otherwise. The word VERIFIED is never the verdict of a bundle no
    trusted key verified, whatever the flags.
    """
    trusted = rep.trusted
    verdict = "verified" if trusted else ("untrusted" if not rep.problems else "failed")
    return {"trusted": trusted, "verdict": verdict}


_HEADLINE = {
    "verified": "VERIFIED",
    "failed": "FAILED",
    "untrusted": "UNTRUSTED (intact, but no trusted key verified a signature)",
    # Keys were given and none verified, without --allow-unsigned: refused (exit 1),
    # unlike "untrusted", which --allow-unsigned accepts (exit 0).
    "wrong key": "NOT VERIFIED (intact, but no key given verified a signature)",
}


_EXTERNAL_MEANING = {
    "external": "not looked for (no --media given)",
    "absent": "not found under --media (not a failure)",
    "ok": "found, digest matches",
    "mismatch": "found, DIGEST DIFFERS",
    "unreadable": "found, CANNOT BE READ",
}


def _signature_lines(signatures: list[dict[str, Any]]) -> list[str]:
    """One line per signature: its key id hint, whether it verified, and by whom."""
    out = []
    for s in signatures:
        who = s["verified_by"] or "no trusted key"
        if s.get("principals"):
            who += ", principals " + ",".join(map(str, s["principals"]))
        state = "valid" if s["valid"] else "not verified"
        hint = s["keyid_hint"] or "-"
        shown = f"{state} ({who})" if who != hint else state
        out.append(f"    #{s['index']} {hint}: {shown}")
    return out


def _headline_word(rep: VerifyReport) -> str:
    from bundler.verify import is_trust_problem

    if rep.problems and all(is_trust_problem(p) for p in rep.problems):
        return "wrong key"
    return str(verify_verdict(rep)["verdict"])


def _members_line(rep: VerifyReport, listed: int) -> str:
    from bundler.verify import is_trust_problem

    if rep.format_version is None:
        # No manifest could be read (a corrupt container, or a manifest that does not
        # parse): there is no member count to give, only that nothing was checked.
        return "  members    not checked: no readable manifest"
    damaged = any(not is_trust_problem(p) for p in rep.problems)
    return (
        f"  members    {listed} files in the manifest"
        + ("" if damaged else ", every digest matches")
        + " (the container also holds the manifest and the signature envelope)"
    )


def _print_verify(rep: VerifyReport, verbosity: int) -> None:
    d = rep.to_dict()
    camp = d["campaign"]
    word = _headline_word(rep)
    tone = {"verified": "good", "failed": "bad", "untrusted": "warn", "wrong key": "bad"}[word]
    say(f"{d['path']}: ", verdict(_HEADLINE[word], tone))
    for p in rep.problems:
        say(f"  problem    {p}")
    if verbosity <= QUIET:
        return
    if camp:
        say(f"  campaign   {camp.get('id')} ({camp.get('kind')}), format {d['format_version']}")
    say(
        f"  signature  {d['signature_status']}"
        + (
            " (accepted by --allow-unsigned: integrity only, signer not trusted)"
            if d["allow_unsigned"] and not rep.signature_status.trusted
            else ""
        )
    )
    say_lines(_signature_lines(d["signatures"]))
    say(_members_line(rep, len(d["members"])))
    if verbosity >= VERBOSE:
        for m in d["members"]:
            say(f"    {m.get('size', 0):>10,}  {m.get('role', '')!s:<8} {m['path']}")
    if d["external"]:
        say(f"  external   {len(d['external'])} artifact(s), not carried in the bundle:")
        if verbosity >= VERBOSE:
            for e in d["external"]:
                say(
                    f"    {e['status']:<10} {e['kind']!s:<7} {e['path']}"
                    + (f"  [{e['availability']}]" if e.get("availability") else "")
                )
        else:
            for n, st, kind, avail in external_groups(d["external"]):
                say(f"    {n:>4} {kind!s:<6} {_EXTERNAL_MEANING.get(st, st)}")
                if avail:
                    say(f"         availability: {avail}")
            say("    (-v lists each artifact)")
