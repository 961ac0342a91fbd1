"""The pre-commit hooks (``.pre-commit-hooks.yaml``) run by the real pre-commit.

A scratch git repository plays a campaign repository. pre-commit installs this
package from a snapshot of the working tree (one git commit, so every hook shares
the one virtualenv pre-commit builds for it) and runs each hook on a passing and a
failing case: a closing keyword in a summary, a tampered bundle, an unregistered
bundle. ``bundle-lint-text`` runs through ``pre-commit try-repo``; the hooks that
need trust options through a ``.pre-commit-config.yaml`` with ``args:`` (try-repo
takes no args), the way a campaign repository uses them. try-repo builds the hook's
virtualenv in a store of its own each run; ``pre-commit run`` reuses one.

Building the hook's virtualenv installs this package's dependencies with pip: from
the package index in CI, from the wheel mirror pip is configured with here.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from bundler.format.keys import load_public_key
from bundler.format.trust import Trust
from bundler.inventory import check_inventory
from tests.cli_workspace import make_workspace

ROOT = Path(__file__).resolve().parents[1]


def _pre_commit() -> list[str] | None:
    if importlib.util.find_spec("pre_commit") is not None:
        return [sys.executable, "-m", "pre_commit"]
    exe = shutil.which("pre-commit")
    return [exe] if exe else None


PRE_COMMIT = _pre_commit()
needs_pre_commit = pytest.mark.skipif(
    PRE_COMMIT is None,
    reason="pre-commit is not installed (pip install 'reprobundle[dev]' installs it); "
    "the hooks are tested only with the real pre-commit",
)

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **_GIT_ENV, "HOME": str(cwd)}
    done = subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@dataclass(frozen=True)
class HookRepo:
    """A one-commit snapshot of this repository and the pre-commit cache shared by the tests."""

    path: Path
    rev: str
    cache: Path


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> HookRepo:
    """This working tree (tracked and untracked, not ignored) committed once in a fresh repo.

    try-repo on a working tree with uncommitted changes commits them into a new
    shadow repository each run, so each run would build a new virtualenv.
    """
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip(
            "the hooks are installed from a git repository: git or this checkout's .git is missing"
        )
    names = _git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    snap = tmp_path_factory.mktemp("hook-repo")
    for name in filter(None, names):
        src = ROOT / name
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the working tree, not yet committed
        dst = snap / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(src.readlink())
        else:
            shutil.copy2(src, dst)
    _git(snap, "init", "-q")
    _git(snap, "add", "-A")
    _git(snap, "commit", "-q", "-m", "snapshot")
    return HookRepo(
        snap, _git(snap, "rev-parse", "HEAD"), tmp_path_factory.mktemp("pre-commit-home")
    )


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A campaign repository: a signed bundle under ``evidence/`` (registered), a summary."""
    ws = make_workspace(tmp_path / "ws")
    repo = tmp_path / "campaign-repo"
    repo.mkdir()
    shutil.copytree(ws / "evidence", repo / "evidence")
    shutil.copy(ws / "author.pub", repo / "author.pub")
    shutil.copy(ws / "run.bundle", repo / "spare.bundle.keep")
    trust = Trust.keys([load_public_key(repo / "author.pub")])
    assert check_inventory(repo / "evidence", trust=trust, fix=True).ok
    (repo / "summary.md").write_text("Faster start-up, see vLLM-Omni PR 9241.\n", encoding="utf-8")
    _git(repo, "init", "-q")
    return repo


def _pre_commit_run(
    repo: Path, hooks: HookRepo, *args: str, path_first: Path | None = None
) -> subprocess.CompletedProcess[str]:
    assert PRE_COMMIT is not None
    _git(repo, "add", "-A")
    env = {
        **os.environ,
        **_GIT_ENV,
        "PRE_COMMIT_HOME": str(hooks.cache),
        "PRE_COMMIT_COLOR": "never",
        # A language: python hook must run the package pre-commit installed; a system
        # hook (path_first) runs this checkout through the `bundle` script beside it.
        "PYTHONPATH": str(ROOT) if path_first else "",
    }
    if path_first is not None:
        env["PATH"] = f"{path_first}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [*PRE_COMMIT, *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def _config(repo: Path, hooks: HookRepo, body: str) -> None:
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {hooks.path}\n  rev: {hooks.rev}\n  hooks:\n{body}", encoding="utf-8"
    )


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.slow
@needs_pre_commit
def test_lint_text_hook_passes_clean_summary_and_fails_closing_keyword(
    scratch: Path, hook_repo: HookRepo
) -> None:
    ok = _pre_commit_run(
        scratch, hook_repo, "try-repo", str(hook_repo.path), "bundle-lint-text", "--all-files"
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "Passed" in ok.stdout
    (scratch / "notes.md").write_text("Summary.\n\nFixes #12 by caching.\n", encoding="utf-8")
    bad = _pre_commit_run(
        scratch, hook_repo, "try-repo", str(hook_repo.path), "bundle-lint-text", "--all-files"
    )
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "notes.md:3:1: closing keyword 'Fixes' before #12" in bad.stdout
    assert "summary.md" not in bad.stdout


@pytest.mark.slow
@needs_pre_commit
def test_verify_hook_without_trust_options_refuses(scratch: Path, hook_repo: HookRepo) -> None:
    # No args: the hook must refuse, never pass a bundle whose signer nobody checked.
    _config(scratch, hook_repo, "  - id: bundle-verify\n")
    res = _pre_commit_run(scratch, hook_repo, "run", "--all-files")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "exit code: 2" in res.stdout
    assert "give --key or --trusted-keys" in res.stdout


@pytest.mark.slow
@needs_pre_commit
def test_verify_hook_passes_signed_bundles_and_fails_a_tampered_one(
    scratch: Path, hook_repo: HookRepo
) -> None:
    _config(scratch, hook_repo, "  - id: bundle-verify\n    args: [--key, author.pub]\n")
    # two bundles: pre-commit passes both names to one `bundle verify` call
    shutil.copy(scratch / "spare.bundle.keep", scratch / "second.bundle")
    ok = _pre_commit_run(scratch, hook_repo, "run", "--all-files")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "Passed" in ok.stdout
    _flip_byte(scratch / "second.bundle")
    bad = _pre_commit_run(scratch, hook_repo, "run", "--all-files")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "second.bundle: FAILED" in bad.stdout
    assert "evidence/run.bundle: VERIFIED" in bad.stdout


@pytest.mark.slow
@needs_pre_commit
def test_inventory_hook_passes_registered_folder_and_fails_unregistered_bundle(
    scratch: Path, hook_repo: HookRepo
) -> None:
    _config(
        scratch,
        hook_repo,
        "  - id: bundle-inventory\n    args: [evidence, --key, author.pub]\n",
    )
    ok = _pre_commit_run(scratch, hook_repo, "run", "--all-files")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "Passed" in ok.stdout
    shutil.copy(scratch / "spare.bundle.keep", scratch / "evidence" / "extra.bundle")
    bad = _pre_commit_run(scratch, hook_repo, "run", "--all-files")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "INCONSISTENT" in bad.stdout
    assert "unregistered extra.bundle" in bad.stdout
    # A registered bundle whose bytes changed: the register's digest no longer matches.
    (scratch / "evidence" / "extra.bundle").unlink()
    _flip_byte(scratch / "evidence" / "run.bundle")
    changed = _pre_commit_run(scratch, hook_repo, "run", "--all-files")
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert "mismatch    run.bundle: registered" in changed.stdout


@pytest.mark.slow
@needs_pre_commit
def test_system_verify_hook_runs_the_installed_bundle(scratch: Path, hook_repo: HookRepo) -> None:
    bindir = Path(sys.executable).parent
    if not (bindir / "bundle").exists():
        pytest.skip(f"no `bundle` script beside {sys.executable}: reprobundle is not installed")
    _config(scratch, hook_repo, "  - id: bundle-verify-system\n    args: [--key, author.pub]\n")
    ok = _pre_commit_run(scratch, hook_repo, "run", "--all-files", path_first=bindir)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    _flip_byte(scratch / "evidence" / "run.bundle")
    bad = _pre_commit_run(scratch, hook_repo, "run", "--all-files", path_first=bindir)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "evidence/run.bundle: FAILED" in bad.stdout


def test_verify_takes_several_bundles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What bundle-verify relies on: pre-commit passes every staged *.bundle to one call.
    from click.testing import CliRunner

    from reprobundle.cli.main import main

    ws = make_workspace(tmp_path / "ws")
    monkeypatch.chdir(ws)
    both = ["verify", "run.bundle", "evidence/run.bundle", "--key", "author.pub"]
    ok = CliRunner().invoke(main, both)
    assert ok.exit_code == 0, ok.output
    assert ok.output.count(": VERIFIED") == 2
    _flip_byte(ws / "evidence" / "run.bundle")
    bad = CliRunner().invoke(main, both)
    assert bad.exit_code == 1, bad.output
    assert "run.bundle: VERIFIED" in bad.output
    assert "evidence/run.bundle: FAILED" in bad.output
    # --json is one document for one bundle: several are refused, not concatenated.
    js = CliRunner().invoke(main, [*both, "--json"])
    assert js.exit_code == 2, js.output
    assert "single BUNDLE" in js.output
