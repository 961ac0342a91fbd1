"""Decoding and parsing an import source's text: one way, for every importer.

Each importer names its own format in its errors (its ``_fail``); what a source's
bytes must be before the format is looked at is the same for all: UTF-8, then JSON
through the one bounded loader (``bundler/_internal/jsonload.py``), bare
``NaN``/``Infinity`` kept so the format's checks can name the field that holds one.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from bundler._internal.jsonload import JsonLoadError, loads
from bundler.format.serving_run import SourceError

__all__ = ["Fail", "decode", "load_json", "parse_json"]


class Fail(Protocol):
    """An importer's error maker: file, field, message and record, as ``Problem`` takes."""

    def __call__(
        self, where: str, field: str | None, message: str, record: str | None = None
    ) -> SourceError: ...


def decode(data: bytes, where: str, fail: Fail) -> str:
    """``data`` as UTF-8 text, or ``fail``'s error naming the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail(where, None, f"not UTF-8 ({exc.reason} at byte {exc.start})") from exc


def parse_json(
    text: str,
    where: str,
    fail: Fail,
    *,
    record: str | None = None,
    source: bytes | None = None,
    at_line: bool = True,
) -> Any:
    """``text`` parsed by the bounded loader, or ``fail``'s error located in it.

    ``record`` names the part of the file ``text`` is (``line 3`` of a JSON Lines
    file); ``at_line`` False gives a syntax error's column only (``text`` is one line).
    """
    try:
        return loads(text, constants="keep", surrogates=True, source=source)
    except JsonLoadError as exc:
        raise fail(where, exc.field, str(exc), record) from None
    except json.JSONDecodeError as exc:
        at = f"line {exc.lineno} column {exc.colno}" if at_line else f"column {exc.colno}"
        raise fail(where, None, f"not JSON (truncated?): {exc.msg} at {at}", record) from exc


def load_json(data: bytes, where: str, fail: Fail) -> Any:
    """A whole-file JSON source: :func:`decode`, then :func:`parse_json`."""
    return parse_json(decode(data, where, fail), where, fail, source=data)
