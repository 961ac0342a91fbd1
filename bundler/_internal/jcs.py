"""RFC 8785 (JSON Canonicalization Scheme) bytes, via the ``rfc8785`` package."""

from __future__ import annotations

from typing import Any

import rfc8785


def dumps(value: Any) -> bytes:
    """Canonical UTF-8 bytes of ``value`` per RFC 8785.

    Raises:
        ValueError: for values JCS cannot represent exactly (NaN, infinities,
            integers beyond ±(2**53 − 1)).
    """
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError) as exc:
        raise ValueError(f"cannot canonicalize as RFC 8785 JSON: {exc}") from exc
