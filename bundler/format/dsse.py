"""DSSE v1 envelopes signed with Ed25519 (secure-systems-lab/dsse, protocol.md).

``SIGNATURE = Sign(PAE(UTF8(payloadType), payload))`` with
``PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body``.
Kept small on purpose so it can be audited against the spec in one sitting.
Verification tries every trusted key against every signature; the ``keyid``
field is an unauthenticated hint and decides nothing.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from bundler._internal import jcs
from bundler.format.keys import key_id

__all__ = [
    "INTOTO_PAYLOAD_TYPE",
    "Envelope",
    "EnvelopeError",
    "SignatureCheck",
    "pae",
    "parse_envelope",
    "sign_payload",
    "verify_envelope",
]

INTOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"


class EnvelopeError(ValueError):
    """The envelope bytes are not a well-formed DSSE envelope."""


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 Pre-Authentication Encoding of ``payload_type`` and ``payload``."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(t), t, len(payload), payload)


@dataclass(frozen=True)
class Envelope:
    """A parsed envelope: payload bytes, type, and (keyid, signature bytes) pairs."""

    payload_type: str
    payload: bytes
    signatures: tuple[tuple[str, bytes], ...]

    def to_bytes(self) -> bytes:
        """Serialize as RFC 8785 canonical JSON (standard base64, padded)."""
        doc = {
            "payload": base64.b64encode(self.payload).decode("ascii"),
            "payloadType": self.payload_type,
            "signatures": [
                {"keyid": kid, "sig": base64.b64encode(sig).decode("ascii")}
                for kid, sig in self.signatures
            ],
        }
        return jcs.dumps(doc)

    def add_signature(self, key: Ed25519PrivateKey) -> Envelope:
        """Return a copy with one more signature by ``key`` over the same payload."""
        sig = key.sign(pae(self.payload_type, self.payload))
        return Envelope(
            self.payload_type, self.payload, (*self.signatures, (key_id(key.public_key()), sig))
        )


def sign_payload(payload: bytes, keys: list[Ed25519PrivateKey], payload_type: str) -> Envelope:
    """Create an envelope over ``payload`` with one signature per key (none allowed)."""
    env = Envelope(payload_type, payload, ())
    for k in keys:
        env = env.add_signature(k)
    return env


def _b64(text: Any, what: str) -> bytes:
    if not isinstance(text, str):
        raise EnvelopeError(f"{what} is not a string")
    padded = text + "=" * (-len(text) % 4)
    try:
        if "-" in text or "_" in text:  # DSSE verifiers accept URL-safe base64 too
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise EnvelopeError(f"{what} is not valid base64") from exc


def parse_envelope(data: bytes) -> Envelope:
    """Parse envelope bytes. The payload stays opaque bytes until verified."""
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EnvelopeError(f"not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise EnvelopeError("not a JSON object")
    for f in ("payload", "payloadType", "signatures"):
        if f not in doc:
            raise EnvelopeError(f"missing field {f!r}")
    if not isinstance(doc["payloadType"], str) or not isinstance(doc["signatures"], list):
        raise EnvelopeError("payloadType must be a string and signatures a list")
    sigs = []
    for i, s in enumerate(doc["signatures"]):
        if not isinstance(s, dict) or "sig" not in s:
            raise EnvelopeError(f"signatures[{i}] has no 'sig'")
        kid = s.get("keyid", "")
        sigs.append((kid if isinstance(kid, str) else "", _b64(s["sig"], f"signatures[{i}].sig")))
    return Envelope(doc["payloadType"], _b64(doc["payload"], "payload"), tuple(sigs))


@dataclass(frozen=True)
class SignatureCheck:
    """The outcome for one signature of an envelope."""

    index: int
    keyid_hint: str
    valid: bool
    verified_by: str | None  # key ID of the trusted key that verified it, if any
    principals: tuple[str, ...] = ()  # names an allowed_signers file gives that key


def verify_envelope(
    env: Envelope,
    trusted: Sequence[Ed25519PublicKey],
    principals: Mapping[str, tuple[str, ...]] | None = None,
) -> list[SignatureCheck]:
    """Check each signature against every trusted key; return one result per signature.

    Every signature is Ed25519 over ``pae(payloadType, payload)``, whatever file
    the key came from (PEM or OpenSSH). ``principals`` (key ID -> names, as an
    ``allowed_signers`` file gives them) are reported for the verifying key.
    """
    names = principals or {}
    message = pae(env.payload_type, env.payload)
    out = []
    for i, (kid, sig) in enumerate(env.signatures):
        by = None
        for pub in trusted:
            try:
                pub.verify(sig, message)
            except InvalidSignature:
                continue
            by = key_id(pub)
            break
        out.append(SignatureCheck(i, kid, by is not None, by, names.get(by, ()) if by else ()))
    return out
