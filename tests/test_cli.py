"""The ``bundle`` command as a user runs it: exit codes, --json, and no tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.campaign_builder import receipts, write_campaign

BUNDLE = [sys.executable, "-m", "reprobundle.cli"]


def run(*args: str | Path, check: int | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*BUNDLE, *map(str, args)], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    if check is not None:
        assert proc.returncode == check, (proc.stdout, proc.stderr)
    return proc


@pytest.fixture
def keypair(tmp_path: Path) -> Path:
    out = run("keygen", "-o", tmp_path / "author", "--json", check=0)
    info = json.loads(out.stdout)
    assert info["key_id"].startswith("SHA256:")
    return tmp_path / "author"


def test_keygen_seal_verify_inspect_sign(tmp_path: Path, keypair: Path) -> None:
    camp = write_campaign(tmp_path / "c")
    out = tmp_path / "x.bundle"
    sealed = json.loads(run("seal", camp, "-o", out, "--key", keypair, "--json", check=0).stdout)
    assert sealed["ok"] and sealed["members"] > 10
    text = run("verify", out, "--key", f"{keypair}.pub", check=0).stdout
    assert "VERIFIED" in text
    rep = json.loads(run("verify", out, "--key", f"{keypair}.pub", "--json", check=0).stdout)
    assert rep["ok"] and rep["signature_status"] == "verified"
    info = json.loads(run("inspect", out, "--json", check=0).stdout)
    assert (
        info["campaign"]["arms"][0]["runtime_commit"] == "c7f56f0155953c7d4a77276a2f4fcbd844ab0da2"
    )
    assert info["counts"]["receipts_by_phase"] == {"warmup": 8, "measured": 12}
    human = run("inspect", out, check=0).stdout
    assert "attempt a1: interrupted (reservation ended)" in human
    run("keygen", "-o", tmp_path / "auditor", check=0)
    # A countersignature endorses a signer the auditor trusts: name that key.
    run("sign", out, "--key", tmp_path / "auditor", check=2)
    run("sign", out, "--key", tmp_path / "auditor", "--key-pub", f"{keypair}.pub", check=0)
    trusted = tmp_path / "trusted.txt"
    trusted.write_text(f"# author and auditor\n{keypair}.pub\n{tmp_path / 'auditor.pub'}\n")
    rep = json.loads(run("verify", out, "--trusted-keys", trusted, "--json", check=0).stdout)
    assert all(s["valid"] for s in rep["signatures"]) and len(rep["signatures"]) == 2


def test_seal_needs_a_key_or_explicit_unsigned(tmp_path: Path) -> None:
    camp = write_campaign(tmp_path / "c")
    proc = run("seal", camp, "-o", tmp_path / "x.bundle", check=2)
    assert "--unsigned" in proc.stderr
    run("seal", camp, "-o", tmp_path / "x.bundle", "--unsigned", check=0)
    proc = run("verify", tmp_path / "x.bundle", check=2)
    assert "--allow-unsigned" in proc.stderr
    proc = run("verify", tmp_path / "x.bundle", "--allow-unsigned", check=0)
    # Accepted for integrity, but nobody vouched for it: never called VERIFIED.
    assert proc.stdout.splitlines()[0].endswith(
        "UNTRUSTED (intact, but no trusted key verified a signature)"
    )
    assert ": VERIFIED" not in proc.stdout


def test_invalid_campaign_exit_2_with_every_problem(tmp_path: Path) -> None:
    rows = receipts()
    rows[0]["phase"] = "warm"
    rows[1]["e2e_s"] = "fast"
    camp = write_campaign(tmp_path / "c", **{"receipts.jsonl": rows})
    proc = run("seal", camp, "-o", tmp_path / "x.bundle", "--unsigned", check=2)
    assert "receipts.jsonl, record line 1, field 'phase'" in proc.stderr
    assert "receipts.jsonl, record line 2, field 'e2e_s'" in proc.stderr
    doc = json.loads(run("seal", camp, "-o", tmp_path / "x.bundle", "--unsigned", "--json").stdout)
    assert doc["exit_code"] == 2 and len(doc["problems"]) == 2
    assert not (tmp_path / "x.bundle").exists()


def test_tampered_bundle_exit_1(tmp_path: Path, keypair: Path) -> None:
    camp = write_campaign(tmp_path / "c")
    out = tmp_path / "x.bundle"
    run("seal", camp, "-o", out, "--key", keypair, check=0)
    data = bytearray(out.read_bytes())
    data[len(data) // 2] ^= 0xFF
    out.write_bytes(bytes(data))
    proc = run("verify", out, "--key", f"{keypair}.pub", check=1)
    assert "FAILED" in proc.stdout


def test_missing_files_and_bad_keys_are_clear_errors(tmp_path: Path, keypair: Path) -> None:
    proc = run("verify", tmp_path / "nope.bundle", "--allow-unsigned", check=2)
    assert "nope.bundle' does not exist" in proc.stderr
    (tmp_path / "junk.pub").write_text("nonsense")
    (tmp_path / "empty.bundle").write_bytes(b"")
    proc = run("verify", tmp_path / "empty.bundle", "--key", tmp_path / "junk.pub", check=2)
    assert "junk.pub: not a readable public key" in proc.stderr
    proc = run("seal", tmp_path / "absent", "-o", tmp_path / "x.bundle", "--unsigned", check=2)
    assert "not a directory" in proc.stderr
    proc = run("inspect", tmp_path / "empty.bundle", check=1)
    assert "empty.bundle: not a reprobundle archive" in proc.stderr


def test_help_lists_exit_codes() -> None:
    """The group lists every code; a command lists its own codes only (verify has no 4/5)."""
    out = run("--help", check=0).stdout
    assert "1  integrity failure" in out and "5  replay" in out
    out = run("verify", "--help", check=0).stdout
    assert "1  any integrity problem" in out
    assert "\n    4  " not in out and "\n    5  " not in out
