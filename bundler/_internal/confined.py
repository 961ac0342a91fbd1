"""Walk a folder and read back exactly the files walked, never leaving the folder.

``bundle seal`` walks the campaign folder (refusing symbolic links), then reads
each file it found. Between the two, a file (or a folder above it) can be
swapped for a symbolic link to a file outside the campaign; reading by path
would follow it and seal content the walk never saw. So:

- the folder is opened once and everything is done relative to that
  descriptor (``os.fwalk``, ``dir_fd``), so renaming the folder's path does not
  redirect us either;
- each read opens every folder on the way with ``O_NOFOLLOW | O_DIRECTORY`` and
  the file itself with ``O_NOFOLLOW`` (a link anywhere on the way fails the
  open), non-blocking (a FIFO put there does not hang the open);
- the opened file must be the one walked: same device and inode as the walk's
  ``lstat``, and a regular file.

Anything else raises :class:`ChangedFileError`, which names what changed.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import TracebackType

__all__ = ["ChangedFileError", "ConfinedTree", "FileIdentity"]

_DIR_FLAGS = (
    os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC
)
_FILE_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | os.O_CLOEXEC
)
# What open(2) says when O_NOFOLLOW meets a link (ELOOP; EMLINK on some BSDs) or
# O_DIRECTORY meets a file.
_LINK_ERRNOS = {errno.ELOOP, errno.EMLINK, errno.ENOTDIR}


@dataclass(frozen=True)
class FileIdentity:
    """Which file a name pointed to when it was walked."""

    dev: int
    ino: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileIdentity:
        """The identity in a ``stat``/``lstat`` result."""
        return cls(st.st_dev, st.st_ino)


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    """``lstat`` of ``name`` in ``dir_fd``; None if it vanished since it was listed."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


class ChangedFileError(Exception):
    """A walked file is no longer the file walked: replaced, or reached through a link."""


class ConfinedTree:
    """A folder opened once; its files are walked and read relative to that descriptor.

    Use as a context manager (the descriptor is closed on exit).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_CLOEXEC)
        self.files: dict[str, FileIdentity] = {}
        """Every regular file :meth:`walk` recorded, by POSIX relative path."""

    def __enter__(self) -> ConfinedTree:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the folder's descriptor (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def walk(
        self,
    ) -> Iterator[tuple[str, list[str], set[str], list[tuple[str, os.stat_result]]]]:
        """``(folder, subfolders, linked, [(file name, lstat)])`` top-down, links never followed.

        ``folder`` is POSIX and relative (``""`` for the root); ``linked`` holds the
        subfolders that are symbolic links (listed, never entered). As with
        :func:`os.walk`, removing names from ``subfolders`` prunes them.
        """
        for dirpath, dirnames, filenames, dirfd in os.fwalk(
            ".", dir_fd=self._fd, follow_symlinks=False
        ):
            rel_dir = "" if dirpath == "." else PurePosixPath(dirpath).as_posix()
            dir_stats = {d: _lstat(d, dirfd) for d in dirnames}
            linked = {d for d, st in dir_stats.items() if st and stat.S_ISLNK(st.st_mode)}
            entries = [(f, st) for f in filenames if (st := _lstat(f, dirfd)) is not None]
            yield rel_dir, dirnames, linked, entries

    def _open_dir(self, rel_dir: str) -> int:
        """A descriptor on folder ``rel_dir``, reached without following any link."""
        fd = os.dup(self._fd)
        try:
            for part in PurePosixPath(rel_dir).parts if rel_dir else ():
                try:
                    nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in _LINK_ERRNOS:
                        raise ChangedFileError(
                            f"the folder {part!r} above it was replaced after the campaign was "
                            "read (by a symbolic link or a file); links are not carried"
                        ) from exc
                    raise
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open(self, rel: str) -> int:
        """A descriptor on the walked file ``rel``, checked to be the file walked.

        Raises:
            ChangedFileError: ``rel`` was not walked, or is now a link, not a regular
                file, or another file than the one walked.
            OSError: it cannot be opened (removed, permissions).
        """
        expect = self.files.get(rel)
        if expect is None:
            raise ChangedFileError("not a file found when the campaign was read")
        parent = PurePosixPath(rel).parent.as_posix()
        dfd = self._open_dir("" if parent == "." else parent)
        try:
            try:
                fd = os.open(PurePosixPath(rel).name, _FILE_FLAGS, dir_fd=dfd)
            except OSError as exc:
                if exc.errno in _LINK_ERRNOS:
                    raise ChangedFileError(
                        "replaced by a symbolic link after the campaign was read; "
                        "links are not carried"
                    ) from exc
                raise
        finally:
            os.close(dfd)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ChangedFileError(
                    "no longer a regular file: it was replaced after the campaign was read"
                )
            if FileIdentity.of(st) != expect:
                raise ChangedFileError(
                    "replaced by another file after the campaign was read (not the file walked)"
                )
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def read(self, rel: str) -> bytes:
        """The bytes of the walked file ``rel`` (see :meth:`open` for what is refused)."""
        fd = self.open(rel)
        with os.fdopen(fd, "rb") as fh:
            return fh.read()
