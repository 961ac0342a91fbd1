"""DSSE PAE, envelope signing and the key ID convention, against independent references."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bundler.errors import KeyFileError
from bundler.format.dsse import pae, parse_envelope, sign_payload, verify_envelope
from bundler.format.keys import generate_keypair, key_id, load_private_key, load_public_key


def test_pae_matches_the_dsse_spec_test_vector() -> None:
    # Test vector from secure-systems-lab/dsse protocol.md (quoted in shared/docs/formats.md).
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_pae_counts_bytes_not_characters() -> None:
    assert pae("t", "é".encode()) == b"DSSEv1 1 t 2 \xc3\xa9"


def test_envelope_round_trip_and_multiple_signatures() -> None:
    k1, k2 = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    env = sign_payload(b'{"a":1}', [k1, k2], "application/vnd.in-toto+json")
    parsed = parse_envelope(env.to_bytes())
    assert parsed == env
    checks = verify_envelope(parsed, [k2.public_key()])
    assert [c.valid for c in checks] == [False, True]
    assert checks[1].verified_by == key_id(k2.public_key())


def test_signature_over_other_payload_type_fails() -> None:
    k = Ed25519PrivateKey.generate()
    env = sign_payload(b"x", [k], "a")
    forged = type(env)("b", env.payload, env.signatures)
    assert not verify_envelope(forged, [k.public_key()])[0].valid


def test_keyid_is_only_a_hint() -> None:
    k, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    env = sign_payload(b"x", [k], "t")
    lying = type(env)(
        env.payload_type, env.payload, ((key_id(other.public_key()), env.signatures[0][1]),)
    )
    checks = verify_envelope(lying, [other.public_key()])
    assert not checks[0].valid


def test_urlsafe_base64_is_accepted() -> None:
    k = Ed25519PrivateKey.generate()
    env = sign_payload(b"\xfb\xff" * 10, [k], "t")
    doc = (
        b'{"payload":"'
        + base64.urlsafe_b64encode(env.payload).rstrip(b"=")
        + b'","payloadType":"t",'
        b'"signatures":[{"keyid":"","sig":"'
        + base64.urlsafe_b64encode(env.signatures[0][1])
        + b'"}]}'
    )
    assert verify_envelope(parse_envelope(doc), [k.public_key()])[0].valid


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen not installed")
def test_key_id_equals_ssh_keygen_fingerprint(tmp_path: Path) -> None:
    k = Ed25519PrivateKey.generate()
    line = k.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    (tmp_path / "k.pub").write_bytes(line + b" test\n")
    out = subprocess.run(
        ["ssh-keygen", "-lf", str(tmp_path / "k.pub")], capture_output=True, text=True, check=True
    ).stdout
    assert out.split()[1] == key_id(k.public_key())


def test_keygen_writes_loadable_pair_with_private_mode(tmp_path: Path) -> None:
    kp = generate_keypair(tmp_path / "author")
    assert kp.public_path == tmp_path / "author.pub"
    assert (kp.private_path.stat().st_mode & 0o777) == 0o600
    priv = load_private_key(kp.private_path)
    assert key_id(priv.public_key()) == key_id(load_public_key(kp.public_path)) == kp.key_id
    assert b"ENCRYPTED" not in kp.private_path.read_bytes()


def test_keygen_refuses_to_overwrite(tmp_path: Path) -> None:
    generate_keypair(tmp_path / "k")
    with pytest.raises(Exception, match="already exists"):
        generate_keypair(tmp_path / "k")


def test_encrypted_key_needs_its_passphrase(tmp_path: Path) -> None:
    kp = generate_keypair(tmp_path / "k", passphrase=b"pw")
    assert b"ENCRYPTED" in kp.private_path.read_bytes()
    with pytest.raises(KeyFileError, match="encrypted"):
        load_private_key(kp.private_path)
    assert key_id(load_private_key(kp.private_path, b"pw").public_key()) == kp.key_id


def test_non_ed25519_and_garbage_keys_are_refused(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    (tmp_path / "ec").write_bytes(pem)
    with pytest.raises(KeyFileError, match="not an Ed25519"):
        load_private_key(tmp_path / "ec")
    (tmp_path / "junk").write_text("hello")
    with pytest.raises(KeyFileError, match="not a readable"):
        load_public_key(tmp_path / "junk")
    with pytest.raises(KeyFileError, match="cannot read"):
        load_public_key(tmp_path / "absent")
