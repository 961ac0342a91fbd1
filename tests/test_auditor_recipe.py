"""The auditor's no-reprobundle recipe (docs/auditor-guide.md) run exactly as written.

A bundle sealed by reprobundle is checked by ``docs/auditor/verify_dsse.py``
(standard library + the ``openssl`` command), after decompressing it with the
guide's Python one-liner. Tampering with one byte of a signature, of a member,
or adding a member must make the recipe fail.
"""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from bundler.format.keys import generate_keypair, load_private_key
from bundler.seal import seal_campaign

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docs" / "auditor" / "verify_dsse.py"
GUIDE = ROOT / "docs" / "auditor-guide.md"
# Step 1 of the recipe, verbatim from the guide (the one step that is not stdlib).
DECOMPRESS = (
    "import sys, pathlib, zstandard as z; p = pathlib.Path; "
    "p(sys.argv[2]).write_bytes(z.ZstdDecompressor().decompress(p(sys.argv[1]).read_bytes()))"
)
OPENSSL_VERIFY = (
    "openssl pkeyutl -verify -pubin -inkey author.key.pub -rawin -in pae.bin -sigfile sig-0.bin"
)
EXTERNAL_SHA = "7be5be791159472b1fbf3c69796f7cb30dca7ad8466c2df70058c37116cdee02"


def _jsonl(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _write_campaign(root: Path) -> None:
    """A minimal valid campaign: two arms, one accepted attempt, four receipts, one claim."""
    (root / "plans").mkdir(parents=True)
    (root / "logs").mkdir()
    campaign = {
        "layout_version": "1",
        "id": "recipe-mini",
        "title": "Recipe test campaign",
        "kind": "campaign",
        "hardware": {"accelerator": "test", "count": 1},
        "arms": [
            {"id": "base", "role": "baseline", "runtime_commit": "c7f56f0"},
            {"id": "cand", "role": "candidate", "runtime_commit": "098b51f"},
        ],
        "plan": "plans/final.json",
    }
    (root / "campaign.json").write_text(json.dumps(campaign), encoding="utf-8")
    plan = {
        "plan_version": "1",
        "id": "final",
        "arm_order": ["base", "cand"],
        "warmups_per_server": 0,
        "measured_per_server": 2,
        "request": {"api": "videos-sync", "timing_boundary": "post-to-response"},
        "timeouts": {"request_s": 60},
        "teardown": {
            "base": {"term_wait_s": 30, "kill_wait_s": 30},
            "cand": {"term_wait_s": 30, "kill_wait_s": 30},
        },
    }
    (root / "plans" / "final.json").write_text(json.dumps(plan), encoding="utf-8")
    _jsonl(root / "attempts.jsonl", [{"attempt_id": "a1", "status": "accepted"}])
    receipts = []
    for i, (arm, e2e) in enumerate([("base", 10.0), ("base", 12.0), ("cand", 5.0), ("cand", 6.0)]):
        receipts.append(
            {
                "request_id": f"r{i}",
                "attempt_id": "a1",
                "arm": arm,
                "server": f"{arm}-1",
                "phase": "measured",
                "seq": i % 2,
                "start": f"2026-01-01T00:0{i}:00Z",
                "end": f"2026-01-01T00:0{i}:30Z",
                "e2e_s": e2e,
                "status": "ok",
            }
        )
    _jsonl(root / "receipts.jsonl", receipts)
    claim = {"claim_id": "c1", "statistic": "arm_mean_s", "params": {"arm": "base"}}
    _jsonl(root / "claims.jsonl", [{**claim, "value": "11.00", "unit": "s"}])
    artifact = {"path": "weights/alex.pth", "kind": "weights", "availability": "public"}
    _jsonl(root / "artifacts.jsonl", [{**artifact, "sha256": EXTERNAL_SHA}])
    (root / "logs" / "server.log").write_text("started\n", encoding="utf-8")


@pytest.fixture(scope="module")
def recipe_bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(bundle, public key): the mini campaign sealed and signed by a fresh key."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not on PATH: the recipe's signature step needs it")
    version = subprocess.run(
        ["openssl", "version"], capture_output=True, text=True, check=True
    ).stdout
    assert re.match(r"OpenSSL 3\.", version), f"the recipe needs OpenSSL 3.x, found {version!r}"
    d = tmp_path_factory.mktemp("recipe")
    kp = generate_keypair(d / "author.key")
    _write_campaign(d / "campaign")
    bundle = d / "mini.bundle"
    seal_campaign(d / "campaign", bundle, keys=[load_private_key(kp.private_path)])
    return bundle, kp.public_path


def _decompress(bundle: Path, tar: Path) -> None:
    subprocess.run([sys.executable, "-c", DECOMPRESS, str(bundle), str(tar)], check=True)


def _recipe(archive: Path, key: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(archive), "--key", str(key), *extra],
        capture_output=True,
        text=True,
        check=False,
    )


def _rewrite(tar: Path, out: Path, name: str, change: bytes | None) -> None:
    """Copy ``tar`` to ``out`` replacing member ``name`` by ``change`` (or adding it)."""
    with tarfile.open(tar) as src, tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as dst:
        for ti in src:
            fh = src.extractfile(ti)
            data = fh.read() if fh else b""
            if ti.name == name and change is not None:
                data = change
            ti.size = len(data)
            dst.addfile(ti, io.BytesIO(data))
        if name not in src.getnames():
            ti = tarfile.TarInfo(name)
            ti.size = len(change or b"")
            dst.addfile(ti, io.BytesIO(change or b""))


def _member(tar: Path, name: str) -> bytes:
    with tarfile.open(tar) as t:
        fh = t.extractfile(name)
        assert fh is not None
        return fh.read()


def test_guide_shows_the_commands_this_test_runs() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    assert DECOMPRESS in text
    assert "python3 docs/auditor/verify_dsse.py mini.tar --key author.key.pub" in text
    assert OPENSSL_VERIFY in text


def test_recipe_verifies_a_sealed_bundle(recipe_bundle: tuple[Path, Path], tmp_path: Path) -> None:
    bundle, key = recipe_bundle
    tar = tmp_path / "mini.tar"
    _decompress(bundle, tar)
    res = _recipe(tar, key)
    assert res.returncode == 0, res.stdout + res.stderr
    # 13 = campaign.json + plans/final.json + logs/server.log + the 10 tables every bundle has.
    assert "OK: signature verified; manifest and 13 members match" in res.stdout
    assert f"external {EXTERNAL_SHA}  weights/alex.pth" in res.stdout


def test_manual_openssl_step_on_the_recipe_files(
    recipe_bundle: tuple[Path, Path], tmp_path: Path
) -> None:
    """The guide's openssl command, run in --workdir on the files the script leaves there."""
    bundle, key = recipe_bundle
    tar = tmp_path / "mini.tar"
    _decompress(bundle, tar)
    work = tmp_path / "work"
    assert _recipe(tar, key, "--workdir", str(work)).returncode == 0
    shutil.copy(key, work / "author.key.pub")
    res = subprocess.run(OPENSSL_VERIFY.split(), cwd=work, capture_output=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    # PAE rebuilt by hand from the DSSE spec (protocol.md), not by the script.
    env = json.loads(_member(tar, "signatures.dsse.json"))
    payload = base64.b64decode(env["payload"])
    t = b"application/vnd.in-toto+json"
    assert (work / "pae.bin").read_bytes() == b"DSSEv1 28 " + t + b" %d " % len(payload) + payload


def test_recipe_reads_the_bundle_through_the_zstd_command(recipe_bundle: tuple[Path, Path]) -> None:
    if shutil.which("zstd") is None and sys.version_info < (3, 14):
        pytest.skip("neither the zstd command nor Python 3.14's compression.zstd is available")
    bundle, key = recipe_bundle
    res = _recipe(bundle, key)
    assert res.returncode == 0, res.stdout + res.stderr


def test_one_flipped_signature_byte_fails(recipe_bundle: tuple[Path, Path], tmp_path: Path) -> None:
    bundle, key = recipe_bundle
    tar = tmp_path / "mini.tar"
    _decompress(bundle, tar)
    env = json.loads(_member(tar, "signatures.dsse.json"))
    sig = bytearray(base64.b64decode(env["signatures"][0]["sig"]))
    sig[10] ^= 0x01
    env["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    bad = tmp_path / "bad.tar"
    _rewrite(tar, bad, "signatures.dsse.json", json.dumps(env).encode())
    res = _recipe(bad, key)
    assert res.returncode == 1
    assert "FAILED: no signature verifies" in res.stdout


@pytest.mark.parametrize("member", ["tables/receipts.parquet", "manifest.json", "logs/server.log"])
def test_one_flipped_member_byte_fails(
    recipe_bundle: tuple[Path, Path], tmp_path: Path, member: str
) -> None:
    bundle, key = recipe_bundle
    tar = tmp_path / "mini.tar"
    _decompress(bundle, tar)
    data = bytearray(_member(tar, member))
    data[len(data) // 2] ^= 0x01
    bad = tmp_path / "bad.tar"
    _rewrite(tar, bad, member, bytes(data))
    res = _recipe(bad, key)
    assert res.returncode == 1
    assert res.stdout.splitlines()[-1].startswith(f"FAILED: {member}")


def test_an_added_member_fails(recipe_bundle: tuple[Path, Path], tmp_path: Path) -> None:
    bundle, key = recipe_bundle
    tar = tmp_path / "mini.tar"
    _decompress(bundle, tar)
    bad = tmp_path / "bad.tar"
    _rewrite(tar, bad, "files/extra.txt", b"smuggled\n")
    res = _recipe(bad, key)
    assert res.returncode == 1
    assert "files/extra.txt: present but not in the manifest" in res.stdout


def test_a_key_that_did_not_sign_fails(recipe_bundle: tuple[Path, Path], tmp_path: Path) -> None:
    bundle, _ = recipe_bundle
    other = generate_keypair(tmp_path / "other.key")
    tar = tmp_path / "mini.tar"
    _decompress(bundle, tar)
    res = _recipe(tar, other.public_path)
    assert res.returncode == 1
    assert "FAILED: no signature verifies with the given key(s)" in res.stdout


def test_key_id_matches_ssh_keygen(recipe_bundle: tuple[Path, Path], tmp_path: Path) -> None:
    """The script's key ID equals OpenSSH's own fingerprint of the same key."""
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not on PATH")
    bundle, key = recipe_bundle
    tar = tmp_path / "mini.tar"
    _decompress(bundle, tar)
    der = base64.b64decode("".join(key.read_text().splitlines()[1:-1]))
    blob = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + der[-32:]
    ssh = tmp_path / "author.ssh.pub"
    ssh.write_text("ssh-ed25519 " + base64.b64encode(blob).decode() + "\n")
    fp = subprocess.run(
        ["ssh-keygen", "-lf", str(ssh)], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    res = _recipe(tar, ssh)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"VALID, key {fp}" in res.stdout
