"""Keeping a rerun inside its folders: safe file names, reads in ``--inputs``, writes in ``-o``.

A sealed bundle that verifies is still hostile input: its plan names input
files, server names and (through them) file names in the rerun directory.

- :func:`safe_name`: one path component from any name (a server, an attempt,
  a request id): honest names come back unchanged.
- :func:`output_path`: the only way the rerun turns a relative path into a file
  it writes: joined, resolved and checked to lie inside the output folder
  before any parent folder is made.
- :func:`input_problem` and :func:`read_input`: a payload file path is relative,
  never climbs with ``..``, and is read only from a regular file whose real
  path lies inside the ``--inputs`` folder, with a size cap.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from pathlib import Path, PurePosixPath

from bundler.errors import UsageError
from bundler.format.container import Limits

__all__ = [
    "MAX_INPUT_BYTES",
    "InputRefused",
    "input_problem",
    "output_path",
    "read_input",
    "safe_name",
]

MAX_INPUT_BYTES = Limits().max_member_bytes
"""The most an input file may hold: what one bundle member may hold (the bundle
could have carried the file instead)."""

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_MAX_NAME_CHARS = 100  # leaves room for a suffix and extension within NAME_MAX (255 bytes)
_HASH_CHARS = 8


def safe_name(name: str) -> str:
    """``name`` as one file name: ``[A-Za-z0-9._-]`` kept, anything else ``_``.

    A name that had to change (or is empty, ``.``, ``..``, or longer than 100
    characters) gets ``-`` and the first 8 hex digits of its UTF-8 SHA-256
    appended, so two different names cannot map to the same file. Honest names
    (``baseline-1``, ``rerun-2``) come back as they are.
    """
    mapped = _UNSAFE.sub("_", name)[:_MAX_NAME_CHARS]
    if mapped == name and name not in ("", ".", ".."):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{mapped}-{digest[:_HASH_CHARS]}"


def output_path(root: Path, rel: str, *, make_parents: bool = True) -> Path:
    """``root / rel``, refused unless its resolved path lies inside the resolved ``root``.

    Parent folders are made only after the check. Symlinks already inside
    ``root`` are followed by the check, so one pointing out is refused too.

    Raises:
        UsageError: the path would leave ``root``.
    """
    base = Path(root).resolve()
    path = base / rel
    real = path.resolve()
    if real != base and base not in real.parents:
        raise UsageError(
            f"{root}: refusing to write {rel!r}, which resolves outside the output folder"
        )
    if make_parents:
        real.parent.mkdir(parents=True, exist_ok=True)
    return real


def input_problem(rel: str) -> str | None:
    """Why payload file path ``rel`` can never be read safely, or None."""
    if "\x00" in rel:
        return "has a NUL byte"
    if PurePosixPath(rel).is_absolute():
        return "is an absolute path"
    if ".." in PurePosixPath(rel).parts:
        return "climbs out with '..'"
    return None


class InputRefused(ValueError):
    """A file that exists in the input folder but must not be read (the reason is the message)."""


def read_input(folder: Path, rel: str, limit: int = MAX_INPUT_BYTES) -> bytes | None:
    """The bytes of ``folder / rel``, or None when the folder has no such file.

    ``rel`` must already pass :func:`input_problem`. The path is resolved (any
    symlink followed) and must lie inside the resolved ``folder``; the file is
    opened without following a final symlink and without blocking (a FIFO is
    never waited on), must be a regular file, and is read up to ``limit`` bytes.

    Raises:
        InputRefused: the path leaves the folder, is not a regular file, or is too large.
        OSError: the file cannot be read.
    """
    base = Path(folder).resolve()
    candidate = base / rel
    if not candidate.exists() and not candidate.is_symlink():
        return None
    real = candidate.resolve()
    if base not in real.parents:
        raise InputRefused(f"resolves to {str(real)!r}, outside --inputs {str(base)!r}")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(real, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # became a symlink after it was resolved
            raise InputRefused("is a symlink") from exc
        raise
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise InputRefused("is not a regular file")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise InputRefused(f"is larger than {limit:,} bytes")
    return data
