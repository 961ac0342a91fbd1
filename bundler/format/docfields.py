"""Parsing helpers shared by the format's typed documents (:mod:`bundler.format.model`,
:mod:`bundler.format.plan_model`): located shape errors, unknown fields kept, key order kept.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from bundler.errors import BundleFormatError, Problem

__all__ = [
    "Document",
    "as_list",
    "fail",
    "frozen_json",
    "int_field",
    "number",
    "obj",
    "optional",
    "put",
    "str_field",
    "unknown_fields",
]

_T = TypeVar("_T")


def fail(where: str, path: str, message: str) -> BundleFormatError:
    return BundleFormatError(
        f"{where}: field {path}: {message}", [Problem(where, None, path, message)]
    )


def obj(value: Any, where: str, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise fail(where, path, f"expected an object, found {type(value).__name__}")
    return value


def as_list(value: Any, where: str, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise fail(where, path, f"expected an array, found {type(value).__name__}")
    return value


def str_field(doc: Mapping[str, Any], key: str, where: str, prefix: str = "") -> str:
    value = doc.get(key)
    if not isinstance(value, str):
        raise fail(where, prefix + key, f"expected a string, found {type(value).__name__}")
    return value


def int_field(doc: Mapping[str, Any], key: str, where: str, prefix: str = "") -> int:
    value = doc.get(key)
    # bool is an int to Python, never to JSON Schema; 3.0 is an integer to both.
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (isinstance(value, float) and not value.is_integer())
    ):
        raise fail(where, prefix + key, f"expected an integer, found {value!r}")
    return value  # type: ignore[return-value]  # kept as written (see module docstring)


def number(value: Any, where: str, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise fail(where, path, f"expected a number, found {value!r}")
    return value


def optional(doc: Mapping[str, Any], key: str, check: Any, where: str, prefix: str = "") -> Any:
    """``check(value, where, path)`` when ``key`` is present, else None."""
    if key not in doc:
        return None
    return check(doc[key], where, prefix + key)


def unknown_fields(doc: Mapping[str, Any], known: Iterable[str]) -> dict[str, Any]:
    names = set(known)
    return {k: copy.deepcopy(v) for k, v in doc.items() if k not in names}


def put(out: dict[str, Any], key: str, value: Any) -> None:
    """Write an optional field back only when it was present (None means absent)."""
    if value is not None:
        out[key] = copy.deepcopy(value)


def frozen_json(items: Iterable[_T]) -> tuple[_T, ...]:
    return tuple(copy.deepcopy(list(items)))


class Document:
    """What every parsed object shares: ``to_dict`` writes keys back in the order read."""

    key_order: tuple[str, ...]

    def _ordered(self, out: dict[str, Any]) -> dict[str, Any]:
        # Order is no part of JSON's meaning (RFC 8785 sorts), but a reader that
        # iterates a document should meet its keys as the author wrote them.
        if not self.key_order:
            return out
        rank = {k: i for i, k in enumerate(self.key_order)}
        return dict(sorted(out.items(), key=lambda kv: rank.get(kv[0], len(rank))))
