"""``bundle inspect``: show what a bundle holds; inspect does not judge it (verify does)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from reprobundle.cli.common import (
    QUIET,
    VERBOSE,
    cli_errors,
    emit_json,
    examples,
    exits,
    external_groups,
    json_option,
    load_trust,
    say,
    trust_options,
    verbosity_options,
)

__all__ = ["INSPECT_EXIT_HELP", "inspect_command"]


INSPECT_EXIT_HELP = exits(
    "0  summary printed, even when it lists problems (inspect does not judge: use verify)",
    "1  malformed container, or no readable manifest",
    "2  bundle missing, unreadable key, bad arguments",
    "3  the bundle cannot be read",
)


@click.command(
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
def inspect_command(
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
        info = inspect_bundle(bundle, load_trust(key_paths, trusted_keys, allow_unsigned))
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
            for n, _st, kind, avail in external_groups(
                [{**e, "status": "external"} for e in externals]
            ):
                say(f"    {n:>4} {kind!s:<6} {avail}")
    if verbosity < VERBOSE:
        say("  (-v lists every member, artifact and full attempt reason)")
