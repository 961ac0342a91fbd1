"""Columnar seal (issue 11 item 5): same bytes as the per-row path, same located errors.

Every comparison here runs both real paths: ``load_campaign(columnar=True)`` /
``seal_campaign`` as shipped, and the per-row path forced with
``REPROBUNDLE_SEAL_PER_ROW=1``. The per-row path is the reference (it is what
sealed every bundle before, and the checked-in vectors pin its bytes).
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundler.campaign.columnar import (
    JSON_BLOCK_BYTES,
    _is_utf8,
    read_columnar,
    to_bundle_table,
)
from bundler.campaign.extra import MAX_OBJECT_KEYS
from bundler.campaign.load import load_campaign
from bundler.campaign.sanitize import Sanitizer
from bundler.campaign.sanitize_rules import ANY_RE2
from bundler.seal import _needs_rows
from tests.campaign_builder import receipts, write_campaign
from tests.seal_paths import both

FIELDS = (
    "request_id",
    "attempt_id",
    "arm",
    "server",
    "phase",
    "seq",
    "start",
    "end",
    "e2e_s",
    "status",
    "timeout_level",
    "http_status",
    "output_sha256",
    "error",
)
SECRETS = (
    "10.0.0.7",
    "fe80::1",
    "Bearer abcdefghijklmnop",
    "token=hunter2hunter2",
    "/home/alice/run",
    "sk-abcdefghijklmnopqrstuv",
    "https://user:pw@example.com/x",
    "gpu-node7.internal",
    "api.example.com",
    "AKIAABCDEFGHIJKLMNOP",
    "ＡＫＩＡ",
    "ǅ",
    "Straße 10.0.0.8",
)


def _csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    cols = [f for f in (*FIELDS, *UNKNOWN) if any(f in r for r in rows)]
    w = csv.DictWriter(buf, cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: repr(v) if type(v) is float else v for k, v in r.items()})
    return buf.getvalue()


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def _campaign(root: Path, name: str, text: str) -> Path:
    """The mini campaign with its receipts replaced by ``text`` in file ``name``."""
    camp = write_campaign(root, **{"receipts.jsonl": None})
    (camp / name).write_bytes(text.encode("utf-8"))
    return camp


# --- generated receipts -------------------------------------------------------------------------

_text = st.one_of(
    st.text(min_size=1, max_size=12),
    st.sampled_from(SECRETS),
    st.builds(lambda a, b: f"{a} {b}", st.sampled_from(SECRETS), st.text(max_size=6)),
)
UNKNOWN: dict[str, st.SearchStrategy[Any]] = {
    "prompt_id": st.text(max_size=8),
    "note": st.one_of(st.none(), _text),
    "npu.clock": st.one_of(st.none(), st.integers(-(2**53) + 1, 2**53 - 1)),
    "ratio": st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
    "warm": st.one_of(st.none(), st.booleans()),
    "é key": st.one_of(st.none(), st.text(max_size=4)),
    "api_token": st.one_of(st.none(), st.text(max_size=6)),
    # Objects (issue 22): scalars of every kind, a nested object, keys that vary (an
    # absent key or a null goes per-row), strings the sanitizer may touch.
    # Arrays (issue 22): numbers, strings (the sanitizer may touch them), booleans and
    # nulls, nested; rows whose element types differ go per-row.
    "tags": st.one_of(
        st.none(),
        st.lists(
            st.one_of(st.none(), st.integers(-(2**53) + 1, 2**53 - 1), st.floats(-1e9, 1e9)),
            max_size=4,
        ),
        st.lists(st.one_of(st.none(), _text), max_size=3),
        st.lists(st.lists(st.booleans(), max_size=2), max_size=2),
    ),
    "usage": st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {
                "n": st.integers(-(2**53) + 1, 2**53 - 1),
                "r": st.floats(allow_nan=False, allow_infinity=False),
                "s": _text,
                "inner": st.fixed_dictionaries({"ok": st.booleans()}),
            },
            optional={"maybe": st.one_of(st.none(), st.integers(0, 9)), "ü": st.just("x")},
        ),
    ),
}


@st.composite
def _timestamp(draw: st.DrawFn) -> str:
    sec = draw(st.integers(0, 59))
    frac = draw(st.sampled_from(["", ".5", ".123456789", ".000001"]))
    sep = draw(st.sampled_from(["T", "t", " "]))
    off = draw(st.sampled_from(["Z", "z", "+01:00", "-05:30"]))
    return (
        f"2026-03-0{draw(st.integers(1, 9))}{sep}1{draw(st.integers(0, 9))}:00:{sec:02d}{frac}{off}"
    )


@st.composite
def _row(draw: st.DrawFn, i: int) -> dict[str, Any]:
    start = draw(_timestamp())
    row: dict[str, Any] = {
        "request_id": f"r{i}-{draw(_text)}",
        "attempt_id": draw(st.sampled_from(["a1", "a2"])),
        "arm": draw(st.sampled_from(["baseline", "candidate"])),
        "server": draw(_text),
        "phase": draw(st.sampled_from(["warmup", "measured", "quality"])),
        "seq": draw(st.one_of(st.integers(0, 9), st.integers(2**53, 2**63 - 1))),
        "start": start,
        "end": start,
        "e2e_s": draw(
            st.one_of(
                st.floats(0, 1e300, allow_nan=False, allow_infinity=False),
                st.integers(0, 2**70),
            )
        ),
        "status": draw(st.sampled_from(["ok", "failed", "timeout", "cancelled"])),
    }
    optional = {
        "timeout_level": st.sampled_from(["request", "wave", "arm", "reservation", None]),
        "http_status": st.one_of(st.none(), st.integers(100, 599)),
        "output_sha256": st.one_of(st.none(), st.just("ab" * 32)),
        "error": st.one_of(st.none(), st.just(""), _text),
    }
    for k, strat in optional.items():
        if draw(st.booleans()):
            row[k] = draw(strat)
    # Fields beyond the schema (kept in `extra`), each of one JSON type or null.
    for k, strat in UNKNOWN.items():
        if draw(st.booleans()):
            row[k] = draw(strat)
    return row


@st.composite
def _rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(1, 12))
    return [draw(_row(i)) for i in range(n)]


_SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@_SETTINGS
@given(rows=_rows(), as_csv=st.booleans())
def test_columnar_seal_matches_per_row(
    tmp_path: Path, rows: list[dict[str, Any]], as_csv: bool
) -> None:
    name, text = ("receipts.csv", _csv(rows)) if as_csv else ("receipts.jsonl", _jsonl(rows))
    camp = tmp_path / "c"
    if camp.exists():
        shutil.rmtree(camp)
    _campaign(camp, name, text)
    col, row = both(camp)
    assert col == row


def test_generated_receipts_take_the_columnar_path(tmp_path: Path) -> None:
    """Unicode, secrets, empty and missing optional fields are read column-wise (no fallback)."""
    rows = receipts()
    rows[0]["server"] = "gpu-node7.internal 10.0.0.7 ünïcødé 🙂"
    rows[1]["error"] = ""
    rows[2]["error"] = "Bearer abcdefghijklmnop at /home/alice"
    rows[3]["http_status"] = None
    rows[4]["seq"] = 2**63 - 1
    # Unknown fields (issue 22): present, absent and explicitly null, of every scalar type.
    for i, r in enumerate(rows):
        r["prompt_id"] = f"p{i % 3}"
        if i % 2:
            r["npu.clock"] = None if i % 4 == 1 else 1800 + i
            r["ratio"] = [0.5, 1.5e-7, -0.0, 3.0][i % 4]
        if i % 3 == 0:
            r["warm"] = i % 2 == 0
            r["note"] = None if i % 6 else 'say "hi" \\ \x01 10.0.0.9'
    for name, text in (("receipts.jsonl", _jsonl(rows)), ("receipts.csv", _csv(rows))):
        camp = _campaign(tmp_path / name, name, text)
        assert read_columnar(camp / name, "receipts") is not None, name
        col, row = both(camp)
        assert isinstance(col, bytes)
        assert col == row


_UNKNOWN_NULLS = {
    "null beside a string holding a null member": [
        ', "npu": null, "note": "say \\"npu\\" is: null"',
        ', "note": "\\"npu\\" b: null npu: null"',
    ],
    "spacing around the colon": [', "npu" :\tnull', ', "npu":1.5', ""],
    "null only": [', "npu": null', ""],
    "string and null": [', "npu": "x"', ', "npu": null', ""],
    # The key's text elsewhere: a value equal to the name, an escaped quote before it.
    "key text as a value": [', "npu": null, "note": "npu"', ', "note": "npu"', ', "npu": 2'],
    "key text after an escaped quote": [', "note": "x\\"npu", "npu": null', ', "npu": 3', ""],
    # At most half the rows null: only those lines are searched (issue 22).
    "few nulls, odd spacing": [', "npu" :\tnull', ', "npu": 1', ', "npu": 2', ', "npu": 3'],
    "few nulls, absent": ["", ', "npu": 1', ', "npu": 2'],
    "few nulls, key text in strings": [
        ', "npu": null, "note": "npu: null"',
        ', "npu": 1, "note": "\\"npu\\" is null"',
        ', "npu": 2',
        ', "note": "say \\"npu\\" is :null"',
        ', "npu": 5',
    ],
}


@pytest.mark.parametrize("case", sorted(_UNKNOWN_NULLS))
def test_unknown_nulls_are_told_from_absent_column_wise(tmp_path: Path, case: str) -> None:
    """An explicit null of an unknown field is kept in `extra`, an absent one is not (issue 22)."""
    rows = [json.dumps(r) for r in receipts()]
    tails = _UNKNOWN_NULLS[case]
    text = "".join(r[:-1] + tails[i % len(tails)] + "}\n" for i, r in enumerate(rows))
    camp = write_campaign(tmp_path / "c")
    (camp / "receipts.jsonl").write_text(text, encoding="utf-8")
    assert read_columnar(camp / "receipts.jsonl", "receipts") is not None
    col, row = both(camp)
    assert isinstance(col, bytes)
    assert col == row


def test_a_duplicate_unknown_key_seals_as_per_row(tmp_path: Path) -> None:
    """``"npu": 1, "npu": null`` on one line: whichever path reads it (the column-wise
    reader cannot tell the member's spelling apart and declines), the bytes are per-row's."""
    rows = [json.dumps(r) for r in receipts()]
    tails = [', "npu": 1, "npu": null', ', "npu": null', ""]
    text = "".join(r[:-1] + tails[i % len(tails)] + "}\n" for i, r in enumerate(rows))
    camp = write_campaign(tmp_path / "c")
    (camp / "receipts.jsonl").write_text(text, encoding="utf-8")
    col, row = both(camp)
    assert isinstance(col, bytes)
    assert col == row


_SCRUB_ORDER = {
    # Two unknown fields whose values get pseudonyms: numbered row by row per row.
    # Column by column would number a's address first; per row, b's comes first.
    "two scrubbed fields": [', "b": "from 10.0.0.9"', ', "a": "at 10.0.0.7", "b": "10.0.0.8"'],
    # An unknown field name the rules change (scrubbed first, per row).
    "scrubbed name": [', "10.0.0.7": "x", "b": "10.0.0.9"', ""],
}


@pytest.mark.parametrize("case", sorted(_SCRUB_ORDER))
def test_pseudonym_order_of_unknown_fields_is_the_per_row_order(tmp_path: Path, case: str) -> None:
    """Where column-by-column scrubbing could number pseudonyms differently, seal reads the
    table per row again: same bytes, same report (issue 22)."""
    rows = [json.dumps(r) for r in receipts()]
    tails = _SCRUB_ORDER[case]
    text = "".join(r[:-1] + tails[i % len(tails)] + "}\n" for i, r in enumerate(rows))
    camp = write_campaign(tmp_path / "c")
    (camp / "receipts.jsonl").write_text(text, encoding="utf-8")
    col, row = both(camp)
    assert isinstance(col, bytes)
    assert col == row


def test_field_first_met_after_the_first_block_stays_column_wise(tmp_path: Path) -> None:
    """The streamed read settles its schema on the first block; a field met later makes
    it read the file whole, still column-wise, with every value kept (issue 22)."""
    base = receipts()[0]
    n = JSON_BLOCK_BYTES // len(json.dumps(base)) + 1000
    lines = [json.dumps({**base, "request_id": f"r{i}"}) for i in range(n)]
    lines[-1] = lines[-1][:-1] + ', "late": 1.5}'
    path = tmp_path / "receipts.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert path.stat().st_size > JSON_BLOCK_BYTES
    ct = read_columnar(path, "receipts")
    assert ct is not None
    extra = to_bundle_table("receipts", ct).column("extra").to_pylist()
    assert extra[-1] == '{"late":1.5}'
    assert extra[:-1] == [None] * (n - 1)


# --- inputs the columnar path must hand to the per-row path ---------------------------------------

_GOOD = json.dumps(receipts()[0])
_HOSTILE_JSONL = {
    "duplicate key": _GOOD[:-1] + ', "arm": "candidate"}',
    "NaN": _GOOD.replace('"e2e_s": 129.0', '"e2e_s": NaN'),
    "Infinity": _GOOD.replace('"e2e_s": 129.0', '"e2e_s": Infinity'),
    "huge float": _GOOD.replace('"e2e_s": 129.0', '"e2e_s": 1e400'),
    "int beyond int64": _GOOD.replace('"seq": 0', '"seq": 9223372036854775808'),
    "integral float seq": _GOOD.replace('"seq": 0', '"seq": 0.0'),
    "unknown big int": _GOOD[:-1] + ', "npu_clock": 9007199254740993}',
    "unknown big int, then a float": _GOOD[:-1]
    + ', "npu_clock": 9007199254740993}\n'
    + _GOOD.replace("b1-0", "b1-y")[:-1]
    + ', "npu_clock": 1.5}',
    "unknown type change": _GOOD[:-1]
    + ', "npu": 1}\n'
    + _GOOD.replace("b1-0", "b1-y")[:-1]
    + ', "npu": "x"}',
    "unknown escaped key null": _GOOD[:-1] + ', "\\u006epu": null, "npu": 1}',
    "unknown comma key null": _GOOD[:-1] + ', ",": null}',
    "unknown null and an escaped quote before a null": _GOOD[:-1]
    + ', "npu": null, "note": "\\"npu\\": null"}',
    "missing required": _GOOD.replace('"status": "ok", ', ""),
    "null required": _GOOD.replace('"status": "ok"', '"status": null'),
    "bad enum": _GOOD.replace('"status": "ok"', '"status": "OK"'),
    "bool seq": _GOOD.replace('"seq": 0', '"seq": true'),
    "number as string": _GOOD.replace('"e2e_s": 129.0', '"e2e_s": "129.0"'),
    "negative": _GOOD.replace('"e2e_s": 129.0', '"e2e_s": -1'),
    "impossible date": _GOOD.replace("2026-03-01T10:00:00Z", "2026-02-30T10:00:00Z", 1),
    "lone surrogate": _GOOD.replace('"arm": "baseline"', '"arm": "\\ud800"'),
    "two objects": _GOOD + " " + _GOOD.replace("b1-0", "b1-x"),
    "array": "[1, 2]",
    # A bare null line crashed pyarrow 26's JSON reader (SIGSEGV), found by tests/fuzz.
    "null line": "null",
    "number line": "7",
    "string line": '"b1-0"',
    "true line": "true",
    "indented object": "  " + _GOOD,
    "empty id": _GOOD.replace('"request_id": "b1-0"', '"request_id": ""'),
    "sha with newline": _GOOD.replace("0" * 64 + '"', "0" * 64 + '\\n"'),
}


# Arrays on one line among lines without the field: column-wise since arrays are.
_ONE_LINE_ARRAYS = {
    "unknown object holding a list": _GOOD[:-1] + ', "npu": {"clock": [1]}}',
    "unknown array": _GOOD[:-1] + ', "npu": [1, null]}',
}


def _with_line_6(root: Path, line: str) -> Path:
    """The mini campaign whose receipts have ``line`` as line 6."""
    rest = [json.dumps(r) for r in receipts()[1:]]
    camp = write_campaign(root)
    text = "\n".join([*rest[:5], line, *rest[5:]]) + "\n"
    (camp / "receipts.jsonl").write_text(text, encoding="utf-8")
    return camp


@pytest.mark.parametrize("case", sorted(_ONE_LINE_ARRAYS))
def test_an_array_on_one_line_is_read_column_wise_like_per_row(tmp_path: Path, case: str) -> None:
    camp = _with_line_6(tmp_path / "c", _ONE_LINE_ARRAYS[case])
    assert read_columnar(camp / "receipts.jsonl", "receipts") is not None
    col, row = both(camp)
    assert isinstance(row, bytes)
    assert col == row


@pytest.mark.parametrize("case", sorted(_HOSTILE_JSONL))
def test_hostile_jsonl_is_refused_or_sealed_like_per_row(tmp_path: Path, case: str) -> None:
    camp = _with_line_6(tmp_path / "c", _HOSTILE_JSONL[case])
    assert read_columnar(camp / "receipts.jsonl", "receipts") is None
    col, row = both(camp)
    assert col == row
    if isinstance(row, list):  # located exactly where the per-row path locates it: line 6
        assert any(p[0] == "receipts.jsonl" and p[1] == "line 6" for p in row), row


@pytest.mark.parametrize(
    ("case", "raw"),
    [
        ("BOM", "\ufeff"),
        ("CRLF", "\r\n"),
        ("blank line", "\n\n"),
        ("line separator", "\u2028"),
    ],
)
def test_line_oddities_go_per_row(tmp_path: Path, case: str, raw: str) -> None:
    lines = [json.dumps(r) for r in receipts()]
    if case == "BOM":
        text = raw + "\n".join(lines) + "\n"
    elif case == "line separator":
        lines[3] = lines[3].replace('"status": "ok"', f'"status": "ok", "note": "a{raw}b"')
        text = "\n".join(lines) + "\n"
    else:
        text = raw.join(lines) + raw
    camp = write_campaign(tmp_path / "c")
    (camp / "receipts.jsonl").write_bytes(text.encode("utf-8"))
    assert read_columnar(camp / "receipts.jsonl", "receipts") is None
    col, row = both(camp)
    assert col == row


@pytest.mark.parametrize(
    ("case", "cell", "field"),
    [
        ("plus sign", "+5", "seq"),
        ("float seq", "5.0", "seq"),
        ("unicode digit", "\u0663", "seq"),
        ("nan", "nan", "e2e_s"),
        ("underscore", "1_0", "e2e_s"),
        ("spaces", " 5", "e2e_s"),
        ("empty required", "", "arm"),
        ("bad enum", "OK", "status"),
    ],
)
def test_hostile_csv_cell_is_located_like_per_row(
    tmp_path: Path, case: str, cell: str, field: str
) -> None:
    rows: list[dict[str, Any]] = receipts()
    rows[6][field] = cell
    camp = _campaign(tmp_path / "c", "receipts.csv", _csv(rows))
    col, row = both(camp)
    assert col == row
    if isinstance(row, list):
        assert ("receipts.csv", "line 8", field) in {p[:3] for p in row}, row


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
@pytest.mark.parametrize("literal", ["-0", "-0.0", "-0e0", "0", "0.0"])
def test_negative_zero_seals_as_per_row(tmp_path: Path, fmt: str, literal: str) -> None:
    """``-0`` is the integer 0 per row (sealed 0.0) but -0.0 for Arrow; ``-0.0`` is -0.0
    for both. Whatever the literal, the column-wise bytes are the per-row bytes."""
    rows: list[dict[str, Any]] = receipts()
    if fmt == "csv":
        rows[3]["e2e_s"] = literal
        camp = _campaign(tmp_path / "c", "receipts.csv", _csv(rows))
    else:
        lines = [json.dumps(r) for r in rows]
        lines[3] = re.sub(r'"e2e_s": [^,}]+', f'"e2e_s": {literal}', lines[3])
        assert f'"e2e_s": {literal}' in lines[3]
        camp = _campaign(tmp_path / "c", "receipts.jsonl", "\n".join(lines) + "\n")
    col, row = both(camp)
    assert isinstance(row, bytes)
    assert col == row


_OBJECTS: dict[str, Any] = {
    "integers": lambda i: {"prompt_tokens": 10 + i, "completion_tokens": 3},
    "every scalar": lambda i: {
        "b": i % 2 == 0,
        "a": 1.5 if i % 2 else 2,
        "s": 'say "hi" \\ \x01',
        "é": "ok",
        "tiny": 1e-7,
        "deep": {"z": 0.1, "y": {"x": "w"}},
    },
    "empty": lambda i: {},
    "non-ASCII no rule touches": lambda i: {"who": "ünï", "ключ": "значение"},
    # Keys absent from some objects (issue 22): left out of their text, as per row.
    "an absent key": lambda i: {"a": 1} if i == 2 else {"a": 1, "b": 2},
    "optional keys, nested": lambda i: {
        "n": i,
        **({"details": {"cached": i, **({"audio": 0} if i % 3 else {})}} if i % 2 else {}),
    },
    "only optional keys": lambda i: {"x": i} if i % 2 else ({"y": True} if i % 3 else {}),
}


def _sealed_from_rows(camp: Path) -> bool:
    """Whether the seal reads this campaign's rows again (objects the sanitizer touches)."""
    loaded, problems = load_campaign(camp, columnar=True)
    assert not problems
    return any(
        _needs_rows(ct, Sanitizer.for_campaign(loaded.doc)) for ct in loaded.columns.values()
    )


_PER_ROW_OBJECTS: dict[str, Any] = {
    "a null child": lambda i: {"a": None if i == 2 else 1},
    "a key absent in one object and null in another": lambda i: (
        {"a": 1} if i == 2 else {"a": 1, "b": None if i == 4 else 2}
    ),
    "an absent key whose name is not plain": lambda i: {"a": 1} if i == 2 else {"a": 1, "b c": 2},
    "an absent key, the same name null elsewhere": lambda i: (
        {"a": 1, "x": {"b": None}} if i == 2 else {"a": 1, "b": 2, "x": {"b": 3}}
    ),
    "an integer beyond 2**53": lambda i: {"a": 2**60},
    "an integral double beyond 2**53": lambda i: {"a": 1e21},
    "an integer and a string": lambda i: {"a": 1} if i == 2 else {"a": "x"},
}
# Arrays (issue 22): their RFC 8785 text column-wise too, elements' nulls being JSON null.
_ARRAYS: dict[str, Any] = {
    "integers": lambda i: [i, 2, -3],
    "doubles": lambda i: [0.1, 1e-7, -0.0, 2.0, 1e15, 5e-324, 1.5e-300],
    "integers and doubles": lambda i: [1, 2.5] if i % 2 else [3],
    "strings": lambda i: ['say "hi" \\ \x01', "ünï", ""],
    "booleans and nulls": lambda i: [True, None, False],
    "empty": lambda i: [],
    "nested": lambda i: [[1, 2], [], [3]] if i % 2 else [[]],
    "objects": lambda i: [{"b": 1, "a": "x"}, {"b": 2, "a": "y"}],
    "an object holding a list": lambda i: {"a": [1, 2], "b": {"c": [True]}},
    "objects holding lists": lambda i: [{"k": [i, None]}],
    "objects with varying keys": lambda i: [{"a": 1}, {"b": 2}, {}],
}
_PER_ROW_ARRAYS: dict[str, Any] = {
    "a number and a string": lambda i: [1, "a"],
    "an integer beyond 2**53": lambda i: [2**60],
    "an integral double beyond 2**53": lambda i: [1e20],
    # pyarrow 26's JSON reader gives a list<null> column inconsistent offsets.
    "only nulls": lambda i: [None, None],
    "an object with a null": lambda i: [{"a": None}, {"a": 1}],
}
_SCRUBBED_OBJECTS: dict[str, Any] = {
    "an address inside": lambda i: {"host": f"10.0.0.{i % 3}", "n": i},
    "an address as a key": lambda i: {"10.0.0.5": i},
    "a secret-like key": lambda i: {"api_key": "abc", "n": 1},
}


def _with_objects(make: Any, field: str = "usage") -> str:
    rows = receipts()
    for i, r in enumerate(rows):
        r[field] = make(i)
    rows[3][field] = None  # an explicit null ...
    del rows[5][field]  # ... and an absent field
    return _jsonl(rows)


_COLUMN_WISE = {
    **{f"object, {k}": v for k, v in _OBJECTS.items()},
    **{f"array, {k}": v for k, v in _ARRAYS.items()},
}
_PER_ROW = {
    **{f"object, {k}": v for k, v in _PER_ROW_OBJECTS.items()},
    **{f"array, {k}": v for k, v in _PER_ROW_ARRAYS.items()},
}


@pytest.mark.parametrize("case", list(_COLUMN_WISE))
def test_object_and_array_fields_are_written_column_wise(tmp_path: Path, case: str) -> None:
    """Objects and arrays in an unknown field (RFC 8785 text per value: keys sorted,
    nested objects and arrays, arrays of objects) are read column-wise and seal to the
    per-row bytes."""
    camp = _campaign(tmp_path / "c", "receipts.jsonl", _with_objects(_COLUMN_WISE[case]))
    ct = read_columnar(camp / "receipts.jsonl", "receipts")
    assert ct is not None
    assert [u.name for u in ct.unknown if u.canonical] == ["usage"]
    assert not _sealed_from_rows(camp)
    col, row = both(camp)
    assert isinstance(row, bytes)
    assert col == row


@pytest.mark.parametrize("case", list(_PER_ROW))
def test_values_the_columns_cannot_tell_exactly_go_per_row(tmp_path: Path, case: str) -> None:
    camp = _campaign(tmp_path / "c", "receipts.jsonl", _with_objects(_PER_ROW[case]))
    assert read_columnar(camp / "receipts.jsonl", "receipts") is None
    col, row = both(camp)
    assert col == row


def test_an_address_inside_an_array_seals_as_per_row(tmp_path: Path) -> None:
    text = _with_objects(lambda i: ["ok", f"10.0.0.{i % 3}"])
    camp = _campaign(tmp_path / "c", "receipts.jsonl", text)
    assert _sealed_from_rows(camp)
    col, row = both(camp)
    assert isinstance(row, bytes)
    assert col == row


@pytest.mark.parametrize("field", ["usage", "api_token"])
@pytest.mark.parametrize("case", list(_SCRUBBED_OBJECTS))
def test_objects_the_sanitizer_touches_seal_as_per_row(
    tmp_path: Path, case: str, field: str
) -> None:
    """Per row, object keys and strings are scrubbed row by row (pseudonyms numbered in
    that order, secret-like keys redacted): read column-wise, such a table is sealed
    from its rows, to the same bytes."""
    camp = _campaign(
        tmp_path / "c", "receipts.jsonl", _with_objects(_SCRUBBED_OBJECTS[case], field)
    )
    assert _sealed_from_rows(camp)
    col, row = both(camp)
    assert isinstance(row, bytes)
    assert col == row


@pytest.mark.parametrize(("opening", "closing"), [('{"x": ', "}"), ("[", "]"), ('[{"x": ', "}]")])
@pytest.mark.parametrize(("levels", "accepted"), [(99, True), (100, False), (5000, False)])
def test_objects_nested_beyond_the_loader_bound_are_refused_at_their_line(
    tmp_path: Path, levels: int, accepted: bool, opening: str, closing: str
) -> None:
    """The per-row loader refuses a line nested deeper than 100 levels (the row is one):
    column-wise, the same bound holds for objects, arrays and both (5,000 levels once
    overflowed Python's stack)."""
    per_level = opening.count("{") + opening.count("[")
    n = -(-levels // per_level)  # each step opens per_level levels
    if per_level > 1 and accepted:
        n = levels // per_level  # stay within the bound
    lines = [json.dumps(r) for r in receipts()]
    lines[2] = lines[2][:-1] + ', "u": ' + opening * n + "1" + closing * n + "}"
    camp = _campaign(tmp_path / "c", "receipts.jsonl", "\n".join(lines) + "\n")
    assert (read_columnar(camp / "receipts.jsonl", "receipts") is not None) == accepted
    col, row = both(camp)
    assert col == row
    if not accepted:
        assert row == [("receipts.jsonl", "line 3", None, "nested deeper than 100 levels")]


@pytest.mark.parametrize(("keys", "accepted"), [(1000, True), (1001, False)])
def test_very_wide_objects_go_per_row(tmp_path: Path, keys: int, accepted: bool) -> None:
    """Beyond MAX_OBJECT_KEYS keys (all levels: here keys - 1 at the top, one below) an
    object field is left to the rows."""
    assert MAX_OBJECT_KEYS == 1000
    text = _with_objects(lambda i: {f"k{j}": {"v": j} if j == 0 else j for j in range(keys - 1)})
    camp = _campaign(tmp_path / "c", "receipts.jsonl", text)
    assert (read_columnar(camp / "receipts.jsonl", "receipts") is not None) == accepted
    col, row = both(camp)
    assert isinstance(row, bytes)
    assert col == row


def test_cross_checks_name_the_line_in_columnar_mode(tmp_path: Path) -> None:
    """Rows that pass the column checks but break cross-row rules: same problems, same lines."""
    rows = receipts()
    rows[4]["request_id"] = rows[2]["request_id"]  # duplicate
    rows[5]["arm"] = "ghost"  # unknown arm
    rows[6]["attempt_id"] = "a9"  # unknown attempt
    rows[7]["end"] = "2026-03-01T09:00:00Z"  # ends before it starts
    for name, text in (("receipts.jsonl", _jsonl(rows)), ("receipts.csv", _csv(rows))):
        camp = _campaign(tmp_path / name, name, text)
        assert read_columnar(camp / name, "receipts") is not None
        _, col = load_campaign(camp, columnar=True)
        _, row = load_campaign(camp, columnar=False)
        assert col == row
        first = 1 if name.endswith(".jsonl") else 2
        where = {(p.record, p.field) for p in col if p.where == name}
        assert where == {
            (f"line {2 + first}", "request_id"),
            (f"line {4 + first}", "request_id"),
            (f"line {5 + first}", "arm"),
            (f"line {6 + first}", "attempt_id"),
            (f"line {7 + first}", "end"),
        }


# --- the sanitizer's RE2 prefilter --------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(
        st.sampled_from(
            [*"abkeytoKENs-_:./\\0123456789 ABCDEFhomeUsrlIP@=", "sk-", "10.0.0.1", "::"]
        ),
        max_size=30,
    ).map("".join)
)
def test_re2_prefilter_covers_every_rule(text: str) -> None:
    """ASCII text the prefilter does not pick is left unchanged by every rule (Python re)."""
    san = Sanitizer(["gpu-node7"], include_local_hostname=False)
    pattern = ANY_RE2 + "|" + re.escape("gpu-node7")
    picked = pc.match_substring_regex(pa.array([text]), pattern, ignore_case=True)
    if not picked[0].as_py():
        assert san.scrub(text, "m", "f") == text
        assert not san.counts


@settings(max_examples=200, deadline=None)
@given(
    data=st.one_of(st.binary(max_size=40), st.text(max_size=12).map(str.encode)),
    block=st.integers(1, 8),
)
def test_blockwise_utf8_check_agrees_with_python(data: bytes, block: int) -> None:
    """The block-at-a-time UTF-8 check (no file-sized str) accepts what bytes.decode does."""
    try:
        data.decode("utf-8")
        expected = True
    except UnicodeDecodeError:
        expected = False
    assert _is_utf8(data, block=block) is expected
