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
from reprobundle.cli.common import cli_errors, emit_json, trust_options

EXIT_HELP = """\b
Exit codes:
  0  ok
  1  integrity failure: tampered, truncated, unsigned or untrusted bundle
  2  usage or input error: bad arguments, invalid campaign, unreadable key
  3  could not run: I/O error, missing optional dependency
  4  replay: a claim contradicted or a gate failed
  5  replay: a claim could not be verified
"""


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
    from bundler.keys import load_trusted_keys

    return load_trusted_keys(paths, trusted_file)


json_option = click.option("--json", "as_json", is_flag=True, help="Print a JSON result on stdout.")


@click.group(epilog=EXIT_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="reprobundle")
def main() -> None:
    """Seal, verify, sign, inspect and replay ML-serving performance campaigns."""


@main.command(epilog=EXIT_HELP)
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
@json_option
def keygen(output: Path, passphrase_file: Path | None, force: bool, as_json: bool) -> None:
    """Create an Ed25519 key pair and print its key ID."""
    from bundler.keys import generate_keypair

    with cli_errors(as_json):
        pw = passphrase_file.read_bytes().rstrip(b"\r\n") if passphrase_file else None
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
            click.echo(f"private key: {kp.private_path}")
            click.echo(f"public key:  {kp.public_path}")
            click.echo(f"key id:      {kp.key_id}")


@main.command(epilog=EXIT_HELP)
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
    "--artifacts",
    "artifact_dirs",
    type=click.Path(file_okay=False, path_type=Path),
    multiple=True,
    help="Folder where external artifacts may be found to hash.",
)
@click.option("--jobs", type=click.IntRange(min=1), help="Hashing threads (default: cores).")
@click.option("--force", is_flag=True, help="Replace an existing output file.")
@click.option("--progress/--no-progress", default=True, help="Progress bar on a terminal.")
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
    as_json: bool,
) -> None:
    """Validate CAMPAIGN_DIR and seal it into one signed bundle."""
    from bundler.keys import load_private_key
    from bundler.seal import seal_campaign

    with cli_errors(as_json):
        if not key_paths and not unsigned:
            raise UsageError("give --key KEY to sign, or --unsigned to seal without a signature")
        if key_paths and unsigned:
            raise UsageError("--key and --unsigned exclude each other")
        pw = passphrase_file.read_bytes().rstrip(b"\r\n") if passphrase_file else None
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
        click.echo(f"sealed {res.campaign_id} -> {res.output} ({res.bundle_bytes:,} bytes)")
        click.echo(f"  sha256   {res.bundle_sha256}")
        click.echo(
            f"  members  {res.members}; rows: "
            + ", ".join(f"{k} {v}" for k, v in res.tables.items() if v)
        )
        hashed = sum(1 for e in res.external if e["hashed_at_seal"])
        click.echo(f"  external {len(res.external)} artifact(s), {hashed} hashed here")
        scrubbed = sum(r["count"] for r in res.sanitization)
        click.echo(f"  scrubbed {scrubbed} value(s) in {len(res.sanitization)} field(s)")
        for w in res.warnings:
            click.echo(f"  warning: {w}", err=True)
        for f in res.findings:
            click.echo(
                f"  warning: {f['member']} line {f['line']}: looks like a {f['rule']} "
                "(file carried verbatim, not scrubbed)",
                err=True,
            )
        click.echo("  signers  " + (", ".join(res.signers) if res.signers else "none (unsigned)"))


def _print_verify(rep: Any) -> None:
    d = rep.to_dict()
    camp = d["campaign"]
    click.echo(f"{d['path']}: {'VERIFIED' if d['ok'] else 'FAILED'}")
    if camp:
        click.echo(
            f"  campaign   {camp.get('id')} ({camp.get('kind')}), format {d['format_version']}"
        )
    click.echo(
        f"  signature  {d['signature_status']}"
        + (
            " (accepted by --allow-unsigned: integrity only)"
            if d["allow_unsigned"] and d["signature_status"] != "verified"
            else ""
        )
    )
    for s in d["signatures"]:
        who = s["verified_by"] or "no trusted key"
        state = "valid" if s["valid"] else "not verified"
        click.echo(f"    #{s['index']} hint {s['keyid_hint'] or '-'}: {state} ({who})")
    click.echo(f"  members    {len(d['members'])} listed")
    for e in d["external"]:
        click.echo(
            f"  external   {e['status']:<10} {e['kind']:<7} {e['path']}"
            + (f"  [{e['availability']}]" if e["status"] in ("external", "absent") else "")
        )
    for p in rep.problems:
        click.echo(f"  problem    {p}")


@main.command(epilog=EXIT_HELP)
@click.argument("bundle", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@trust_options("Accept a bundle no trusted key signed (integrity only; says so).")
@click.option(
    "--media",
    "media_dirs",
    type=click.Path(file_okay=False, path_type=Path),
    multiple=True,
    help="Folder holding external artifacts to check (repeatable).",
)
@click.option("--jobs", type=click.IntRange(min=1), help="Hashing threads (default: cores).")
@click.option("--progress/--no-progress", default=True, help="Progress bar on a terminal.")
@json_option
def verify(
    bundle: Path,
    key_paths: tuple[Path, ...],
    trusted_keys: Path | None,
    allow_unsigned: bool,
    media_dirs: tuple[Path, ...],
    jobs: int | None,
    progress: bool,
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
            emit_json(rep.to_dict())
        else:
            _print_verify(rep)
        sys.exit(EXIT_OK if rep.ok else EXIT_INTEGRITY)


def _media_total(dirs: tuple[Path, ...]) -> int:
    # An upper bound for the bar; only files the manifest names are hashed.
    return sum(p.stat().st_size for d in dirs for p in d.rglob("*") if p.is_file())


@main.command(epilog=EXIT_HELP)
@click.argument("bundle", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--key",
    "key_path",
    type=click.Path(path_type=Path),
    required=True,
    help="Private key to countersign with.",
)
@click.option("--passphrase-file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="Write the countersigned bundle here instead of replacing BUNDLE.",
)
@json_option
def sign(
    bundle: Path, key_path: Path, passphrase_file: Path | None, output: Path | None, as_json: bool
) -> None:
    """Add a countersignature to BUNDLE; no other member changes."""
    from bundler.keys import load_private_key
    from bundler.sign import countersign

    with cli_errors(as_json):
        pw = passphrase_file.read_bytes().rstrip(b"\r\n") if passphrase_file else None
        res = countersign(bundle, load_private_key(key_path, pw), output)
        if as_json:
            emit_json(
                {"ok": True, "output": str(res.output), "added": res.added, "signers": res.signers}
            )
        else:
            click.echo(f"signed {res.output} as {res.added}; {len(res.signers)} signature(s)")


@main.command(name="inspect", epilog=EXIT_HELP)
@click.argument("bundle", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--key",
    "key_paths",
    type=click.Path(path_type=Path),
    multiple=True,
    help="Trusted public key, to show which signers verify.",
)
@json_option
def inspect_cmd(bundle: Path, key_paths: tuple[Path, ...], as_json: bool) -> None:
    """Show what BUNDLE holds: campaign, arms, counts, signers, members, externals."""
    from bundler.inspect import inspect_bundle

    with cli_errors(as_json):
        info = inspect_bundle(bundle, _load_keys(key_paths, None))
        if as_json:
            emit_json(info)
            return
        c = info["campaign"]
        click.echo(f"{c['id']} ({c['kind']}): {c['title']}")
        for a in c["arms"]:
            click.echo(f"  arm {a['id']:<10} {a['role']:<9} commit {a['runtime_commit']}")
        phases = ", ".join(
            f"{k} {v}" for k, v in sorted(info["counts"]["receipts_by_phase"].items())
        )
        click.echo(f"  receipts   {info['tables'].get('receipts', 0)} ({phases})")
        click.echo(
            f"  comparisons {info['counts']['comparisons']}, worker exits "
            f"{info['counts']['worker_exits']}, claims {info['counts']['claims']}"
        )
        for a in info["counts"]["attempts"]:
            click.echo(
                f"  attempt {a['attempt_id']}: {a['status']}"
                + (f" ({a['reason']})" if a["reason"] else "")
            )
        click.echo(f"  signature  {info['signature_status']}")
        for s in info["signers"]:
            click.echo(
                f"    signer {s['keyid_hint']}"
                + (f" (verified by {s['verified_by']})" if s["verified_by"] else "")
            )
        click.echo(f"  members ({len(info['members'])}):")
        for m in info["members"]:
            click.echo(f"    {m['size']:>10,}  {m['role']:<8} {m['path']}")
        click.echo(f"  external artifacts ({len(info['external'])}):")
        for e in info["external"]:
            click.echo(f"    {e['kind']:<7} {e['sha256'][:16]}  {e['path']}  [{e['availability']}]")
        for p in info["problems"]:
            click.echo(f"  problem: {p}")


@main.command(name="lint-text", epilog=EXIT_HELP)
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@json_option
def lint_text_cmd(files: tuple[Path, ...], as_json: bool) -> None:
    """Find closing syntax ("fixes #123") in summary text; exit 1 if any."""
    from bundler.lint_text import find_closing_references

    with cli_errors(as_json):
        found = []
        for f in files:
            text = f.read_text(encoding="utf-8", errors="replace")
            found += [{"file": str(f), **r.__dict__} for r in find_closing_references(text)]
        if as_json:
            emit_json({"ok": not found, "findings": found})
        else:
            for r in found:
                click.echo(
                    f"{r['file']}:{r['line']}:{r['column']}: closing keyword "
                    f"{r['keyword']!r} before {r['reference']} ({r['text']!r}); cite "
                    "the source without it, e.g. 'vLLM-Omni PR 9241'"
                )
            if not found:
                click.echo(f"no closing syntax in {len(files)} file(s)")
        sys.exit(EXIT_INTEGRITY if found else EXIT_OK)


def _print_inventory(rep: Any) -> None:
    d = rep.to_dict()
    click.echo(f"{d['root']}: {'CONSISTENT' if d['ok'] else 'INCONSISTENT'}")
    for e in d["added"]:
        click.echo(f"  registered  {e['path']} (id {e['id']}, kind {e['kind']})")
    for name in d["unregistered"]:
        click.echo(f"  unregistered {name} (run with --fix to register it)")
    for name in d["missing"]:
        click.echo(f"  missing     {name} (registered, not present)")
    for m in d["mismatched"]:
        click.echo(f"  mismatch    {m['path']}: registered {m['registered']}, now {m['actual']}")
    for name in d["unclassified"]:
        click.echo(f"  unclassified {name} (neither a bundle nor a campaign directory)")
    for v in d["verify"]:
        click.echo(
            f"  verify      {v['path']}: {'ok' if v['ok'] else 'FAILED'} "
            f"(signature {v['signature_status']})"
        )
        for p in v["problems"]:
            click.echo(f"                {p}")
    for a in d["artifacts"]:
        note = f"  [{a['availability']}]" if a["class"] == "external" else ""
        click.echo(f"  artifact    {a['entry']}: {a['path']} -> {a['class']}{note}")


@main.command(epilog=EXIT_HELP)
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
@json_option
def inventory(
    root: Path,
    fix: bool,
    key_paths: tuple[Path, ...],
    trusted_keys: Path | None,
    allow_unsigned: bool,
    media_dirs: tuple[Path, ...],
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
            _print_inventory(rep)
        sys.exit(EXIT_OK if rep.ok else EXIT_INTEGRITY)


def _register_replay_commands() -> None:
    # The replayer's commands live in replay/; they import their heavy parts lazily.
    from reprobundle.cli.replay_cmd import replay_command
    from reprobundle.cli.report_cmd import report_command
    from reprobundle.cli.rerun_cmd import plan_group, rerun_command

    main.add_command(replay_command)
    main.add_command(report_command)
    main.add_command(plan_group)
    main.add_command(rerun_command)


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
