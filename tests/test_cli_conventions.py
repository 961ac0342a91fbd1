"""CLI conventions (issue 13): --json everywhere, usage errors as JSON, aliases, -q/-v, colour.

Every command runs in-process through click's CliRunner on the example workspace
(``tests/cli_workspace.py``); stdout alone is parsed, as a script would.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from reprobundle.cli.main import main
from tests.cli_workspace import make_workspace

# One successful --json invocation per command, with the exit code it must give.
SUCCESS: dict[str, tuple[list[str], int]] = {
    "init": (["init", "new-campaign"], 0),
    "import": (
        [
            "import",
            "vllm",
            "--arm",
            "baseline=base.json",
            "--arm",
            "candidate=cand.json",
            "--commit",
            "baseline=aaaaaaa",
            "--commit",
            "candidate=bbbbbbb",
            "-o",
            "imported",
        ],
        0,
    ),
    "export": (["export", "run.bundle", "exported", "--key", "author.pub"], 0),
    "keygen": (["keygen", "-o", "newkey"], 0),
    "seal": (["seal", "campaign", "-o", "s.bundle", "--key", "author"], 0),
    "verify": (["verify", "run.bundle", "--key", "author.pub"], 0),
    "diff": (["diff", "run.bundle", "evidence/run.bundle", "--key", "author.pub"], 0),
    "sign": (["sign", "run.bundle", "--key", "auditor", "--key-pub", "author.pub", "-o", "co"], 0),
    "inspect": (["inspect", "run.bundle", "--trusted-keys", "trusted.txt"], 0),
    "lint-text": (["lint-text", "summary.md"], 0),
    "inventory": (["inventory", "evidence", "--key", "author.pub", "--fix"], 0),
    "replay": (["replay", "run.bundle", "--key", "author.pub"], 0),
    "report": (["report", "run.bundle", "--key", "author.pub", "-o", "r.md", "--format", "md"], 0),
    "plan check": (["plan", "check", "run.bundle"], 0),
    "rerun": (
        ["rerun", "run.bundle", "--key", "author.pub", "-o", "rr", "--launch", "--dry-run"],
        0,
    ),
    "run": (
        [
            "run",
            "campaign/plans/reference-ab.json",
            "-o",
            "first-run",
            "--arm",
            "baseline=c7f56f0",
            "--arm",
            "candidate=098b51f",
            "--campaign-id",
            "first",
            "--launch",
            "--inputs",
            "campaign",
            "--dry-run",
        ],
        0,
    ),
}


def _leaf_commands(
    group: click.Group = main, prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            out += _leaf_commands(cmd, (*prefix, name))
        else:
            out.append((*prefix, name))
    return out


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("ws"))


def _leaf(cmd: tuple[str, ...]) -> click.Command:
    node: click.Command = main
    for part in cmd:
        assert isinstance(node, click.Group)
        node = node.commands[part]
    return node


def invoke(ws: Path, args: list[str], monkeypatch: pytest.MonkeyPatch) -> click.testing.Result:
    monkeypatch.chdir(ws)
    return CliRunner().invoke(main, args)


def test_every_command_has_a_success_case() -> None:
    mine = {" ".join(c) for c in _leaf_commands()}
    assert mine <= set(SUCCESS), mine - set(SUCCESS)


@pytest.mark.parametrize("name", sorted(SUCCESS))
def test_json_success_parses(
    name: str, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    ws = tmp_path / "ws"
    shutil.copytree(workspace, ws)
    args, code = SUCCESS[name]
    res = invoke(ws, [*args, "--json"], monkeypatch)
    assert res.exit_code == code, (res.stdout, res.stderr)
    doc = json.loads(res.stdout)
    assert isinstance(doc, dict) and doc


@pytest.mark.parametrize("cmd", _leaf_commands(), ids=" ".join)
def test_usage_errors_are_json_with_exit_2(
    cmd: tuple[str, ...], workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad option, and a missing file where the command takes one: JSON on stdout, exit 2."""
    res = invoke(workspace, [*cmd, "--json", "--no-such-option"], monkeypatch)
    assert res.exit_code == 2, res.stdout
    doc = json.loads(res.stdout)
    assert doc["ok"] is False and doc["exit_code"] == 2
    assert "--no-such-option" in doc["error"]
    assert "--no-such-option" in res.stderr  # the message stays on stderr too
    leaf = _leaf(cmd)
    file_args = [
        p
        for p in leaf.params
        if isinstance(p, click.Argument)
        and isinstance(p.type, click.Path)
        and p.type.exists
        and p.type.dir_okay is not True  # a folder argument is tested below
    ]
    if file_args:
        res = invoke(workspace, [*cmd, "no-such-file.bundle", "--json"], monkeypatch)
        assert res.exit_code == 2, res.stdout
        doc = json.loads(res.stdout)
        assert "no-such-file.bundle" in doc["error"]
        assert doc["problems"][0]["field"] is not None


def test_bad_value_is_json(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    res = invoke(workspace, ["verify", "run.bundle", "--jobs", "0", "--json"], monkeypatch)
    assert res.exit_code == 2
    doc = json.loads(res.stdout)
    assert doc["problems"][0]["field"] == "--jobs"
    res = invoke(workspace, ["no-such-command", "--json"], monkeypatch)
    assert res.exit_code == 2 and json.loads(res.stdout)["ok"] is False


def test_without_json_usage_errors_stay_text(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = invoke(workspace, ["verify", "--no-such-option"], monkeypatch)
    assert res.exit_code == 2 and res.stdout == ""
    assert "No such option" in res.stderr


def test_the_0_1_0_spellings_are_gone_and_the_current_ones_work(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The hidden aliases of the untagged 0.1.0 (issue 20) are refused like any unknown
    # option (exit 2, naming it); --media and -o do what they did.
    media = tmp_path / "media"
    media.mkdir()
    cases = (
        (["seal", "campaign", "-o", str(tmp_path / "a.bundle"), "--unsigned"], "--artifacts"),
        (["verify", "run.bundle", "--key", "author.pub"], "--artifacts"),
    )
    for args, old in cases:
        res = invoke(workspace, [*args, old, str(media)], monkeypatch)
        assert res.exit_code == 2, (args, res.output)
        assert old in res.output
        res = invoke(workspace, [*args, "--media", str(media)], monkeypatch)
        assert res.exit_code == 0, (args, res.output)
    rerun = ["rerun", "run.bundle", "--key", "author.pub", "--launch", "--dry-run"]
    res = invoke(workspace, [*rerun, "--out", str(tmp_path / "r")], monkeypatch)
    assert res.exit_code == 2 and "--out" in res.output
    res = invoke(workspace, [*rerun, "-o", str(tmp_path / "r")], monkeypatch)
    assert res.exit_code == 0, res.output


def test_inspect_takes_the_trust_options(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    res = invoke(
        workspace, ["inspect", "run.bundle", "--trusted-keys", "trusted.txt", "--json"], monkeypatch
    )
    assert json.loads(res.stdout)["signature_status"] == "verified"
    res = invoke(workspace, ["inspect", "run.bundle", "--json"], monkeypatch)
    assert json.loads(res.stdout)["signature_status"] == "unchecked"


def test_every_option_has_help(monkeypatch: pytest.MonkeyPatch) -> None:
    for cmd in _leaf_commands():
        leaf = _leaf(cmd)
        for p in leaf.params:
            if isinstance(p, click.Option) and not p.hidden:
                assert p.help, (cmd, p.opts)


def test_one_module_per_command() -> None:
    # main.py only registers; each top-level command (a group with its subcommands)
    # lives in a module of its own, named after it.
    modules = {}
    for name, cmd in main.commands.items():
        assert cmd.callback is not None
        modules[name] = cmd.callback.__module__
        assert modules[name] == f"reprobundle.cli.{name.replace('-', '_')}_cmd", name
    assert len(set(modules.values())) == len(modules)


def test_quiet_prints_the_verdict_line_only(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = invoke(workspace, ["verify", "run.bundle", "--key", "author.pub", "-q"], monkeypatch)
    assert res.exit_code == 0
    assert res.stdout.splitlines() == ["run.bundle: VERIFIED"]
    full = invoke(workspace, ["verify", "run.bundle", "--key", "author.pub", "-v"], monkeypatch)
    default = invoke(workspace, ["verify", "run.bundle", "--key", "author.pub"], monkeypatch)
    # -v lists each member the manifest lists (as --json reports them); the default, none.
    listed = json.loads(
        invoke(
            workspace, ["verify", "run.bundle", "--key", "author.pub", "--json"], monkeypatch
        ).stdout
    )["members"]
    assert all(m["path"] in full.stdout for m in listed)
    assert not any(f" {m['path']}\n" in default.stdout for m in listed)
    assert f"{len(listed)} files in the manifest" in default.stdout


def test_no_colour_off_a_terminal_or_under_no_color(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reprobundle.cli import common

    res = invoke(workspace, ["verify", "run.bundle", "--key", "author.pub"], monkeypatch)
    assert "\x1b[" not in res.stdout
    import sys

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.setenv("NO_COLOR", "1")

    def shown() -> str:  # a verdict word as the one output path prints it
        return common.text_line(common.verdict("VERIFIED", "good"), colour=common.colour_enabled())

    assert shown() == "VERIFIED"
    monkeypatch.delenv("NO_COLOR")
    assert shown() == "\x1b[32m\x1b[1mVERIFIED\x1b[0m"


def test_shell_completion_as_documented() -> None:
    """README: eval "$(_BUNDLE_COMPLETE=bash_source bundle)"; completing 'bundle ver'."""
    runner = CliRunner()
    script = runner.invoke(main, [], prog_name="bundle", env={"_BUNDLE_COMPLETE": "bash_source"})
    assert script.exit_code == 0 and "_bundle_completion()" in script.stdout
    env = {"_BUNDLE_COMPLETE": "bash_complete", "COMP_WORDS": "bundle ver", "COMP_CWORD": "1"}
    done = runner.invoke(main, [], prog_name="bundle", env=env)
    assert done.stdout.split() == ["plain,verify"]


@pytest.mark.parametrize("cmd", _leaf_commands(), ids=" ".join)
def test_every_command_takes_quiet_and_verbose(
    cmd: tuple[str, ...], workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """-q and -v on every command the group registers (issue 24): the same meaning everywhere.

    -q prints one line, the verdict or result; the default prints at least as much;
    -v at least as much as the default. A new command without them fails here.
    """
    import shutil

    args, code = SUCCESS[" ".join(cmd)]
    printed: dict[str, list[str]] = {}
    for flag in ("-q", "", "-v"):
        ws = tmp_path / f"ws{flag}"
        shutil.copytree(workspace, ws)
        res = invoke(ws, [*args, *([flag] if flag else [])], monkeypatch)
        assert res.exit_code == code, (flag, res.stdout, res.stderr)
        printed[flag] = [line for line in res.stdout.splitlines() if line.strip()]
    assert len(printed["-q"]) == 1, printed["-q"]
    assert len(printed["-q"]) <= len(printed[""]) <= len(printed["-v"])
