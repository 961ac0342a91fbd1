"""The manifest and the in-toto Statement that signatures cover.

``manifest.json`` lists every member (path, SHA-256, size, role) and every
external artifact (SHA-256, size, kind, availability). Every author string in
it (title, arms, the externals' ``availability`` and ``uri``) has been through
the sanitizer before it gets here, and names (campaign id, paths) were refused
at seal if a rule would change them (``specs/sanitizer.md``): the statement
below copies ``availability`` from this document, never from the campaign.

The signed payload is an in-toto Statement v1 whose subjects are the manifest
itself, every member and every external artifact; its predicate binds the
manifest's digest. Both are RFC 8785 canonical JSON so an auditor can rebuild
the signed bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from bundler._internal import jcs
from bundler._internal.schemas import document_errors
from bundler.errors import BundleFormatError
from bundler.format.model import Manifest, Statement

__all__ = [
    "ENVELOPE_NAME",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "LEGACY_PREDICATE_TYPES",
    "MANIFEST_NAME",
    "PREDICATE_TYPE",
    "STATEMENT_TYPE",
    "SUPPORTED_VERSIONS",
    "ManifestError",
    "build_manifest",
    "build_statement",
    "parse_manifest",
    "parse_statement",
]

FORMAT_NAME = "reprobundle"
FORMAT_VERSION = "1"
SUPPORTED_VERSIONS = frozenset({"1"})
MANIFEST_NAME = "manifest.json"
ENVELOPE_NAME = "signatures.dsse.json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
# The predicate's type URI (docs/adr/0006-predicate-type.md): versioned, in the project's
# spec namespace (the host of every schema $id), schema in
# specs/schemas/predicate.bundle.v1.schema.json. Seal writes it; verify also reads the
# URN that bundles sealed before it carry (same predicate, same meaning).
PREDICATE_TYPE = "https://reprobundle.invalid/predicate/bundle/v1"
LEGACY_PREDICATE_TYPES = frozenset({"urn:reprobundle:predicate:bundle:v1"})
EXTERNAL_PREFIX = "external:"

_D = TypeVar("_D")


class ManifestError(ValueError):
    """The manifest or statement is not one this version understands."""


def build_manifest(
    *,
    campaign: dict[str, Any],
    members: list[dict[str, Any]],
    tables: dict[str, int],
    external: list[dict[str, Any]],
    sanitization: list[dict[str, Any]],
    findings: list[dict[str, Any]],
    environment: dict[str, str],
    rules_version: str,
) -> bytes:
    """Canonical bytes of ``manifest.json`` (see ``specs/bundle-format.md``).

    ``rules_version`` is the scrubbing rules' version the sealer applied
    (``bundler.campaign.sanitize.RULES_VERSION``): the format records it, and knows
    nothing of the campaign code above it.
    """
    doc = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "campaign": campaign,
        "members": members,
        "tables": tables,
        "external": external,
        "sanitization": {
            "rules_version": rules_version,
            "scrubbed": sanitization,
            "unscrubbed": findings,
        },
        "environment": environment,
    }
    return jcs.dumps(doc)


def parse_manifest(data: bytes) -> Manifest:
    """Parse and check ``manifest.json``; reject unknown formats and versions.

    Raises:
        ManifestError: not JSON, not ours, an unknown version, or a schema problem.
    """
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"manifest.json is not JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise ManifestError("manifest.json does not describe a reprobundle archive")
    version = doc.get("format_version")
    if not isinstance(version, str) or version not in SUPPORTED_VERSIONS:
        raise ManifestError(
            f"unknown format_version {version!r}; this reprobundle reads "
            f"{sorted(SUPPORTED_VERSIONS)} (a newer reprobundle may read it)"
        )
    errors = document_errors("manifest", doc)
    if errors:
        field, msg = errors[0]
        raise ManifestError(f"manifest.json field {field}: {msg} ({len(errors)} problem(s))")
    return _typed(Manifest.from_dict, doc)


def _typed(parse: Callable[[dict[str, Any]], _D], doc: dict[str, Any]) -> _D:
    """``parse(doc)``, its located shape error reported as a ManifestError like the others."""
    try:
        return parse(doc)
    except BundleFormatError as exc:
        raise ManifestError(exc.message) from exc


def build_statement(manifest_bytes: bytes, manifest_sha256: str, doc: Manifest) -> bytes:
    """Canonical bytes of the in-toto Statement v1 over the manifest's digests."""
    subjects: list[dict[str, Any]] = [
        {"name": MANIFEST_NAME, "digest": {"sha256": manifest_sha256}}
    ]
    subjects += [{"name": m.path, "digest": {"sha256": m.sha256}} for m in doc.members]
    for e in doc.external:
        subjects.append(
            {
                "name": EXTERNAL_PREFIX + e.path,
                "digest": {"sha256": e.sha256},
                "annotations": {
                    "kind": e.kind,
                    "bytes": e.bytes,
                    "availability": e.availability,
                },
            }
        )
    statement = {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "format_version": doc.format_version,
            "campaign_id": doc.campaign.id,
            "manifest": {
                "name": MANIFEST_NAME,
                "sha256": manifest_sha256,
                "size": len(manifest_bytes),
            },
        },
    }
    return jcs.dumps(statement)


def parse_statement(payload: bytes) -> Statement:
    """Parse a (verified) payload as our in-toto Statement."""
    try:
        doc = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"signed payload is not JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("_type") != STATEMENT_TYPE:
        raise ManifestError("signed payload is not an in-toto Statement v1")
    ptype = doc.get("predicateType")
    if ptype != PREDICATE_TYPE and not (isinstance(ptype, str) and ptype in LEGACY_PREDICATE_TYPES):
        raise ManifestError(f"unknown predicateType {doc.get('predicateType')!r}")
    if not isinstance(doc.get("subject"), list) or not isinstance(doc.get("predicate"), dict):
        raise ManifestError("statement has no subject list or predicate")
    # The payload is parsed before anyone knows who signed it: check every subject's
    # shape here so the comparison with the manifest never meets a list or a number.
    seen: set[str] = set()
    for i, s in enumerate(doc["subject"]):
        digest = s.get("digest") if isinstance(s, dict) else None
        name = s.get("name") if isinstance(s, dict) else None
        if not isinstance(name, str) or not isinstance(digest, dict):
            raise ManifestError(f"statement subject[{i}] has no string name and digest object")
        if not isinstance(digest.get("sha256"), str):
            raise ManifestError(f"statement subject[{i}] ({name!r}) has no sha256 string")
        if name in seen:
            raise ManifestError(f"statement names subject {name!r} twice")
        seen.add(name)
    return _typed(Statement.from_dict, doc)
