"""Ed25519 keys: generation, loading, and the key ID we show everywhere.

Key ID convention (see ``specs/bundle-format.md``): OpenSSH's fingerprint,
``SHA256:`` + unpadded base64 of SHA-256 over the SSH wire-format public key
blob. An auditor gets the same string from ``ssh-keygen -lf`` on the key in
OpenSSH form, with no reprobundle installed. The key ID is only a hint inside
envelopes; verification always tries the trusted keys themselves.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from bundler._internal.atomic import atomic_write_bytes
from bundler.errors import KeyFileError, UsageError

__all__ = [
    "KeyPair",
    "generate_keypair",
    "key_id",
    "load_private_key",
    "load_public_key",
    "load_trusted_keys",
    "parse_public_key",
]


def key_id(public: Ed25519PublicKey) -> str:
    """Return the OpenSSH-style fingerprint ``SHA256:<base64>`` of ``public``."""
    line = public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    blob = base64.b64decode(line.split()[1])
    digest = hashlib.sha256(blob).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


@dataclass(frozen=True)
class KeyPair:
    """Paths written by :func:`generate_keypair` and the key ID."""

    private_path: Path
    public_path: Path
    key_id: str


def generate_keypair(out: Path, passphrase: bytes | None = None, force: bool = False) -> KeyPair:
    """Write a new Ed25519 private key (PKCS#8 PEM) to ``out`` and its public key to ``out.pub``.

    The private key is encrypted only when ``passphrase`` is given. Both files
    are written atomically; the private key with mode 0600.
    """
    pub_path = out.with_name(out.name + ".pub")
    if not force:
        for p in (out, pub_path):
            if p.exists():
                raise UsageError(f"{p}: already exists (pass --force to overwrite)")
    out.parent.mkdir(parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    enc: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase)
        if passphrase
        else serialization.NoEncryption()
    )
    priv_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)
    pub_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    atomic_write_bytes(out, priv_pem, mode=0o600)
    atomic_write_bytes(pub_path, pub_pem, mode=0o644)
    return KeyPair(out, pub_path, key_id(key.public_key()))


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot read key file: {exc.strerror or exc}") from exc


def load_private_key(path: Path, passphrase: bytes | None = None) -> Ed25519PrivateKey:
    """Load an Ed25519 private key from a PEM file.

    The passphrase may also come from ``REPROBUNDLE_KEY_PASSPHRASE``; we never
    prompt, so scripted seals cannot hang.
    """
    data = _read(path)
    encrypted = b"ENCRYPTED PRIVATE KEY" in data
    if passphrase is None and encrypted and os.environ.get("REPROBUNDLE_KEY_PASSPHRASE"):
        passphrase = os.environ["REPROBUNDLE_KEY_PASSPHRASE"].encode("utf-8")
    try:
        key = serialization.load_pem_private_key(data, password=passphrase)
    except TypeError as exc:
        raise KeyFileError(
            f"{path}: the key is encrypted; give its passphrase "
            "(--passphrase-file or REPROBUNDLE_KEY_PASSPHRASE)"
            if passphrase is None
            else f"{path}: a passphrase was given but the key is not encrypted"
        ) from exc
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise KeyFileError(f"{path}: not a readable PEM private key ({exc})") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{path}: not an Ed25519 key ({type(key).__name__})")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """Load an Ed25519 public key: PEM (SubjectPublicKeyInfo) or one OpenSSH line."""
    return parse_public_key(_read(path), str(path))


def load_trusted_keys(
    paths: Sequence[Path] = (), trusted_file: Path | None = None
) -> list[Ed25519PublicKey]:
    """Public keys from ``--key`` paths and a ``--trusted-keys`` file.

    The file lists one key per line: a path to a PEM or OpenSSH public key
    (relative to the file's folder) or an ``ssh-ed25519 AAAA...`` line; ``#``
    starts a comment.
    """
    keys = [load_public_key(p) for p in paths]
    if trusted_file is None:
        return keys
    try:
        lines = trusted_file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyFileError(f"{trusted_file}: cannot read the trusted keys file ({exc})") from exc
    for n, line in enumerate(lines, 1):
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        if entry.startswith("ssh-ed25519"):
            keys.append(parse_public_key(entry.encode(), f"{trusted_file}: line {n}"))
        else:
            keys.append(load_public_key(trusted_file.parent / entry))
    return keys


def parse_public_key(data: bytes, where: str) -> Ed25519PublicKey:
    """Parse an Ed25519 public key (PEM or one OpenSSH line); ``where`` names it in errors."""
    key: object
    try:
        if data.lstrip().startswith(b"ssh-ed25519"):
            key = serialization.load_ssh_public_key(data.strip())
        else:
            key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise KeyFileError(f"{where}: not a readable public key ({exc})") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{where}: not an Ed25519 public key ({type(key).__name__})")
    return key
