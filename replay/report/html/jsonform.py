"""The optional sections' inputs: a media replay and a rerun comparison, as JSON forms.

Both arrive as plain mappings (``MediaReplayResult.to_dict()`` and
``RerunComparison.to_dict()``, in memory or read back from a JSON file), so
the report never imports the media or rerun packages (torch, PyAV, the
launcher). A JSON file is untrusted like the bundle: :func:`normalize_media`
and :func:`normalize_rerun` check its shape, and the readers below take every
field defensively and print it as text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from bundler.errors import UsageError

__all__ = ["_json_text", "_list", "_map", "normalize_media", "normalize_rerun"]


def _as_dict(obj: Any, what: str) -> Mapping[str, Any]:
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        obj = to_dict()
    if not isinstance(obj, Mapping):
        raise UsageError(f"{what}: expected a JSON object, got {type(obj).__name__}")
    return obj


def normalize_media(obj: Any, what: str = "media result") -> Mapping[str, Any]:
    """A media replay result (object or JSON form, possibly under a ``media`` key), checked.

    Raises:
        UsageError: it does not look like a media replay result.
    """
    d = _as_dict(obj, what)
    if "comparisons" not in d and isinstance(d.get("media"), Mapping):
        d = d["media"]
    if not isinstance(d.get("comparisons"), list) or not isinstance(d.get("gates"), list):
        raise UsageError(
            f"{what}: not a media replay result (needs 'comparisons' and 'gates' lists, "
            "as MediaReplayResult.to_dict() writes)"
        )
    return d


def normalize_rerun(obj: Any, what: str = "rerun result") -> Mapping[str, Any]:
    """A rerun comparison (object or JSON form, possibly under a ``rerun`` key), checked.

    Raises:
        UsageError: it does not look like a rerun comparison.
    """
    d = _as_dict(obj, what)
    for key in ("rerun", "comparison"):
        if "effects" not in d and isinstance(d.get(key), Mapping):
            d = d[key]
    if not isinstance(d.get("effects"), list) or not isinstance(d.get("sealed"), Mapping):
        raise UsageError(
            f"{what}: not a rerun comparison (needs 'effects' and 'sealed', as "
            "RerunComparison.to_dict() writes)"
        )
    return d


# ----------------------------------------------------------------------------- readers


def _json_text(x: Any) -> str:
    """Any JSON value as short text."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.6g}" if math.isfinite(x) else str(x)
    return str(x)


def _list(x: Any) -> list[Mapping[str, Any]]:
    return [e for e in x if isinstance(e, Mapping)] if isinstance(x, list) else []


def _map(x: Any) -> Mapping[str, Any]:
    return x if isinstance(x, Mapping) else {}
