"""The GitHub action on changed paths a pull request chooses: names with line breaks,
backticks, Markdown, quotes, shell syntax, bidi controls and bytes that are not UTF-8.

``git diff -z`` gives the names NUL-separated; each reaches the job summary only through
``markdown_code`` (one line, control and bidi characters dropped) and git only as one
argument. Every copy of the bundle verifies and replays CONFIRMED; no name may inject
Markdown, break the summary's encoding, or end the step in a traceback.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.conftest import Keys
from tests.fuzz.properties import live_markdown, raw_unsafe
from tests.test_ci_action import author, git, repo, run_step

__all__ = ["author", "repo"]  # the fixtures, used by name

NAMES = {
    b"evidence/line\nbreak `x` [a](http:e).bundle": (
        "## ``evidence/line break `x` [a](http:e).bundle``"
    ),
    b"evidence/q\"uo'te $(id) ;rm.bundle": "## `evidence/q\"uo'te $(id) ;rm.bundle`",
    b"evidence/\xe2\x80\xaertl.bundle": "## `evidence/rtl.bundle`",
    b"evidence/not-utf8-\xff.bundle": "## `evidence/not-utf8-.bundle`",
    b"-rf.bundle": "## `-rf.bundle`",
    b":colon.bundle": "## `:colon.bundle`",
}


def test_hostile_changed_paths_are_shown_inert(repo: Path, author: Keys, tmp_path: Path) -> None:
    del author
    work = tmp_path / "clone"
    shutil.copytree(repo, work)
    for name in NAMES:
        # A bytes path: the name need not be UTF-8.
        shutil.copyfile(work / "evidence" / "new.bundle", os.fsencode(work) + b"/" + name)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "hostile names")
    summary = tmp_path / "summary.md"
    # Every bundle verifies and replays CONFIRMED; the resealed one differs (exit stays 0).
    assert run_step(work, summary, {"key": "keys/author.pub"}) == 0
    md = summary.read_text(encoding="utf-8")
    assert raw_unsafe(md) == []
    assert live_markdown(md) == []
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    for heading in NAMES.values():
        assert heading in headings, headings
    # Each added copy is new: verified, replayed, and said to have no base version.
    assert md.count("Replay: **CONFIRMED** (signature verified)") == len(NAMES) + 2
