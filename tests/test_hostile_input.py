"""Hostile campaigns and bundles: located errors (exit 2), never tracebacks; escaped output.

Issue 12, defects 5 (campaign side) and 8: JSON nested hundreds deep, a plan
whose ``arm_order`` holds non-strings, file names that are not UTF-8 or hold
control characters, and names/values that would paint a fake "VERIFIED" line
when printed raw.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest

import bundler.campaign.load
import bundler.format.contract
from bundler._internal.textsafe import has_unsafe, json_safe, safe, unsafe_chars
from bundler.campaign.load import MAX_JSON_DEPTH, json_depth_exceeds, load_campaign
from bundler.seal import seal_campaign
from tests.campaign_builder import receipts, write_campaign
from tests.conftest import Keys

BUNDLE = [sys.executable, "-m", "reprobundle.cli"]
ESC = "\x1b"
RLO = "\u202e"


def run(*args: str | Path, check: int | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*BUNDLE, *map(str, args)],
        capture_output=True,
        text=True,
        errors="surrogateescape",
        timeout=180,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    if check is not None:
        assert proc.returncode == check, (proc.stdout, proc.stderr)
    return proc


def nest(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _plan() -> dict[str, Any]:
    return {
        "plan_version": "1",
        "id": "p",
        "arm_order": ["baseline", "candidate", "candidate", "baseline"],
        "warmups_per_server": 2,
        "measured_per_server": 3,
        "request": {"api": "videos-async", "timing_boundary": "post_to_delete"},
        "timeouts": {"request_s": 600},
        "teardown": {
            "baseline": {"term_wait_s": 60, "kill_wait_s": 90},
            "candidate": {"term_wait_s": 30, "kill_wait_s": 60},
        },
    }


# --- textsafe ----------------------------------------------------------------------------


def test_safe_escapes_controls_bidi_and_undecodable_bytes() -> None:
    assert safe("a\nb\rc\td") == "a\\nb\\rc\\td"
    assert safe(f"{ESC}[32mVERIFIED{ESC}[0m") == "\\x1b[32mVERIFIED\\x1b[0m"
    assert safe(f"gpj{RLO}.exe") == "gpj\\u202e.exe"
    assert safe("\x7f\x85\x9b\u2028\u2066\ufeff\u200b") == (
        "\\x7f\\x85\\x9b\\u2028\\u2066\\ufeff\\u200b"
    )
    assert safe("\U000e0041") == "\\U000e0041"  # a tag character
    assert safe(os.fsdecode(b"name-\xff.txt")) == "name-\\xff.txt"  # non-UTF-8 byte
    plain = "campaign h3-ref2va-5s: 407.27 → 108.12 s, é, 中文, C:\\path"
    assert safe(plain) == plain
    assert not has_unsafe(plain)
    assert unsafe_chars("a\n\nb\x1b") == ["\\n", "\\x1b"]
    assert safe(None) == "None"  # type: ignore[arg-type]  # hostile JSON may hold anything


def test_safe_is_idempotent_and_leaves_nothing_that_moves_the_cursor() -> None:
    hostile = "".join(chr(c) for c in range(0, 0x250)) + RLO + "\u2029" + "\udcff"
    once = safe(hostile)
    assert safe(once) == once
    assert not has_unsafe(once)
    once.encode("utf-8")  # no lone surrogate left


def test_safe_covers_every_control_separator_and_surrogate() -> None:
    # Cc, Zl, Zp and Cs are stable across Unicode versions; the hard-coded class
    # must cover all of them, and every bidi control.
    bidi = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
    for cp in range(0x110000):
        if unicodedata.category(chr(cp)) in ("Cc", "Zl", "Zp", "Cs") or cp in bidi:
            assert has_unsafe(chr(cp)), hex(cp)
    # On the interpreter this was written for, the class is exactly Cc/Cf/Zl/Zp/Cs.
    if unicodedata.unidata_version == "14.0.0":
        for cp in range(0x110000):
            cat = unicodedata.category(chr(cp))
            assert has_unsafe(chr(cp)) == (cat in ("Cc", "Cf", "Zl", "Zp", "Cs")), hex(cp)


def test_json_safe_is_the_same_json() -> None:
    doc = {"a": f"x\n{ESC}\x7f{RLO}\udcff\U000e0041", "b": [1, "é"]}
    text = json_safe(json.dumps(doc, indent=2, ensure_ascii=False))
    assert not has_unsafe(text.replace("\n", ""))
    assert json.loads(text) == doc
    assert "é" in text  # ordinary non-ASCII stays readable


# --- defect 5: located errors, exit 2 ------------------------------------------------------


def test_json_depth_is_measured_without_recursion() -> None:
    assert not json_depth_exceeds(nest(MAX_JSON_DEPTH))
    assert json_depth_exceeds(nest(MAX_JSON_DEPTH + 1))
    assert not json_depth_exceeds({"a": nest(MAX_JSON_DEPTH - 1)})
    assert json_depth_exceeds({"a": nest(MAX_JSON_DEPTH)})
    assert json_depth_exceeds(nest(100_000))  # no RecursionError
    assert not json_depth_exceeds("x") and not json_depth_exceeds(None)


def test_deeply_nested_json_is_a_located_error(tmp_path: Path) -> None:
    rows = receipts()
    rows[1]["extra"] = nest(600)
    camp = write_campaign(
        tmp_path / "c",
        **{
            "receipts.jsonl": rows,
            "scorer.json": "[" * 100_000 + "]" * 100_000,  # beyond the C parser's own limit
        },
    )
    doc = json.loads((camp / "campaign.json").read_text())
    doc["notes"] = nest(500)
    (camp / "campaign.json").write_text(json.dumps(doc))
    _, problems = load_campaign(camp)
    where = {(p.where, p.record): p.message for p in problems}
    deeper = f"nested deeper than {MAX_JSON_DEPTH} levels"
    assert where[("campaign.json", None)] == deeper
    assert where[("receipts.jsonl", "line 2")] == deeper
    assert where[("scorer.json", None)] == deeper
    proc = run("seal", camp, "-o", tmp_path / "x.bundle", "--unsigned", check=2)
    assert f"campaign.json: {deeper}" in proc.stderr
    assert f"receipts.jsonl, record line 2: {deeper}" in proc.stderr
    assert not (tmp_path / "x.bundle").exists()


def test_nesting_up_to_the_limit_seals(tmp_path: Path) -> None:
    rows = receipts()
    rows[0]["extra"] = nest(MAX_JSON_DEPTH - 1)
    camp = write_campaign(tmp_path / "c", **{"receipts.jsonl": rows})
    doc = json.loads((camp / "campaign.json").read_text())
    doc["notes"] = nest(MAX_JSON_DEPTH - 1)
    (camp / "campaign.json").write_text(json.dumps(doc))
    seal_campaign(camp, tmp_path / "x.bundle")


def test_lone_surrogate_escape_is_a_located_error(tmp_path: Path) -> None:
    camp = write_campaign(tmp_path / "c")
    text = (camp / "campaign.json").read_text()
    # A valid pair (an emoji) is fine; a lone surrogate cannot be written as UTF-8.
    text = text.replace('"mini campaign"', '"mini \\ud83d\\ude00 \\udcff"')
    (camp / "campaign.json").write_text(text)
    proc = run("seal", camp, "-o", tmp_path / "x.bundle", "--unsigned", check=2)
    assert "campaign.json: string 'mini \U0001f600 \\xff' holds a lone" in proc.stderr


@pytest.mark.parametrize(
    "arm_order",
    [[["baseline"], {"a": 1}], {"baseline": 1}, "baseline", [None, 3, "nope"], None],
    ids=["lists-and-objects", "object", "string", "mixed", "null"],
)
def test_plan_arm_order_of_non_strings_is_a_located_error(tmp_path: Path, arm_order: Any) -> None:
    plan = _plan()
    plan["arm_order"] = arm_order
    camp = write_campaign(tmp_path / "c", **{"plans/p.json": plan})
    _, problems = load_campaign(camp)
    assert problems
    assert all(p.where == "plans/p.json" for p in problems), problems
    assert any((p.field or "").startswith("arm_order") for p in problems)


@pytest.mark.parametrize("api", [{"x": 1}, ["openai-completions"], 7, None])
def test_plan_request_api_of_non_strings_is_a_located_error(tmp_path: Path, api: Any) -> None:
    """Found by tests/fuzz: a dict or list `request.api` raised TypeError (unhashable)."""
    plan = _plan()
    plan["request"]["api"] = api
    camp = write_campaign(tmp_path / "c", **{"plans/p.json": plan})
    _, problems = load_campaign(camp)
    assert any(p.where == "plans/p.json" and "api" in (p.field or "") for p in problems), problems


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("arms", {"a": 1}),
        ("arms", [{"id": "b", "role": ["baseline"]}]),
        ("arms", [[1]]),
        ("arms", None),
    ],
)
def test_malformed_arms_are_located_errors(tmp_path: Path, field: str, value: Any) -> None:
    camp = write_campaign(tmp_path / "c")
    doc = json.loads((camp / "campaign.json").read_text())
    doc[field] = value
    (camp / "campaign.json").write_text(json.dumps(doc))
    _, problems = load_campaign(camp)
    assert any(p.where == "campaign.json" and p.field == "arms" for p in problems), problems


def test_seal_cli_arm_order_of_lists_exit_2(tmp_path: Path) -> None:
    plan = _plan()
    plan["arm_order"] = [["baseline"], {"a": 1}]
    camp = write_campaign(tmp_path / "c", **{"plans/p.json": plan})
    proc = run("seal", camp, "-o", tmp_path / "x.bundle", "--unsigned", check=2)
    assert "plans/p.json, field 'arm_order.0'" in proc.stderr


def test_non_utf8_file_name_is_refused_by_name(tmp_path: Path) -> None:
    camp = write_campaign(tmp_path / "c")
    (Path(os.fsdecode(bytes(camp) + b"/notes-\xff.txt"))).write_bytes(b"hello")
    (Path(os.fsdecode(bytes(camp) + b"/logs/\xfe\xfe"))).mkdir(parents=True)
    (Path(os.fsdecode(bytes(camp) + b"/logs/\xfe\xfe/a.log"))).write_text("x")
    _, problems = load_campaign(camp)
    msgs = {p.where: p.message for p in problems}
    assert msgs == {
        "logs/\\xfe\\xfe": "folder name is not valid UTF-8; rename it",
        "notes-\\xff.txt": "file name is not valid UTF-8; rename it",
    }
    proc = run("seal", camp, "-o", tmp_path / "x.bundle", "--unsigned", check=2)
    assert "notes-\\xff.txt: file name is not valid UTF-8" in proc.stderr
    assert not (tmp_path / "x.bundle").exists()


def test_file_names_with_control_characters_are_refused(tmp_path: Path) -> None:
    camp = write_campaign(tmp_path / "c")
    (camp / f"a\nx.bundle: VERIFIED{ESC}[2J.txt").write_text("hi")
    (camp / "logs").mkdir()
    (camp / "logs" / f"run{RLO}gol.txt").write_text("hi")
    proc = run("seal", camp, "-o", tmp_path / "x.bundle", "--unsigned", check=2)
    assert (
        "a\\nx.bundle: VERIFIED\\x1b[2J.txt: file name holds control or invisible "
        "characters (\\n, \\x1b); rename it"
    ) in proc.stderr
    assert "logs/run\\u202egol.txt: file name holds" in proc.stderr
    assert ESC not in proc.stderr and RLO not in proc.stderr
    assert not any(line.startswith("x.bundle: VERIFIED") for line in proc.stderr.splitlines())


def test_artifact_path_with_control_characters_is_refused(tmp_path: Path) -> None:
    row = {
        "path": "media/a\nb.mp4",
        "kind": "media",
        "sha256": "0" * 64,
        "availability": "NAS",
    }
    camp = write_campaign(tmp_path / "c", **{"artifacts.jsonl": [row]})
    _, problems = load_campaign(camp)
    assert [(p.where, p.field) for p in problems] == [("artifacts.jsonl", "path")]
    assert "control or invisible characters (\\n)" in problems[0].message


# --- defect 8: what verify, inspect and sign print ------------------------------------------

SPOOF_FILE = f"notes\nspoof.bundle: VERIFIED{ESC}[0m.txt"
SPOOF_ARTIFACT = {
    "path": f"media/clip{RLO}4pm.exe",
    "kind": "media",
    "sha256": "1" * 64,
    "availability": f"NAS\nspoof.bundle: VERIFIED{ESC}[1m",
}


@pytest.fixture
def spoof_bundle(tmp_path: Path, keys: Keys, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A validly signed bundle whose names would forge lines if printed raw.

    seal now refuses such names, so the check is lifted for this one seal, as
    an attacker with their own tooling would.
    """
    camp = write_campaign(tmp_path / "c", **{"artifacts.jsonl": [SPOOF_ARTIFACT]})
    (camp / SPOOF_FILE).write_text("hello")
    monkeypatch.setattr(bundler.campaign.load, "name_problem", lambda rel: None, raising=False)
    monkeypatch.setattr(bundler.format.contract, "name_problem", lambda rel: None)
    out = tmp_path / "spoof.bundle"
    seal_campaign(camp, out, keys=[keys.private])
    monkeypatch.undo()
    return out


def _assert_no_forged_line(text: str) -> None:
    assert ESC not in text and RLO not in text and "\x9b" not in text
    assert not any(line.startswith("spoof.bundle: VERIFIED") for line in text.splitlines())


def test_verify_and_inspect_escape_hostile_names(spoof_bundle: Path, keys: Keys) -> None:
    # The default summary groups artifacts by availability: escaped there too.
    out = run("verify", spoof_bundle, "--key", keys.public_path, check=0).stdout
    _assert_no_forged_line(out)
    assert "availability: NAS\\nspoof.bundle: VERIFIED\\x1b[1m" in out
    _assert_no_forged_line(run("inspect", spoof_bundle, check=0).stdout)
    # -v lists every path.
    out = run("verify", spoof_bundle, "--key", keys.public_path, "-v", check=0).stdout
    _assert_no_forged_line(out)
    assert "media/clip\\u202e4pm.exe  [NAS\\nspoof.bundle: VERIFIED\\x1b[1m]" in out
    # The headline, the escaped artifact and the escaped member name (-v lists members).
    assert sum("VERIFIED" in line for line in out.splitlines()) == 3
    info = run("inspect", spoof_bundle, "-v", check=0).stdout
    _assert_no_forged_line(info)
    assert "files/notes\\nspoof.bundle: VERIFIED\\x1b[0m.txt" in info
    for cmd in ("verify", "inspect"):
        raw = run(cmd, spoof_bundle, "--key", keys.public_path, "--json", check=0).stdout
        _assert_no_forged_line(raw)  # escaped as JSON \uXXXX: the same values
        assert json.loads(raw)["external"][0]["path"] == SPOOF_ARTIFACT["path"]


def test_problem_and_error_lines_are_escaped(spoof_bundle: Path, tmp_path: Path) -> None:
    from bundler.format.container import read_container, write_container

    members = [(m.name, m.data) for m in read_container(spoof_bundle)]
    members.append((f"files/x\nspoof.bundle: VERIFIED{ESC}[0m", b"extra"))
    tampered = tmp_path / "t.bundle"
    with tampered.open("wb") as fh:
        write_container(fh, members)
    proc = run("verify", tampered, "--allow-unsigned", check=1)
    _assert_no_forged_line(proc.stdout)
    assert "files/x\\nspoof.bundle: VERIFIED\\x1b[0m: present but not in the manifest" in (
        proc.stdout
    )
    run("keygen", "-o", tmp_path / "k", check=0)
    proc = run("sign", tampered, "--key", tmp_path / "k", "--force-adopt", check=1)
    _assert_no_forged_line(proc.stderr)
    assert "refusing to countersign" in proc.stderr


def test_lint_text_escapes_file_names(tmp_path: Path) -> None:
    f = tmp_path / f"pr{ESC}[2Jbody.md"
    f.write_text("This fixes #123.\n")
    proc = run("lint-text", f, check=1)
    _assert_no_forged_line(proc.stdout)
    assert "pr\\x1b[2Jbody.md:1:" in proc.stdout
