"""Find files by SHA-256 in local directories, and read them verified.

A file is used only when its SHA-256 equals a digest the bundle names (the
``artifacts`` table for media, ``scorer.json`` for weights); names may differ
from the recorded paths. What was looked for and not found is reported
(``absent``); a file at the recorded path, or with the recorded name, whose
digest differs is reported as a ``mismatch``. Nothing is silently skipped.

The bytes that are decoded or loaded are the bytes that were hashed: callers
use :func:`read_verified`, which re-hashes what it read, so a file that
changes between the search and the use is caught.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Final

from bundler.format.hashing import FileDigest, hash_files
from replay.engine.verdicts import FileStatus

__all__ = [
    "ABSENT",
    "MISMATCH",
    "NOT_ATTESTED",
    "OK",
    "ArtifactRef",
    "IdentityError",
    "Location",
    "locate",
    "read_verified",
]

# Names the media modules import; the words are :class:`FileStatus`'s.
OK: Final = FileStatus.OK
ABSENT: Final = FileStatus.ABSENT
MISMATCH: Final = FileStatus.MISMATCH
NOT_ATTESTED: Final = FileStatus.NOT_ATTESTED
UNREADABLE: Final = FileStatus.UNREADABLE


class IdentityError(Exception):
    """A file's bytes do not hash to the digest they were used for."""


@dataclass(frozen=True)
class ArtifactRef:
    """A file the bundle names: recorded path, digest and (optional) size."""

    path: str
    sha256: str
    bytes: int | None = None


@dataclass(frozen=True)
class Location:
    """Where (and whether) a digest was found."""

    sha256: str
    status: FileStatus
    path: str | None = None
    recorded_path: str | None = None
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return asdict(self)


def _files(dirs: Sequence[Path]) -> list[tuple[Path, Path]]:
    """Every regular file under ``dirs`` as (directory, file), in a stable order."""
    out: list[tuple[Path, Path]] = []
    for d in dirs:
        for root, subdirs, names in os.walk(d):
            subdirs.sort()
            for n in sorted(names):
                p = Path(root) / n
                if p.is_file():
                    out.append((d, p))
    return out


def _candidates(
    want: Sequence[str],
    by_digest: Mapping[str, ArtifactRef],
    files: Sequence[tuple[Path, Path]],
) -> tuple[dict[str, list[Path]], set[Path]]:
    """Files worth hashing: same size as recorded, or same path or name."""
    sizes: dict[Path, int] = {}
    for _, p in files:
        with contextlib.suppress(OSError):
            sizes[p] = p.stat().st_size
    named: dict[str, list[Path]] = {}
    to_hash: set[Path] = set()
    for dg in want:
        ref = by_digest.get(dg)
        if ref is None:
            continue
        rec_name = PurePosixPath(ref.path).name
        for base, p in files:
            if p not in sizes:
                continue
            if p.relative_to(base).as_posix() == ref.path or p.name == rec_name:
                named.setdefault(dg, []).append(p)
                to_hash.add(p)
            elif ref.bytes is None or sizes[p] == ref.bytes:
                to_hash.add(p)
    return named, to_hash


def _resolve(
    dg: str,
    ref: ArtifactRef,
    *,
    found: Mapping[str, Path],
    named: Sequence[Path],
    digests: Mapping[Path, FileDigest],
    dirs: Sequence[Path],
) -> Location:
    if dg in found:
        p = found[dg]
        note = "" if p.name == PurePosixPath(ref.path).name else f"found as {p.name}"
        return Location(dg, OK, str(p), ref.path, note)
    for p in named:
        got = digests[p].sha256
        if got is not None:
            return Location(
                dg, MISMATCH, str(p), ref.path, f"{p} has sha256 {got}, the bundle records {dg}"
            )
    for p in named:
        return Location(dg, UNREADABLE, str(p), ref.path, str(digests[p].error))
    where = ", ".join(str(d) for d in dirs) or "(no directory given)"
    return Location(dg, ABSENT, None, ref.path, f"no file with this sha256 in {where}")


def locate(
    wanted: Iterable[str],
    refs: Iterable[ArtifactRef],
    dirs: Sequence[Path],
    *,
    jobs: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Location]:
    """Find each wanted digest among the files under ``dirs``.

    Only digests named by ``refs`` are looked for (others are
    ``not-attested``). A file is hashed when its size equals the recorded size
    (any size when none is recorded) or when its path or name equals the
    recorded path's; hashing runs on ``jobs`` threads.

    Args:
        wanted: digests to find.
        refs: what the bundle names (path, digest, size).
        dirs: directories to search, recursively.
        jobs: hashing threads (default: one per core).
        progress: called with the number of bytes hashed, as they are.

    Returns:
        digest -> :class:`Location`, one per wanted digest.
    """
    by_digest: dict[str, ArtifactRef] = {}
    for r in refs:
        by_digest.setdefault(r.sha256, r)
    want = sorted(set(wanted))
    named, to_hash = _candidates(want, by_digest, _files(dirs))
    digests = hash_files(sorted(to_hash), jobs=jobs, progress=progress)
    found: dict[str, Path] = {}
    for p in sorted(digests):
        d = digests[p].sha256
        if d is not None:
            found.setdefault(d, p)
    out: dict[str, Location] = {}
    for dg in want:
        ref = by_digest.get(dg)
        if ref is None:
            out[dg] = Location(dg, NOT_ATTESTED, detail="digest not listed by the bundle")
        else:
            out[dg] = _resolve(
                dg, ref, found=found, named=named.get(dg, []), digests=digests, dirs=dirs
            )
    return out


def read_verified(path: Path, sha256: str) -> bytes:
    """Read ``path`` whole and check that the bytes read hash to ``sha256``.

    Raises:
        IdentityError: the bytes do not match (the file changed, or is not the one).
        OSError: the file cannot be read.
    """
    data = Path(path).read_bytes()
    got = hashlib.sha256(data).hexdigest()
    if got != sha256:
        raise IdentityError(f"{path}: sha256 {got}, expected {sha256}")
    return data
