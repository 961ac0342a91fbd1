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
from bundler._internal.userfile import (
    KEY_FILE_MAX_BYTES,
    KEY_LIST_MAX_BYTES,
    PASSPHRASE_MAX_BYTES,
    read_user_file,
)
from bundler.errors import KeyFileError, UsageError
from bundler.format.ssh_keys import (
    OPENSSH_PRIVATE_MARKER,
    SignerEntry,
    load_openssh_private_key,
    parse_signers,
)

__all__ = [
    "KeyPair",
    "TrustedKeys",
    "generate_keypair",
    "key_id",
    "load_private_key",
    "load_public_key",
    "load_public_keys",
    "load_trusted_keys",
    "parse_public_key",
    "read_passphrase_file",
]


def key_id(public: Ed25519PublicKey) -> str:
    """Return the OpenSSH-style fingerprint ``SHA256:<base64>`` of ``public``."""
    line = public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    blob = base64.b64decode(line.split()[1])
    digest = hashlib.sha256(blob).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


@dataclass(frozen=True)
class KeyPair:
    """Paths written by :func:`generate_keypair`, the key ID, and the public key's OpenSSH line.

    ``openssh`` (``ssh-ed25519 AAAA…``) is the same public key in the form
    ``allowed_signers``, ``authorized_keys`` and ``ssh-keygen -lf`` read; the key
    files stay PEM.
    """

    private_path: Path
    public_path: Path
    key_id: str
    openssh: str = ""


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
    openssh = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return KeyPair(out, pub_path, key_id(key.public_key()), openssh.decode("ascii"))


def _read(path: Path, what: str = "key file", max_bytes: int = KEY_FILE_MAX_BYTES) -> bytes:
    try:
        return read_user_file(path, what=what, max_bytes=max_bytes, error=KeyFileError)
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot read {what}: {exc.strerror or exc}") from exc


def read_passphrase_file(path: Path) -> bytes:
    """The passphrase in ``--passphrase-file`` (trailing CR and LF dropped).

    Raises:
        KeyFileError: not a regular file, or larger than 64 KiB.
        OSError: it cannot be read.
    """
    data = read_user_file(
        path, what="passphrase file", max_bytes=PASSPHRASE_MAX_BYTES, error=KeyFileError
    )
    return data.rstrip(b"\r\n")


def load_private_key(path: Path, passphrase: bytes | None = None) -> Ed25519PrivateKey:
    """Load an Ed25519 private key: PEM (PKCS#8) or OpenSSH (``~/.ssh/id_ed25519``).

    The passphrase may also come from ``REPROBUNDLE_KEY_PASSPHRASE``; we never
    prompt, so scripted seals cannot hang.
    """
    data = _read(path)
    if data.lstrip().startswith(OPENSSH_PRIVATE_MARKER):
        return load_openssh_private_key(data, str(path), passphrase)
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
    return parse_public_key(_read(path, "public key file", KEY_LIST_MAX_BYTES), str(path))


class TrustedKeys(list[Ed25519PublicKey]):
    """The trusted public keys, plus the principals an ``allowed_signers`` file gave them.

    A plain list everywhere keys are expected; ``principals`` maps a key ID to
    the names that file attached to it (empty for PEM keys and bare key lines);
    ``sources`` maps it to where it was read (a path, or ``path:line``), so that a
    key that verifies nothing can be named as the user gave it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.principals: dict[str, tuple[str, ...]] = {}
        self.sources: dict[str, tuple[str, ...]] = {}

    def add(self, key: Ed25519PublicKey, principals: Sequence[str] = (), where: str = "") -> None:
        """Trust ``key``; remember ``principals`` and ``where`` (merged when listed twice)."""
        kid = key_id(key)
        if kid not in self.principals:
            self.append(key)
            self.principals[kid] = ()
            self.sources[kid] = ()
        if where and where not in self.sources[kid]:
            self.sources[kid] = (*self.sources[kid], where)
        merged = [*self.principals[kid], *(p for p in principals if p not in self.principals[kid])]
        self.principals[kid] = tuple(merged)


def load_public_keys(path: Path) -> list[SignerEntry]:
    """Every Ed25519 key of a public key file, sniffed by content.

    PEM (SubjectPublicKeyInfo); one OpenSSH line (``id_ed25519.pub``); a list of
    ``ssh-ed25519 AAAA… comment`` lines (a code host's ``USER.keys``); or an
    OpenSSH ``allowed_signers`` file (principals kept). See ``bundler.format.ssh_keys``.
    """
    data = _read(path, "public key file", KEY_LIST_MAX_BYTES)
    if data.lstrip().startswith(b"-----BEGIN"):
        return [SignerEntry(parse_public_key(data, str(path)), (), str(path))]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KeyFileError(f"{path}: not a PEM or OpenSSH public key file (not UTF-8)") from exc
    if not any(_is_signer_line(line) for line in text.splitlines()):
        raise KeyFileError(f"{path}: not a readable public key (neither PEM nor OpenSSH key lines)")
    entries = parse_signers(text, str(path))
    if not entries:
        raise KeyFileError(f"{path}: holds no Ed25519 public key (or none valid now)")
    return entries


def _is_signer_line(line: str) -> bool:
    return any(
        tok in ("ssh-ed25519", "ssh-rsa") or tok.startswith(("ecdsa-", "sk-"))
        for tok in line.split()[:3]
    )


def load_trusted_keys(paths: Sequence[Path] = (), trusted_file: Path | None = None) -> TrustedKeys:
    """Public keys from ``--key`` paths and a ``--trusted-keys`` file.

    Each path may be any file :func:`load_public_keys` reads. The trusted-keys
    file lists one key per line: a path to such a file (relative to the file's
    folder), an ``ssh-ed25519 AAAA...`` line or an ``allowed_signers`` line;
    ``#`` starts a comment.
    """
    keys = TrustedKeys()
    for p in paths:
        for e in load_public_keys(p):
            keys.add(e.key, e.principals, e.where)
    if trusted_file is None:
        return keys
    data = _read(trusted_file, "trusted keys file", KEY_LIST_MAX_BYTES)
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise KeyFileError(f"{trusted_file}: cannot read the trusted keys file ({exc})") from exc
    signer_lines = []
    before = len(keys)
    for line in lines:
        # allowed_signers and key lines are parsed together below (one file, line numbers kept)
        signer_lines.append(line if _is_signer_line(line) else "")
        entry = line.split("#", 1)[0].strip()
        if entry and not line.strip().startswith("#") and not _is_signer_line(line):
            for e in load_public_keys(trusted_file.parent / entry):
                keys.add(e.key, e.principals, e.where)
    if any(signer_lines):
        for e in parse_signers("\n".join(signer_lines), str(trusted_file)):
            keys.add(e.key, e.principals, e.where)
    if len(keys) == before:
        raise KeyFileError(f"{trusted_file}: lists no Ed25519 public key (or none valid now)")
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
