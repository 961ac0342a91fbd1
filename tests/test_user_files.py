"""Files the user names are opened without blocking, must be regular, and are read bounded.

Issue 19, defect 11: a key file that is a FIFO hung ``bundle verify`` and
``--key /dev/zero`` read until a MemoryError. Every command here runs as a
subprocess with a timeout, so a regression fails the test instead of hanging it.
A FIFO is made with ``os.mkfifo`` and nothing ever writes to it: before the fix
the first ``open`` of it waited for a writer forever.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bundler._internal.userfile import read_user_file
from bundler.errors import KeyFileError, UsageError
from bundler.format.keys import load_public_key
from tests.conftest import Keys

BUNDLE = [sys.executable, "-m", "reprobundle.cli"]
TIMEOUT_S = 60
MIB = 1 << 20

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")


def bundle(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """Run the CLI; a hang is a TimeoutExpired (the child is killed), never a stuck suite."""
    proc = subprocess.run(
        [*BUNDLE, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def refused(proc: subprocess.CompletedProcess[str], path: Path, why: str) -> None:
    """Exit 2, and stderr names the file and says why."""
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert str(path) in proc.stderr, proc.stderr
    assert why in proc.stderr, proc.stderr


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    p = tmp_path / "pipe"
    os.mkfifo(p)
    return p


def sparse(path: Path, size: int) -> Path:
    """A file of ``size`` bytes that takes no disk space."""
    with path.open("wb") as fh:
        fh.truncate(size)
    return path


# --- keys -------------------------------------------------------------------------------


def test_verify_key_fifo_is_refused(sealed: Path, fifo: Path) -> None:
    refused(bundle("verify", sealed, "--key", fifo), fifo, "is a FIFO, not a regular file")


def test_verify_trusted_keys_fifo_is_refused(sealed: Path, fifo: Path) -> None:
    proc = bundle("verify", sealed, "--trusted-keys", fifo)
    refused(proc, fifo, "is a FIFO, not a regular file")


def test_a_trusted_keys_entry_naming_a_fifo_is_refused(
    sealed: Path, fifo: Path, tmp_path: Path
) -> None:
    listing = tmp_path / "trusted.txt"
    listing.write_text(f"# the author\n{fifo.name}\n")
    refused(bundle("verify", sealed, "--trusted-keys", listing), fifo, "is a FIFO")


def test_verify_key_dev_zero_is_refused(sealed: Path) -> None:
    dev_zero = Path("/dev/zero")
    if not dev_zero.exists():
        pytest.skip("no /dev/zero")
    proc = bundle("verify", sealed, "--key", dev_zero)
    refused(proc, dev_zero, "is a character device, not a regular file")


def test_a_trusted_keys_entry_naming_a_directory_is_refused(sealed: Path, tmp_path: Path) -> None:
    (tmp_path / "keys.d").mkdir()
    listing = tmp_path / "trusted.txt"
    listing.write_text("keys.d\n")
    proc = bundle("verify", sealed, "--trusted-keys", listing)
    refused(proc, tmp_path / "keys.d", "is a directory, not a regular file")


def test_an_oversized_public_key_file_is_refused(sealed: Path, keys: Keys, tmp_path: Path) -> None:
    # A real key line, then padding past the 4 MiB bound for key lists.
    big = tmp_path / "big.keys"
    big.write_bytes(keys.public_path.read_bytes() + b"#" * (4 * MIB))
    refused(bundle("verify", sealed, "--key", big), big, "is larger than 4 MiB")


def test_seal_key_fifo_and_oversized_key_are_refused(
    campaign: Path, fifo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.bundle"
    refused(bundle("seal", campaign, "-o", out, "--key", fifo), fifo, "is a FIFO")
    big = sparse(tmp_path / "big.pem", MIB + 1)
    refused(bundle("seal", campaign, "-o", out, "--key", big), big, "is larger than 1 MiB")
    assert not out.exists()


def test_passphrase_file_fifo_is_refused(
    campaign: Path, keys: Keys, fifo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.bundle"
    proc = bundle(
        "seal", campaign, "-o", out, "--key", keys.private_path, "--passphrase-file", fifo
    )
    refused(proc, fifo, "is a FIFO")
    assert not out.exists()
    proc = bundle("keygen", "-o", tmp_path / "k", "--passphrase-file", fifo)
    refused(proc, fifo, "is a FIFO")
    assert not (tmp_path / "k").exists()


# --- documents --------------------------------------------------------------------------


def test_plan_check_fifo_and_oversized_plan_are_refused(fifo: Path, tmp_path: Path) -> None:
    refused(bundle("plan", "check", fifo), fifo, "is a FIFO")
    big = sparse(tmp_path / "plan.json", 64 * MIB + 1)
    refused(bundle("plan", "check", big), big, "is larger than 64 MiB")


def test_plan_check_still_reads_a_plan_and_a_bundle(sealed: Path, tmp_path: Path) -> None:
    plan = Path(__file__).parent / "fixtures" / "plans" / "seed-cache-range-pilot.corrected.json"
    assert bundle("plan", "check", plan, "--json").returncode in (0, 2)
    assert json.loads(bundle("plan", "check", plan, "--json").stdout)["source"] == str(plan)
    proc = bundle("plan", "check", sealed, "--json")
    assert json.loads(proc.stdout)["source"].startswith(f"{sealed}:plans/"), proc.stderr


def test_inventory_json_fifo_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "evidence"
    root.mkdir()
    os.mkfifo(root / "inventory.json")
    proc = bundle("inventory", root, "--allow-unsigned")
    refused(proc, root / "inventory.json", "is a FIFO")


def test_lint_text_fifo_is_refused(fifo: Path) -> None:
    refused(bundle("lint-text", fifo), fifo, "is a FIFO")


def test_import_source_fifo_is_a_located_problem(fifo: Path, tmp_path: Path) -> None:
    out = tmp_path / "imported"
    real = Path(__file__).parent / "fixtures" / "real_writers" / "vllm-0.33.0" / "cand-c2.json"
    proc = bundle(
        "import",
        "vllm",
        *("--arm", f"base={fifo}", "--arm", f"cand={real}"),
        *("--commit", "base=abcdef1", "--commit", "cand=1234567"),
        *("-o", out),
    )
    refused(proc, fifo, "is a FIFO")
    assert not out.exists()


# --- the helper itself ------------------------------------------------------------------


def test_helper_refuses_each_kind_by_name(tmp_path: Path, fifo: Path) -> None:
    cases = {
        fifo: "a FIFO",
        tmp_path: "a directory",
        sparse(tmp_path / "big", 1001): "larger than 1,000 bytes",
    }
    if Path("/dev/zero").exists():
        cases[Path("/dev/zero")] = "a character device"
    for path, why in cases.items():
        with pytest.raises(UsageError) as err:
            read_user_file(path, what="test file", max_bytes=1000)
        assert err.value.exit_code == 2
        assert str(path) in str(err.value) and why in str(err.value)


def test_helper_reads_a_regular_file_up_to_the_cap(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"x" * 1000)
    assert read_user_file(p, what="test file", max_bytes=1000) == b"x" * 1000


def test_key_errors_stay_key_file_errors(fifo: Path) -> None:
    with pytest.raises(KeyFileError, match="is a FIFO"):
        load_public_key(fifo)
