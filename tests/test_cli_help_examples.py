"""Every example in ``bundle --help`` and each subcommand's help runs as printed.

The examples are extracted from the help text itself (lines ``$ bundle ...``),
so a help example that stops working fails here. They run in a copy of the
example workspace (``tests/cli_workspace.py``); each must exit 0, or the code a
trailing ``# exit N`` states.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from reprobundle.cli.main import main
from tests.cli_workspace import make_workspace

_EXAMPLE = re.compile(r"^\s+\$ bundle (?P<cmd>[^#\n]*?)\s*(?:#(?P<note>.*))?$", re.MULTILINE)
_EXIT = re.compile(r"\bexit (\d+)\b")


def _commands(group: click.Group = main, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = [prefix]
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            out += _commands(cmd, (*prefix, name))
        else:
            out.append((*prefix, name))
    return out


def _examples(cmd: tuple[str, ...]) -> list[tuple[str, int]]:
    text = CliRunner().invoke(main, [*cmd, "--help"]).stdout
    found = []
    for m in _EXAMPLE.finditer(text):
        note = m.group("note") or ""
        code = _EXIT.search(note)
        found.append((m.group("cmd"), int(code.group(1)) if code else 0))
    return found


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("ws"))


def test_every_command_shows_an_example() -> None:
    missing = [" ".join(c) or "bundle" for c in _commands() if not _examples(c)]
    assert not missing
    # The extraction itself: the top-level help has three examples.
    assert len(_examples(())) == 3


@pytest.mark.parametrize("cmd", [c for c in _commands() if _examples(c)], ids=" ".join)
def test_help_examples_run(
    cmd: tuple[str, ...], workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One command's examples run in order in one fresh copy (a later one may use an
    earlier one's output, as a reader following the help would)."""
    ws = tmp_path / "ws"
    shutil.copytree(workspace, ws)
    monkeypatch.chdir(ws)
    for line, expected in _examples(cmd):
        res = CliRunner().invoke(main, shlex.split(line))
        assert res.exit_code == expected, (line, res.stdout, res.stderr)
        assert "Traceback" not in res.stderr
