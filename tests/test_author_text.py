"""Author text never reaches a screen, a pull request or a chart as anything but text.

Issue 19, defects 8-10. A bundle's author chooses server names, attempt ids and
reasons, claim and gate ids, metric names, notes and titles; a signature says who
sealed them, not that they are harmless. Printed raw, an ESC sequence or a CR
repaints the terminal (an exit-4 replay reading "CONFIRMED (exit 0)"), U+202E
reverses text, ``ESC[2J`` clears the screen (defect 8); pasted into a pull
request, an ``@name`` after a backtick notifies that person and a bare URL
becomes a live link (defect 9); drawn by matplotlib, a ``$`` starts mathtext and
a server named ``b$\\foo{$x`` aborts the HTML report (defect 10).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundler.format.trust import Trust
from reprobundle.cli.main import main
from tests.conftest import Keys, make_keys
from tests.replay_factory import Files, build, seed_like

ESC = "\x1b"

# The characters that move a cursor, recolour, clear, break or reorder a line.
HOSTILE = [
    *map(chr, range(0x00, 0x20)),  # C0: ESC, CR, LF, BS, BEL ...
    "\x7f",
    *map(chr, range(0x80, 0xA0)),  # C1: CSI (\x9b) among them
    "\u2028",
    "\u2029",
    *map(chr, range(0x202A, 0x202F)),  # bidi embeddings and overrides (RLO = U+202E)
    *map(chr, range(0x2066, 0x206A)),  # bidi isolates
]
ATTACK = f"{ESC}[2J{ESC}[1;1H\rCONFIRMED (exit 0) 17 of 17 claims confirmed\u202e\n\u2028\x9b31m"


def raw_controls(text: str) -> list[str]:
    """Characters a terminal would act on or hide, other than our own line breaks.

    Derived from Unicode itself (categories Cc, Cf, Zl, Zp, Cs), not from the
    escaping code under test.
    """
    return sorted(
        {c for c in text if c != "\n" and unicodedata.category(c) in {"Cc", "Cf", "Zl", "Zp", "Cs"}}
    )


# --- a campaign with hostile text in every field seal accepts ---------------------------------

# Free text: appended to wherever the key appears.
_FREE = ("reason", "title", "note", "what", "definition", "claim_id")


def hostile_files(h: str) -> Files:
    """The seed-like campaign with ``h`` appended to every author-chosen string seal accepts.

    Identifiers (servers, attempts, requests, comparisons, gates, metrics, workers,
    devices) are renamed consistently wherever they are referenced, so the campaign
    stays valid and its replay confirms every claim; free text (reasons, titles,
    notes, gate definitions, claim ids, the plan's id and description) gets ``h``
    appended. Arm and campaign ids are pattern-checked by seal, and stay as they are.
    """
    f = build(seed_like())
    t = f.tables
    # Server names in the plan too (plan check and rerun print them), and what a rerun
    # of a videos-async plan needs to be planned at all.
    f.plan["servers"] = list(dict.fromkeys(r["server"] for r in t["receipts"]))
    f.plan["request"]["poll_interval_s"] = 0.5
    names = {
        *(r["server"] for r in t["receipts"]),
        *(r["request_id"] for r in t["receipts"]),
        *(a["attempt_id"] for a in t["attempts"]),
        *(g["gate_id"] for g in t["gates"]),
        *(g["metric"] for g in t["gates"]),
        *(c["comparison_id"] for c in t["comparisons"]),
        *(e["worker"] for e in t["worker_exits"]),
        *(s["device"] for s in t["telemetry"]),
    }
    rename = {n: n + h for n in names}

    def edit(obj: Any, key: str | None = None) -> Any:
        if isinstance(obj, str):
            return obj + h if key in _FREE else rename.get(obj, obj)
        if isinstance(obj, list):
            return [edit(x, key) for x in obj]
        if isinstance(obj, dict):
            # comparisons' metrics are keyed by metric name
            return {
                (rename.get(k, k) if key == "metrics" else k): edit(v, k) for k, v in obj.items()
            }
        return obj

    plan = edit(f.plan)
    plan["id"] += h
    plan["description"] = "frozen" + h
    return Files(edit(f.campaign), plan, {k: edit(v) for k, v in t.items()}, f.scorer)


def run_cli(args: list[str]) -> tuple[int, str]:
    """``bundle ARGS`` in-process (not a terminal, NO_COLOR): exit code, stdout + stderr."""
    res = CliRunner().invoke(main, args, env={"NO_COLOR": "1"})
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.stdout + res.stderr


def every_text_view(bundle: Path, keys: Keys, work: Path) -> dict[str, tuple[int, str]]:
    """Every command's text output on ``bundle`` (and the Markdown report it writes)."""
    key = ["--key", str(keys.public_path)]
    md = work / "report.md"
    views = {
        "replay": run_cli(["replay", str(bundle), *key]),
        "replay -v": run_cli(["replay", str(bundle), *key, "-v"]),
        "report md": run_cli(["report", str(bundle), *key, "-o", str(md), "--format", "md"]),
        "plan check": run_cli(["plan", "check", str(bundle)]),
        "rerun --dry-run": run_cli(
            [
                "rerun",
                str(bundle),
                *key,
                "-o",
                str(work / "rerun"),
                "--launch",
                "--launch-command",
                "serve --port {port} --server {server} --arm {arm}",
                "--dry-run",
            ]
        ),
        "inspect -v": run_cli(["inspect", str(bundle), "-v"]),
        "verify -v": run_cli(["verify", str(bundle), *key, "-v"]),
    }
    views["report.md"] = (0, md.read_text(encoding="utf-8"))
    return views


@pytest.fixture(scope="module")
def author(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return make_keys(tmp_path_factory.mktemp("keys"))


def test_every_text_view_escapes_a_forged_verdict(
    author: Keys, tmp_path_factory: pytest.TempPathFactory
) -> None:
    work = tmp_path_factory.mktemp("forged")
    bundle = hostile_files(ATTACK).seal(work, author.private)
    views = every_text_view(bundle, author, work)
    for name, (_code, out) in views.items():
        assert raw_controls(out) == [], name
        # No line of ours starts with the forged verdict: the CR that would have
        # returned the cursor to column 0 is shown as "\r".
        assert not any(line.startswith("CONFIRMED (exit 0) 17") for line in out.splitlines()), name
    assert views["replay"][0] == 0  # honest figures under hostile names: still confirmed
    assert views["rerun --dry-run"][0] == 0 and views["plan check"][0] == 0
    # The author's text is all there, escaped, e.g. an attempt's reason with -v:
    escaped_attack = r"\x1b[2J\x1b[1;1H\rCONFIRMED (exit 0) 17 of 17 claims confirmed"
    assert escaped_attack + r"\u202e\n\u2028\x9b31m" in views["replay -v"][1]
    assert escaped_attack in views["inspect -v"][1]
    assert "baseline-1" + escaped_attack in views["rerun --dry-run"][1]  # server name
    assert "baseline-1" + escaped_attack in views["plan check"][1]


@settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(h=st.text(alphabet=st.sampled_from([*HOSTILE, "X", " ", "é"]), min_size=1, max_size=6))
def test_no_control_character_reaches_any_text_view(
    h: str, author: Keys, tmp_path_factory: pytest.TempPathFactory
) -> None:
    work = tmp_path_factory.mktemp("hostile")
    bundle = hostile_files(h).seal(work, author.private)
    for name, (_code, out) in every_text_view(bundle, author, work).items():
        assert raw_controls(out) == [], (name, h)


def test_a_contradicted_replay_cannot_paint_confirmed(
    author: Keys, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The default (one-screen) output of an exit-4 replay names the accepted attempt and
    the plan: ids that, printed raw, would return to column 0 and paint "CONFIRMED"."""
    work = tmp_path_factory.mktemp("contradicted")
    f = hostile_files(ATTACK)
    f.tables["claims"][0]["value"] = "1.00"  # far from the sealed figure: contradicted
    bundle = f.seal(work, author.private)
    code, out = run_cli(["replay", str(bundle), "--key", str(author.public_path)])
    assert code == 4
    assert raw_controls(out) == []
    lines = out.splitlines()
    assert lines[1].startswith("  CONTRADICTED (exit 4)")
    assert not any(line.lstrip().startswith("CONFIRMED") for line in lines)
    # The accepted attempt and the plan, named as they are.
    assert r"accepted final-2\x1b[2J\x1b[1;1H\rCONFIRMED (exit 0) 17 of 17" in out
    assert r"plan final\x1b[2J" in out


def test_our_colours_survive_and_the_authors_do_not() -> None:
    from reprobundle.cli.common import Styled, text_line

    line = text_line(
        Styled("VERIFIED", "good"), f": run{ESC}[32m\u202e.bundle{ESC}[0m", colour=True
    )
    assert line == "\x1b[32m\x1b[1mVERIFIED\x1b[0m: run\\x1b[32m\\u202e.bundle\\x1b[0m"


# --- defect 9: Markdown that notifies no one and links nothing ---------------------------------


def _outside_code(md: str) -> str:
    """``md`` without its code spans (GitHub links and mentions nothing inside them)."""
    out, i = [], 0
    while i < len(md):
        if md[i] == "\\" and i + 1 < len(md):  # an escaped character is literal text
            out.append(md[i : i + 2])
            i += 2
            continue
        if md[i] == "`":
            run = re.match(r"`+", md[i:])
            assert run is not None
            fence = run.group(0)
            end = md.find(fence, i + len(fence))
            while end != -1 and md[end + len(fence) : end + len(fence) + 1] == "`":
                end = md.find(fence, end + len(fence) + 1)
            if end != -1:
                i = end + len(fence)
                continue
        out.append(md[i])
        i += 1
    return "".join(out)


# GitHub: an @name notifies when it follows anything but an ASCII word character.
_LIVE_MENTION = re.compile(r"(?:^|[^A-Za-z0-9_\\])@bob")
_LIVE_LINK = re.compile(r"(?i)https?://|www\.")


@pytest.mark.parametrize(
    "text",
    [
        "thanks `@bob for the review",
        "thanks é@bob",
        "(@bob)",
        "see http://evil.example/x and https://evil.example/y",
        "see www.evil.example",
        "WWW.Evil.Example/path|cell",
    ],
)
def test_markdown_report_neither_mentions_nor_links(
    text: str, author: Keys, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from replay.report.html.render import render_bundle

    work = tmp_path_factory.mktemp("md")
    f = build(seed_like())
    f.tables["attempts"][0]["reason"] = text
    f.tables["not_claimed"][0]["note"] = text
    f.campaign["title"] = text
    bundle = f.seal(work, author.private)
    md = render_bundle(bundle, "md", trust=Trust.keys([author.public])).text
    plain = _outside_code(md)
    assert not _LIVE_MENTION.search(plain), plain
    assert not _LIVE_LINK.search(plain), plain
    # The author's words are still there, in code spans.
    assert ("@bob" in md) == ("@bob" in text)
    assert all(url in md for url in re.findall(r"(?:https?://|www\.)[^\s|]+", text, re.I))


def test_closing_syntax_and_mentions_together_stay_inert() -> None:
    from replay.report.escape import markdown_text

    out, n = markdown_text("fixes #123, thanks `@bob, see www.x.example")
    assert n == 1
    plain = _outside_code(out)
    assert "#123" not in plain.replace("\\#", "")  # the reference is code
    assert not _LIVE_MENTION.search(plain) and not _LIVE_LINK.search(plain)


# --- defect 10: a "$" in a server name is text, not mathtext -----------------------------------


def test_html_report_draws_a_server_named_like_mathtext(
    author: Keys, tmp_path_factory: pytest.TempPathFactory
) -> None:
    pytest.importorskip("matplotlib")
    work = tmp_path_factory.mktemp("mathtext")
    name = "b$\\foo{$x"
    f = build(seed_like())

    def rename(obj: Any) -> Any:
        if isinstance(obj, str):
            return name if obj == "baseline-1" else obj
        if isinstance(obj, list):
            return [rename(x) for x in obj]
        if isinstance(obj, dict):
            return {k: rename(v) for k, v in obj.items()}
        return obj

    f = Files(f.campaign, f.plan, {k: rename(v) for k, v in f.tables.items()}, f.scorer)
    bundle = f.seal(work, author.private)
    out = work / "report.html"
    code, text = run_cli(["report", str(bundle), "--key", str(author.public_path), "-o", str(out)])
    assert code == 0, text
    html = out.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert name in html  # literally, in the tables (no HTML-special character in it)
