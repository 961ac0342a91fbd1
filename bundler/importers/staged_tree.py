"""The campaign folder an import writes: staged beside its destination, renamed into place.

Files land in a hidden sibling folder (``.<name>.reprobundle-partial-import-<hex>``)
and the folder is renamed to the destination once every file is there, so a failed
import leaves nothing at the destination (and removes its staging folder). The
carried sources are written by the job that parsed each (in a worker process when
the sources are large) into the staging folder's ``.parts/`` under a random name
(:func:`stage_bytes`), and only its digest comes back: the caller renames it into
place (:meth:`StagedTree.adopt`) instead of receiving its bytes through a pipe and
writing them again (writing 178 MiB of fresh page cache cost 1.7 s of system time
on the 2-core VM of ``bench/serving_scale.py``; the jobs do it beside each other).
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

__all__ = ["PARTS", "StagedFile", "StagedTree", "stage_bytes"]

PARTS = ".parts"
"""The staging folder's subfolder of files written by :func:`stage_bytes`, not yet
adopted; removed (with any never adopted) before the rename."""


@dataclass(frozen=True)
class StagedFile:
    """Bytes already written into a staging folder's :data:`PARTS`, by their digest."""

    path: str
    sha256: str
    size: int


def stage_bytes(data: bytes, parts: str) -> StagedFile:
    """Write ``data`` to a new file of the folder ``parts`` (created if missing; a name
    no one else uses, created exclusively) and return it with its SHA-256."""
    folder = Path(parts)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / secrets.token_hex(12)
    with path.open("xb") as fh:
        fh.write(data)
    return StagedFile(str(path), hashlib.sha256(data).hexdigest(), len(data))


class StagedTree:
    """A folder written file by file, then renamed to ``out``.

    Use as a context manager: leaving it by an exception removes the staging folder;
    :meth:`finish` writes the rest and renames.
    """

    def __init__(self, out: Path) -> None:
        self.out = out
        self.tmp = out.parent / f".{out.name}.reprobundle-partial-import-{secrets.token_hex(6)}"
        self._written: set[str] = set()

    def __enter__(self) -> StagedTree:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if kind is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(self.tmp)

    def put(self, rel: str, data: bytes) -> None:
        """Write ``data`` at ``rel`` (under the staging folder); a path already put or
        adopted is left as it is."""
        if rel in self._written:
            return
        self._written.add(rel)
        p = self.tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)

    @property
    def parts(self) -> Path:
        """Where :func:`stage_bytes` writes files this tree may :meth:`adopt`."""
        return self.tmp / PARTS

    def adopt(self, rel: str, staged: StagedFile) -> None:
        """Move ``staged`` (a file of :attr:`parts`) to ``rel``; when ``rel`` was already
        put or adopted (a file carried for several runs: the same bytes), drop it."""
        src = Path(staged.path)
        if src.parent != self.parts:
            raise ValueError(f"{staged.path}: not a part of this staging folder")
        if rel in self._written:
            src.unlink(missing_ok=True)  # missing: this very file, adopted for an earlier run
            return
        self._written.add(rel)
        dst = self.tmp / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        src.rename(dst)

    def finish(self, files: Mapping[str, bytes]) -> None:
        """Write ``files`` (those not already put or adopted) and rename the staging
        folder to ``out``."""
        for rel in sorted(files):
            self.put(rel, files[rel])
        self.tmp.mkdir(parents=True, exist_ok=True)  # an import of no file at all
        # Parts never adopted: a worker that wrote one and died before answering.
        shutil.rmtree(self.parts, ignore_errors=True)
        self.tmp.rename(self.out)
