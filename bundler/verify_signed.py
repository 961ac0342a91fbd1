"""The signed documents of a bundle, read within the JSON bound: envelope, statement, manifest.

Order of trust: the envelope's signatures are checked over the exact payload
bytes before the payload is parsed (:func:`check_signatures`); the manifest is
read (:func:`read_manifest`) and trusted only because the signed statement
names its digest (:func:`bundler.verify_members.check_statement`).
"""

from __future__ import annotations

from bundler.errors import Problem
from bundler.format.container import Limits, Member
from bundler.format.dsse import (
    INTOTO_PAYLOAD_TYPE,
    Envelope,
    EnvelopeError,
    parse_envelope,
    verify_envelope,
)
from bundler.format.keys import key_id
from bundler.format.manifest import (
    ENVELOPE_NAME,
    MANIFEST_NAME,
    ManifestError,
    parse_manifest,
    parse_statement,
)
from bundler.format.model import Manifest, Statement
from bundler.format.trust import SignatureStatus, Trust
from bundler.verify_report import UNTRUSTED_FIELD, VerifyReport

__all__ = ["check_signatures", "json_cost", "json_problem", "read_manifest"]


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


def json_problem(m: Member, lim: Limits) -> tuple[bytes | None, str | None]:
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


def _read_envelope(
    report: VerifyReport, members: dict[str, Member], lim: Limits
) -> Envelope | None:
    env_member = members.get(ENVELOPE_NAME)
    if env_member is None:
        report.problems.append(Problem(ENVELOPE_NAME, None, None, "missing member"))
        return None
    data, why = json_problem(env_member, lim)
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


def check_signatures(
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


def read_manifest(report: VerifyReport, members: dict[str, Member], lim: Limits) -> Manifest | None:
    m = members.get(MANIFEST_NAME)
    if m is None:
        report.problems.append(Problem(MANIFEST_NAME, None, None, "missing member"))
        return None
    data, why = json_problem(m, lim)
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
