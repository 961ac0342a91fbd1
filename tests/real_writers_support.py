"""Shared helpers for the tests on the real writers' recordings (``fixtures/real_writers/``).

One way to run the CLI, to read a recorded JSON file and to take a recording through
``import`` -> ``seal`` -> ``replay``, so that each test file states only what it checks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REAL = HERE / "fixtures" / "real_writers"
COMMITS = ("--commit", "base=aaaaaaa", "--commit", "cand=bbbbbbb")


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """Run ``python -m reprobundle.cli ARGS`` in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "reprobundle.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def read_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` (a recorded tool output or ``recording.json``)."""
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def import_runs(
    tmp: Path, tool: str, arms: Iterable[tuple[str, str | Path]], *extra: str, camp: str = "camp"
) -> subprocess.CompletedProcess[str]:
    """``bundle import TOOL -o TMP/CAMP --arm ARM=SRC ...`` with the two test commits."""
    args: list[str | Path] = ["import", tool, "-o", tmp / camp]
    for arm, src in arms:
        args += ["--arm", f"{arm}={src}"]
    return cli(*args, *COMMITS, *extra)


def seal_unsigned(tmp: Path, name: str = "x.bundle") -> Path:
    """Seal ``TMP/camp`` unsigned into ``TMP/NAME``; the bundle's path."""
    bundle = tmp / name
    seal = cli("seal", tmp / "camp", "-o", bundle, "--unsigned")
    assert seal.returncode == 0, seal.stderr
    return bundle


def replay_json(bundle: Path) -> dict[str, Any]:
    """``bundle replay --allow-unsigned --json``: its document plus ``_exit``."""
    rep = cli("replay", bundle, "--allow-unsigned", "--json")
    doc: dict[str, Any] = json.loads(rep.stdout)
    doc["_exit"] = rep.returncode
    return doc


def import_seal_replay(
    tmp: Path,
    tool: str,
    arms: Iterable[tuple[str, str | Path]],
    *extra: str,
    bundle: str = "x.bundle",
) -> dict[str, Any]:
    """Import, seal unsigned and replay ``--json``; the replay document plus ``_exit``,
    ``_camp`` (the imported campaign) and ``_import`` (the import's completed process)."""
    res = import_runs(tmp, tool, arms, *extra)
    assert res.returncode == 0, res.stderr
    doc = replay_json(seal_unsigned(tmp, bundle))
    doc["_camp"] = tmp / "camp"
    doc["_import"] = res
    return doc
