"""``bundle sign``: add a countersignature; every other member stays byte-identical."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bundler._internal.atomic import atomic_output
from bundler.container import write_container
from bundler.dsse import parse_envelope, verify_envelope
from bundler.errors import IntegrityError, UsageError
from bundler.keys import key_id
from bundler.manifest import ENVELOPE_NAME
from bundler.verify import open_bundle

__all__ = ["SignResult", "countersign"]


@dataclass(frozen=True)
class SignResult:
    """The bundle written and who has signed it now."""

    output: Path
    added: str
    signers: list[str]


def countersign(bundle: Path, key: Ed25519PrivateKey, output: Path | None = None) -> SignResult:
    """Add a signature by ``key`` to ``bundle`` (in place unless ``output`` is given).

    The bundle must be intact (every digest as listed): we refuse to lend a
    signature to bytes that do not match what earlier signers signed.
    """
    # One read: the same members that were checked are the ones rewritten.
    opened = open_bundle(bundle, allow_unsigned=True)
    if opened.report.problems:
        raise IntegrityError(
            f"{bundle}: refusing to countersign a bundle that does not verify",
            opened.report.problems,
        )
    members = list(opened.members.values())
    env = parse_envelope(opened.members[ENVELOPE_NAME].data)
    kid = key_id(key.public_key())
    if any(c.valid for c in verify_envelope(env, [key.public_key()])):
        raise UsageError(f"{bundle}: already signed by {kid}")
    new_env = env.add_signature(key)
    out = output or bundle
    with atomic_output(out) as fh:
        write_container(
            fh,
            [(m.name, new_env.to_bytes() if m.name == ENVELOPE_NAME else m.data) for m in members],
        )
    return SignResult(out, kid, [k for k, _ in new_env.signatures])
