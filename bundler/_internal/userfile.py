"""Read a file the user named (a key, a key list, a plan, a source) without trusting what it is.

A path on the command line may name a FIFO (an open for reading waits for a
writer forever), a device (``/dev/zero`` never ends) or a directory. Every such
file is opened with ``O_NONBLOCK`` (opening a FIFO returns at once) and
``O_NOCTTY`` (a terminal never becomes ours), checked with ``fstat`` on the
opened descriptor (so the file checked is the file read) to be a regular file,
and read up to a cap: the caller's bound for that kind of file, documented in
``specs/bundle-format.md`` ("Files named on the command line").
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from bundler.errors import UsageError

__all__ = [
    "DOCUMENT_MAX_BYTES",
    "IMPORT_SOURCE_MAX_BYTES",
    "KEY_FILE_MAX_BYTES",
    "KEY_LIST_MAX_BYTES",
    "PASSPHRASE_MAX_BYTES",
    "format_bytes",
    "open_user_file",
    "read_bounded",
    "read_user_file",
]

KEY_FILE_MAX_BYTES = 1 << 20
"""A private key (PEM or OpenSSH): a few hundred bytes, even encrypted."""
KEY_LIST_MAX_BYTES = 4 << 20
"""A public key file, key list or ``allowed_signers`` file: about 100 bytes a key."""
PASSPHRASE_MAX_BYTES = 64 << 10
"""``--passphrase-file``."""
DOCUMENT_MAX_BYTES = 64 << 20
"""A plan, ``inventory.json`` or a ``lint-text`` file."""
IMPORT_SOURCE_MAX_BYTES = 1 << 30
"""An import source: it is carried as one bundle member, and a member is bounded by 1 GiB."""

_READ_CHUNK = 1 << 20


def format_bytes(n: int) -> str:
    """``1 MiB``, ``64 KiB``, ``1 GiB`` for the caps above; plain bytes otherwise."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n:,} bytes"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a plain file"


def open_user_file(path: Path, *, what: str, error: type[UsageError] = UsageError) -> BinaryIO:
    """Open ``path`` for reading if it is a regular file, never blocking on the open.

    ``what`` names the file's role in errors (``"key file"``); ``error`` is the
    :class:`UsageError` subclass raised (``KeyFileError`` for keys).

    Raises:
        UsageError: (``error``) ``path`` is a FIFO, socket, device or directory.
        OSError: it cannot be opened (missing, permissions); callers keep their own
            handling of these.
    """
    flags = (
        os.O_RDONLY
        | getattr(os, "O_NONBLOCK", 0)
        | getattr(os, "O_NOCTTY", 0)
        | getattr(os, "O_CLOEXEC", 0)
        | getattr(os, "O_BINARY", 0)
    )
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise error(f"{path}: the {what} is {_kind(mode)}, not a regular file")
        # Reads from a regular file never block; clear the flag so nothing downstream sees it.
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bounded(
    fh: BinaryIO,
    path: Path,
    *,
    what: str,
    max_bytes: int,
    error: type[UsageError] = UsageError,
    head: bytes = b"",
) -> bytes:
    """The rest of ``fh`` after ``head`` (bytes already read), refusing more than ``max_bytes``.

    The size is counted as read, not taken from ``fstat``: a file that grows
    while we read is still bounded.
    """
    if os.fstat(fh.fileno()).st_size > max_bytes:  # the common case, refused before any read
        raise error(f"{path}: the {what} is larger than {format_bytes(max_bytes)}")
    chunks = [head]
    total = len(head)
    while total <= max_bytes:
        chunk = fh.read(min(_READ_CHUNK, max_bytes + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
    raise error(f"{path}: the {what} is larger than {format_bytes(max_bytes)}")


def read_user_file(
    path: Path, *, what: str, max_bytes: int, error: type[UsageError] = UsageError
) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them.

    Raises:
        UsageError: (``error``) not a regular file, or larger than ``max_bytes``;
            the message names the file and says which.
        OSError: it cannot be opened or read.
    """
    with open_user_file(path, what=what, error=error) as fh:
        return read_bounded(fh, path, what=what, max_bytes=max_bytes, error=error)
