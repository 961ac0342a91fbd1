"""Shared fixtures: a fresh Ed25519 key pair and a sealed mini campaign."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from bundler.format.keys import generate_keypair, load_private_key, load_public_key
from bundler.seal import seal_campaign
from tests.campaign_builder import write_campaign


@dataclass(frozen=True)
class Keys:
    """A key pair on disk and loaded."""

    private_path: Path
    public_path: Path
    private: Ed25519PrivateKey
    public: Ed25519PublicKey
    key_id: str


def make_keys(directory: Path, name: str = "author") -> Keys:
    """Generate a key pair under ``directory``."""
    kp = generate_keypair(directory / name)
    return Keys(
        kp.private_path,
        kp.public_path,
        load_private_key(kp.private_path),
        load_public_key(kp.public_path),
        kp.key_id,
    )


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    """An author key pair."""
    d = tmp_path / "keys"
    d.mkdir()
    return make_keys(d)


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    """A valid mini campaign directory."""
    return write_campaign(tmp_path / "campaign")


@pytest.fixture
def sealed(tmp_path: Path, campaign: Path, keys: Keys) -> Path:
    """The mini campaign sealed and signed by ``keys``."""
    out = tmp_path / "mini.bundle"
    seal_campaign(campaign, out, keys=[keys.private])
    return out
