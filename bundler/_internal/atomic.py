"""Atomic writes: a partial file in the target's directory, fsync, then link or replace.

An interrupted write leaves the old file (or nothing) in place, never a half file.

- ``replace=False`` creates the target without ever replacing one: the finished
  partial file is hard-linked to the target name, which fails if the name
  exists, so of two concurrent writers exactly one wins and the other gets
  :class:`~bundler.errors.UsageError` ("already exists"). On a file system
  without hard links the name is claimed with ``O_CREAT | O_EXCL`` first.
- ``replace=True`` (``--force``, in-place rewrites) uses ``os.replace``.

The partial file is named
``.<target name>.reprobundle-partial-<host>-<pid>-<random>`` so that it is
recognisably ours. A writer killed outright (``kill -9``, power loss) leaves it
behind; every later write into the same directory removes the partial files
written on this host whose process is gone, and any older than
:data:`STALE_AFTER_S` (a folder shared over the network may hold partial files
of live writers on other hosts, whose pids mean nothing here).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from bundler.errors import UsageError

__all__ = [
    "PARTIAL_MARK",
    "STALE_AFTER_S",
    "atomic_output",
    "atomic_write_bytes",
    "partial_name",
    "remove_stale_partials",
]

PARTIAL_MARK = ".reprobundle-partial-"
STALE_AFTER_S = 6 * 3600
"""A partial file this old is removed even if a process with its pid is running
(pids are reused; no write of ours takes hours)."""

_PARTIAL_RE = re.compile(
    r"\..*\.reprobundle-partial-([A-Za-z0-9.-]*)-(\d+)-[0-9a-f]{12}", re.DOTALL
)
_NAME_BYTES = 120  # of the target's name kept in the partial name (NAME_MAX is 255)
# link(2) errors meaning "this file system has no hard links", not "the name exists".
_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK}


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "", socket.gethostname())[:40] or "host"


def partial_name(target_name: str, pid: int | None = None, host: str | None = None) -> str:
    """The name of a partial file for ``target_name`` written by process ``pid`` on ``host``."""
    stem = os.fsdecode(os.fsencode(target_name)[:_NAME_BYTES])
    who = f"{_host() if host is None else host}-{os.getpid() if pid is None else pid}"
    return f".{stem}{PARTIAL_MARK}{who}-{secrets.token_hex(6)}"


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, someone else's
        return True
    return True


def remove_stale_partials(directory: Path, max_age_s: float = STALE_AFTER_S) -> list[Path]:
    """Remove our partial files in ``directory`` whose writer is gone or that are too old.

    Only names of the form ``partial_name`` produces are touched. A partial
    file younger than ``max_age_s`` is kept if its writer may be alive: a
    process of this host that still runs (this process's other threads
    included), or any process of another host.
    Returns the files removed.
    """
    removed: list[Path] = []
    here = _host()
    now = time.time()
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        m = _PARTIAL_RE.fullmatch(entry.name)
        if m is None:
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        if age < max_age_s and (m.group(1) != here or _pid_alive(int(m.group(2)))):
            continue
        try:
            Path(entry.path).unlink()
        except OSError:  # gone already, or not ours to remove after all
            continue
        removed.append(Path(entry.path))
    return removed


def _create_partial(directory: Path, target_name: str) -> tuple[int, Path]:
    for _ in range(100):
        tmp = directory / partial_name(target_name)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            continue
        return fd, tmp
    raise FileExistsError(errno.EEXIST, "cannot create a partial file", str(directory))


def _link_no_replace(tmp: Path, path: Path) -> None:
    """Make ``tmp`` appear as ``path``; FileExistsError if ``path`` exists. ``tmp`` is consumed."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        # No hard links here: claim the name exclusively, then move the data over it.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        try:
            tmp.replace(path)
        except BaseException:
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        return
    with contextlib.suppress(OSError):  # the target is complete; a leftover is cleaned later
        tmp.unlink()


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_output(path: Path, mode: int = 0o644, *, replace: bool = True) -> Iterator[BinaryIO]:
    """Yield a binary file that becomes ``path`` only if the block completes.

    With ``replace=False`` an existing ``path`` is never replaced, even one that
    appears while the block runs: :class:`~bundler.errors.UsageError` is raised
    and nothing is written.
    """
    path = Path(path)
    directory = path.parent
    remove_stale_partials(directory)
    try:
        fd, tmp = _create_partial(directory, path.name)
    except OSError as exc:  # name the file the user asked for, not our partial file
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        tmp.chmod(mode)
        if replace:
            tmp.replace(path)
        else:
            try:
                _link_no_replace(tmp, path)
            except FileExistsError:
                raise UsageError(f"{path}: already exists (pass --force to replace it)") from None
        _fsync_dir(directory)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def atomic_write_bytes(path: Path, data: bytes, mode: int = 0o644, *, replace: bool = True) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_output` for ``replace``)."""
    with atomic_output(path, mode=mode, replace=replace) as fh:
        fh.write(data)
