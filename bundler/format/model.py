"""The format's documents as types: parsed once, after schema validation, with unknown fields kept.

The manifest and the signed Statement are here; the frozen plan and ``scorer.json`` in
:mod:`bundler.format.plan_model`; the shared parsing helpers in
:mod:`bundler.format.docfields`.

``manifest.json``, the signed in-toto Statement, a frozen plan and
``scorer.json`` used to travel as ``dict[str, Any]``, and each reader re-checked
the fields it needed. Here each document is a frozen dataclass made by
``from_dict`` (which checks the shapes its typed fields rely on and raises a
located :class:`~bundler.errors.BundleFormatError` otherwise) and turned back
into JSON by ``to_dict``.

``to_dict(from_dict(x)) == x`` for every document ``from_dict`` accepts: fields
this version does not type are kept in ``unknown`` (per object) and written
back, values are never coerced (an integer written as ``1.0`` stays a float),
and an optional field that was absent stays absent. So a document read by one
version and written by it is byte-identical under RFC 8785, as in TUF's
``Metadata.from_dict`` / ``to_dict``.

Nested values the schemas leave open (a manifest arm, a sanitization record,
a plan's ``quality`` or ``launch``) are kept as the JSON they are; ``to_dict``
returns deep copies, so a caller never mutates a parsed document.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bundler.format.docfields import (
    Document,
    as_list,
    fail,
    frozen_json,
    int_field,
    obj,
    str_field,
    unknown_fields,
)

__all__ = [
    "ExternalEntry",
    "Manifest",
    "ManifestCampaign",
    "MemberEntry",
    "Sanitization",
    "Statement",
    "Subject",
]


# --------------------------------------------------------------------------- manifest


@dataclass(frozen=True)
class MemberEntry(Document):
    """One member of ``manifest.json`` ``members``: path, SHA-256, size, role."""

    path: str
    sha256: str
    size: int
    role: str
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("path", "sha256", "size", "role")

    @classmethod
    def from_dict(cls, doc: Any, where: str, path: str) -> MemberEntry:
        """Parse one entry; ``path`` (e.g. ``members.3``) locates it in ``where``."""
        d = obj(doc, where, path)
        p = path + "."
        return cls(
            path=str_field(d, "path", where, p),
            sha256=str_field(d, "sha256", where, p),
            size=int_field(d, "size", where, p),
            role=str_field(d, "role", where, p),
            unknown=unknown_fields(d, cls._KEYS),
            key_order=tuple(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The entry as JSON, unknown fields included."""
        return self._ordered(
            {
                "path": self.path,
                "sha256": self.sha256,
                "size": self.size,
                "role": self.role,
                **copy.deepcopy(dict(self.unknown)),
            }
        )


@dataclass(frozen=True)
class ExternalEntry(Document):
    """One external artifact: digest, size (None when unknown), kind, availability, uri."""

    path: str
    sha256: str
    bytes: int | None
    kind: str
    availability: str
    hashed_at_seal: bool
    uri: str | None = None
    # ``uri`` is optional and nullable: remember whether it was written at all.
    has_uri: bool = True
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("path", "sha256", "bytes", "kind", "availability", "hashed_at_seal", "uri")

    @classmethod
    def from_dict(cls, doc: Any, where: str, path: str) -> ExternalEntry:
        """Parse one entry; ``path`` (e.g. ``external.0``) locates it in ``where``."""
        d = obj(doc, where, path)
        p = path + "."
        size = None if d.get("bytes") is None else int_field(d, "bytes", where, p)
        if "bytes" not in d:
            raise fail(where, p + "bytes", "missing (null when the size is unknown)")
        uri = d.get("uri")
        if uri is not None and not isinstance(uri, str):
            raise fail(where, p + "uri", f"expected a string or null, found {uri!r}")
        hashed = d.get("hashed_at_seal")
        if not isinstance(hashed, bool):
            raise fail(where, p + "hashed_at_seal", f"expected a boolean, found {hashed!r}")
        return cls(
            path=str_field(d, "path", where, p),
            sha256=str_field(d, "sha256", where, p),
            bytes=size,
            kind=str_field(d, "kind", where, p),
            availability=str_field(d, "availability", where, p),
            hashed_at_seal=hashed,
            uri=uri,
            has_uri="uri" in d,
            unknown=unknown_fields(d, cls._KEYS),
            key_order=tuple(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The entry as JSON, unknown fields included."""
        out: dict[str, Any] = {
            "path": self.path,
            "sha256": self.sha256,
            "bytes": self.bytes,
            "kind": self.kind,
            "availability": self.availability,
            "hashed_at_seal": self.hashed_at_seal,
        }
        if self.has_uri:
            out["uri"] = self.uri
        out.update(copy.deepcopy(dict(self.unknown)))
        return self._ordered(out)


@dataclass(frozen=True)
class ManifestCampaign(Document):
    """The manifest's copy of the campaign: id, title, kind and its arms as sealed.

    The schema fixes an arm's keys (``id``, ``role``, ``runtime_commit``) but not
    their types, so arms stay the JSON objects they are.
    """

    id: str
    title: str
    kind: str
    arms: tuple[Mapping[str, Any], ...]
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("id", "title", "kind", "arms")

    @classmethod
    def from_dict(cls, doc: Any, where: str) -> ManifestCampaign:
        """Parse ``campaign``."""
        d = obj(doc, where, "campaign")
        arms = as_list(d.get("arms"), where, "campaign.arms")
        for i, a in enumerate(arms):
            obj(a, where, f"campaign.arms.{i}")
        return cls(
            id=str_field(d, "id", where, "campaign."),
            title=str_field(d, "title", where, "campaign."),
            kind=str_field(d, "kind", where, "campaign."),
            arms=frozen_json(arms),
            unknown=unknown_fields(d, cls._KEYS),
            key_order=tuple(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The campaign as JSON, unknown fields included."""
        return self._ordered(
            {
                "id": self.id,
                "title": self.title,
                "kind": self.kind,
                "arms": copy.deepcopy(list(self.arms)),
                **copy.deepcopy(dict(self.unknown)),
            }
        )


@dataclass(frozen=True)
class Sanitization(Document):
    """What the sanitizer did at seal: rules version, scrubbed fields, unscrubbed findings."""

    rules_version: str
    scrubbed: tuple[Mapping[str, Any], ...]
    unscrubbed: tuple[Mapping[str, Any], ...]
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("rules_version", "scrubbed", "unscrubbed")

    @classmethod
    def from_dict(cls, doc: Any, where: str) -> Sanitization:
        """Parse ``sanitization``."""
        d = obj(doc, where, "sanitization")
        lists = {}
        for key in ("scrubbed", "unscrubbed"):
            items = as_list(d.get(key), where, f"sanitization.{key}")
            for i, item in enumerate(items):
                obj(item, where, f"sanitization.{key}.{i}")
            lists[key] = frozen_json(items)
        return cls(
            rules_version=str_field(d, "rules_version", where, "sanitization."),
            scrubbed=lists["scrubbed"],
            unscrubbed=lists["unscrubbed"],
            unknown=unknown_fields(d, cls._KEYS),
            key_order=tuple(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The section as JSON, unknown fields included."""
        return self._ordered(
            {
                "rules_version": self.rules_version,
                "scrubbed": copy.deepcopy(list(self.scrubbed)),
                "unscrubbed": copy.deepcopy(list(self.unscrubbed)),
                **copy.deepcopy(dict(self.unknown)),
            }
        )


@dataclass(frozen=True)
class Manifest(Document):
    """``manifest.json``: every member and external artifact with its digest, and the context.

    Made by :func:`bundler.format.manifest.parse_manifest` (format, version and
    schema checked first) or :meth:`from_dict`.
    """

    format: str
    format_version: str
    campaign: ManifestCampaign
    members: tuple[MemberEntry, ...]
    tables: Mapping[str, int]
    external: tuple[ExternalEntry, ...]
    sanitization: Sanitization
    environment: Mapping[str, str]
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = (
        "format",
        "format_version",
        "campaign",
        "members",
        "tables",
        "external",
        "sanitization",
        "environment",
    )

    @classmethod
    def from_dict(cls, doc: Any, where: str = "manifest.json") -> Manifest:
        """Parse a manifest document (already schema-validated by ``parse_manifest``).

        Raises:
            BundleFormatError: a field the types rely on has another shape, located
                as ``where``, field path.
        """
        d = obj(doc, where, "(document)")
        tables = obj(d.get("tables"), where, "tables")
        for name in tables:
            int_field(tables, name, where, "tables.")
        env = obj(d.get("environment"), where, "environment")
        for key, value in env.items():
            if not isinstance(value, str):
                raise fail(where, f"environment.{key}", f"expected a string, found {value!r}")
        members = as_list(d.get("members"), where, "members")
        external = as_list(d.get("external"), where, "external")
        return cls(
            format=str_field(d, "format", where),
            format_version=str_field(d, "format_version", where),
            campaign=ManifestCampaign.from_dict(d.get("campaign"), where),
            members=tuple(
                MemberEntry.from_dict(m, where, f"members.{i}") for i, m in enumerate(members)
            ),
            tables=dict(tables),
            external=tuple(
                ExternalEntry.from_dict(e, where, f"external.{i}") for i, e in enumerate(external)
            ),
            sanitization=Sanitization.from_dict(d.get("sanitization"), where),
            environment=dict(env),
            unknown=unknown_fields(d, cls._KEYS),
            key_order=tuple(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The manifest as JSON (``jcs.dumps`` of it is the sealed bytes), unknown fields kept."""
        return self._ordered(
            {
                "format": self.format,
                "format_version": self.format_version,
                "campaign": self.campaign.to_dict(),
                "members": [m.to_dict() for m in self.members],
                "tables": dict(self.tables),
                "external": [e.to_dict() for e in self.external],
                "sanitization": self.sanitization.to_dict(),
                "environment": dict(self.environment),
                **copy.deepcopy(dict(self.unknown)),
            }
        )


# --------------------------------------------------------------------------- statement


@dataclass(frozen=True)
class Subject(Document):
    """One signed subject: a name and its digests (``sha256`` always present)."""

    name: str
    digest: Mapping[str, Any]
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("name", "digest")

    @property
    def sha256(self) -> str:
        """The subject's SHA-256 (checked to be a string by :meth:`from_dict`)."""
        value: str = self.digest["sha256"]
        return value

    @classmethod
    def from_dict(cls, doc: Any, where: str, path: str) -> Subject:
        """Parse one subject; ``path`` (``subject.N``) locates it."""
        d = obj(doc, where, path)
        digest = obj(d.get("digest"), where, path + ".digest")
        str_field(digest, "sha256", where, path + ".digest.")
        return cls(
            name=str_field(d, "name", where, path + "."),
            digest=copy.deepcopy(dict(digest)),
            unknown=unknown_fields(d, cls._KEYS),
            key_order=tuple(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The subject as JSON (annotations and other fields included)."""
        return self._ordered(
            {
                "name": self.name,
                "digest": copy.deepcopy(dict(self.digest)),
                **copy.deepcopy(dict(self.unknown)),
            }
        )


@dataclass(frozen=True)
class Statement(Document):
    """The signed in-toto Statement v1: subjects and our predicate.

    The predicate is kept as the JSON it is: verify compares it with the manifest
    field by field (:attr:`bound_manifest_sha256`, :attr:`campaign_id`) and a
    predicate of another shape simply does not bind the manifest.
    """

    type: str
    subjects: tuple[Subject, ...]
    predicate_type: str
    predicate: Mapping[str, Any]
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("_type", "subject", "predicateType", "predicate")

    @classmethod
    def from_dict(cls, doc: Any, where: str = "signatures.dsse.json") -> Statement:
        """Parse a statement whose type and predicate type were checked by ``parse_statement``."""
        d = obj(doc, where, "payload")
        subjects = as_list(d.get("subject"), where, "subject")
        return cls(
            type=str_field(d, "_type", where),
            subjects=tuple(
                Subject.from_dict(s, where, f"subject.{i}") for i, s in enumerate(subjects)
            ),
            predicate_type=str_field(d, "predicateType", where),
            predicate=copy.deepcopy(dict(obj(d.get("predicate"), where, "predicate"))),
            unknown=unknown_fields(d, cls._KEYS),
            key_order=tuple(d),
        )

    @property
    def bound_manifest_sha256(self) -> Any:
        """``predicate.manifest.sha256`` as signed (None when absent or not under an object)."""
        bound = self.predicate.get("manifest")
        return bound.get("sha256") if isinstance(bound, Mapping) else None

    @property
    def campaign_id(self) -> Any:
        """``predicate.campaign_id`` as signed (None when absent)."""
        return self.predicate.get("campaign_id")

    def to_dict(self) -> dict[str, Any]:
        """The statement as JSON (``jcs.dumps`` of it is the signed payload)."""
        return self._ordered(
            {
                "_type": self.type,
                "subject": [s.to_dict() for s in self.subjects],
                "predicateType": self.predicate_type,
                "predicate": copy.deepcopy(dict(self.predicate)),
                **copy.deepcopy(dict(self.unknown)),
            }
        )
