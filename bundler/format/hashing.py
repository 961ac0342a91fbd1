"""Streaming, parallel SHA-256 of local files (external artifacts and media).

``hashlib`` releases the GIL while hashing buffers larger than 2 KiB, so
threads hash on every core with no process start-up or pickling. Files are
scheduled largest first, one file per task: bagit-python's ``Pool.map``
default chunking put all large files in one worker and gained nothing from a
second process. Memory is one read buffer per thread, whatever the media size.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bundler._internal.confined import ChangedFileError

__all__ = ["CHUNK_BYTES", "FileDigest", "Opener", "default_jobs", "hash_file", "hash_files"]

CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class FileDigest:
    """SHA-256 and size of one file, or the error that stopped reading it."""

    path: Path
    sha256: str | None
    size: int | None
    error: str | None = None


def default_jobs() -> int:
    """One hashing thread per available core."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


Opener = Callable[[], int]
"""Returns a descriptor open for reading on the file to hash, or raises with the reason."""

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | os.O_CLOEXEC


def _open_regular(path: Path) -> int:
    # Found as a regular file, it may be swapped for a FIFO before we open it: never wait.
    fd = os.open(path, _OPEN_FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def hash_file(
    path: Path, progress: Callable[[int], None] | None = None, opener: Opener | None = None
) -> FileDigest:
    """Hash one regular file in 1 MiB reads into a reused buffer.

    ``opener`` (default: open ``path``, non-blocking, regular files only) gives
    the descriptor to read; any exception it raises becomes the digest's ``error``.
    """
    h = hashlib.sha256()
    buf = bytearray(CHUNK_BYTES)
    view = memoryview(buf)
    size = 0
    try:
        fd = opener() if opener is not None else _open_regular(Path(path))
        with os.fdopen(fd, "rb", buffering=0) as fh:
            while n := fh.readinto(buf):
                h.update(view[:n])
                size += n
                if progress:
                    progress(n)
    except OSError as exc:
        return FileDigest(path, None, None, exc.strerror or str(exc))
    except ChangedFileError as exc:  # the file found is not the file there now
        return FileDigest(path, None, None, str(exc))
    return FileDigest(path, h.hexdigest(), size)


def hash_files(
    paths: Sequence[Path],
    jobs: int | None = None,
    progress: Callable[[int], None] | None = None,
    openers: Mapping[Path, Opener] | None = None,
) -> dict[Path, FileDigest]:
    """Hash ``paths`` on ``jobs`` threads (default: one per core), largest first.

    ``openers`` gives, for some paths, how to open them (see :func:`hash_file`).
    """
    how = openers or {}

    def size_of(p: Path) -> int:
        try:
            return p.stat().st_size
        except OSError:
            return 0

    order = sorted(set(paths), key=lambda p: (-size_of(p), str(p)))
    n = jobs or default_jobs()
    if n == 1 or len(order) <= 1:
        return {p: hash_file(p, progress, how.get(p)) for p in order}
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="sha256") as pool:
        results = list(pool.map(lambda p: hash_file(p, progress, how.get(p)), order))
    return {r.path: r for r in results}
