"""``bundle inventory``: check that a folder's evidence entries match its inventory.json."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bundler.errors import EXIT_INTEGRITY, EXIT_OK
from reprobundle.cli.common import (
    QUIET,
    cli_errors,
    emit_json,
    examples,
    exits,
    json_option,
    load_trust,
    say,
    trust_options,
    verbosity_options,
    verdict,
)

if TYPE_CHECKING:
    from bundler.inventory import InventoryReport

__all__ = ["INVENTORY_EXIT_HELP", "inventory_command"]


INVENTORY_EXIT_HELP = exits(
    "0  register and folder agree, every bundle verifies, no artifact mismatch",
    "1  unregistered, missing or mismatched entries; a bundle that does not verify",
    "2  ROOT missing; no trust option given; unreadable inventory.json",
    "3  cannot read or write",
)


@click.command(
    name="inventory",
    epilog=examples(
        "bundle inventory evidence --key author.pub --fix",
    )
    + INVENTORY_EXIT_HELP,
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
def inventory_command(
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
        trust = load_trust(
            key_paths,
            trusted_keys,
            allow_unsigned,
            refusal="give --key or --trusted-keys to check bundle signatures, "
            "or --allow-unsigned to check integrity alone",
        )
        rep = check_inventory(root, trust=trust, media_dirs=media_dirs, fix=fix)
        if as_json:
            emit_json(rep.to_dict())
        else:
            _print_inventory(rep, verbosity)
        sys.exit(EXIT_OK if rep.ok else EXIT_INTEGRITY)


def _verify_word(v: dict[str, Any]) -> str:
    if not v["ok"]:
        return "FAILED"
    # ok without a trusted signature means --allow-unsigned accepted it: intact only.
    return "ok" if v.get("trusted") else "intact, UNTRUSTED"


def _print_inventory(rep: InventoryReport, verbosity: int) -> None:
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
