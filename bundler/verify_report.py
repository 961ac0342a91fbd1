"""What ``bundle verify`` established about one bundle: the report, and the opened bundle.

Filled by the checks of :mod:`bundler.verify_signed`, :mod:`bundler.verify_members`
and :mod:`bundler.verify_external`; :mod:`bundler.verify` runs them in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bundler.errors import BundleFormatError, Problem
from bundler.format.container import Member
from bundler.format.dsse import SignatureCheck
from bundler.format.manifest import ENVELOPE_NAME
from bundler.format.model import Manifest
from bundler.format.trust import NO_TRUST, SignatureStatus, Trust

__all__ = ["UNTRUSTED_FIELD", "ExternalCheck", "OpenedBundle", "VerifyReport", "is_trust_problem"]

UNTRUSTED_FIELD = "trusted keys"
"""The ``field`` of the problem that says no key given verified a signature."""


@dataclass(frozen=True)
class ExternalCheck:
    """An external artifact and what we could establish about it."""

    path: str
    kind: str
    sha256: str
    bytes: int | None
    availability: str
    status: str  # external (not looked for), absent, ok, mismatch, unreadable
    found_at: str | None = None
    detail: str | None = None


@dataclass
class VerifyReport:
    """Everything ``check_bundle`` established about one bundle."""

    path: str
    format_version: str | None = None
    campaign: dict[str, Any] = field(default_factory=dict)
    signature_status: SignatureStatus = SignatureStatus.UNCHECKED
    signatures: list[SignatureCheck] = field(default_factory=list)
    members: list[dict[str, Any]] = field(default_factory=list)
    external: list[ExternalCheck] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    trust: Trust = NO_TRUST

    @property
    def ok(self) -> bool:
        """True when no problem was found and the trust accepts the signature status."""
        return not self.problems and self.trust.accepts(self.signature_status)

    @property
    def trusted(self) -> bool:
        """True when no problem was found and a trusted key verified a signature.

        Stricter than :attr:`ok`: a bundle accepted unsigned is ok, never trusted.
        """
        return not self.problems and self.signature_status.trusted

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (``--json``; described in ``specs/bundle-format.md``)."""
        return {
            "path": self.path,
            "ok": self.ok,
            "format_version": self.format_version,
            "campaign": self.campaign,
            "signature_status": self.signature_status,
            "allow_unsigned": self.trust.accept_untrusted,
            "signatures": [
                {
                    "index": s.index,
                    "keyid_hint": s.keyid_hint,
                    "valid": s.valid,
                    "verified_by": s.verified_by,
                    "principals": list(s.principals),
                }
                for s in self.signatures
            ],
            "members": self.members,
            "external": [e.__dict__ for e in self.external],
            "problems": [
                {"where": p.where, "record": p.record, "field": p.field, "message": p.message}
                for p in self.problems
            ],
        }


@dataclass(frozen=True)
class OpenedBundle:
    """A bundle whose structure was read: members by name plus the report so far."""

    members: dict[str, Member]
    manifest: Manifest | None
    report: VerifyReport

    def table(self, name: str) -> pa.Table:
        """Read table ``name`` from its Parquet member.

        Raises:
            BundleFormatError: the member is not readable Parquet (this type also
                serves ``inspect``, which reads bundles that did not verify).
        """
        # use_threads=False: tables are small, and pyarrow's thread pool was seen to
        # abort ("terminate called without an active exception") at interpreter exit.
        path = f"tables/{name}.parquet"
        try:
            with self.members[path].open() as fh:
                return pq.read_table(fh, use_threads=False)
        except (pa.ArrowException, ValueError) as exc:
            # ValueError: pyarrow decodes names as UTF-8 (UnicodeDecodeError) and
            # raises ArrowInvalid, both ValueErrors; ArrowIOError is an OSError.
            raise BundleFormatError(
                f"{self.report.path}: table {name!r} is not readable Parquet",
                [Problem(path, None, None, f"{type(exc).__name__}: {exc}")],
            ) from exc

    def document(self, name: str) -> dict[str, Any] | None:
        """Parse JSON member ``name`` (``campaign.json``, ``scorer.json``), or None if absent."""
        import json

        m = self.members.get(name)
        if m is None:
            return None
        doc: dict[str, Any] = json.loads(m.read_bytes())
        return doc


def is_trust_problem(p: Problem) -> bool:
    """True for the problem "no signature verifies with the key(s) given" (not an integrity one)."""
    return p.where == ENVELOPE_NAME and p.field == UNTRUSTED_FIELD
