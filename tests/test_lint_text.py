"""Closing syntax in summary text is caught; honest citations pass."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bundler.lint_text import find_closing_references


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("This fixes #9241 in the runner", "#9241"),
        ("Closes #12", "#12"),
        ("resolved #3", "#3"),
        ("Fix: #44", "#44"),
        ("fixed vllm-project/vllm-omni#9698 too", "vllm-project/vllm-omni#9698"),
        ("resolves https://github.com/o/r/pull/77", "https://github.com/o/r/pull/77"),
        ("CLOSE #1", "#1"),
    ],
)
def test_closing_references_are_found(text: str, ref: str) -> None:
    found = find_closing_references(text)
    assert [f.reference for f in found] == [ref]


@pytest.mark.parametrize(
    "text",
    [
        "multi-video correction (vLLM-Omni PR 9241)",
        "Refs #293",
        "All downstream engine changes are consolidated in vLLM-Omni #9698.",
        "the fix in #9241 was reviewed",
        "fixes the audio coverage check",
        "closest gate margin 0.813411",
    ],
)
def test_honest_citations_pass(text: str) -> None:
    assert find_closing_references(text) == []


def test_line_and_column_are_reported() -> None:
    text = "Five-second delivery\n\nINT8/RainFusion row: see fixes #9241 upstream\n"
    (f,) = find_closing_references(text)
    assert (f.line, f.column, f.keyword, f.text) == (3, 26, "fixes", "fixes #9241")


def test_cli_names_the_line_and_exits_1(tmp_path: Path) -> None:
    body = tmp_path / "pr-body.md"
    body.write_text("Summary\n\n| INT8 | fixes #9241 |\n")
    proc = subprocess.run(
        [sys.executable, "-m", "reprobundle.cli", "lint-text", str(body)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert f"{body}:3:" in proc.stdout
    body.write_text("| INT8 | multi-video correction (vLLM-Omni PR 9241) |\n")
    proc = subprocess.run(
        [sys.executable, "-m", "reprobundle.cli", "lint-text", str(body)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0
