"""The GitHub Actions composite action (``action.yml``), its steps run as Actions would.

A scratch git repository with a base commit (``main``: one sealed bundle and the
author's public key) and a pull-request commit (``feature``: that bundle resealed
with a loosened gate, and a new bundle). The action's review step is read from
``action.yml`` and run with bash, with the variables Actions sets
(``GITHUB_WORKSPACE``, ``GITHUB_BASE_REF``, ``GITHUB_STEP_SUMMARY``) and its inputs
mapped as ``action.yml`` maps them. No network: the install step is only checked
to install the action's own path.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # PyYAML ships no type hints

from bundler.seal import seal_campaign
from tests.conftest import Keys, make_keys

ROOT = Path(__file__).resolve().parents[1]
FIVE = ROOT / "samples" / "h3-ref2va-5s"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        env={**os.environ, **GIT_ENV},
    )


def action() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def review_step() -> dict[str, Any]:
    steps: list[dict[str, Any]] = action()["runs"]["steps"]
    (step,) = [s for s in steps if "reprobundle.ci_action" in s["run"]]
    return step


def run_step(repo: Path, summary: Path, inputs: dict[str, str], base_ref: str = "main") -> int:
    """The review step as Actions runs it: its env with ``inputs`` substituted, bash, cwd."""
    step = review_step()

    def expand(value: str) -> str:
        return re.sub(
            r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda m: inputs.get(m.group(1), ""), value
        )

    env = {
        **os.environ,
        **{k: expand(str(v)) for k, v in step["env"].items()},
        "GITHUB_WORKSPACE": str(repo),
        "GITHUB_BASE_REF": base_ref,
        "GITHUB_STEP_SUMMARY": str(summary),
        "PYTHONPATH": str(ROOT),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run(
        ["bash", "-c", step["run"]],
        cwd=repo,
        env=env,
        capture_output=True,
        check=False,
        timeout=300,
    )
    assert "Traceback" not in done.stderr.decode(), done.stderr.decode()
    return done.returncode


@pytest.fixture(scope="module")
def author(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return make_keys(tmp_path_factory.mktemp("keys"))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, author: Keys) -> Path:
    """``main``: evidence/run.bundle; ``feature`` (checked out): it resealed, gate loosened,
    and evidence/new.bundle added."""
    tmp = tmp_path_factory.mktemp("repo")
    repo = tmp / "campaign-repo"
    (repo / "evidence").mkdir(parents=True)
    (repo / "keys").mkdir()
    shutil.copy(author.public_path, repo / "keys" / "author.pub")
    seal_campaign(FIVE, repo / "evidence" / "run.bundle", keys=[author.private])
    (repo / "README.md").write_text("campaign\n", encoding="utf-8")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "feature")
    camp = tmp / "edited"
    shutil.copytree(FIVE, camp)
    gates = json.loads((camp / "gates.json").read_text(encoding="utf-8"))
    next(g for g in gates if g["gate_id"] == "lpips-max")["threshold"] = 0.3
    (camp / "gates.json").write_text(json.dumps(gates), encoding="utf-8")
    (repo / "evidence" / "run.bundle").unlink()
    seal_campaign(camp, repo / "evidence" / "run.bundle", keys=[author.private])
    shutil.copy(repo / "evidence" / "run.bundle", repo / "evidence" / "new.bundle")
    (repo / "README.md").write_text("campaign, second head\n", encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "loosen a gate, add a bundle")
    return repo


def test_install_step_installs_the_action_itself() -> None:
    steps = action()["runs"]["steps"]
    assert action()["runs"]["using"] == "composite"
    assert 'pip install --disable-pip-version-check "$GITHUB_ACTION_PATH"' in steps[0]["run"]
    assert (ROOT / "pyproject.toml").is_file()  # what that path installs


def test_review_step_writes_the_summary(repo: Path, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("an earlier step's summary\n", encoding="utf-8")
    code = run_step(repo, summary, {"key": "keys/author.pub"})
    assert code == 0  # both bundles replay CONFIRMED; a difference alone does not fail
    md = summary.read_text(encoding="utf-8")
    # Appended once, after what earlier steps wrote; README.md is not a bundle.
    assert md.startswith(
        "an earlier step's summary\n# reprobundle: 2 bundle(s) changed against `main`\n"
    )
    new_at, run_at = md.index("## `evidence/new.bundle`"), md.index("## `evidence/run.bundle`")
    assert new_at < run_at  # sorted by path
    new_part, run_part = md[new_at:run_at], md[run_at:]
    assert "Replay: **CONFIRMED** (signature verified)" in new_part
    assert "New bundle: the base branch has no version of it to diff against." in new_part
    assert "Replay: **CONFIRMED** (signature verified)" in run_part
    assert "#### bundle diff: DIFFERS" in run_part
    assert "> **GATE LOOSENED** `lpips-max`: `threshold` `0.2` → `0.3`" in run_part
    assert "`main:evidence/run.bundle` → `evidence/run.bundle`" in run_part


def test_a_bundle_that_does_not_verify_fails_the_step(repo: Path, tmp_path: Path) -> None:
    work = tmp_path / "clone"
    shutil.copytree(repo, work)
    data = bytearray((work / "evidence" / "new.bundle").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (work / "evidence" / "new.bundle").write_bytes(bytes(data))
    git(work, "commit", "-q", "-am", "corrupt")
    summary = tmp_path / "summary.md"
    assert run_step(work, summary, {"key": "keys/author.pub"}) == 1
    md = summary.read_text(encoding="utf-8")
    new_part = md[md.index("## `evidence/new.bundle`") : md.index("## `evidence/run.bundle`")]
    assert "**FAILED**" in new_part


def test_usage_errors_exit_2(repo: Path, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    assert run_step(repo, summary, {}) == 2  # no key, no allow-unsigned
    assert run_step(repo, summary, {"key": "keys/author.pub"}, base_ref="") == 2  # not a PR
    assert not summary.exists()  # nothing half-written


def test_a_symbolic_link_named_bundle_is_not_read(repo: Path, tmp_path: Path) -> None:
    # A pull request can add a link that points at the runner's own files.
    secret = tmp_path / "runner-secret.bundle"
    secret.write_bytes(b"not for the pull request")
    work = tmp_path / "clone"
    shutil.copytree(repo, work)
    (work / "evidence" / "link.bundle").symlink_to(secret)
    git(work, "add", "evidence/link.bundle")
    git(work, "commit", "-q", "-m", "a link")
    summary = tmp_path / "summary.md"
    assert run_step(work, summary, {"key": "keys/author.pub"}) == 1
    md = summary.read_text(encoding="utf-8")
    part = md[md.index("## `evidence/link.bundle`") :]
    assert part.splitlines()[2] == "**FAILED**: a symbolic link, or a path through one; not read"
