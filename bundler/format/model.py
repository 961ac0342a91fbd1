"""The format's documents as types: parsed once, after schema validation, with unknown fields kept.

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bundler.errors import BundleFormatError, Problem

__all__ = [
    "ExternalEntry",
    "Manifest",
    "ManifestCampaign",
    "MemberEntry",
    "Plan",
    "PlanRequest",
    "Sanitization",
    "ScorerDoc",
    "ScorerWeight",
    "Statement",
    "Subject",
    "Teardown",
    "TeardownBudget",
    "Timeouts",
]

_T = TypeVar("_T")


def _fail(where: str, path: str, message: str) -> BundleFormatError:
    return BundleFormatError(
        f"{where}: field {path}: {message}", [Problem(where, None, path, message)]
    )


def _obj(value: Any, where: str, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(where, path, f"expected an object, found {type(value).__name__}")
    return value


def _list(value: Any, where: str, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(where, path, f"expected an array, found {type(value).__name__}")
    return value


def _str(doc: Mapping[str, Any], key: str, where: str, prefix: str = "") -> str:
    value = doc.get(key)
    if not isinstance(value, str):
        raise _fail(where, prefix + key, f"expected a string, found {type(value).__name__}")
    return value


def _int(doc: Mapping[str, Any], key: str, where: str, prefix: str = "") -> int:
    value = doc.get(key)
    # bool is an int to Python, never to JSON Schema; 3.0 is an integer to both.
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (isinstance(value, float) and not value.is_integer())
    ):
        raise _fail(where, prefix + key, f"expected an integer, found {value!r}")
    return value  # type: ignore[return-value]  # kept as written (see module docstring)


def _number(value: Any, where: str, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(where, path, f"expected a number, found {value!r}")
    return value


def _opt(doc: Mapping[str, Any], key: str, check: Any, where: str, prefix: str = "") -> Any:
    """``check(value, where, path)`` when ``key`` is present, else None."""
    if key not in doc:
        return None
    return check(doc[key], where, prefix + key)


def _unknown(doc: Mapping[str, Any], known: Iterable[str]) -> dict[str, Any]:
    names = set(known)
    return {k: copy.deepcopy(v) for k, v in doc.items() if k not in names}


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    """Write an optional field back only when it was present (None means absent)."""
    if value is not None:
        out[key] = copy.deepcopy(value)


def _frozen_json(items: Iterable[_T]) -> tuple[_T, ...]:
    return tuple(copy.deepcopy(list(items)))


class _Document:
    """What every parsed object shares: ``to_dict`` writes keys back in the order read."""

    key_order: tuple[str, ...]

    def _ordered(self, out: dict[str, Any]) -> dict[str, Any]:
        # Order is no part of JSON's meaning (RFC 8785 sorts), but a reader that
        # iterates a document should meet its keys as the author wrote them.
        if not self.key_order:
            return out
        rank = {k: i for i, k in enumerate(self.key_order)}
        return dict(sorted(out.items(), key=lambda kv: rank.get(kv[0], len(rank))))


# --------------------------------------------------------------------------- manifest


@dataclass(frozen=True)
class MemberEntry(_Document):
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
        d = _obj(doc, where, path)
        p = path + "."
        return cls(
            path=_str(d, "path", where, p),
            sha256=_str(d, "sha256", where, p),
            size=_int(d, "size", where, p),
            role=_str(d, "role", where, p),
            unknown=_unknown(d, cls._KEYS),
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
class ExternalEntry(_Document):
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
        d = _obj(doc, where, path)
        p = path + "."
        size = None if d.get("bytes") is None else _int(d, "bytes", where, p)
        if "bytes" not in d:
            raise _fail(where, p + "bytes", "missing (null when the size is unknown)")
        uri = d.get("uri")
        if uri is not None and not isinstance(uri, str):
            raise _fail(where, p + "uri", f"expected a string or null, found {uri!r}")
        hashed = d.get("hashed_at_seal")
        if not isinstance(hashed, bool):
            raise _fail(where, p + "hashed_at_seal", f"expected a boolean, found {hashed!r}")
        return cls(
            path=_str(d, "path", where, p),
            sha256=_str(d, "sha256", where, p),
            bytes=size,
            kind=_str(d, "kind", where, p),
            availability=_str(d, "availability", where, p),
            hashed_at_seal=hashed,
            uri=uri,
            has_uri="uri" in d,
            unknown=_unknown(d, cls._KEYS),
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
class ManifestCampaign(_Document):
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
        d = _obj(doc, where, "campaign")
        arms = _list(d.get("arms"), where, "campaign.arms")
        for i, a in enumerate(arms):
            _obj(a, where, f"campaign.arms.{i}")
        return cls(
            id=_str(d, "id", where, "campaign."),
            title=_str(d, "title", where, "campaign."),
            kind=_str(d, "kind", where, "campaign."),
            arms=_frozen_json(arms),
            unknown=_unknown(d, cls._KEYS),
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
class Sanitization(_Document):
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
        d = _obj(doc, where, "sanitization")
        lists = {}
        for key in ("scrubbed", "unscrubbed"):
            items = _list(d.get(key), where, f"sanitization.{key}")
            for i, item in enumerate(items):
                _obj(item, where, f"sanitization.{key}.{i}")
            lists[key] = _frozen_json(items)
        return cls(
            rules_version=_str(d, "rules_version", where, "sanitization."),
            scrubbed=lists["scrubbed"],
            unscrubbed=lists["unscrubbed"],
            unknown=_unknown(d, cls._KEYS),
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
class Manifest(_Document):
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
        d = _obj(doc, where, "(document)")
        tables = _obj(d.get("tables"), where, "tables")
        for name in tables:
            _int(tables, name, where, "tables.")
        env = _obj(d.get("environment"), where, "environment")
        for key, value in env.items():
            if not isinstance(value, str):
                raise _fail(where, f"environment.{key}", f"expected a string, found {value!r}")
        members = _list(d.get("members"), where, "members")
        external = _list(d.get("external"), where, "external")
        return cls(
            format=_str(d, "format", where),
            format_version=_str(d, "format_version", where),
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
            unknown=_unknown(d, cls._KEYS),
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
class Subject(_Document):
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
        d = _obj(doc, where, path)
        digest = _obj(d.get("digest"), where, path + ".digest")
        _str(digest, "sha256", where, path + ".digest.")
        return cls(
            name=_str(d, "name", where, path + "."),
            digest=copy.deepcopy(dict(digest)),
            unknown=_unknown(d, cls._KEYS),
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
class Statement(_Document):
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
        d = _obj(doc, where, "payload")
        subjects = _list(d.get("subject"), where, "subject")
        return cls(
            type=_str(d, "_type", where),
            subjects=tuple(
                Subject.from_dict(s, where, f"subject.{i}") for i, s in enumerate(subjects)
            ),
            predicate_type=_str(d, "predicateType", where),
            predicate=copy.deepcopy(dict(_obj(d.get("predicate"), where, "predicate"))),
            unknown=_unknown(d, cls._KEYS),
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


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class PlanRequest(_Document):
    """``request``: which API, where timing starts and ends, the poll interval, the payload."""

    api: str
    timing_boundary: str
    poll_interval_s: float | None = None
    payload: Mapping[str, Any] | None = None
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("api", "timing_boundary", "poll_interval_s", "payload")

    @classmethod
    def from_dict(cls, doc: Any, where: str) -> PlanRequest:
        """Parse ``request``."""
        d = _obj(doc, where, "request")
        payload = _opt(d, "payload", _obj, where, "request.")
        return cls(
            api=_str(d, "api", where, "request."),
            timing_boundary=_str(d, "timing_boundary", where, "request."),
            poll_interval_s=_opt(d, "poll_interval_s", _number, where, "request."),
            payload=None if payload is None else copy.deepcopy(dict(payload)),
            unknown=_unknown(d, cls._KEYS),
            key_order=tuple(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """``request`` as JSON, unknown fields included."""
        out: dict[str, Any] = {"api": self.api, "timing_boundary": self.timing_boundary}
        _put(out, "poll_interval_s", self.poll_interval_s)
        _put(out, "payload", None if self.payload is None else dict(self.payload))
        out.update(copy.deepcopy(dict(self.unknown)))
        return self._ordered(out)


@dataclass(frozen=True)
class Timeouts(_Document):
    """``timeouts``: per request, per wave, per arm position (seconds)."""

    request_s: float
    wave_s: float | None = None
    arm_s: float | None = None
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("request_s", "wave_s", "arm_s")

    @classmethod
    def from_dict(cls, doc: Any, where: str) -> Timeouts:
        """Parse ``timeouts``."""
        d = _obj(doc, where, "timeouts")
        return cls(
            request_s=_number(d.get("request_s"), where, "timeouts.request_s"),
            wave_s=_opt(d, "wave_s", _number, where, "timeouts."),
            arm_s=_opt(d, "arm_s", _number, where, "timeouts."),
            unknown=_unknown(d, cls._KEYS),
            key_order=tuple(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """``timeouts`` as JSON, unknown fields included."""
        out: dict[str, Any] = {"request_s": self.request_s}
        _put(out, "wave_s", self.wave_s)
        _put(out, "arm_s", self.arm_s)
        out.update(copy.deepcopy(dict(self.unknown)))
        return self._ordered(out)


@dataclass(frozen=True)
class TeardownBudget(_Document):
    """One arm's teardown budget: how long to wait after TERM, then after KILL (seconds)."""

    term_wait_s: float
    kill_wait_s: float
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("term_wait_s", "kill_wait_s")

    @classmethod
    def from_dict(cls, doc: Any, where: str, path: str) -> TeardownBudget:
        """Parse ``teardown.<arm>``."""
        d = _obj(doc, where, path)
        return cls(
            term_wait_s=_number(d.get("term_wait_s"), where, path + ".term_wait_s"),
            kill_wait_s=_number(d.get("kill_wait_s"), where, path + ".kill_wait_s"),
            unknown=_unknown(d, cls._KEYS),
            key_order=tuple(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The budget as JSON, unknown fields included."""
        return self._ordered(
            {
                "term_wait_s": self.term_wait_s,
                "kill_wait_s": self.kill_wait_s,
                **copy.deepcopy(dict(self.unknown)),
            }
        )


@dataclass(frozen=True)
class Teardown:
    """``teardown``: arm id to its :class:`TeardownBudget`."""

    budgets: Mapping[str, TeardownBudget]

    @classmethod
    def from_dict(cls, doc: Any, where: str) -> Teardown:
        """Parse ``teardown``."""
        d = _obj(doc, where, "teardown")
        return cls(
            {arm: TeardownBudget.from_dict(b, where, f"teardown.{arm}") for arm, b in d.items()}
        )

    def get(self, arm: str) -> TeardownBudget | None:
        """The budget of ``arm``, or None when the plan gives it none."""
        return self.budgets.get(arm)

    def to_dict(self) -> dict[str, Any]:
        """``teardown`` as JSON."""
        return {arm: b.to_dict() for arm, b in self.budgets.items()}


@dataclass(frozen=True)
class Plan(_Document):
    """A frozen plan (``plans/<path>.json``; ``specs/schemas/plan.schema.json``).

    The fields the schedule, the conformance and lifecycle checks read are typed;
    the plan's other sections (``reservation``, ``telemetry``, ``media``,
    ``launch``, ``servers``, ``expected_request_s``, ``quality``,
    ``load_points``) and fields unknown to this version are kept in ``unknown``
    as the JSON they are.
    """

    plan_version: str
    id: str
    request: PlanRequest
    arm_order: tuple[str, ...] | None = None
    warmups_per_server: int | None = None
    measured_per_server: int | None = None
    timeouts: Timeouts | None = None
    startup_budget_s: float | None = None
    teardown: Teardown | None = None
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = (
        "plan_version",
        "id",
        "request",
        "arm_order",
        "warmups_per_server",
        "measured_per_server",
        "timeouts",
        "startup_budget_s",
        "teardown",
    )

    @classmethod
    def from_dict(cls, doc: Any, where: str) -> Plan:
        """Parse a plan that passed ``document_errors("plan", doc)``; ``where`` is its file.

        Raises:
            BundleFormatError: a typed field has another shape (the plan skipped the schema).
        """
        d = _obj(doc, where, "(document)")
        order = _opt(d, "arm_order", _list, where)
        if order is not None:
            for i, a in enumerate(order):
                if not isinstance(a, str):
                    raise _fail(where, f"arm_order.{i}", f"expected a string, found {a!r}")
        return cls(
            plan_version=_str(d, "plan_version", where),
            id=_str(d, "id", where),
            request=PlanRequest.from_dict(d.get("request"), where),
            arm_order=None if order is None else tuple(order),
            warmups_per_server=(
                _int(d, "warmups_per_server", where) if "warmups_per_server" in d else None
            ),
            measured_per_server=(
                _int(d, "measured_per_server", where) if "measured_per_server" in d else None
            ),
            timeouts=Timeouts.from_dict(d["timeouts"], where) if "timeouts" in d else None,
            startup_budget_s=_opt(d, "startup_budget_s", _number, where),
            teardown=Teardown.from_dict(d["teardown"], where) if "teardown" in d else None,
            unknown=_unknown(d, cls._KEYS),
            key_order=tuple(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON, unknown fields included."""
        out: dict[str, Any] = {
            "plan_version": self.plan_version,
            "id": self.id,
            "request": self.request.to_dict(),
        }
        _put(out, "arm_order", None if self.arm_order is None else list(self.arm_order))
        _put(out, "warmups_per_server", self.warmups_per_server)
        _put(out, "measured_per_server", self.measured_per_server)
        _put(out, "timeouts", None if self.timeouts is None else self.timeouts.to_dict())
        _put(out, "startup_budget_s", self.startup_budget_s)
        _put(out, "teardown", None if self.teardown is None else self.teardown.to_dict())
        out.update(copy.deepcopy(dict(self.unknown)))
        return self._ordered(out)


# --------------------------------------------------------------------------- scorer


@dataclass(frozen=True)
class ScorerWeight(_Document):
    """One weights file of the scorer: its role, file name, SHA-256 and size if given."""

    role: str
    file: str
    sha256: str
    bytes: int | None = None
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("role", "file", "sha256", "bytes")

    @classmethod
    def from_dict(cls, doc: Any, where: str, path: str) -> ScorerWeight:
        """Parse ``weights.N``."""
        d = _obj(doc, where, path)
        p = path + "."
        return cls(
            role=_str(d, "role", where, p),
            file=_str(d, "file", where, p),
            sha256=_str(d, "sha256", where, p),
            bytes=_int(d, "bytes", where, p) if "bytes" in d else None,
            unknown=_unknown(d, cls._KEYS),
            key_order=tuple(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The entry as JSON, unknown fields included."""
        out: dict[str, Any] = {"role": self.role, "file": self.file, "sha256": self.sha256}
        _put(out, "bytes", self.bytes)
        out.update(copy.deepcopy(dict(self.unknown)))
        return self._ordered(out)


@dataclass(frozen=True)
class ScorerDoc(_Document):
    """``scorer.json``: the scorer's identity (name, version, net) and its weights files."""

    name: str
    version: str
    weights: tuple[ScorerWeight, ...]
    net: str | None = None
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("name", "version", "net", "weights")

    @classmethod
    def from_dict(cls, doc: Any, where: str = "scorer.json") -> ScorerDoc:
        """Parse a scorer document that passed ``document_errors("scorer", doc)``."""
        d = _obj(doc, where, "(document)")
        weights = _list(d.get("weights"), where, "weights")
        return cls(
            name=_str(d, "name", where),
            version=_str(d, "version", where),
            weights=tuple(
                ScorerWeight.from_dict(w, where, f"weights.{i}") for i, w in enumerate(weights)
            ),
            net=_str(d, "net", where) if "net" in d else None,
            unknown=_unknown(d, cls._KEYS),
            key_order=tuple(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The scorer document as JSON, unknown fields included."""
        out: dict[str, Any] = {"name": self.name, "version": self.version}
        _put(out, "net", self.net)
        out["weights"] = [w.to_dict() for w in self.weights]
        out.update(copy.deepcopy(dict(self.unknown)))
        return self._ordered(out)
