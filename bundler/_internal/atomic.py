"""Atomic writes: a temp file in the target's directory, fsync, then ``os.replace``.

An interrupted write leaves the old file (or nothing) in place, never a half file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


@contextlib.contextmanager
def atomic_output(path: Path, mode: int = 0o644) -> Iterator[BinaryIO]:
    """Yield a binary file that becomes ``path`` only if the block completes."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    except OSError as exc:  # name the file the user asked for, not our temp file
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            Path(tmp).unlink()
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            Path(tmp).unlink()
        raise


def atomic_write_bytes(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_output(path, mode=mode) as fh:
        fh.write(data)
