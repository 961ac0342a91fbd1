"""The keys auditors already have (issue 12): OpenSSH Ed25519 keys, allowed_signers, USER.keys.

Every key here is made by the real ``/usr/bin/ssh-keygen``; expected key IDs
come from ``ssh-keygen -lf`` and the signature is checked by hand against the
DSSE PAE, not through reprobundle's own verifier.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from bundler.errors import KeyFileError
from bundler.format.container import read_container
from bundler.format.keys import load_private_key, load_trusted_keys
from tests.campaign_builder import write_campaign

BUNDLE = [sys.executable, "-m", "reprobundle.cli"]
SSH_KEYGEN = shutil.which("ssh-keygen") or "/usr/bin/ssh-keygen"

pytestmark = pytest.mark.skipif(not Path(SSH_KEYGEN).exists(), reason="ssh-keygen not installed")


def keygen(d: Path, name: str, kind: str = "ed25519", passphrase: str = "") -> Path:
    """Make a key with ssh-keygen; return the private key's path."""
    path = d / name
    subprocess.run(
        [SSH_KEYGEN, "-q", "-t", kind, "-N", passphrase, "-C", f"{name}@test", "-f", str(path)],
        check=True,
    )
    return path


def fingerprint(pub: Path) -> str:
    """``SHA256:...`` as ssh-keygen prints it."""
    out = subprocess.run([SSH_KEYGEN, "-lf", str(pub)], capture_output=True, text=True, check=True)
    return out.stdout.split()[1]


def bundle(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the CLI."""
    return subprocess.run(
        [*BUNDLE, *args], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )


@pytest.fixture
def ssh(tmp_path: Path) -> Path:
    """A folder of keys: plain and encrypted Ed25519, RSA, ECDSA."""
    d = tmp_path / "ssh"
    d.mkdir()
    keygen(d, "id_ed25519")
    keygen(d, "id_enc", passphrase="correct horse")
    keygen(d, "id_rsa", "rsa")
    keygen(d, "id_ecdsa", "ecdsa")
    keygen(d, "other")
    return d


def seal(tmp_path: Path, key: Path, *extra: str, env: dict[str, str] | None = None) -> Path:
    """Seal the mini campaign with ``key``; assert it worked."""
    camp = write_campaign(tmp_path / "campaign")
    out = tmp_path / "mini.bundle"
    r = bundle("seal", str(camp), "-o", str(out), "--key", str(key), *extra, env=env)
    assert r.returncode == 0, r.stderr
    return out


def test_openssh_key_signs_and_its_pub_verifies_with_ssh_keygens_fingerprint(
    tmp_path: Path, ssh: Path
) -> None:
    out = seal(tmp_path, ssh / "id_ed25519")
    r = bundle("verify", str(out), "--key", str(ssh / "id_ed25519.pub"), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["signatures"][0]["verified_by"] == fingerprint(ssh / "id_ed25519.pub")
    assert doc["signatures"][0]["keyid_hint"] == fingerprint(ssh / "id_ed25519.pub")


def test_signature_is_ed25519_over_the_dsse_pae(tmp_path: Path, ssh: Path) -> None:
    """Rebuild PAE from the DSSE spec by hand and check it with the SSH public key."""
    out = seal(tmp_path, ssh / "id_ed25519")
    env = json.loads(next(m.data for m in read_container(out) if m.name.endswith(".dsse.json")))
    payload = base64.b64decode(env["payload"])
    ptype = b"application/vnd.in-toto+json"
    pae = b"DSSEv1 " + str(len(ptype)).encode() + b" " + ptype + b" "
    pae += str(len(payload)).encode() + b" " + payload
    pub = serialization.load_ssh_public_key((ssh / "id_ed25519.pub").read_bytes())
    assert isinstance(pub, Ed25519PublicKey)
    pub.verify(base64.b64decode(env["signatures"][0]["sig"]), pae)  # raises if wrong


def test_encrypted_openssh_key_needs_and_takes_its_passphrase(tmp_path: Path, ssh: Path) -> None:
    camp = write_campaign(tmp_path / "campaign")
    r = bundle("seal", str(camp), "-o", str(tmp_path / "a.bundle"), "--key", str(ssh / "id_enc"))
    assert r.returncode == 2
    assert str(ssh / "id_enc") in r.stderr
    assert "encrypted" in r.stderr
    assert "Traceback" not in r.stderr
    wrong = tmp_path / "wrong.txt"
    wrong.write_text("battery staple\n")
    r = bundle(
        "seal", str(camp), "-o", str(tmp_path / "b.bundle"), "--key", str(ssh / "id_enc"),
        "--passphrase-file", str(wrong),
    )  # fmt: skip
    assert r.returncode == 2
    assert "wrong passphrase" in r.stderr
    pw = tmp_path / "pw.txt"
    pw.write_text("correct horse\n")
    out = seal(tmp_path / "x", ssh / "id_enc", "--passphrase-file", str(pw))
    r = bundle("verify", str(out), "--key", str(ssh / "id_enc.pub"))
    assert r.returncode == 0, r.stderr
    # and through the environment variable, for scripts
    out = seal(tmp_path / "y", ssh / "id_enc", env={"REPROBUNDLE_KEY_PASSPHRASE": "correct horse"})
    assert bundle("verify", str(out), "--key", str(ssh / "id_enc.pub")).returncode == 0


def test_encrypted_openssh_key_without_bcrypt_says_what_is_missing(
    tmp_path: Path, ssh: Path
) -> None:
    camp = write_campaign(tmp_path / "campaign")
    code = (
        "import sys; sys.modules['bcrypt'] = None\n"
        "from reprobundle.cli.main import run\n"
        f"sys.argv = ['bundle', 'seal', {str(camp)!r}, '-o', {str(tmp_path / 'o.bundle')!r},"
        f" '--key', {str(ssh / 'id_enc')!r}]\n"
        "run()\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "REPROBUNDLE_KEY_PASSPHRASE": "correct horse"},
    )
    assert r.returncode == 2, r.stderr
    assert "bcrypt" in r.stderr
    assert str(ssh / "id_enc") in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("name", "kind"), [("id_rsa", "ssh-rsa"), ("id_ecdsa", "ecdsa-sha2-nistp256")]
)
def test_non_ed25519_private_keys_are_refused_naming_file_and_type(
    tmp_path: Path, ssh: Path, name: str, kind: str
) -> None:
    with pytest.raises(KeyFileError) as err:
        load_private_key(ssh / name)
    assert str(ssh / name) in str(err.value)
    assert kind in str(err.value)
    camp = write_campaign(tmp_path / "campaign")
    r = bundle("seal", str(camp), "-o", str(tmp_path / "o.bundle"), "--key", str(ssh / name))
    assert r.returncode == 2
    assert str(ssh / name) in r.stderr
    assert kind in r.stderr


def _pub(ssh: Path, name: str) -> str:
    return (ssh / f"{name}.pub").read_text().strip()


def test_allowed_signers_principals_show_in_verify_and_inspect(tmp_path: Path, ssh: Path) -> None:
    out = seal(tmp_path, ssh / "id_ed25519")
    signers = tmp_path / "allowed_signers"
    signers.write_text(
        "# auditors' allowed signers\n\n"
        f'alice@example.org,release-team namespaces="file,git" {_pub(ssh, "id_ed25519")}\n'
        f"bob@example.org {_pub(ssh, 'other')}\n"
        f"carol@example.org {_pub(ssh, 'id_rsa')}\n"
    )
    for opt in ("--trusted-keys", "--key"):
        r = bundle("verify", str(out), opt, str(signers), "--json")
        assert r.returncode == 0, r.stderr
        sig = json.loads(r.stdout)["signatures"][0]
        assert sig["principals"] == ["alice@example.org", "release-team"]
        assert sig["verified_by"] == fingerprint(ssh / "id_ed25519.pub")
    r = bundle("verify", str(out), "--trusted-keys", str(signers))
    assert "principals alice@example.org,release-team" in r.stdout
    r = bundle("inspect", str(out), "--key", str(signers), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["signers"][0]["principals"] == ["alice@example.org", "release-team"]


def test_allowed_signers_validity_window_is_honoured(tmp_path: Path, ssh: Path) -> None:
    out = seal(tmp_path, ssh / "id_ed25519")
    expired = tmp_path / "expired"
    expired.write_text(f'alice valid-before="20200101Z" {_pub(ssh, "id_ed25519")}\n')
    r = bundle("verify", str(out), "--trusted-keys", str(expired))
    assert r.returncode == 2  # the file trusts no key now: said, not silently empty
    assert "valid now" in r.stderr
    expired.write_text(expired.read_text() + f"bob {_pub(ssh, 'other')}\n")
    r = bundle("verify", str(out), "--trusted-keys", str(expired), "--json")
    assert r.returncode == 1  # only bob is trusted, and bob did not sign
    assert json.loads(r.stdout)["signature_status"] == "untrusted"
    current = tmp_path / "current"
    current.write_text(
        f"alice valid-after=20200101,valid-before=29991231 {_pub(ssh, 'id_ed25519')}\n"
    )
    assert bundle("verify", str(out), "--trusted-keys", str(current)).returncode == 0


def test_cert_authority_lines_are_refused(tmp_path: Path, ssh: Path) -> None:
    f = tmp_path / "signers"
    f.write_text(f"*@example.org cert-authority {_pub(ssh, 'id_ed25519')}\n")
    with pytest.raises(KeyFileError, match="cert-authority"):
        load_trusted_keys([f])


def test_a_published_key_list_verifies_and_skips_other_key_types(tmp_path: Path, ssh: Path) -> None:
    """The USER.keys form: bare 'type base64 [comment]' lines, RSA and Ed25519 mixed."""
    out = seal(tmp_path, ssh / "id_ed25519")
    keys = tmp_path / "alice.keys"
    keys.write_text(f"{_pub(ssh, 'id_rsa')}\n{_pub(ssh, 'id_ed25519')}\n{_pub(ssh, 'id_ecdsa')}\n")
    r = bundle("verify", str(out), "--key", str(keys), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["signatures"][0]["principals"] == []
    only_rsa = tmp_path / "bob.keys"
    only_rsa.write_text(f"{_pub(ssh, 'id_rsa')}\n{_pub(ssh, 'id_ecdsa')}\n")
    r = bundle("verify", str(out), "--key", str(only_rsa))
    assert r.returncode == 2
    assert str(only_rsa) in r.stderr
    assert "ssh-rsa" in r.stderr
    assert "ecdsa-sha2-nistp256" in r.stderr


def test_a_garbled_key_line_is_located(tmp_path: Path) -> None:
    f = tmp_path / "signers"
    f.write_text("# ok\nalice ssh-ed25519 AAAA!!notbase64\n")
    with pytest.raises(KeyFileError) as err:
        load_trusted_keys([f])
    assert f"{f}: line 2" in str(err.value)
    f.write_text("just some words here\n")
    with pytest.raises(KeyFileError, match="signers: not a readable public key"):
        load_trusted_keys([f])
    f.write_text(f"ssh-ed25519 {base64.b64encode(b'x' * 51).decode()} ok\njust some words\n")
    with pytest.raises(KeyFileError, match="line 1: not a readable ssh-ed25519 public key"):
        load_trusted_keys([f])


def test_countersign_with_ssh_keys_end_to_end(tmp_path: Path, ssh: Path) -> None:
    """An auditor countersigns with ~/.ssh keys: signer trusted through allowed_signers."""
    out = seal(tmp_path, ssh / "id_ed25519")
    signers = tmp_path / "allowed_signers"
    signers.write_text(
        f'alice@example.org namespaces="file" {_pub(ssh, "id_ed25519")} alice laptop 2026\n'
        f"auditor@example.org {_pub(ssh, 'id_enc')}\n"
    )
    r = bundle(
        "sign", str(out), "--key", str(ssh / "id_enc"), "--key-pub", str(signers),
        env={"REPROBUNDLE_KEY_PASSPHRASE": "correct horse"},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = bundle("verify", str(out), "--trusted-keys", str(signers), "--json")
    assert r.returncode == 0, r.stderr
    sigs = json.loads(r.stdout)["signatures"]
    assert [s["principals"] for s in sigs] == [["alice@example.org"], ["auditor@example.org"]]
    assert [s["verified_by"] for s in sigs] == [
        fingerprint(ssh / "id_ed25519.pub"),
        fingerprint(ssh / "id_enc.pub"),
    ]


def test_a_key_listed_twice_merges_its_principals(tmp_path: Path, ssh: Path) -> None:
    f = tmp_path / "signers"
    f.write_text(f"alice {_pub(ssh, 'id_ed25519')}\nops,alice {_pub(ssh, 'id_ed25519')}\n")
    keys = load_trusted_keys([f])
    assert len(keys) == 1
    assert keys.principals == {fingerprint(ssh / "id_ed25519.pub"): ("alice", "ops")}
