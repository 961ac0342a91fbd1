"""``bundle sign``: add a countersignature; every other member stays byte-identical.

A countersignature endorses what an earlier, trusted signer sealed. Signing a
bundle that no trusted key has signed (signed only by unknown keys, or not at
all) is not a countersignature but an *adoption*: the new signer vouches for
bytes nobody they trust vouched for, and afterwards the bundle verifies with
the new signer's key alone. :func:`countersign` refuses that unless an existing
signature verifies with a key of its :class:`~bundler.format.trust.Trust`, or
that trust accepts an untrusted bundle (``--force-adopt``); an adoption is
reported in :class:`SignResult` (the bundle format has no place to record it
inside the file).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bundler._internal.atomic import atomic_output
from bundler.errors import IntegrityError, UsageError
from bundler.format.container import write_container
from bundler.format.dsse import parse_envelope, verify_envelope
from bundler.format.keys import key_id
from bundler.format.manifest import ENVELOPE_NAME
from bundler.format.trust import NO_TRUST, Trust
from bundler.verify import is_trust_problem, open_bundle

__all__ = ["SignResult", "countersign"]


@dataclass(frozen=True)
class SignResult:
    """The bundle written and who has signed it now.

    ``endorsed`` lists the key IDs of the trusted keys that verified an existing
    signature. ``adopted`` is true when none did and the trust accepted an untrusted
    bundle (``--force-adopt``); ``unverified`` then lists the key ID hints of the existing
    signatures that no trusted key verified (empty for an unsigned bundle).
    """

    output: Path
    added: str
    signers: list[str]
    endorsed: list[str] = field(default_factory=list)
    adopted: bool = False
    unverified: list[str] = field(default_factory=list)


def countersign(
    bundle: Path,
    key: Ed25519PrivateKey,
    output: Path | None = None,
    *,
    trust: Trust = NO_TRUST,
) -> SignResult:
    """Add a signature by ``key`` to ``bundle`` (in place unless ``output`` is given).

    The bundle must be intact (every digest as listed): we refuse to lend a
    signature to bytes that do not match what earlier signers signed. And an
    existing signature must verify with one of ``trust.public_keys`` (the keys of
    the signers the caller trusts), unless ``trust`` accepts an untrusted bundle:
    signing one adopts it (``--force-adopt``).

    Raises:
        IntegrityError: the bundle has an integrity problem, or trusted keys were
            given and verify no existing signature (and ``trust`` refuses adoption).
        UsageError: ``key`` already signed it; or no trusted key was given and
            ``trust`` refuses adoption.
    """
    # One read: the same members that were checked are the ones rewritten.
    opened = open_bundle(bundle, trust=trust)
    # "No key given verified a signature" is answered below, with sign's own advice.
    if any(not is_trust_problem(p) for p in opened.report.problems):
        raise IntegrityError(
            f"{bundle}: refusing to countersign a bundle that does not verify",
            opened.report.problems,
        )
    members = list(opened.members.values())
    env = parse_envelope(opened.members[ENVELOPE_NAME].data)
    kid = key_id(key.public_key())
    if any(c.valid for c in verify_envelope(env, [key.public_key()])):
        raise UsageError(f"{bundle}: already signed by {kid}")
    checks = opened.report.signatures
    endorsed = sorted({c.verified_by for c in checks if c.verified_by})
    unverified = [c.keyid_hint or f"#{c.index}" for c in checks if not c.valid]
    if not trust.accepts(opened.report.signature_status):
        held = (
            f"signed only by key(s) you did not pass as trusted: {', '.join(unverified)}"
            if checks
            else "not signed at all"
        )
        advice = (
            "pass the signer's public key with --key-pub or --trusted-keys to countersign, "
            "or --force-adopt to vouch for it yourself"
        )
        if not trust.public_keys:
            raise UsageError(
                f"{bundle}: no trusted key given to check who signed it ({held}); {advice}"
            )
        raise IntegrityError(
            f"{bundle}: no existing signature verifies with a trusted key ({held}); {advice}"
        )
    new_env = env.add_signature(key)
    out = output or bundle
    with atomic_output(out) as fh:
        write_container(
            fh,
            [(m.name, new_env.to_bytes() if m.name == ENVELOPE_NAME else m.data) for m in members],
        )
    return SignResult(
        out,
        kid,
        [k for k, _ in new_env.signatures],
        endorsed=endorsed,
        adopted=not endorsed,
        unverified=unverified,
    )
