"""``bundle inventory``: keep a folder of evidence consistent with its register.

A root folder holds evidence entries at its top level: bundle files
(``*.bundle``) and campaign directories (folders with a ``campaign.json``).
``inventory.json`` registers each one (id, kind, path, digest). The check
reports unregistered entries, registered entries that are missing, digest
mismatches, each bundle's verify result, and classifies every external
artifact as local-and-verified or external-with-its-availability-note: an
external artifact is never reported as a missing local file (the seed's P1).
See ``specs/inventory.md``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from bundler._internal.atomic import atomic_write_bytes
from bundler.errors import UsageError
from bundler.hashing import hash_file
from bundler.verify import check_bundle

__all__ = [
    "INVENTORY_NAME",
    "INVENTORY_VERSION",
    "InventoryReport",
    "check_inventory",
    "tree_digest",
]

INVENTORY_NAME = "inventory.json"
INVENTORY_VERSION = "1"


@dataclass
class InventoryReport:
    """Everything ``check_inventory`` found; ``ok`` when nothing is inconsistent."""

    root: str
    entries: list[dict[str, Any]] = field(default_factory=list)
    unregistered: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    mismatched: list[dict[str, str]] = field(default_factory=list)
    unclassified: list[str] = field(default_factory=list)
    verify: list[dict[str, Any]] = field(default_factory=list)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    added: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the register and the folder agree and every bundle and artifact checks out."""
        return not (
            self.unregistered
            or self.missing
            or self.mismatched
            or self.unclassified
            or any(not v["ok"] for v in self.verify)
            or any(a["status"] in ("mismatch", "unreadable") for a in self.artifacts)
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``--json``)."""
        return {"ok": self.ok, **asdict(self)}


def tree_digest(directory: Path) -> str:
    """SHA-256 over ``"<sha256>  <relative path>\\n"`` lines of every file, sorted by path.

    The same text ``sha256sum`` prints for the files, so an auditor can recompute it:
    ``(cd DIR && find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs -d '\\n' sha256sum)
    | sha256sum``.
    """
    lines = []
    for p in sorted(directory.rglob("*"), key=lambda q: q.relative_to(directory).as_posix()):
        if p.is_file() and not p.is_symlink():
            d = hash_file(p)
            lines.append(f"{d.sha256}  {p.relative_to(directory).as_posix()}\n")
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def _load_register(root: Path) -> dict[str, Any]:
    path = root / INVENTORY_NAME
    if not path.exists():
        return {"inventory_version": INVENTORY_VERSION, "entries": []}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not a readable inventory ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("inventory_version") != INVENTORY_VERSION:
        raise UsageError(
            f"{path}: unknown inventory_version {doc.get('inventory_version')!r}"
            if isinstance(doc, dict)
            else f"{path}: not an inventory object"
        )
    entries = doc.get("entries")
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("path"), str) for e in entries
    ):
        raise UsageError(f"{path}: 'entries' must be a list of objects with a 'path'")
    return doc


def _discover(root: Path) -> tuple[dict[str, str], list[str]]:
    """Top-level evidence entries: path -> "bundle" | "campaign"; and unclassified names."""
    found: dict[str, str] = {}
    unclassified: list[str] = []
    for p in sorted(root.iterdir()):
        if p.name == INVENTORY_NAME or p.name.startswith("."):
            continue
        if p.is_file() and p.suffix == ".bundle":
            found[p.name] = "bundle"
        elif p.is_dir() and (p / "campaign.json").is_file():
            found[p.name] = "campaign"
        elif p.is_dir():
            unclassified.append(p.name)
    return found, unclassified


def _digest(path: Path, kind: str) -> str:
    if kind == "bundle":
        d = hash_file(path)
        return str(d.sha256)
    return tree_digest(path)


def _describe(path: Path, kind: str) -> dict[str, Any]:
    """A register entry for a new evidence entry (id and kind from its own metadata)."""
    from bundler.verify import open_bundle

    entry: dict[str, Any] = {"path": path.name}
    if kind == "bundle":
        opened = open_bundle(path, allow_unsigned=True)
        camp = (opened.manifest or {}).get("campaign", {})
        entry.update(
            id=camp.get("id", path.stem),
            kind=camp.get("kind", "bundle"),
            format="bundle",
            sha256=_digest(path, kind),
        )
    else:
        doc = json.loads((path / "campaign.json").read_text(encoding="utf-8"))
        entry.update(
            id=doc.get("id", path.name),
            kind=doc.get("kind", "campaign"),
            format="campaign-dir",
            tree_sha256=_digest(path, kind),
        )
    return entry


_CLASS = {
    "ok": "local, verified",
    "mismatch": "local, digest mismatch",
    "unreadable": "local, unreadable",
}


def _classified(entry: str, artifact: dict[str, Any], status: str) -> dict[str, Any]:
    # Anything not found locally is "external" with its availability note, never "missing".
    return {
        "entry": entry,
        **{k: artifact.get(k) for k in ("path", "kind", "sha256", "availability")},
        "class": _CLASS.get(status, "external"),
        "status": status,
    }


def _campaign_artifacts(
    report: InventoryReport, name: str, directory: Path, media_dirs: Sequence[Path]
) -> None:
    from bundler.campaign import load_campaign

    camp, _ = load_campaign(directory)
    for row in camp.tables.get("artifacts", []):
        rel = str(row.get("path"))
        local = next((d / rel for d in (directory, *media_dirs) if (d / rel).is_file()), None)
        status = "external"
        if local is not None:
            got = hash_file(local)
            status = (
                "unreadable"
                if got.error
                else ("ok" if row.get("sha256") in (None, got.sha256) else "mismatch")
            )
        report.artifacts.append(_classified(name, row, status))


def check_inventory(
    root: Path,
    *,
    trusted: Sequence[Ed25519PublicKey] = (),
    allow_unsigned: bool = False,
    media_dirs: Sequence[Path] = (),
    fix: bool = False,
) -> InventoryReport:
    """Check ``root`` against its ``inventory.json``; with ``fix``, register new entries.

    ``fix`` only adds entries (atomically rewriting the register); it never
    deletes one, so a missing entry stays reported until a person decides.
    """
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"{root}: not a directory")
    register = _load_register(root)
    report = InventoryReport(str(root), entries=list(register["entries"]))
    found, report.unclassified = _discover(root)
    registered = {e["path"]: e for e in register["entries"]}
    for path in registered:
        if path not in found:
            report.missing.append(path)
    for name, kind in found.items():
        entry = registered.get(name)
        if entry is None:
            if fix:
                new = _describe(root / name, kind)
                register["entries"].append(new)
                report.added.append(new)
            else:
                report.unregistered.append(name)
            continue
        want = entry.get("sha256") if kind == "bundle" else entry.get("tree_sha256")
        got = _digest(root / name, kind)
        if want != got:
            report.mismatched.append({"path": name, "registered": str(want), "actual": got})
    for name, kind in found.items():
        if kind == "campaign":
            _campaign_artifacts(report, name, root / name, media_dirs)
            continue
        rep = check_bundle(
            root / name, trusted=trusted, allow_unsigned=allow_unsigned, media_dirs=media_dirs
        )
        report.verify.append(
            {
                "path": name,
                "ok": rep.ok,
                "signature_status": rep.signature_status,
                "problems": [str(p) for p in rep.problems],
            }
        )
        report.artifacts += [_classified(name, asdict(e), e.status) for e in rep.external]
    if report.added:
        register["entries"].sort(key=lambda e: e["path"])
        text = json.dumps(register, indent=2, sort_keys=True) + "\n"
        atomic_write_bytes(root / INVENTORY_NAME, text.encode("utf-8"))
        report.entries = register["entries"]
    return report
