"""The ``bundle`` command: parse arguments, call one library function, print text or JSON.

Exit codes (``docs/exit-codes.md``): 0 ok; 1 integrity failure (tampered,
truncated, unsigned or untrusted bundle); 2 usage or input error (bad
arguments, invalid campaign, unreadable key); 3 could not run (I/O, missing
optional dependency); 4 a claim contradicted or a gate failed (replay);
5 a claim could not be verified (replay).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from bundler import __version__
from bundler.errors import (
    EXIT_INTEGRITY,
    EXIT_OK,
    UsageError,
)
from reprobundle.cli.common import (
    QUIET,
    VERBOSE,
    JsonAwareGroup,
    cli_errors,
    emit_json,
    examples,
    say,
    say_lines,
    trust_options,
    verbosity_options,
    verdict,
)

EXIT_HELP = """\b
Exit codes (each command's own are listed in its --help):
  0  ok
  1  integrity failure: tampered, truncated, unsigned or untrusted bundle
  2  usage or input error: bad arguments, invalid campaign, unreadable key
  3  could not run: I/O error, missing optional dependency
  4  replay/report/rerun: a claim contradicted, a gate failed, an attempt rejected
  5  replay/report: a claim could not be verified
"""


def _exits(*lines: str) -> str:
    """A command's own exit codes, as an unwrapped help epilog."""
    return "\b\nExit codes:\n" + "\n".join(f"  {line}" for line in lines) + "\n"


KEYGEN_EXIT_HELP = _exits(
    "0  key pair written",
    "2  output exists (no --force), passphrase file missing, bad arguments",
    "3  cannot write the key files",
)
SEAL_EXIT_HELP = _exits(
    "0  bundle written",
    "2  invalid campaign (each problem named by file, record, field), key unreadable,",
    "   --key/--unsigned missing or both, output exists (no --force)",
    "3  cannot read a carried file or write the output",
)
VERIFY_EXIT_HELP = _exits(
    "0  intact, and a trusted key verified a signature (VERIFIED); with",
    "   --allow-unsigned also intact but untrusted (UNTRUSTED)",
    "1  any integrity problem, or unsigned/untrusted without --allow-unsigned",
    "2  no --key/--trusted-keys and no --allow-unsigned; unreadable key; bad --media",
    "3  the bundle cannot be read",
)
SIGN_EXIT_HELP = _exits(
    "0  signature added (countersigned, or ADOPTED with --force-adopt)",
    "1  the bundle has an integrity problem, or no trusted key verified a signature",
    "2  key unreadable or wrong, that key already signed, no trust option given",
    "3  cannot read or write",
)
INSPECT_EXIT_HELP = _exits(
    "0  summary printed, even when it lists problems (inspect does not judge: use verify)",
    "1  malformed container, or no readable manifest",
    "2  unreadable key, bad arguments",
    "3  the bundle cannot be read",
)
LINT_EXIT_HELP = _exits(
    "0  no closing syntax in any file",
    "1  closing syntax found (each printed as FILE:LINE:COLUMN)",
    "2  a file is missing, bad arguments",
    "3  a file cannot be read",
)
INVENTORY_EXIT_HELP = _exits(
    "0  register and folder agree, every bundle verifies, no artifact mismatch",
    "1  unregistered, missing or mismatched entries; a bundle that does not verify",
    "2  no trust option given; unreadable inventory.json",
    "3  cannot read or write",
)


_MAIN_EXAMPLES = examples(
    "bundle keygen -o me                         # writes me and me.pub",
    "bundle seal campaign -o mine.bundle --key me  # validate, seal and sign",
    "bundle replay mine.bundle --key me.pub        # re-derive every claim",
)


class _Bar:
    """A thread-safe click progress bar on stderr, shown only on a terminal."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.label = label
        self.enabled = enabled and sys.stderr.isatty()
        self._bar: Any = None
        self._lock = threading.Lock()
        self._last = 0

    def update(self, stage: str, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        with self._lock:
            if self._bar is None:
                self._bar = click.progressbar(
                    length=total, label=f"{self.label} ({stage})", file=sys.stderr
                )
                self._bar.__enter__()
            self._bar.update(done - self._last)
            self._last = done

    def bytes_callback(self, total: int) -> Callable[[int], None]:
        seen = [0]

        def cb(n: int) -> None:
            seen[0] += n
            self.update("hash", seen[0], total)

        return cb

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


def _load_keys(paths: tuple[Path, ...], trusted_file: Path | None) -> list[Any]:
    from bundler.format.keys import load_trusted_keys

    return load_trusted_keys(paths, trusted_file)


json_option = click.option("--json", "as_json", is_flag=True, help="Print a JSON result on stdout.")


@click.group(
    cls=JsonAwareGroup,
    epilog=_MAIN_EXAMPLES + EXIT_HELP,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, prog_name="reprobundle")
def main() -> None:
    """Seal, verify, sign, inspect and replay ML-serving performance campaigns."""


@main.command(
    epilog=examples(
        "bundle keygen -o mykey          # writes mykey and mykey.pub",
        "bundle keygen -o mykey2 --json  # prints the key id as JSON",
    )
    + KEYGEN_EXIT_HELP
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    required=True,
    help="Private key file to write; the public key goes to OUTPUT.pub.",
)
@click.option(
    "--passphrase-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Encrypt the private key with the passphrase in this file (never prompted).",
)
@click.option("--force", is_flag=True, help="Overwrite existing key files.")
@verbosity_options
@json_option
def keygen(
    output: Path, passphrase_file: Path | None, force: bool, verbosity: int, as_json: bool
) -> None:
    """Create an Ed25519 key pair and print its key ID."""
    from bundler.format.keys import generate_keypair, read_passphrase_file

    with cli_errors(as_json):
        pw = read_passphrase_file(passphrase_file) if passphrase_file else None
        kp = generate_keypair(output, pw, force=force)
        if as_json:
            emit_json(
                {
                    "ok": True,
                    "private_key": str(kp.private_path),
                    "public_key": str(kp.public_path),
                    "key_id": kp.key_id,
                }
            )
        else:
            if verbosity <= QUIET:
                say(kp.key_id)
                return
            say(f"private key: {kp.private_path}")
            say(f"public key:  {kp.public_path}")
            say(f"key id:      {kp.key_id}")


@main.command(
    epilog=examples(
        "bundle seal campaign -o sealed.bundle --key author",
        "bundle seal campaign -o draft.bundle --unsigned --json",
    )
    + SEAL_EXIT_HELP
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
def seal(
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
        bar = _Bar("sealing", progress and not as_json)
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
        _print_seal(res, verbosity)


def _print_seal(res: Any, verbosity: int) -> None:
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
    for w in res.warnings:
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


def verify_verdict(rep: Any) -> dict[str, Any]:
    """``trusted`` and ``verdict`` of a verify report (added to its ``--json`` form).

    ``verified`` only when nothing is wrong and a trusted key verified a
    signature; ``untrusted`` when the bundle is intact but no trusted key
    verified it (passes only with ``--allow-unsigned``: integrity only);
    ``failed`` otherwise. The word VERIFIED is never the verdict of a bundle no
    trusted key verified, whatever the flags.
    """
    trusted = not rep.problems and rep.signature_status == "verified"
    verdict = "verified" if trusted else ("untrusted" if not rep.problems else "failed")
    return {"trusted": trusted, "verdict": verdict}


_HEADLINE = {
    "verified": "VERIFIED",
    "failed": "FAILED",
    "untrusted": "UNTRUSTED (intact, but no trusted key verified a signature)",
}


_EXTERNAL_MEANING = {
    "external": "not looked for (no --media given)",
    "absent": "not found under --media (not a failure)",
    "ok": "found, digest matches",
    "mismatch": "found, DIGEST DIFFERS",
    "unreadable": "found, CANNOT BE READ",
}


def _external_groups(externals: list[dict[str, Any]]) -> list[tuple[int, str, str, str]]:
    """Externals grouped by (status, kind, availability): one line per group, not per file."""
    counts: dict[tuple[str, str, str], int] = {}
    for e in externals:
        key = (e.get("status", "external"), e["kind"], e.get("availability") or "")
        counts[key] = counts.get(key, 0) + 1
    return [(n, st, kind, avail) for (st, kind, avail), n in counts.items()]


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


def _print_verify(rep: Any, verbosity: int) -> None:
    d = rep.to_dict()
    camp = d["campaign"]
    word = verify_verdict(rep)["verdict"]
    tone = {"verified": "good", "failed": "bad", "untrusted": "warn"}[word]
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
            if d["allow_unsigned"] and d["signature_status"] != "verified"
            else ""
        )
    )
    say_lines(_signature_lines(d["signatures"]))
    say(
        f"  members    {len(d['members'])} files in the manifest"
        + ("" if rep.problems else ", every digest matches")
        + " (the container also holds the manifest and the signature envelope)"
    )
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
            for n, st, kind, avail in _external_groups(d["external"]):
                say(f"    {n:>4} {kind!s:<6} {_EXTERNAL_MEANING.get(st, st)}")
                if avail:
                    say(f"         availability: {avail}")
            say("    (-v lists each artifact)")


@main.command(
    epilog=examples(
        "bundle verify run.bundle --key author.pub",
        "bundle verify run.bundle --trusted-keys trusted.txt --json",
    )
    + VERIFY_EXIT_HELP
)
@click.argument("bundle", type=click.Path(exists=True, dir_okay=False, path_type=Path))
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
def verify(
    bundle: Path,
    key_paths: tuple[Path, ...],
    trusted_keys: Path | None,
    allow_unsigned: bool,
    media_dirs: tuple[Path, ...],
    jobs: int | None,
    progress: bool,
    verbosity: int,
    as_json: bool,
) -> None:
    """Check BUNDLE's signatures, every member's digest and external artifacts."""
    from bundler.verify import check_bundle

    with cli_errors(as_json):
        keys = _load_keys(key_paths, trusted_keys)
        if not keys and not allow_unsigned:
            raise UsageError(
                "give --key or --trusted-keys to check signatures, "
                "or --allow-unsigned to check integrity alone"
            )
        for d in media_dirs:
            if not d.is_dir():
                raise UsageError(f"{d}: --media must be an existing folder")
        bar = _Bar("verifying", progress and not as_json)
        try:
            rep = check_bundle(
                bundle,
                trusted=keys,
                allow_unsigned=allow_unsigned,
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
        sys.exit(EXIT_OK if rep.ok else EXIT_INTEGRITY)


def _media_total(dirs: tuple[Path, ...]) -> int:
    # An upper bound for the bar; only files the manifest names are hashed.
    return sum(p.stat().st_size for d in dirs for p in d.rglob("*") if p.is_file())


@main.command(
    epilog=examples(
        "bundle sign run.bundle --key auditor --key-pub author.pub -o co.bundle",
    )
    + SIGN_EXIT_HELP
)
@click.argument("bundle", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--key",
    "key_path",
    type=click.Path(path_type=Path),
    required=True,
    help="Private key to countersign with.",
)
@click.option(
    "--passphrase-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="File holding the passphrase of an encrypted --key (never prompted).",
)
@click.option(
    "--key-pub",
    "trusted_paths",
    type=click.Path(path_type=Path),
    multiple=True,
    help="Public key of a signer you trust (repeatable); one existing signature must verify.",
)
@click.option(
    "--trusted-keys",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Trusted keys: a list of PEM paths and 'ssh-ed25519 ...' lines, or an OpenSSH "
    "allowed_signers file (principals are shown).",
)
@click.option(
    "--force-adopt",
    is_flag=True,
    help="Sign although no trusted key verified an existing signature (you vouch for it).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="Write the countersigned bundle here instead of replacing BUNDLE.",
)
@verbosity_options
@json_option
def sign(
    bundle: Path,
    key_path: Path,
    passphrase_file: Path | None,
    trusted_paths: tuple[Path, ...],
    trusted_keys: Path | None,
    force_adopt: bool,
    output: Path | None,
    verbosity: int,
    as_json: bool,
) -> None:
    """Add a countersignature to BUNDLE; no other member changes.

    An existing signature must verify with a key given by --key-pub or
    --trusted-keys; otherwise signing would adopt a bundle nobody you trust
    signed, which takes --force-adopt (and is reported as an adoption).
    """
    from bundler.format.keys import load_private_key, read_passphrase_file
    from bundler.sign import countersign

    with cli_errors(as_json):
        pw = read_passphrase_file(passphrase_file) if passphrase_file else None
        res = countersign(
            bundle,
            load_private_key(key_path, pw),
            output,
            trusted=_load_keys(trusted_paths, trusted_keys),
            force_adopt=force_adopt,
        )
        if as_json:
            emit_json(
                {
                    "ok": True,
                    "output": str(res.output),
                    "added": res.added,
                    "signers": res.signers,
                    "endorsed": res.endorsed,
                    "adopted": res.adopted,
                    "unverified": res.unverified,
                }
            )
            return
        say(
            verdict("SIGNED", "good"),
            f" {res.output} as {res.added}; {len(res.signers)} signature(s)",
        )
        if verbosity <= QUIET:
            return
        if res.endorsed:
            say(f"  countersigns a signature verified by {', '.join(res.endorsed)}")
        else:
            held = ", ".join(map(str, res.unverified)) or "none: the bundle was unsigned"
            say(
                "  ADOPTED (--force-adopt): no trusted key verified an existing signature "
                f"(unverified: {held}); this signature vouches for the bundle by itself"
            )


@main.command(
    name="inspect",
    epilog=examples(
        "bundle inspect run.bundle",
        "bundle inspect run.bundle --key author.pub -v",
    )
    + INSPECT_EXIT_HELP,
)
@click.argument("bundle", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@trust_options("Accepted for symmetry with verify; inspect never refuses a bundle.")
@verbosity_options
@json_option
def inspect_cmd(
    bundle: Path,
    key_paths: tuple[Path, ...],
    trusted_keys: Path | None,
    allow_unsigned: bool,
    verbosity: int,
    as_json: bool,
) -> None:
    """Show what BUNDLE holds: campaign, arms, counts, signers, members, externals.

    Trusted keys (--key, --trusted-keys) only show which signers verify;
    inspect does not judge the bundle (use verify).
    """
    from bundler.inspect import inspect_bundle

    with cli_errors(as_json):
        info = inspect_bundle(bundle, _load_keys(key_paths, trusted_keys))
        if as_json:
            emit_json(info)
            return
        _print_inspect(info, verbosity)


def _print_inspect(info: dict[str, Any], verbosity: int) -> None:
    # Everything here comes from the bundle, which inspect does not judge; say() escapes
    # it, and str() first because a hostile value need not be a string.
    c = info["campaign"]
    say(f"{c['id']} ({c['kind']}): {c['title']}")
    for p in info["problems"]:
        say(f"  problem: {p}")
    if verbosity <= QUIET:
        return
    for a in c["arms"]:
        say(f"  arm {a['id']!s:<10} {a['role']!s:<9} commit {a['runtime_commit']}")
    phases = ", ".join(f"{k} {v}" for k, v in sorted(info["counts"]["receipts_by_phase"].items()))
    say(f"  receipts   {info['tables'].get('receipts', 0)} ({phases})")
    say(
        f"  comparisons {info['counts']['comparisons']}, worker exits "
        f"{info['counts']['worker_exits']}, claims {info['counts']['claims']}"
    )
    for a in info["counts"]["attempts"]:
        reason = str(a["reason"]) if a["reason"] else ""
        if reason and verbosity < VERBOSE and len(reason) > 90:
            reason = reason[:89] + "…"
        say(f"  attempt {a['attempt_id']}: {a['status']}" + (f" ({reason})" if reason else ""))
    say(f"  signature  {info['signature_status']}")
    for s in info["signers"]:
        say(
            f"    signer {s['keyid_hint']}"
            + (f" (verified by {s['verified_by']})" if s["verified_by"] else "")
            + (f" principals {','.join(map(str, s['principals']))}" if s.get("principals") else "")
        )
    _print_inspect_contents(info, verbosity)


def _print_inspect_contents(info: dict[str, Any], verbosity: int) -> None:
    members = info["members"]
    if verbosity >= VERBOSE:
        say(f"  members ({len(members)} files in the manifest):")
        for m in members:
            say(f"    {m['size']:>10,}  {m['role']!s:<8} {m['path']}")
    else:
        roles: dict[str, list[int]] = {}
        for m in members:
            roles.setdefault(m["role"], []).append(m["size"])
        say(
            f"  members    {len(members)} files in the manifest: "
            + ", ".join(f"{len(v)} {r}" for r, v in sorted(roles.items()))
            + f"; {sum(sum(v) for v in roles.values()):,} bytes"
        )
    externals = info["external"]
    if externals:
        say(f"  external   {len(externals)} artifact(s), not carried in the bundle:")
        if verbosity >= VERBOSE:
            for e in externals:
                say(
                    f"    {e['kind']!s:<7} {str(e['sha256'])[:16]}  {e['path']}"
                    f"  [{e['availability']}]"
                )
        else:
            for n, _st, kind, avail in _external_groups(
                [{**e, "status": "external"} for e in externals]
            ):
                say(f"    {n:>4} {kind!s:<6} {avail}")
    if verbosity < VERBOSE:
        say("  (-v lists every member, artifact and full attempt reason)")


@main.command(
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
def lint_text_cmd(files: tuple[Path, ...], verbosity: int, as_json: bool) -> None:
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


def _verify_word(v: dict[str, Any]) -> str:
    if not v["ok"]:
        return "FAILED"
    # ok without a trusted signature means --allow-unsigned accepted it: intact only.
    return "ok" if v.get("trusted") else "intact, UNTRUSTED"


def _print_inventory(rep: Any, verbosity: int) -> None:
    d = rep.to_dict()
    word = verdict("CONSISTENT", "good") if d["ok"] else verdict("INCONSISTENT", "bad")
    say(f"{d['root']}: ", word)
    if verbosity <= QUIET:
        return
    for e in d["added"]:
        say(f"  registered  {e['path']} (id {e['id']}, kind {e['kind']})")
    for bad in d["invalid"]:
        say(f"  invalid     {bad['path']}: {bad['problem']} (not registered)")
    for name in d["unregistered"]:
        say(f"  unregistered {name} (run with --fix to register it)")
    for name in d["missing"]:
        say(f"  missing     {name} (registered, not present)")
    for m in d["mismatched"]:
        say(f"  mismatch    {m['path']}: registered {m['registered']}, now {m['actual']}")
    for name in d["unclassified"]:
        say(f"  unclassified {name} (neither a bundle nor a campaign directory)")
    for v in d["verify"]:
        say(f"  verify      {v['path']}: {_verify_word(v)} (signature {v['signature_status']})")
        for p in v["problems"]:
            say(f"                {p}")
    for a in d["artifacts"]:
        note = f"  [{a['availability']}]" if a["class"] == "external" else ""
        detail = f" ({a['detail']})" if a.get("detail") else ""
        say(f"  artifact    {a['entry']}: {a['path']} -> {a['class']}{detail}{note}")


@main.command(
    epilog=examples(
        "bundle inventory evidence --key author.pub --fix",
    )
    + INVENTORY_EXIT_HELP
)
@click.argument("root", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--fix", is_flag=True, help="Register new entries (atomically; never deletes).")
@trust_options("Accept bundles no trusted key signed (integrity only; says so).")
@click.option(
    "--media",
    "media_dirs",
    type=click.Path(file_okay=False, path_type=Path),
    multiple=True,
    help="Folder holding external artifacts to check (repeatable).",
)
@verbosity_options
@json_option
def inventory(
    root: Path,
    fix: bool,
    key_paths: tuple[Path, ...],
    trusted_keys: Path | None,
    allow_unsigned: bool,
    media_dirs: tuple[Path, ...],
    verbosity: int,
    as_json: bool,
) -> None:
    """Check that ROOT's evidence entries match its inventory.json register."""
    from bundler.inventory import check_inventory

    with cli_errors(as_json):
        keys = _load_keys(key_paths, trusted_keys)
        if not keys and not allow_unsigned:
            raise UsageError(
                "give --key or --trusted-keys to check bundle signatures, "
                "or --allow-unsigned to check integrity alone"
            )
        rep = check_inventory(
            root, trusted=keys, allow_unsigned=allow_unsigned, media_dirs=media_dirs, fix=fix
        )
        if as_json:
            emit_json(rep.to_dict())
        else:
            _print_inventory(rep, verbosity)
        sys.exit(EXIT_OK if rep.ok else EXIT_INTEGRITY)


def _register_replay_commands() -> None:
    # The replayer's commands live in replay/; they import their heavy parts lazily.
    from reprobundle.cli.import_cmd import import_command
    from reprobundle.cli.replay_cmd import replay_command
    from reprobundle.cli.report_cmd import report_command
    from reprobundle.cli.rerun_cmd import plan_group, rerun_command

    main.add_command(replay_command)
    main.add_command(report_command)
    main.add_command(plan_group)
    main.add_command(rerun_command)
    main.add_command(import_command)

    from reprobundle.cli.init_export_cmd import export_command, init_command

    main.add_command(init_command)
    main.add_command(export_command)


_register_replay_commands()


def run() -> None:
    """Console entry point: run ``main`` and leave without tearing down native threads.

    Arrow's C++ thread pools can abort the interpreter's final teardown ("terminate
    called without an active exception", apache/arrow issue 34314) after all our
    work is done and written, turning a success into SIGABRT. Once the command has
    finished, we flush and end the process directly. Every output file is already
    closed (atomic writes complete inside the command); a real exception still
    propagates with its traceback.
    """
    try:
        main()
        code = 0
    except SystemExit as exc:
        if isinstance(exc.code, str):
            sys.stderr.write(exc.code + "\n")
            code = 1
        else:
            code = int(exc.code or 0)
    for stream in (sys.stdout, sys.stderr):
        # A closed pipe (``bundle inspect | head``) is not our failure.
        with contextlib.suppress(OSError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
