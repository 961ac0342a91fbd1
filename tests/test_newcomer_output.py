"""What a newcomer sees first (issue 24, item 10): seal's plan warning, env.sh's progress.

The demo's first seal used to print a ~900-character plan-check warning; by
default it is one line naming the command that explains it, and ``-v`` keeps the
whole text. ``scripts/env.sh`` runs pip through ``scripts/heartbeat.sh``, which
prints a line every interval instead of minutes of silence.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "h3-ref2va-5s"
BUNDLE = [sys.executable, "-m", "reprobundle.cli"]


def _seal(tmp_path: Path, *flags: str) -> list[str]:
    proc = subprocess.run(
        [
            *BUNDLE,
            "seal",
            str(SAMPLE),
            "-o",
            str(tmp_path / "s.bundle"),
            "--unsigned",
            "--force",
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stderr.splitlines() if "plan check" in line]


def test_seal_prints_the_samples_plan_warning_in_one_line(tmp_path: Path) -> None:
    # The sample's plan has three warnings (samples/h3-ref2va-5s/README.md, "Plan"; the
    # H3 canvas and the implicit task from the vLLM-Omni checks): one line names them all.
    (line,) = _seal(tmp_path)
    # About 220 characters with the demo's relative path (the absolute one here varies).
    assert len(line.replace(str(SAMPLE), "samples/h3-ref2va-5s")) <= 240, line
    assert "[worst-case-exceeds-reservation, h3-canvas, task-implicit]" in line
    assert f"bundle plan check {SAMPLE / 'plans' / 'final-5s.json'}" in line
    full = _seal(tmp_path, "-v")  # -v: every finding whole, one line each, as before
    assert len(full) == 3
    assert any(len(x) > 500 and "soft TERM" in x for x in full), full


def test_heartbeat_reports_progress_and_keeps_the_exit_status(tmp_path: Path) -> None:
    script = (
        ". scripts/heartbeat.sh; "
        f"with_heartbeat 1 {tmp_path / 'log'} bash -c 'echo Collecting torch; sleep 3; exit 7'"
    )
    proc = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert proc.returncode == 7
    beats = [x for x in proc.stderr.splitlines() if "still installing" in x]
    assert len(beats) >= 2 and all("Collecting torch" in x for x in beats), proc.stderr
    assert "failed (exit 7)" in proc.stderr
    ok = subprocess.run(
        ["bash", "-c", f". scripts/heartbeat.sh; with_heartbeat 5 {tmp_path / 'l2'} true"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert ok.returncode == 0 and ok.stderr == ""


def test_env_sh_runs_pip_through_the_heartbeat() -> None:
    text = (ROOT / "scripts" / "env.sh").read_text(encoding="utf-8")
    install = [x for x in text.splitlines() if "pip install" in x and "-e" in x]
    assert install and "--quiet" not in install[0]
    assert "with_heartbeat" in text
