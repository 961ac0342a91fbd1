"""reprobundle packager: seal, verify, sign and inspect campaign bundles."""

from __future__ import annotations

import functools

__all__ = ["__version__", "version"]


@functools.cache
def version() -> str:
    """This installation's version (its package metadata), read on first use.

    Not at import: ``importlib.metadata`` costs ~30 ms, paid by every process that
    imports ``bundler`` (each parse worker too), most of which never need it.
    """
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("reprobundle")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0.0.0"


def __getattr__(name: str) -> str:
    if name == "__version__":
        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
