"""``bundle verify``: signatures, every member's bytes, and external artifacts, offline.

:func:`check_bundle` returns a :class:`VerifyReport` listing every problem;
:func:`verify_bundle` raises :class:`~bundler.errors.IntegrityError` if there
is any. Order of trust: the envelope's signatures are checked over the exact
payload bytes before the payload is parsed; the manifest is trusted only
because the signed statement names its digest.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bundler.errors import BundleFormatError, IntegrityError, Problem
from bundler.format.container import Limits, Member, member_name_problem, read_container
from bundler.format.dsse import (
    INTOTO_PAYLOAD_TYPE,
    Envelope,
    EnvelopeError,
    SignatureCheck,
    parse_envelope,
    verify_envelope,
)
from bundler.format.hashing import hash_files
from bundler.format.keys import key_id
from bundler.format.manifest import (
    ENVELOPE_NAME,
    EXTERNAL_PREFIX,
    MANIFEST_NAME,
    ManifestError,
    parse_manifest,
    parse_statement,
)
from bundler.format.model import ExternalEntry, Manifest, MemberEntry, Statement
from bundler.format.tables import TABLE_FORMAT_VERSION, TABLE_NAMES, arrow_schema
from bundler.format.trust import NO_TRUST, SignatureStatus, Trust

__all__ = [
    "UNTRUSTED_FIELD",
    "ExternalCheck",
    "OpenedBundle",
    "VerifyReport",
    "check_bundle",
    "is_trust_problem",
    "json_cost",
    "needed_for_verify",
    "open_bundle",
    "verify_bundle",
]

UNTRUSTED_FIELD = "trusted keys"
"""The ``field`` of the problem that says no key given verified a signature."""

_TABLE_MEMBERS = frozenset(f"tables/{name}.parquet" for name in TABLE_NAMES)


def needed_for_verify(name: str) -> bool:
    """True for the members whose bytes verification reads (envelope, manifest, tables).

    Every other member is only hashed: ``check_bundle`` reads with this as
    ``keep``, so their bytes are never stored.
    """
    return name in (MANIFEST_NAME, ENVELOPE_NAME) or name in _TABLE_MEMBERS


def json_cost(data: bytes) -> int:
    """An upper estimate of the memory, in bytes, that ``json.loads(data)`` may take.

    Parsed JSON costs far more than its text: ``{},`` (3 bytes) becomes a
    64-byte dict plus a list slot, so 16 MiB of ``[{},{},…]`` takes about
    400 MiB (25x) while a 100,000-member manifest takes 4x. The estimate
    charges the text twice (bytes and decoded str), 200 bytes per ``{`` or
    ``[``, 60 per ``,`` or ``:`` and 25 per ``"``; it stays above the measured
    peak for objects, arrays, numbers and strings alike, and well below the
    bound for real manifests (about 1.4 KB per member).
    """
    containers = data.count(b"{") + data.count(b"[")
    separators = data.count(b",") + data.count(b":")
    return 2 * len(data) + 200 * containers + 60 * separators + 25 * data.count(b'"')


def _json_problem(m: Member, lim: Limits) -> tuple[bytes | None, str | None]:
    """The member's bytes, or why they are not parsed: too large to parse within the bound."""
    if 2 * m.size > lim.max_json_cost:
        return None, (
            f"{m.size:,} bytes: too large to parse within the reader's "
            f"{lim.max_json_cost:,}-byte memory bound"
        )
    data = m.read_bytes()
    cost = json_cost(data)
    if cost > lim.max_json_cost:
        return None, (
            f"{m.size:,} bytes whose parse would take an estimated {cost:,} bytes of memory, "
            f"over the reader's {lim.max_json_cost:,}-byte bound"
        )
    return data, None


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


def _read_envelope(
    report: VerifyReport, members: dict[str, Member], lim: Limits
) -> Envelope | None:
    env_member = members.get(ENVELOPE_NAME)
    if env_member is None:
        report.problems.append(Problem(ENVELOPE_NAME, None, None, "missing member"))
        return None
    data, why = _json_problem(env_member, lim)
    if data is None:
        report.problems.append(Problem(ENVELOPE_NAME, None, None, str(why)))
        return None
    try:
        env = parse_envelope(data)
    except EnvelopeError as exc:
        report.problems.append(Problem(ENVELOPE_NAME, None, None, str(exc)))
        return None
    except RecursionError:
        report.problems.append(Problem(ENVELOPE_NAME, None, None, "not JSON: nested too deeply"))
        return None
    if env.payload_type != INTOTO_PAYLOAD_TYPE:
        report.problems.append(
            Problem(ENVELOPE_NAME, None, "payloadType", f"unexpected {env.payload_type!r}")
        )
        return None
    return env


def _parse_payload(report: VerifyReport, payload: bytes, lim: Limits) -> Statement | None:
    cost = json_cost(payload)
    why: str | None = None
    if cost > lim.max_json_cost:
        why = (
            f"{len(payload):,} bytes whose parse would take an estimated {cost:,} "
            f"bytes of memory, over the reader's {lim.max_json_cost:,}-byte bound"
        )
    else:
        try:
            return parse_statement(payload)
        except ManifestError as exc:
            why = str(exc)
        except RecursionError:
            why = "signed payload is nested too deeply"
    report.problems.append(Problem(ENVELOPE_NAME, None, "payload", why))
    return None


def _check_signatures(
    report: VerifyReport,
    members: dict[str, Member],
    trust: Trust,
    lim: Limits,
) -> Statement | None:
    env = _read_envelope(report, members, lim)
    if env is None:
        return None
    report.signatures = verify_envelope(env, trust.public_keys, trust.principals)
    trusted_ids = {key_id(k) for k in trust.public_keys}
    forged = [s for s in report.signatures if not s.valid and s.keyid_hint in trusted_ids]
    for s in forged:
        # The hint is unauthenticated, but a bad signature naming a trusted key is
        # what tampering with a signed bundle looks like: say so.
        report.problems.append(
            Problem(
                ENVELOPE_NAME,
                f"signature {s.index}",
                "sig",
                f"does not verify with the trusted key {s.keyid_hint} it names",
            )
        )
    if not env.signatures:
        report.signature_status = SignatureStatus.UNSIGNED
        if trust.public_keys and not trust.accept_untrusted:
            report.problems.append(
                Problem(
                    ENVELOPE_NAME,
                    None,
                    UNTRUSTED_FIELD,
                    "the bundle holds no signature for the key(s) given to verify: "
                    f"{'; '.join(trust.describe_keys())}",
                )
            )
    elif forged and not any(s.valid for s in report.signatures):
        report.signature_status = SignatureStatus.INVALID
    elif any(s.valid for s in report.signatures):
        # Other signatures no trusted key accepts are not problems: countersignatures
        # by parties the verifier does not know are normal.
        report.signature_status = SignatureStatus.VERIFIED
    elif not trust.public_keys:
        report.signature_status = SignatureStatus.UNCHECKED
    else:
        report.signature_status = SignatureStatus.UNTRUSTED
        if not trust.accept_untrusted:
            # Keys were given and none verified: the refusal is a located problem naming
            # each key tried, never an empty list behind the --allow-unsigned headline.
            hints = sorted({s.keyid_hint or "no key id" for s in report.signatures})
            report.problems.append(
                Problem(
                    ENVELOPE_NAME,
                    None,
                    UNTRUSTED_FIELD,
                    "no signature verifies with the key(s) given: "
                    f"{'; '.join(trust.describe_keys())} (the bundle's signature(s) name "
                    f"{', '.join(hints)})",
                )
            )
    return _parse_payload(report, env.payload, lim)


def is_trust_problem(p: Problem) -> bool:
    """True for the problem "no signature verifies with the key(s) given" (not an integrity one)."""
    return p.where == ENVELOPE_NAME and p.field == UNTRUSTED_FIELD


def _check_duplicates(report: VerifyReport, manifest: Manifest) -> None:
    """A path listed twice is refused: every check keyed by path would see only one entry.

    Left to a dict, the last entry wins and the other, whatever its digest or size,
    would go unchecked (members) or unhashed (external artifacts).
    """
    entries: tuple[tuple[Sequence[MemberEntry | ExternalEntry], str, str], ...] = (
        (manifest.members, "member", ""),
        (manifest.external, "external artifact", EXTERNAL_PREFIX),
    )
    for listed, name, prefix in entries:
        counts = Counter(e.path for e in listed)
        for path, n in counts.items():
            if n > 1:
                report.problems.append(
                    Problem(
                        prefix + path,
                        None,
                        "path",
                        f"{name} listed {n} times in the manifest (each path once)",
                    )
                )


def _check_members(report: VerifyReport, members: dict[str, Member], manifest: Manifest) -> None:
    listed = {m.path: m for m in manifest.members}
    report.members = [m.to_dict() for m in manifest.members]
    for path, m in listed.items():
        got = members.get(path)
        if got is None:
            report.problems.append(Problem(path, None, None, "listed in the manifest but absent"))
            continue
        if got.size != m.size:
            report.problems.append(
                Problem(path, None, "size", f"{got.size} bytes, manifest says {m.size}")
            )
        if got.sha256 != m.sha256:
            report.problems.append(
                Problem(path, None, "sha256", "digest does not match the manifest")
            )
    for path in members:
        if path not in listed and path not in (MANIFEST_NAME, ENVELOPE_NAME):
            report.problems.append(Problem(path, None, None, "present but not in the manifest"))


def _check_statement(
    report: VerifyReport,
    members: dict[str, Member],
    manifest: Manifest,
    statement: Statement,
) -> None:
    """The signed statement must name exactly the manifest, its members and its externals."""
    subj = {s.name: s.sha256 for s in statement.subjects}
    want = {MANIFEST_NAME: members[MANIFEST_NAME].sha256}
    want.update({m.path: m.sha256 for m in manifest.members})
    want.update({EXTERNAL_PREFIX + e.path: e.sha256 for e in manifest.external})
    if subj != want:
        diff = sorted(set(subj.items()) ^ set(want.items()), key=str)
        names = sorted({str(n) for n, _ in diff})[:5]
        report.problems.append(
            Problem(
                ENVELOPE_NAME,
                None,
                "subject",
                f"signed subjects differ from the manifest for {names}",
            )
        )
    if (
        statement.bound_manifest_sha256 != members[MANIFEST_NAME].sha256
        or statement.campaign_id != manifest.campaign.id
    ):
        report.problems.append(
            Problem(
                ENVELOPE_NAME, None, "predicate", "signed predicate does not bind this manifest"
            )
        )


def _parquet_footer_problem(m: Member, lim: Limits) -> str | None:
    """Refuse a footer (Parquet metadata) over the bound before pyarrow allocates it."""
    if m.size < 12:
        return None  # pyarrow says what is wrong with it
    with m.open() as fh:
        fh.seek(-8, io.SEEK_END)
        tail = fh.read(8)
    size = int.from_bytes(tail[:4], "little")
    if tail[4:] == b"PAR1" and size > lim.max_parquet_footer_bytes:
        return (
            f"not a readable Parquet file: footer of {size:,} bytes, over the "
            f"{lim.max_parquet_footer_bytes:,}-byte bound"
        )
    return None


def _check_tables(
    report: VerifyReport, members: dict[str, Member], manifest: Manifest, lim: Limits
) -> None:
    listed = {m.path for m in manifest.members}
    for name in TABLE_NAMES:
        path = f"tables/{name}.parquet"
        m = members.get(path)
        if path not in listed:
            # Format 1 always has every table (empty ones too): a dropped table is tampering.
            report.problems.append(Problem(path, None, None, "format 1 requires this table"))
        if m is None:
            continue  # reported as absent (or unlisted) already
        if (why := _parquet_footer_problem(m, lim)) is not None:
            report.problems.append(Problem(path, None, None, why))
            continue
        try:
            with m.open() as fh:
                meta_file = pq.read_metadata(fh)
            schema = meta_file.schema.to_arrow_schema()
            meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
        except (pa.ArrowException, OSError, ValueError) as exc:
            # ValueError covers UnicodeDecodeError: pyarrow decodes column names as
            # UTF-8, and so do we for the key-value metadata (found by the fuzzer).
            report.problems.append(
                Problem(
                    path, None, None, f"not a readable Parquet file: {type(exc).__name__}: {exc}"
                )
            )
            continue
        version = meta.get("format_version")
        if version != TABLE_FORMAT_VERSION:
            report.problems.append(
                Problem(path, None, "format_version", f"unknown table format version {version!r}")
            )
            continue
        if not schema.remove_metadata().equals(arrow_schema(name).remove_metadata()):
            report.problems.append(Problem(path, None, None, "Arrow schema differs from the spec"))
        rows = manifest.tables.get(name)
        if rows != meta_file.num_rows:
            report.problems.append(
                Problem(path, None, "rows", f"{meta_file.num_rows} rows, manifest says {rows}")
            )


def _external_check(
    e: ExternalEntry, status: str, found_at: str | None = None, detail: str | None = None
) -> ExternalCheck:
    return ExternalCheck(
        e.path, e.kind, e.sha256, e.bytes, e.availability, status, found_at, detail
    )


def _check_external(
    report: VerifyReport,
    manifest: Manifest,
    media_dirs: Sequence[Path],
    jobs: int | None,
    progress: Callable[[int], None] | None,
) -> None:
    found: dict[int, Path] = {}
    for i, e in enumerate(manifest.external):
        if (why := member_name_problem(e.path)) is not None:
            # Never let a manifest steer hashing outside the --media folders.
            report.problems.append(
                Problem(EXTERNAL_PREFIX + e.path, None, "path", f"unacceptable path: {why}")
            )
            continue
        for d in media_dirs:
            for cand in (d / e.path, d / Path(e.path).name):
                if cand.is_file():
                    found[i] = cand
                    break
            if i in found:
                break
    digests = hash_files(list(found.values()), jobs=jobs, progress=progress)
    for i, e in enumerate(manifest.external):
        p = found.get(i)
        if p is None:
            # Absent is a normal state of an external artifact, never a failure.
            status = "absent" if media_dirs else "external"
            report.external.append(_external_check(e, status=status))
            continue
        dg = digests[p]
        if dg.error:
            report.external.append(
                _external_check(e, status="unreadable", found_at=str(p), detail=dg.error)
            )
            report.problems.append(
                Problem(EXTERNAL_PREFIX + e.path, None, None, f"{p}: cannot read: {dg.error}")
            )
        elif dg.sha256 != e.sha256:
            report.external.append(
                _external_check(e, status="mismatch", found_at=str(p), detail=f"sha256 {dg.sha256}")
            )
            report.problems.append(
                Problem(
                    EXTERNAL_PREFIX + e.path,
                    None,
                    "sha256",
                    f"{p} does not match the sealed digest",
                )
            )
        else:
            report.external.append(_external_check(e, status="ok", found_at=str(p)))


def _read_manifest(
    report: VerifyReport, members: dict[str, Member], lim: Limits
) -> Manifest | None:
    m = members.get(MANIFEST_NAME)
    if m is None:
        report.problems.append(Problem(MANIFEST_NAME, None, None, "missing member"))
        return None
    data, why = _json_problem(m, lim)
    if data is None:
        report.problems.append(Problem(MANIFEST_NAME, None, None, str(why)))
        return None
    try:
        return parse_manifest(data)
    except ManifestError as exc:
        report.problems.append(Problem(MANIFEST_NAME, None, None, str(exc)))
    except RecursionError:
        report.problems.append(
            Problem(MANIFEST_NAME, None, None, "manifest.json is not JSON: nested too deeply")
        )
    return None


def open_bundle(
    path: Path,
    *,
    trust: Trust = NO_TRUST,
    limits: Limits | None = None,
    keep: Callable[[str], bool] | None = None,
) -> OpenedBundle:
    """Read ``path`` and check signatures, manifest, members and table formats.

    Never raises for integrity problems: they are in ``.report.problems``.
    ``keep`` (default: all) selects the members whose bytes stay readable
    through ``.members``; pass :func:`needed_for_verify` when only the report
    matters (every member is hashed and checked either way).

    Raises:
        BundleFormatError: the container itself is malformed (see ``read_container``).
        UsageError: ``path`` is not a regular file.
        OSError: the file cannot be read.
    """
    lim = limits or Limits()
    report = VerifyReport(str(path), trust=trust)
    if keep is not None:
        # Verification itself reads the envelope, manifest and tables whatever the caller keeps.
        wanted = keep

        def keep_also_needed(name: str) -> bool:
            return needed_for_verify(name) or wanted(name)

        keep = keep_also_needed
    members = {m.name: m for m in read_container(Path(path), lim, keep=keep)}
    statement = _check_signatures(report, members, trust, lim)
    manifest = _read_manifest(report, members, lim)
    if manifest is not None:
        report.format_version = manifest.format_version
        report.campaign = manifest.campaign.to_dict()
        _check_duplicates(report, manifest)
        _check_members(report, members, manifest)
        if statement is not None:
            _check_statement(report, members, manifest, statement)
        _check_tables(report, members, manifest, lim)
    return OpenedBundle(members, manifest, report)


def check_bundle(
    path: Path,
    *,
    trust: Trust = NO_TRUST,
    media_dirs: Sequence[Path] = (),
    jobs: int | None = None,
    progress: Callable[[int], None] | None = None,
    limits: Limits | None = None,
) -> VerifyReport:
    """Verify the bundle at ``path`` and return a report of every problem found.

    A malformed container is reported as a problem too, never raised.
    """
    try:
        opened = open_bundle(
            path,
            trust=trust,
            limits=limits,
            keep=needed_for_verify,  # the other members are hashed, never stored
        )
    except BundleFormatError as exc:
        report = VerifyReport(str(path), trust=trust)
        message = exc.message.removeprefix(f"{path}: ")
        report.problems.append(Problem(str(path), None, None, message))
        report.problems.extend(exc.problems)
        return report
    report = opened.report
    if opened.manifest is not None:
        _check_external(report, opened.manifest, media_dirs, jobs, progress)
    return report


def verify_bundle(
    path: Path,
    *,
    trust: Trust = NO_TRUST,
    media_dirs: Sequence[Path] = (),
    jobs: int | None = None,
) -> VerifyReport:
    """Like :func:`check_bundle` but raise :class:`IntegrityError` unless it verified."""
    report = check_bundle(path, trust=trust, media_dirs=media_dirs, jobs=jobs)
    if not report.ok:
        damaged = [p for p in report.problems if not is_trust_problem(p)]
        reason = f"{len(damaged)} problem(s)" if damaged else f"signature {report.signature_status}"
        raise IntegrityError(f"{path}: does not verify ({reason})", report.problems)
    return report
