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

from bundler._internal.atomic import atomic_write_bytes
from bundler._internal.jsonload import JsonLoadError, loads
from bundler._internal.userfile import DOCUMENT_MAX_BYTES, read_user_file
from bundler.errors import BundleFormatError, Problem, UsageError
from bundler.format.container import member_name_problem
from bundler.format.hashing import hash_file
from bundler.format.trust import NO_TRUST, SignatureStatus, Trust
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
    invalid: list[dict[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the register and the folder agree and every bundle and artifact checks out."""
        return not (
            self.unregistered
            or self.missing
            or self.mismatched
            or self.unclassified
            or self.invalid
            or any(not v["ok"] for v in self.verify)
            or any(a["status"] in _FAILING for a in self.artifacts)
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
        # Bounded: a hostile register must not raise from the parser, and what --fix
        # writes back must be JSON again (no NaN, no integer Python cannot print).
        data = read_user_file(path, what="inventory", max_bytes=DOCUMENT_MAX_BYTES)
        doc = loads(data.decode("utf-8"))
    except JsonLoadError as exc:
        raise UsageError(
            f"{path}: not a usable inventory",
            [Problem(str(path), None, exc.field, str(exc))],
        ) from None
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
    """Top-level evidence entries: path -> "bundle" | "campaign"; and unclassified names.

    Symbolic links are never followed (they could lead outside ROOT): each is unclassified.
    """
    found: dict[str, str] = {}
    unclassified: list[str] = []
    for p in sorted(root.iterdir()):
        if p.name == INVENTORY_NAME or p.name.startswith("."):
            continue
        if p.is_symlink():
            if p.suffix == ".bundle" or p.is_dir():
                unclassified.append(p.name)
        elif p.is_file() and p.suffix == ".bundle":
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


class _NotRegistrable(Exception):
    """An entry that ``--fix`` cannot register; the message says why."""


def _text(value: Any, default: str) -> str:
    return value if isinstance(value, str) and value else default


def _describe(path: Path, kind: str) -> dict[str, Any]:
    """A register entry for a new evidence entry (id and kind from its own metadata).

    Raises:
        _NotRegistrable: the name, the bundle or its ``campaign.json`` cannot be read.
    """
    from bundler.campaign.load import name_problem
    from bundler.verify import open_bundle

    if (why := name_problem(path.name)) is not None:
        raise _NotRegistrable(why)
    entry: dict[str, Any] = {"path": path.name}
    if kind == "bundle":
        try:
            opened = open_bundle(path, trust=Trust.allow_unsigned())
        except BundleFormatError as exc:
            raise _NotRegistrable(exc.message.removeprefix(f"{path}: ")) from exc
        except OSError as exc:
            raise _NotRegistrable(f"cannot read: {exc.strerror or exc}") from exc
        if opened.manifest is None:
            raise _NotRegistrable("no readable manifest")
        camp = opened.manifest.campaign
        entry.update(
            id=_text(camp.id, path.stem),
            kind=_text(camp.kind, "bundle"),
            format="bundle",
            sha256=_digest(path, kind),
        )
    else:
        doc = _campaign_doc(path)
        entry.update(
            id=_text(doc.get("id"), path.name),
            kind=_text(doc.get("kind"), "campaign"),
            format="campaign-dir",
            tree_sha256=_digest(path, kind),
        )
    return entry


def _campaign_doc(directory: Path) -> dict[str, Any]:
    """``campaign.json`` of a campaign directory, read as ``bundle seal`` reads it."""
    from bundler.campaign.load import read_json

    if (directory / "campaign.json").is_symlink():
        raise _NotRegistrable("campaign.json: symbolic links are not followed")
    problems: list[Problem] = []
    doc = read_json(directory / "campaign.json", "campaign.json", problems)
    if problems:
        raise _NotRegistrable(str(problems[0]))
    if not isinstance(doc, dict):
        raise _NotRegistrable("campaign.json: not a JSON object")
    return doc


_CLASS = {
    "ok": "local, verified",
    "mismatch": "local, digest mismatch",
    "unreadable": "local, unreadable",
    "refused": "refused",
}
_FAILING = ("mismatch", "unreadable", "refused")


def _classified(
    entry: str, artifact: dict[str, Any], status: str, detail: str | None = None
) -> dict[str, Any]:
    # Anything not found locally is "external" with its availability note, never "missing".
    out = {
        "entry": entry,
        **{k: artifact.get(k) for k in ("path", "kind", "sha256", "availability")},
        "class": _CLASS.get(status, "external"),
        "status": status,
    }
    if detail is not None:
        out["detail"] = detail
    return out


def _artifact_path_problem(rel: Any) -> str | None:
    """Why an artifact ``path`` must not be looked up at all (as ``verify --media`` refuses)."""
    if not isinstance(rel, str):
        return "path is not a string"
    return member_name_problem(rel)


def _inside(path: Path, folder: Path) -> bool:
    """True when ``path`` resolves (links followed) to a place under ``folder``."""
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):  # a link loop
        return False


def _campaign_artifacts(
    report: InventoryReport, name: str, directory: Path, media_dirs: Sequence[Path]
) -> None:
    from bundler.campaign.load import load_campaign

    try:
        camp, _ = load_campaign(directory)
    except OSError as exc:
        where = f"{Path(exc.filename).name}: " if exc.filename else ""
        report.invalid.append(
            {"path": name, "problem": f"{where}cannot read: {exc.strerror or exc}"}
        )
        return
    for row in camp.tables.get("artifacts", []):
        rel = row.get("path")
        if (why := _artifact_path_problem(rel)) is not None:
            # Never let an entry's own table steer hashing outside ROOT and --media.
            report.artifacts.append(_classified(name, row, "refused", f"unacceptable path: {why}"))
            continue
        assert isinstance(rel, str)
        if not _inside(directory / rel, directory):
            report.artifacts.append(
                _classified(name, row, "refused", "resolves outside its folder (symbolic link)")
            )
            continue
        candidates = [directory / rel, *(d / rel for d in media_dirs)]
        local = next((c for c in candidates if c.is_file()), None)
        status = "external"
        if local is not None:
            got = hash_file(local)
            status = (
                "unreadable"
                if got.error
                else ("ok" if row.get("sha256") in (None, got.sha256) else "mismatch")
            )
        report.artifacts.append(_classified(name, row, status))


def _bundle_check(
    report: InventoryReport,
    root: Path,
    name: str,
    trust: Trust,
    media_dirs: Sequence[Path],
) -> None:
    """Verify one bundle entry as ``bundle verify`` does; its artifacts are classified too."""
    try:
        rep = check_bundle(root / name, trust=trust, media_dirs=media_dirs)
    except OSError as exc:
        report.verify.append(
            {
                "path": name,
                "ok": False,
                "trusted": False,
                "signature_status": SignatureStatus.UNCHECKED,
                "problems": [f"{name}: cannot read: {exc.strerror or exc}"],
            }
        )
        return
    report.verify.append(
        {
            "path": name,
            "ok": rep.ok,
            # ok with --allow-unsigned means "intact", not "signed by someone you trust".
            "trusted": rep.trusted,
            "signature_status": rep.signature_status,
            "problems": [str(p) for p in rep.problems],
        }
    )
    report.artifacts += [_classified(name, asdict(e), e.status) for e in rep.external]


def check_inventory(
    root: Path,
    *,
    trust: Trust = NO_TRUST,
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
            if not fix:
                report.unregistered.append(name)
                continue
            try:
                new = _describe(root / name, kind)
            except _NotRegistrable as exc:
                # One bad entry must not stop the others from being registered.
                report.invalid.append({"path": name, "problem": str(exc)})
                continue
            register["entries"].append(new)
            report.added.append(new)
            continue
        want = entry.get("sha256") if kind == "bundle" else entry.get("tree_sha256")
        got = _digest(root / name, kind)
        if want != got:
            report.mismatched.append({"path": name, "registered": str(want), "actual": got})
    for name, kind in found.items():
        if kind == "campaign":
            _campaign_artifacts(report, name, root / name, media_dirs)
        else:
            _bundle_check(report, root, name, trust, media_dirs)
    if report.added:
        register["entries"].sort(key=lambda e: e["path"])
        text = json.dumps(register, indent=2, sort_keys=True) + "\n"
        atomic_write_bytes(root / INVENTORY_NAME, text.encode("utf-8"))
        report.entries = register["entries"]
    return report
