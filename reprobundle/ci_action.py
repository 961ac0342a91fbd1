"""The GitHub Actions step (``action.yml``): verify, replay and diff the bundles a PR changes.

Run as ``python -m reprobundle.ci_action`` in the checked-out repository, with the
variables Actions sets (``GITHUB_WORKSPACE``, ``GITHUB_BASE_REF``,
``GITHUB_STEP_SUMMARY``) and the action's inputs (``INPUT_KEY``,
``INPUT_TRUSTED_KEYS``, ``INPUT_ALLOW_UNSIGNED``, ``INPUT_BASE``). For every
``*.bundle`` the pull request adds or changes (``git diff --name-only base...HEAD``)
it verifies and replays the new version and, when the base branch has the file too,
diffs the two (``git show base:path``). The Markdown goes to the step summary, once,
at the end; the exit status is the worst replay code (1 a bundle does not verify, 4
contradicted, 5 unverified), 0 when every changed bundle is confirmed. A difference
alone is what a pull request is for: it is shown, not failed. Spec: docs/diff.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from bundler.errors import (
    EXIT_CLAIM_CONTRADICTED,
    EXIT_COULD_NOT_RUN,
    EXIT_INTEGRITY,
    EXIT_OK,
    EXIT_UNVERIFIABLE,
    EXIT_USAGE,
    BundleError,
    UsageError,
)
from bundler.format.keys import load_trusted_keys
from bundler.format.trust import Trust
from bundler.verified import VerifiedBundle, open_verified
from replay.api import replay
from replay.diff import diff_bundles
from replay.diff.render import render_markdown
from replay.report.escape import markdown_code, markdown_text

__all__ = ["ActionConfig", "changed_bundles", "main", "run_action"]

# Worse first: what the action exits with when several bundles disagree.
_SEVERITY = (
    EXIT_INTEGRITY,
    EXIT_COULD_NOT_RUN,
    EXIT_CLAIM_CONTRADICTED,
    EXIT_UNVERIFIABLE,
    EXIT_OK,
)


@dataclass(frozen=True)
class ActionConfig:
    """What the action reads from its environment."""

    workspace: Path
    base: str
    summary: Path | None
    trust: Trust

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ActionConfig:
        """The configuration Actions gives through ``env``.

        Raises:
            UsageError: no base revision (not a pull request, and no ``INPUT_BASE``), or
                no key and no ``INPUT_ALLOW_UNSIGNED``; a key file cannot be read.
        """
        given = env.get("GITHUB_WORKSPACE")
        workspace = Path(given) if given else Path.cwd()
        base = env.get("INPUT_BASE") or ""
        if not base:
            ref = env.get("GITHUB_BASE_REF") or ""
            if not ref:
                raise UsageError(
                    "no base revision: GITHUB_BASE_REF is unset (not a pull_request event) "
                    "and the action's base input is empty"
                )
            # actions/checkout fetches the base branch as origin/<name> (fetch-depth: 0).
            remote = f"origin/{ref}"
            base = remote if _git_ok(workspace, "rev-parse", "--verify", "-q", remote) else ref
        keys = [workspace / p for p in (env.get("INPUT_KEY") or "").split() if p]
        listed = env.get("INPUT_TRUSTED_KEYS") or ""
        allow = (env.get("INPUT_ALLOW_UNSIGNED") or "").strip().lower() == "true"
        trust = Trust.keys(
            load_trusted_keys(keys, workspace / listed if listed else None),
            allow_unsigned=allow,
        )
        if trust.refuses_all:
            raise UsageError(
                "give the action's key or trusted-keys input to check signatures, "
                "or allow-unsigned: true to check integrity alone"
            )
        summary = env.get("GITHUB_STEP_SUMMARY")
        return cls(workspace, base, Path(summary) if summary else None, trust)


def _git(workspace: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", "-C", str(workspace), *args], check=True, capture_output=True
    ).stdout


def _git_ok(workspace: Path, *args: str) -> bool:
    done = subprocess.run(["git", "-C", str(workspace), *args], capture_output=True, check=False)
    return done.returncode == 0


def changed_bundles(workspace: Path, base: str) -> list[str]:
    """The ``*.bundle`` paths added or modified between ``base`` and HEAD (renames as adds)."""
    out = _git(
        workspace,
        "diff",
        "--name-only",
        "-z",
        "--no-renames",
        "--diff-filter=AM",
        f"{base}...HEAD",
        "--",
        "*.bundle",
    )
    return sorted(p for p in out.decode("utf-8", "surrogateescape").split("\0") if p)


def _not_a_plain_file(workspace: Path, path: str) -> str | None:
    """Why ``path`` is not read: a pull request may add a symbolic link named ``x.bundle``
    that points at the runner's own files, or a FIFO that blocks the reader."""
    full = workspace / path
    root = workspace.resolve()
    if full.is_symlink() or not full.resolve().is_relative_to(root):
        return "a symbolic link, or a path through one"
    if not full.is_file():
        return "not a regular file"
    return None


def _section(cfg: ActionConfig, path: str, tmp: Path) -> tuple[int, list[str]]:
    """One bundle's Markdown, and its exit code (verify and replay)."""
    lines = [f"## {markdown_code(path)}", ""]
    refusal = _not_a_plain_file(cfg.workspace, path)
    if refusal is not None:
        return EXIT_INTEGRITY, [*lines, f"**FAILED**: {refusal}; not read", ""]
    try:
        new = open_verified(cfg.workspace / path, trust=cfg.trust)
        outcome = replay(new)
    except (BundleError, OSError) as exc:
        code = exc.exit_code if isinstance(exc, BundleError) else EXIT_INTEGRITY
        message = exc.message if isinstance(exc, BundleError) else str(exc)
        lines.append(f"**FAILED**: {markdown_text(message)[0]}")
        lines += [f"- {markdown_text(str(p))[0]}" for p in getattr(exc, "problems", [])[:20]]
        return (code if code in _SEVERITY else EXIT_INTEGRITY), [*lines, ""]
    lines.append(
        f"Replay: **{outcome.outcome}** (signature {markdown_text(str(new.signature_status))[0]})"
    )
    lines.append("")
    lines += _diff_lines(cfg, path, new, tmp)
    return int(outcome.exit_code), lines


def _diff_lines(cfg: ActionConfig, path: str, new: VerifiedBundle, tmp: Path) -> list[str]:
    if not _git_ok(cfg.workspace, "cat-file", "-e", f"{cfg.base}:{path}"):
        return ["New bundle: the base branch has no version of it to diff against.", ""]
    old_path = tmp / "base.bundle"
    old_path.write_bytes(_git(cfg.workspace, "show", f"{cfg.base}:{path}"))
    try:
        old = open_verified(old_path, trust=cfg.trust)
        diff = diff_bundles(old, new)
    except BundleError as exc:
        return [
            f"No diff: the base branch's version was refused: {markdown_text(exc.message)[0]}",
            "",
        ]
    # Named as the reviewer knows them, not by this runner's temporary paths.
    diff = replace(
        diff, old=replace(diff.old, path=f"{cfg.base}:{path}"), new=replace(diff.new, path=path)
    )
    # Headings one level below the bundle's own.
    return ["#" + render_markdown(diff), ""]


def run_action(cfg: ActionConfig) -> tuple[int, str]:
    """Verify, replay and diff every changed bundle; the worst exit code and the Markdown."""
    bundles = changed_bundles(cfg.workspace, cfg.base)
    out = [f"# reprobundle: {len(bundles)} bundle(s) changed against {markdown_code(cfg.base)}", ""]
    codes = [EXIT_OK]
    with tempfile.TemporaryDirectory(prefix="reprobundle-action-") as tmp:
        for path in bundles:
            code, lines = _section(cfg, path, Path(tmp))
            codes.append(code)
            out += lines
    worst = min(codes, key=lambda c: _SEVERITY.index(c) if c in _SEVERITY else 0)
    return worst, "\n".join(out) + "\n"


def main(env: Mapping[str, str] | None = None) -> int:
    """Run the action with ``env`` (default: the process environment); the exit status."""
    env = os.environ if env is None else env
    try:
        cfg = ActionConfig.from_env(env)
        code, markdown = run_action(cfg)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except subprocess.CalledProcessError as exc:
        err = exc.stderr.decode("utf-8", "replace").strip() if exc.stderr else ""
        print(f"error: git failed: {err or exc}", file=sys.stderr)
        return EXIT_USAGE
    if cfg.summary is not None:
        # The step summary is one file Actions shares between steps: append, in one write.
        with cfg.summary.open("a", encoding="utf-8") as fh:
            fh.write(markdown)
    else:
        sys.stdout.write(markdown)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
