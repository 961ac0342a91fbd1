"""Concurrent seals and killed writers (issue 12, defect 6).

Two seals to one ``-o`` without ``--force``: exactly one wins, the other says
the file exists, and the SHA-256 the winner reports is the file on disk. A
writer killed with SIGKILL leaves a partial file named as ours, which the next
write into that directory removes.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import bundler.seal
from bundler._internal.atomic import (
    PARTIAL_MARK,
    STALE_AFTER_S,
    atomic_output,
    atomic_write_bytes,
    partial_name,
    remove_stale_partials,
)
from bundler.errors import UsageError
from bundler.format.container import write_container
from bundler.seal import SealResult, seal_campaign
from tests.campaign_builder import write_campaign

BUNDLE = [sys.executable, "-m", "reprobundle.cli"]


def _partials(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if PARTIAL_MARK in p.name)


def _two_campaigns(tmp_path: Path) -> list[Path]:
    """Two campaigns that seal to different bytes (their titles differ)."""
    out = []
    for name in ("one", "two"):
        camp = write_campaign(tmp_path / name)
        doc = json.loads((camp / "campaign.json").read_text())
        doc["title"] = f"campaign {name}"
        (camp / "campaign.json").write_text(json.dumps(doc))
        out.append(camp)
    return out


# --- the atomic write itself -----------------------------------------------------------------


def test_create_only_never_replaces(tmp_path: Path) -> None:
    target = tmp_path / "x.bundle"
    atomic_write_bytes(target, b"first", replace=False)
    with pytest.raises(UsageError, match="already exists"):
        atomic_write_bytes(target, b"second", replace=False)
    assert target.read_bytes() == b"first"
    atomic_write_bytes(target, b"forced", replace=True)
    assert target.read_bytes() == b"forced"
    assert _partials(tmp_path) == []


def test_create_only_does_not_write_through_a_dangling_link(tmp_path: Path) -> None:
    target = tmp_path / "x.bundle"
    target.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UsageError, match="already exists"):
        atomic_write_bytes(target, b"data", replace=False)
    assert not (tmp_path / "elsewhere").exists()


def test_failed_block_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "x.bundle"

    def fail_midway() -> None:
        with atomic_output(target, replace=False) as fh:
            fh.write(b"half")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        fail_midway()
    assert list(tmp_path.iterdir()) == []


def test_partial_file_is_named_as_ours_in_the_target_folder(tmp_path: Path) -> None:
    target = tmp_path / "x.bundle"
    with atomic_output(target, replace=False) as fh:
        fh.write(b"data")
        (partial,) = _partials(tmp_path)
        assert partial.name.startswith(f".x.bundle{PARTIAL_MARK}")
        assert f"-{os.getpid()}-" in partial.name
        assert oct(partial.stat().st_mode & 0o777) == "0o600"
    assert _partials(tmp_path) == []
    assert oct(target.stat().st_mode & 0o777) == "0o644"


def test_racing_writers_exactly_one_wins(tmp_path: Path) -> None:
    target = tmp_path / "x.bundle"
    n = 6
    barrier = threading.Barrier(n)
    results: list[str] = [""] * n

    def write(i: int) -> None:
        try:
            with atomic_output(target, replace=False) as fh:
                fh.write(f"writer {i}".encode() * 1000)
                barrier.wait(timeout=30)  # every writer has its partial file open
        except UsageError:
            results[i] = "exists"
        else:
            results[i] = "won"

    threads = [threading.Thread(target=write, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["exists"] * (n - 1) + ["won"]
    winner = results.index("won")
    assert target.read_bytes() == f"writer {winner}".encode() * 1000
    assert _partials(tmp_path) == []


# --- seal: threads, then processes -----------------------------------------------------------


def test_concurrent_seals_exactly_one_wins_and_reports_the_file_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    campaigns = _two_campaigns(tmp_path)
    target = tmp_path / "out.bundle"
    barrier = threading.Barrier(2)
    real_write = write_container

    def write_after_both_checked(fh: Any, members: Any) -> None:
        # Both seals have passed the "output exists?" check and are writing.
        barrier.wait(timeout=60)
        real_write(fh, members)

    monkeypatch.setattr(bundler.seal, "write_container", write_after_both_checked)
    results: list[SealResult | Exception | None] = [None, None]

    def seal(i: int) -> None:
        try:
            results[i] = seal_campaign(campaigns[i], target)
        except Exception as exc:  # collected and asserted below
            results[i] = exc

    threads = [threading.Thread(target=seal, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [r for r in results if isinstance(r, SealResult)]
    lost = [r for r in results if not isinstance(r, SealResult)]
    assert len(won) == 1, results
    assert isinstance(lost[0], UsageError), lost
    assert "already exists" in str(lost[0])
    assert won[0].bundle_sha256 == hashlib.sha256(target.read_bytes()).hexdigest()
    assert _partials(tmp_path) == []


def test_concurrent_seal_processes_one_wins(tmp_path: Path) -> None:
    campaigns = _two_campaigns(tmp_path)
    target = tmp_path / "out.bundle"
    procs = [
        subprocess.Popen(
            [*BUNDLE, "seal", str(c), "-o", str(target), "--unsigned", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for c in campaigns
    ]
    outcomes = [(p.wait(timeout=180), *p.communicate()) for p in procs]
    assert all("Traceback" not in err for _, _, err in outcomes), outcomes
    codes = sorted(code for code, _, _ in outcomes)
    assert codes == [0, 2], outcomes
    (out,) = [o for code, o, _ in outcomes if code == 0]
    (err,) = [e for code, _, e in outcomes if code == 2]
    assert "already exists (pass --force to replace it)" in err
    reported = json.loads(out)["bundle_sha256"]
    assert reported == hashlib.sha256(target.read_bytes()).hexdigest()
    assert _partials(tmp_path) == []


# --- killed writers ------------------------------------------------------------------------

_KILLED_SEAL = """
import os, signal, sys
import bundler.seal
from pathlib import Path

def write_then_die(fh, members):
    fh.write(b"half a bundle" * 1000)
    fh.flush()
    os.kill(os.getpid(), signal.SIGKILL)

bundler.seal.write_container = write_then_die
bundler.seal.seal_campaign(Path(sys.argv[1]), Path(sys.argv[2]))
"""


def test_seal_killed_mid_write_leaves_a_partial_the_next_seal_removes(tmp_path: Path) -> None:
    camp = write_campaign(tmp_path / "c")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "x.bundle"
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED_SEAL, str(camp), str(target)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not target.exists()  # never a half bundle under the real name
    (partial,) = _partials(out_dir)
    assert partial.name.startswith(f".x.bundle{PARTIAL_MARK}")
    assert partial.stat().st_size > 0
    # The next seal into that folder (here to another name) removes it.
    ok = subprocess.run(
        [*BUNDLE, "seal", str(camp), "-o", str(out_dir / "y.bundle"), "--unsigned"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert ok.returncode == 0, ok.stderr
    assert _partials(out_dir) == []
    assert sorted(p.name for p in out_dir.iterdir()) == ["y.bundle"]


def test_stale_partials_by_dead_pid_or_age_live_ones_kept(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead_pid = int(dead.stdout)
    live = tmp_path / partial_name("a.bundle", os.getpid())
    old_live = tmp_path / partial_name("b.bundle", os.getpid())
    of_dead = tmp_path / partial_name("c.bundle", dead_pid)
    # Another host's pid means nothing here: kept until it is old.
    other_host = tmp_path / partial_name("e.bundle", dead_pid, host="other-node-7")
    old_other_host = tmp_path / partial_name("f.bundle", dead_pid, host="other-node-7")
    not_ours = tmp_path / ".c.bundle.abc123.partial"  # another tool's naming: untouched
    look_alike = tmp_path / f".d.bundle{PARTIAL_MARK}{dead_pid}-nothex"
    for p in (live, old_live, of_dead, other_host, old_other_host, not_ours, look_alike):
        p.write_bytes(b"x")
    old = time.time() - STALE_AFTER_S - 60
    for p in (old_live, old_other_host):
        os.utime(p, (old, old))
    removed = remove_stale_partials(tmp_path)
    assert sorted(removed) == sorted([old_live, of_dead, old_other_host])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [live.name, other_host.name, not_ours.name, look_alike.name]
    )


def test_partial_name_stays_within_name_max(tmp_path: Path) -> None:
    long_name = "é" * 120 + ".bundle"  # 247 bytes in UTF-8
    target = tmp_path / long_name
    atomic_write_bytes(target, b"data", replace=False)
    assert target.read_bytes() == b"data"
    assert len(os.fsencode(partial_name(long_name))) < 255
