"""The trust decision as values: which signature statuses are trusted, what a Trust accepts.

Expected values are written out from the contract (specs/bundle-format.md and
docs/exit-codes.md: only ``verified`` is trusted; ``--allow-unsigned`` accepts
every other status on integrity alone), not read back from the enum.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bundler.errors import IntegrityError
from bundler.format.keys import TrustedKeys, key_id
from bundler.format.trust import NO_TRUST, SignatureStatus, Trust
from bundler.seal import seal_campaign
from bundler.verified import open_verified
from bundler.verify import check_bundle
from tests.campaign_builder import write_campaign

# The words every JSON output and document uses today (specs/bundle-format.md).
WORDS = ("verified", "unsigned", "unchecked", "untrusted", "invalid")


def test_statuses_are_exactly_the_words_the_outputs_use() -> None:
    assert sorted(s.value for s in SignatureStatus) == sorted(WORDS)
    for word in WORDS:
        status = SignatureStatus(word)
        # Printed, formatted and serialized as the bare word: outputs stay byte-identical.
        assert status == word
        assert str(status) == word
        assert f"signature {status}" == f"signature {word}"
        assert json.dumps({"s": status}) == json.dumps({"s": word})


@pytest.mark.parametrize(("word", "trusted"), [(w, w == "verified") for w in WORDS])
def test_only_verified_is_trusted(word: str, trusted: bool) -> None:
    assert SignatureStatus(word).trusted is trusted


def test_keys_accept_only_verified() -> None:
    trust = Trust.keys([Ed25519PrivateKey.generate().public_key()])
    assert [w for w in WORDS if trust.accepts(SignatureStatus(w))] == ["verified"]
    assert not trust.accept_untrusted
    assert not trust.refuses_all


@pytest.mark.parametrize("keys", [0, 1])
def test_allow_unsigned_accepts_every_status(keys: int) -> None:
    pubs = [Ed25519PrivateKey.generate().public_key() for _ in range(keys)]
    trust = Trust.allow_unsigned(pubs)
    assert all(trust.accepts(SignatureStatus(w)) for w in WORDS)
    assert trust.public_keys == tuple(pubs)
    assert not trust.refuses_all


def test_no_trust_refuses_all() -> None:
    assert Trust() == NO_TRUST
    # Without a key no bundle can reach ``verified``: every status it can have is refused.
    assert [w for w in WORDS if NO_TRUST.accepts(SignatureStatus(w))] == ["verified"]
    assert NO_TRUST.refuses_all
    assert Trust.keys([]).refuses_all
    assert Trust.keys([], allow_unsigned=True) == Trust.allow_unsigned()


def test_trust_is_frozen_and_keeps_principals() -> None:
    pub = Ed25519PrivateKey.generate().public_key()
    keys = TrustedKeys()
    keys.add(pub, ["alice@example.org"])
    trust = Trust.keys(keys)
    keys.add(Ed25519PrivateKey.generate().public_key())  # later changes do not leak in
    assert trust.public_keys == (pub,)
    assert dict(trust.principals) == {key_id(pub): ("alice@example.org",)}
    with pytest.raises(AttributeError):
        trust.accept_untrusted = True  # type: ignore[misc]


def test_a_trust_decides_a_real_bundle(tmp_path: Path) -> None:
    """Sealed unsigned, by a known key and by a stranger: status, ok, trusted, refusal."""
    author, stranger = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    camp = write_campaign(tmp_path / "c")
    signed, unsigned = tmp_path / "s.bundle", tmp_path / "u.bundle"
    seal_campaign(camp, signed, keys=[author])
    seal_campaign(camp, unsigned)
    mine = Trust.keys([author.public_key()])
    theirs = Trust.keys([stranger.public_key()])
    cases = [
        (signed, mine, "verified", True),
        (signed, theirs, "untrusted", False),
        (signed, NO_TRUST, "unchecked", False),
        (unsigned, mine, "unsigned", False),
    ]
    for path, trust, word, ok in cases:
        rep = check_bundle(path, trust=trust)
        assert (rep.signature_status, rep.ok, rep.trusted) == (word, ok, ok)
        lenient = check_bundle(path, trust=Trust.allow_unsigned(trust.public_keys))
        assert (lenient.signature_status, lenient.ok, lenient.trusted) == (word, True, ok)
        assert lenient.to_dict()["allow_unsigned"] is True
        if ok:
            assert open_verified(path, trust=trust).trusted
        else:
            with pytest.raises(IntegrityError, match=f"signature {word}: no trusted key"):
                open_verified(path, trust=trust)
            assert not open_verified(path, trust=Trust.allow_unsigned()).trusted
