"""The keys auditors already have: OpenSSH Ed25519 private keys, ``allowed_signers`` files
and ``ssh-ed25519 AAAA… comment`` lists (the format code hosts publish users' keys in).

:mod:`bundler.format.keys` sniffs a key file and hands OpenSSH formats to this module,
so ``--key``, ``--key-pub`` and ``--trusted-keys`` accept them without new
options. A signature stays Ed25519 over the DSSE PAE whatever file the key came
from; an SSH key is only a container for the same 32-byte Ed25519 key (no SSH
signature format, no namespace is involved), and its key ID is the same
``SHA256:`` fingerprint ``ssh-keygen -lf`` prints.

``allowed_signers`` (``man ssh-keygen``, ALLOWED SIGNERS): one key per line,
``principals [options] keytype base64-key [comment]``; ``#`` comments and blank
lines are skipped. Principals (comma-separated) are carried to the output so an
auditor sees *who* signed. Options: ``valid-after``/``valid-before`` are
honoured (a key outside its window is not trusted now); ``namespaces`` is
accepted and not applied (our signatures are not SSH signatures, so there is
no namespace to match); ``cert-authority`` is refused (we verify keys, not
certificates). Lines of another key type (``ssh-rsa``, ``ecdsa-…``, ``sk-…``)
are skipped when the file holds at least one Ed25519 key — a user's published
key list often mixes types — and refused, naming the file and the types, when
it holds none.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import os
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from bundler.errors import KeyFileError

__all__ = [
    "OPENSSH_PRIVATE_MARKER",
    "SignerEntry",
    "load_openssh_private_key",
    "parse_signers",
]

OPENSSH_PRIVATE_MARKER = b"-----BEGIN OPENSSH PRIVATE KEY-----"
_ED25519 = "ssh-ed25519"
_KEY_TYPES = (
    "ssh-ed25519",
    "ssh-rsa",
    "ssh-dss",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)


def _is_key_type(token: str) -> bool:
    return token in _KEY_TYPES or token.endswith("-cert-v01@openssh.com")


def _type_name(key: Any) -> str:
    """The key's type as OpenSSH names it (``ssh-rsa``, ``ecdsa-sha2-nistp256``)."""
    try:
        pub = key.public_key() if hasattr(key, "public_key") else key
        line: bytes = pub.public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        return line.split()[0].decode("ascii")
    except (ValueError, TypeError, AttributeError):
        return type(key).__name__


def _encrypted(data: bytes) -> bool:
    """True when the OpenSSH key needs a passphrase (cryptography says so before any KDF runs)."""
    try:
        serialization.load_ssh_private_key(data, password=None)
    except TypeError:
        return True
    except (ValueError, UnsupportedAlgorithm):
        return False  # the load that follows reports what is wrong with it
    return False


def load_openssh_private_key(
    data: bytes, where: str, passphrase: bytes | None
) -> Ed25519PrivateKey:
    """Load an ``-----BEGIN OPENSSH PRIVATE KEY-----`` file (``ssh-keygen`` output).

    Encrypted keys need their passphrase (argument, or ``REPROBUNDLE_KEY_PASSPHRASE``,
    which an unencrypted key ignores) and the ``bcrypt`` package (OpenSSH derives
    the key with bcrypt-pbkdf).
    """
    env = os.environ.get("REPROBUNDLE_KEY_PASSPHRASE")
    if passphrase is None and env and _encrypted(data):
        # As for PEM keys: the environment's passphrase is for encrypted keys only; an
        # unencrypted key is read as it is (an explicit --passphrase-file is refused).
        passphrase = env.encode("utf-8")
    try:
        key = serialization.load_ssh_private_key(data, password=passphrase)
    except TypeError as exc:
        raise KeyFileError(
            f"{where}: the OpenSSH key is encrypted; give its passphrase "
            "(--passphrase-file or REPROBUNDLE_KEY_PASSPHRASE)"
            if passphrase is None
            else f"{where}: a passphrase was given but the OpenSSH key is not encrypted"
        ) from exc
    except UnsupportedAlgorithm as exc:
        if "bcrypt" in str(exc):
            raise KeyFileError(
                f"{where}: an encrypted OpenSSH key needs the 'bcrypt' package to derive its "
                "key (pip install bcrypt), or convert it: ssh-keygen -p -m PKCS8 -f KEY"
            ) from exc
        raise KeyFileError(f"{where}: unsupported OpenSSH private key ({exc})") from exc
    except ValueError as exc:
        hint = "wrong passphrase, or " if passphrase is not None else ""
        raise KeyFileError(f"{where}: not a readable OpenSSH private key ({hint}{exc})") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(
            f"{where}: an OpenSSH {_type_name(key)} key; reprobundle signs with Ed25519 only "
            "(make one with: ssh-keygen -t ed25519)"
        )
    return key


@dataclass(frozen=True)
class SignerEntry:
    """One trusted Ed25519 key from a signers file, with its principals (may be empty)."""

    key: Ed25519PublicKey
    principals: tuple[str, ...]
    where: str


def _tokens(line: str) -> list[str]:
    """Split on blanks outside double quotes (``namespaces="a,b c"`` stays one token)."""
    out: list[str] = []
    cur: list[str] = []
    quoted = False
    for ch in line:
        if ch == '"':
            quoted = not quoted
            cur.append(ch)
        elif ch in " \t" and not quoted:
            if cur:
                out.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


def _options(text: str) -> list[tuple[str, str]]:
    """``opt1,opt2="v,w"`` -> [(name, value)], commas inside quotes kept."""
    out: list[tuple[str, str]] = []
    cur: list[str] = []
    quoted = False
    for ch in [*text, ","]:
        if ch == '"':
            quoted = not quoted
        elif ch == "," and not quoted:
            item = "".join(cur)
            name, _, value = item.partition("=")
            out.append((name.strip().lower(), value))
            cur = []
        else:
            cur.append(ch)
    return out


def _when(value: str, where: str) -> dt.datetime:
    """``YYYYMMDD[HHMM[SS]][Z]`` as ssh-keygen reads it (UTC with ``Z``, else local time)."""
    utc = value.endswith(("Z", "z"))
    digits = value[:-1] if utc else value
    formats = {8: "%Y%m%d", 12: "%Y%m%d%H%M", 14: "%Y%m%d%H%M%S"}
    fmt = formats.get(len(digits))
    try:
        if fmt is None or not digits.isdigit():
            raise ValueError(value)
        t = dt.datetime.strptime(digits, fmt)
    except ValueError as exc:
        raise KeyFileError(f"{where}: invalid time {value!r} (want YYYYMMDD[HHMM[SS]][Z])") from exc
    return t.replace(tzinfo=dt.UTC) if utc else t.astimezone()


def _within_window(opts: list[tuple[str, str]], where: str, now: dt.datetime) -> bool:
    for name, value in opts:
        if name == "cert-authority":
            raise KeyFileError(
                f"{where}: cert-authority lines are not supported (reprobundle trusts keys, "
                "not SSH certificates)"
            )
        if name == "valid-after" and now < _when(value.strip('"'), where):
            return False
        if name == "valid-before" and now >= _when(value.strip('"'), where):
            return False
    return True


def _decode_key(keytype: str, blob: str, where: str) -> Ed25519PublicKey:
    try:
        base64.b64decode(blob, validate=True)
        key = serialization.load_ssh_public_key(f"{keytype} {blob}".encode("ascii"))
    except (ValueError, binascii.Error, UnicodeEncodeError, UnsupportedAlgorithm) as exc:
        raise KeyFileError(f"{where}: not a readable {keytype} public key ({exc})") from exc
    if not isinstance(key, Ed25519PublicKey):  # pragma: no cover - keytype checked by caller
        raise KeyFileError(f"{where}: not an Ed25519 public key ({_type_name(key)})")
    return key


def parse_signers(text: str, where: str, now: dt.datetime | None = None) -> list[SignerEntry]:
    """Ed25519 keys of an ``allowed_signers`` file or a list of ``ssh-ed25519 AAAA…`` lines.

    ``where`` names the file in errors (with the line number). See the module
    docstring for options and other key types.
    """
    now = now or dt.datetime.now(dt.UTC)
    entries: list[SignerEntry] = []
    other_types: list[str] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        here = f"{where}: line {n}"
        toks = _tokens(line)
        principals: tuple[str, ...] = ()
        opts: list[tuple[str, str]] = []
        if not _is_key_type(toks[0]):
            principals = tuple(p for p in toks[0].split(",") if p)
            toks = toks[1:]
            if toks and not _is_key_type(toks[0]):
                opts = _options(toks[0])
                toks = toks[1:]
        if len(toks) < 2 or not _is_key_type(toks[0]):
            raise KeyFileError(
                f"{here}: not a key line (want 'ssh-ed25519 AAAA… [comment]' or the "
                "allowed_signers form 'principals [options] ssh-ed25519 AAAA…')"
            )
        if toks[0] != _ED25519:
            other_types.append(toks[0])
            continue
        key = _decode_key(toks[0], toks[1], here)
        if _within_window(opts, here, now):
            entries.append(SignerEntry(key, principals, here))
    if not entries and other_types:
        raise KeyFileError(
            f"{where}: no Ed25519 key, only {', '.join(sorted(set(other_types)))}; "
            "reprobundle verifies Ed25519 signatures only"
        )
    return entries
