"""Load the JSON Schemas of ``specs/schemas`` (the contract), shipped as ``bundler/schemas``."""

from __future__ import annotations

import functools
import json
from importlib.resources import files
from typing import Any

import jsonschema


@functools.cache
def load_schema(name: str) -> dict[str, Any]:
    """Return the schema ``specs/schemas/<name>.schema.json`` as a dict."""
    text = (files("bundler") / "schemas" / f"{name}.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@functools.cache
def validator(name: str) -> jsonschema.protocols.Validator:
    """A compiled Draft 2020-12 validator for schema ``name`` (with format checks)."""
    schema = load_schema(name)
    cls = jsonschema.Draft202012Validator
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def document_errors(name: str, doc: Any) -> list[tuple[str | None, str]]:
    """Validate ``doc`` against schema ``name``; return (field path, message) pairs."""
    out: list[tuple[str | None, str]] = []
    for err in sorted(validator(name).iter_errors(doc), key=lambda e: list(map(str, e.path))):
        path = ".".join(str(p) for p in err.path) or None
        out.append((path, err.message))
    return out
