"""Telemetry and worker exits read column-wise (issue 22): same bytes, same problems.

Every comparison runs both real paths: ``seal_campaign`` as shipped (column-wise where
the file allows) and the per-row path forced with ``REPROBUNDLE_SEAL_PER_ROW=1``, the
reference. Expected values are the per-row path's; nothing here is copied from the
column-wise code.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundler.campaign.columnar import ColumnTable, read_columnar
from bundler.campaign.load import load_campaign
from bundler.format.tables import table_schema
from tests.campaign_builder import write_campaign
from tests.seal_paths import both

TABLES = ("telemetry", "worker_exits")
SECRETS = (
    "10.0.0.7",
    "gpu-node7.internal",
    "Bearer abcdefghijklmnop",
    "/home/alice/run",
    "ünïcødé 🙂",
    "Straße 10.0.0.8",
)
UNKNOWN: dict[str, st.SearchStrategy[Any]] = {
    "temp_c": st.one_of(st.none(), st.floats(-50, 150, allow_nan=False)),
    "npu.clock": st.one_of(st.none(), st.integers(-(2**53) + 1, 2**53 - 1)),
    "note": st.one_of(st.none(), st.sampled_from(SECRETS), st.text(max_size=6)),
    "warm": st.one_of(st.none(), st.booleans()),
}


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def _csv(name: str, rows: list[dict[str, Any]]) -> str:
    known = list(table_schema(name)["properties"])
    cols = [f for f in (*known, *UNKNOWN) if any(f in r for r in rows)]
    buf = io.StringIO()
    w = csv.DictWriter(buf, cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: repr(v) if type(v) is float else v for k, v in r.items()})
    return buf.getvalue()


def _campaign(root: Path, rel: str, text: str) -> Path:
    if root.exists():
        shutil.rmtree(root)
    camp = write_campaign(root)
    (camp / rel).write_bytes(text.encode("utf-8"))
    return camp


# --- generated rows ------------------------------------------------------------------------

_text = st.one_of(st.text(min_size=1, max_size=10), st.sampled_from(SECRETS))
_number = st.one_of(
    st.floats(0, 1e300, allow_nan=False, allow_infinity=False), st.integers(0, 2**70)
)


@st.composite
def _time(draw: st.DrawFn) -> str:
    frac = draw(st.sampled_from(["", ".1", ".123456789"]))
    sep = draw(st.sampled_from(["T", "t", " "]))
    off = draw(st.sampled_from(["Z", "z", "+01:00"]))
    return f"2026-03-0{draw(st.integers(1, 9))}{sep}10:00:{draw(st.integers(0, 59)):02d}{frac}{off}"


def _common(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "attempt_id": draw(st.sampled_from(["a1", "a2"])),
        "arm": draw(st.sampled_from(["baseline", "candidate"])),
        "server": draw(_text),
    }


@st.composite
def _telemetry(draw: st.DrawFn) -> dict[str, Any]:
    row = {
        **_common(draw),
        "device": draw(_text),
        "time": draw(_time()),
        "hbm_used_mb": draw(_number),
    }
    optional: dict[str, st.SearchStrategy[Any]] = {
        "hbm_total_mb": st.one_of(st.none(), _number),
        "aicore_pct": st.one_of(st.none(), st.floats(0, 100), st.integers(0, 100)),
        "source": st.one_of(st.none(), st.just(""), _text),
    }
    return _with_optional(draw, row, optional)


@st.composite
def _worker_exit(draw: st.DrawFn) -> dict[str, Any]:
    row = {**_common(draw), "worker": draw(_text), "exit_s": draw(_number)}
    optional: dict[str, st.SearchStrategy[Any]] = {
        "exit_code": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
        "signal": st.one_of(st.none(), st.sampled_from(["SIGTERM", "SIGKILL", "SIG9"])),
        "killed": st.one_of(st.none(), st.booleans()),
    }
    return _with_optional(draw, row, optional)


def _with_optional(
    draw: st.DrawFn, row: dict[str, Any], optional: dict[str, st.SearchStrategy[Any]]
) -> dict[str, Any]:
    # Optional and unknown fields each absent, null or a value.
    for k, strat in {**optional, **UNKNOWN}.items():
        if draw(st.booleans()):
            row[k] = draw(strat)
    return row


_ROWS = {"telemetry": _telemetry, "worker_exits": _worker_exit}

_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@_SETTINGS
@given(data=st.data(), name=st.sampled_from(TABLES), as_csv=st.booleans())
def test_column_wise_seal_matches_per_row(
    tmp_path: Path, data: st.DataObject, name: str, as_csv: bool
) -> None:
    rows = data.draw(st.lists(_ROWS[name](), min_size=1, max_size=10))
    rel, text = (f"{name}.csv", _csv(name, rows)) if as_csv else (f"{name}.jsonl", _jsonl(rows))
    col, row = both(_campaign(tmp_path / "c", rel, text))
    assert col == row


# --- honest files take the column-wise path --------------------------------------------------


def _honest(name: str, n: int) -> list[dict[str, Any]]:
    """``n`` valid rows with optional fields absent, null and set, and unknown fields."""
    rows: list[dict[str, Any]] = []
    for i in range(n):
        r: dict[str, Any] = {
            "attempt_id": "a2",
            "arm": ("baseline", "candidate")[i % 2],
            "server": f"node{i % 4} 10.0.0.{i % 3}",
        }
        if name == "telemetry":
            r |= {
                "device": f"npu{i % 8}",
                "time": f"2026-03-01T10:{i // 60 % 60:02d}:{i % 60:02d}.{i % 10}Z",
                "hbm_used_mb": 1000.0 + i / 8,
            }
            if i % 3:
                r["aicore_pct"] = None if i % 3 == 1 else i % 101
            if i % 5 == 0:
                r["source"] = "npu-smi"
        else:
            r |= {"worker": f"w{i}", "exit_s": i * 0.25}
            if i % 3:
                r["killed"] = None if i % 3 == 1 else i % 2 == 0
            if i % 4 == 0:
                r["exit_code"], r["signal"] = -9, "SIGKILL"
        if i % 2:
            r["temp_c"] = None if i % 4 == 1 else 40.5 + i % 7
        if i % 7 == 0:
            r["note"] = f"at gpu-node{i % 2}.internal"
        rows.append(r)
    return rows


@pytest.mark.parametrize("name", TABLES)
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_honest_table_is_read_column_wise_and_sealed_alike(
    tmp_path: Path, name: str, fmt: str
) -> None:
    rows = _honest(name, 40)
    text = _jsonl(rows) if fmt == "jsonl" else _csv(name, rows)
    camp = _campaign(tmp_path / "c", f"{name}.{fmt}", text)
    assert isinstance(read_columnar(camp / f"{name}.{fmt}", name), ColumnTable)
    col, row = both(camp)
    assert isinstance(col, bytes)
    assert col == row


@pytest.mark.parametrize("name", TABLES)
def test_large_valid_file_takes_the_column_wise_path(tmp_path: Path, name: str) -> None:
    n = 20_000
    camp = _campaign(tmp_path / "c", f"{name}.jsonl", _jsonl(_honest(name, n)))
    loaded, problems = load_campaign(camp, columnar=True)
    assert problems == []
    assert loaded.tables[name] == []
    assert loaded.columns[name].num_rows == n


def test_csv_booleans_are_read_as_python_lowers_them(tmp_path: Path) -> None:
    """``TRUE``/``False`` are booleans per row (``str.lower``); column-wise too."""
    rows = _honest("worker_exits", 6)
    text = _csv("worker_exits", rows).replace("True", "TRUE").replace("False", "fAlSe")
    assert "TRUE" in text
    camp = _campaign(tmp_path / "c", "worker_exits.csv", text)
    ct = read_columnar(camp / "worker_exits.csv", "worker_exits")
    assert ct is not None
    got = ct.column("killed").to_pylist()
    assert got == [None, None, True, None, None, False]
    col, row = both(camp)
    assert isinstance(col, bytes)
    assert col == row


# --- invalid files: the same problems ---------------------------------------------------------

_TELEMETRY_BAD = {
    "negative memory": {"hbm_used_mb": -1},
    "percent over 100": {"aicore_pct": 100.5},
    "missing time": {"time": None},
    "bad time": {"time": "2026-02-30T10:00:00Z"},
    "number as text": {"hbm_used_mb": "12"},
    "boolean as number": {"hbm_used_mb": True},
    "unknown attempt": {"attempt_id": "a9"},
    "unknown arm": {"arm": "other"},
    "big integer in an unknown field": {"temp_c": 2**60},
}
_WORKER_BAD = {
    "killed as text": {"killed": "yes"},
    "killed as number": {"killed": 1},
    "fractional exit code": {"exit_code": 1.5},
    "boolean exit code": {"exit_code": True},
    "signal pattern": {"signal": "TERM"},
    "missing worker": {"worker": None},
    "unknown attempt": {"attempt_id": "a9"},
    "unknown arm": {"arm": "other"},
}
_BAD = [("telemetry", k, v) for k, v in _TELEMETRY_BAD.items()] + [
    ("worker_exits", k, v) for k, v in _WORKER_BAD.items()
]


@pytest.mark.parametrize(("name", "case", "change"), _BAD, ids=[f"{n}-{c}" for n, c, _ in _BAD])
def test_invalid_rows_are_reported_as_per_row(
    tmp_path: Path, name: str, case: str, change: dict[str, Any]
) -> None:
    rows = _honest(name, 12)
    for i in (3, 8):
        for k, v in change.items():
            if v is None:
                rows[i].pop(k, None)
            else:
                rows[i][k] = v
    camp = _campaign(tmp_path / "c", f"{name}.jsonl", _jsonl(rows))
    col, row = both(camp)
    assert isinstance(row, list), case
    assert row, case
    assert col == row, case


@pytest.mark.parametrize(
    ("name", "column", "cell"),
    [
        ("worker_exits", "killed", "yes"),
        ("worker_exits", "killed", "1"),
        ("worker_exits", "exit_code", "+5"),
        ("telemetry", "hbm_used_mb", "nan"),
        ("telemetry", "aicore_pct", " 5"),
    ],
)
def test_invalid_csv_cells_are_reported_as_per_row(
    tmp_path: Path, name: str, column: str, cell: str
) -> None:
    rows = _honest(name, 8)
    rows[0][column] = "PLACEHOLDER"
    text = _csv(name, rows).replace("PLACEHOLDER", cell)
    camp = _campaign(tmp_path / "c", f"{name}.csv", text)
    col, row = both(camp)
    assert col == row


def test_unknown_object_field_goes_per_row_and_seals_alike(tmp_path: Path) -> None:
    """An object holding a list, on one row only, in an unknown field is valid (kept in
    ``extra``) but has no exact column form (absent elsewhere, a list inside): per-row."""
    rows = _honest("telemetry", 6)
    rows[2]["temp_c"] = {"die": 41.5, "hbm": [1, 2]}
    camp = _campaign(tmp_path / "c", "telemetry.jsonl", _jsonl(rows))
    assert read_columnar(camp / "telemetry.jsonl", "telemetry") is None
    col, row = both(camp)
    assert isinstance(col, bytes)
    assert col == row


_LEXICAL = {
    "duplicate boolean key": '"killed": true, "killed": false',
    "duplicate number key": '"exit_s": 1.5, "exit_s": 2.5',
    "exponent integer": '"exit_code": 1e2',
    "integer beyond int64": '"exit_code": 9223372036854775808',
    "negative zero": '"exit_s": -0.0, "exit_code": -0',
    "double overflow": '"exit_s": 1E400',
    "double underflow": '"exit_s": 1e-400',
    "boolean in capitals": '"killed": True',
    "string boolean": '"killed": "true"',
}


@pytest.mark.parametrize("case", sorted(_LEXICAL))
def test_json_spellings_are_sealed_or_reported_as_per_row(tmp_path: Path, case: str) -> None:
    """Spellings the two JSON readers might see differently: bytes or problems as per row."""
    rows = [json.dumps(r) for r in _honest("worker_exits", 6)]
    for i in (1, 4):
        r = json.loads(rows[i])
        for k in ("killed", "exit_s", "exit_code"):
            if f'"{k}"' in _LEXICAL[case]:
                r.pop(k, None)
        rows[i] = json.dumps(r)[:-1] + ", " + _LEXICAL[case] + "}"
    camp = _campaign(tmp_path / "c", "worker_exits.jsonl", "\n".join(rows) + "\n")
    col, row = both(camp)
    assert col == row
