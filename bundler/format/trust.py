"""The trust decision as values: what a signature check established, and what a reader accepts.

:class:`SignatureStatus` is the one vocabulary of the signature check; its words
are the ``signature_status`` of every JSON output and document, so it is a
:class:`~enum.StrEnum` (it prints, formats and serializes as the word itself).
Only ``verified`` is trusted: a trusted key verified a signature.

:class:`Trust` is the caller's policy, made once from the command line (or by a
library caller) and handed to every reader: the public keys it trusts, and
whether a bundle no trusted key verified is accepted anyway (integrity only).
Modelled on sigstore-python's policy objects: one value instead of a key list
and a flag threaded side by side.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from bundler.format.keys import TrustedKeys, key_id

__all__ = ["NO_TRUST", "SignatureStatus", "Trust"]


class SignatureStatus(StrEnum):
    """What the signature check of a bundle established."""

    VERIFIED = "verified"
    """A trusted key verified at least one signature."""
    UNSIGNED = "unsigned"
    """The envelope holds no signature."""
    UNCHECKED = "unchecked"
    """Signed, but no trusted key was given to check it (or the check was never reached)."""
    UNTRUSTED = "untrusted"
    """Signed, and no trusted key verifies any signature."""
    INVALID = "invalid"
    """A signature names a trusted key but does not verify with it (and none verifies)."""

    @property
    def trusted(self) -> bool:
        """True only for ``verified``: every other status means nobody the reader trusts signed."""
        return self is SignatureStatus.VERIFIED


def _no_principals() -> Mapping[str, tuple[str, ...]]:
    return MappingProxyType({})


@dataclass(frozen=True)
class Trust:
    """Whom a reader trusts, and whether it accepts a bundle none of them signed.

    ``public_keys`` are the trusted keys; ``principals`` maps a key ID to the
    names an ``allowed_signers`` file gave that key (shown, never decisive).
    ``accept_untrusted`` accepts a bundle whose status is not trusted (unsigned,
    unchecked, untrusted, invalid) on integrity alone; integrity problems are
    refused whatever the trust. ``Trust()`` trusts nobody, so it accepts no bundle.
    """

    public_keys: tuple[Ed25519PublicKey, ...] = ()
    principals: Mapping[str, tuple[str, ...]] = field(default_factory=_no_principals)
    accept_untrusted: bool = False
    sources: Mapping[str, tuple[str, ...]] = field(default_factory=_no_principals)

    @classmethod
    def keys(cls, keys: Iterable[Ed25519PublicKey], *, allow_unsigned: bool = False) -> Trust:
        """Trust ``keys`` (a :class:`~bundler.format.keys.TrustedKeys` keeps its principals).

        ``allow_unsigned`` also accepts a bundle none of them verified (``--allow-unsigned``).
        """
        names = keys.principals if isinstance(keys, TrustedKeys) else {}
        sources = keys.sources if isinstance(keys, TrustedKeys) else {}
        return cls(
            tuple(keys),
            MappingProxyType(dict(names)),
            allow_unsigned,
            MappingProxyType(dict(sources)),
        )

    @classmethod
    def allow_unsigned(cls, keys: Iterable[Ed25519PublicKey] = ()) -> Trust:
        """Accept a bundle no trusted key verified; ``keys`` are still checked and reported."""
        return cls.keys(keys, allow_unsigned=True)

    def describe_keys(self) -> list[str]:
        """Each trusted key as ``SOURCE (SHA256:...)``; its key ID alone when read from no file."""
        out = []
        for k in self.public_keys:
            kid = key_id(k)
            where = ", ".join(self.sources.get(kid, ()))
            out.append(f"{where} ({kid})" if where else kid)
        return out

    def accepts(self, status: SignatureStatus) -> bool:
        """True when a bundle with this signature status (and no integrity problem) is accepted."""
        return status.trusted or self.accept_untrusted

    @property
    def refuses_all(self) -> bool:
        """True when no bundle can be accepted: no trusted key, and unsigned not allowed.

        The command line refuses such options as a usage error before reading anything.
        """
        return not self.public_keys and not self.accept_untrusted


NO_TRUST = Trust()
"""Trusts nobody, so it accepts no bundle: the default of every reader (a bundle is
refused unless the caller says whom it trusts, or accepts unsigned bundles explicitly)."""
