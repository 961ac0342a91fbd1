"""What verify and replay say when the key is wrong, and when the bundle is damaged (issue 24).

A wrong ``--key`` is a refusal that names the key tried (its file and its
``SHA256:`` fingerprint), in a headline of its own and as a ``--json`` problem;
``--allow-unsigned`` keeps its UNTRUSTED headline and exit 0. A damaged bundle
gets no advice about keys (no key repairs it), and verify does not count the
members of a manifest it could not read. Fingerprints are derived here from the
key file with ``cryptography`` and ``hashlib``, not with our ``key_id``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from cryptography.hazmat.primitives import serialization

from reprobundle.cli.main import main
from tests.cli_workspace import make_workspace


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_workspace(tmp_path_factory.mktemp("ws"))
    data = bytearray((root / "run.bundle").read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte inside the zstd frame
    (root / "corrupt.bundle").write_bytes(bytes(data))
    return root


def _bundle(ws: Path, args: list[str], monkeypatch: pytest.MonkeyPatch) -> Result:
    monkeypatch.chdir(ws)
    return CliRunner().invoke(main, args)


def _fingerprint(pub: Path) -> str:
    key = serialization.load_pem_public_key(pub.read_bytes())
    line = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    digest = hashlib.sha256(base64.b64decode(line.split()[1])).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def test_wrong_key_is_a_located_refusal_naming_the_key(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = _fingerprint(ws / "auditor.pub")
    signer = _fingerprint(ws / "author.pub")
    res = _bundle(ws, ["verify", "run.bundle", "--key", "auditor.pub"], monkeypatch)
    assert res.exit_code == 1
    head = res.stdout.splitlines()[0]
    assert "UNTRUSTED" not in head and "VERIFIED" in head and "NOT" in head
    assert f"auditor.pub ({wrong})" in res.stdout
    assert signer in res.stdout
    doc = json.loads(
        _bundle(ws, ["verify", "run.bundle", "--key", "auditor.pub", "--json"], monkeypatch).stdout
    )
    assert doc["ok"] is False and doc["signature_status"] == "untrusted"
    assert len(doc["problems"]) == 1
    assert wrong in doc["problems"][0]["message"] and "auditor.pub" in doc["problems"][0]["message"]
    # --allow-unsigned keeps its own headline, exit 0 and no problem.
    ok = _bundle(
        ws,
        ["verify", "run.bundle", "--key", "auditor.pub", "--allow-unsigned", "--json"],
        monkeypatch,
    )
    assert ok.exit_code == 0
    assert json.loads(ok.stdout)["problems"] == []
    text = _bundle(ws, ["verify", "run.bundle", "--allow-unsigned"], monkeypatch)
    assert text.exit_code == 0 and "UNTRUSTED" in text.stdout.splitlines()[0]


def test_replay_with_the_wrong_key_names_it_and_advises_a_key(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = _bundle(ws, ["replay", "run.bundle", "--key", "auditor.pub"], monkeypatch)
    assert res.exit_code == 1
    assert _fingerprint(ws / "auditor.pub") in res.stderr
    assert "--allow-unsigned" in res.stderr  # here a key (or accepting it) is the remedy


@pytest.mark.parametrize("trust", [["--key", "author.pub"], ["--allow-unsigned"]])
def test_damaged_bundle_gets_no_key_advice(
    trust: list[str], ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = _bundle(ws, ["replay", "corrupt.bundle", *trust], monkeypatch)
    assert res.exit_code == 1
    assert "corrupt" in res.stderr
    assert "--key" not in res.stderr and "--allow-unsigned" not in res.stderr
    assert "public key" not in res.stderr


def test_verify_of_a_damaged_bundle_counts_no_members(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = _bundle(ws, ["verify", "corrupt.bundle", "--key", "author.pub"], monkeypatch)
    assert res.exit_code == 1
    assert "0 files in the manifest" not in res.stdout
    assert "no readable manifest" in res.stdout
