"""The per-command exit-code table of docs/exit-codes.md, checked against the code (issue 24).

Three checks: every command the ``bundle`` group registers has exactly one row;
each command's ``--help`` lists exactly the codes its row gives (a cell ``—``
means "never"); and each situation below, cheap to produce, exits with the code
whose cell names it. The expected codes are the table's, read from the document,
never from the code under test.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from reprobundle.cli.main import main
from tests.cli_workspace import make_workspace

DOC = Path(__file__).resolve().parents[1] / "docs" / "exit-codes.md"
CODES = ("0", "1", "2", "3", "4", "5", "6")


def _table() -> dict[str, dict[str, str]]:
    """``command -> code -> cell`` from the "Per command" table."""
    text = DOC.read_text(encoding="utf-8").split("## Per command", 1)[1]
    rows: dict[str, dict[str, str]] = {}
    header: list[str] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            if header is not None and rows:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if cells[0] == "command":
            header = cells[1:]
            assert tuple(header) == CODES, header
            continue
        if set(cells[0]) <= {"-", " "}:
            continue
        name = cells[0].strip("`")
        assert name not in rows, f"two rows for {name}"
        assert header is not None and len(cells) == len(header) + 1, line
        rows[name] = dict(zip(header, cells[1:], strict=True))
    return rows


TABLE = _table()


def _leaf_commands(group: click.Group = main, prefix: tuple[str, ...] = ()) -> list[str]:
    out: list[str] = []
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            out += _leaf_commands(cmd, (*prefix, name))
        else:
            out.append(" ".join((*prefix, name)))
    return out


def _help_codes(command: str) -> set[str]:
    text = CliRunner().invoke(main, [*command.split(), "--help"]).stdout
    block = text.split("Exit codes", 1)[1]
    return set(re.findall(r"^\s{2,}(\d)\s{2}", block, re.MULTILINE))


def test_every_command_has_one_row() -> None:
    assert sorted(TABLE) == sorted(_leaf_commands())


@pytest.mark.parametrize("command", _leaf_commands())
def test_help_lists_exactly_the_codes_of_its_row(command: str) -> None:
    documented = {code for code, cell in TABLE[command].items() if cell != "—"}
    assert _help_codes(command) == documented


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_workspace(tmp_path_factory.mktemp("ws"))
    runner = CliRunner()
    res = runner.invoke(
        main, ["seal", str(root / "campaign"), "-o", str(root / "unsigned.bundle"), "--unsigned"]
    )
    assert res.exit_code == 0, res.output
    data = bytearray((root / "run.bundle").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (root / "corrupt.bundle").write_bytes(bytes(data))
    (root / "closing.md").write_text("This fixes #123.\n", encoding="utf-8")
    # The init skeleton with its commits filled in: sealed, it claims nothing.
    assert runner.invoke(main, ["init", str(root / "empty")]).exit_code == 0
    doc = json.loads((root / "empty" / "campaign.json").read_text())
    doc["arms"][0]["runtime_commit"] = "a" * 40
    doc["arms"][1]["runtime_commit"] = "b" * 40
    (root / "empty" / "campaign.json").write_text(json.dumps(doc))
    res = runner.invoke(
        main, ["seal", str(root / "empty"), "-o", str(root / "empty.bundle"), "--unsigned"]
    )
    assert res.exit_code == 0, res.output
    return root


MISSING = "nope.bundle"
NO_TRUST_PHRASE = "no `--key`/`--trusted-keys` and no `--allow-unsigned`"

# (command, arguments, code, words its cell for that code must contain)
SITUATIONS: list[tuple[str, list[str], str, str]] = [
    ("keygen", ["-o", "author"], "2", "output exists"),
    ("seal", ["nope", "-o", "x.bundle", "--key", "author"], "2", "campaign folder missing"),
    ("seal", ["campaign", "-o", "run.bundle", "--key", "author"], "2", "output exists"),
    ("verify", [MISSING, "--key", "author.pub"], "2", "bundle path missing"),
    ("verify", ["run.bundle"], "2", NO_TRUST_PHRASE),
    ("verify", ["unsigned.bundle", "--key", "author.pub"], "1", "`unsigned`"),
    ("verify", ["run.bundle", "--key", "auditor.pub"], "1", "a wrong key"),
    ("verify", ["corrupt.bundle", "--key", "author.pub"], "1", "corrupt"),
    ("verify", ["unsigned.bundle", "--allow-unsigned"], "0", "with `--allow-unsigned`"),
    ("sign", [MISSING, "--key", "auditor", "--key-pub", "author.pub"], "2", "bundle path missing"),
    ("sign", ["run.bundle", "--key", "auditor"], "2", "neither `--key-pub`"),
    (
        "sign",
        ["run.bundle", "--key", "auditor", "--key-pub", "auditor.pub", "-o", "s.bundle"],
        "1",
        "none verifies an existing signature",
    ),
    ("sign", ["corrupt.bundle", "--key", "auditor", "--force-adopt"], "1", "corrupt"),
    ("inspect", [MISSING], "2", "bundle path missing"),
    ("inspect", ["corrupt.bundle"], "1", "corrupt"),
    ("lint-text", ["nope.md"], "2", "file missing"),
    ("lint-text", ["closing.md"], "1", "closing keyword"),
    ("inventory", ["nope", "--key", "author.pub"], "2", "folder missing"),
    ("inventory", ["evidence"], "2", NO_TRUST_PHRASE),
    ("init", ["campaign"], "2", "not empty"),
    (
        "import",
        [
            *("vllm", "--arm", "baseline=nope.json", "--arm", "candidate=nope2.json"),
            *("--commit", "baseline=aaaaaaa", "--commit", "candidate=bbbbbbb", "-o", "imp"),
        ],
        "2",
        "source missing",
    ),
    ("export", [MISSING, "out", "--key", "author.pub"], "2", "bundle path missing"),
    ("export", ["run.bundle", "out"], "2", NO_TRUST_PHRASE),
    ("export", ["run.bundle", "campaign", "--key", "author.pub"], "2", "folder exists"),
    ("export", ["unsigned.bundle", "out", "--key", "author.pub"], "1", "no trusted key verified"),
    ("export", ["corrupt.bundle", "out", "--key", "author.pub"], "1", "corrupt"),
    ("replay", [MISSING, "--key", "author.pub"], "2", "bundle path missing"),
    ("replay", ["run.bundle"], "2", NO_TRUST_PHRASE),
    ("replay", ["unsigned.bundle", "--key", "author.pub"], "1", "unsigned or untrusted"),
    ("replay", ["corrupt.bundle", "--allow-unsigned"], "1", "corrupt"),
    ("replay", ["empty.bundle", "--allow-unsigned"], "5", "NOT EVIDENCED"),
    ("report", [MISSING, "--key", "author.pub", "-o", "r.md"], "2", "as `replay`"),
    ("report", ["run.bundle", "--key", "author.pub", "-o", "campaign"], "2", "names a folder"),
    ("report", ["run.bundle", "-o", "r.md"], "2", "no trust option"),
    ("diff", [MISSING, "run.bundle", "--key", "author.pub"], "2", "bundle path missing"),
    ("diff", ["run.bundle", "run.bundle"], "2", NO_TRUST_PHRASE),
    ("diff", ["run.bundle", "corrupt.bundle", "--key", "author.pub"], "1", "corrupt"),
    (
        "diff",
        ["run.bundle", "unsigned.bundle", "--key", "author.pub"],
        "1",
        "unsigned or untrusted",
    ),
    ("diff", ["run.bundle", "run.bundle", "--key", "author.pub"], "0", "identical content"),
    ("diff", ["run.bundle", "empty.bundle", "--allow-unsigned"], "6", "the content differs"),
    ("plan check", ["nope.json"], "2", "plan or bundle path missing"),
    ("plan check", ["corrupt.bundle"], "1", "corrupt"),
    ("run", ["nope.json", "-o", "rr"], "2", "plan path missing"),
    ("rerun", [MISSING, "--key", "author.pub", "-o", "rr"], "2", "bundle path missing"),
    ("rerun", ["run.bundle", "-o", "rr", "--launch", "--dry-run"], "2", "no trust option"),
    (
        "rerun",
        ["corrupt.bundle", "--key", "author.pub", "-o", "rr", "--launch", "--dry-run"],
        "1",
        "corrupt",
    ),
]


@pytest.mark.parametrize(
    "situation", SITUATIONS, ids=[f"{c} {a[0]} -> {k}" for c, a, k, _ in SITUATIONS]
)
def test_each_situation_exits_with_the_code_its_cell_names(
    situation: tuple[str, list[str], str, str],
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    command, args, code, phrase = situation
    assert phrase in TABLE[command][code], (command, code, phrase)
    ws = tmp_path / "ws"
    shutil.copytree(workspace, ws)
    monkeypatch.chdir(ws)
    res = CliRunner().invoke(main, [*command.split(), *args])
    assert res.exit_code == int(code), (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr


def test_every_command_is_tried_with_a_missing_file() -> None:
    with_file_argument = {
        name
        for name in _leaf_commands()
        if name not in ("keygen", "init")  # they take no file that must exist
    }
    tried = {c for c, _, code, phrase in SITUATIONS if code == "2" and "missing" in phrase}
    tried |= {c for c, a, code, _ in SITUATIONS if code == "2" and MISSING in a}
    assert with_file_argument <= tried, with_file_argument - tried
