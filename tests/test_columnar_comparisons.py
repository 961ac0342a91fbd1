"""The comparisons table read column-wise (issue 22): same bytes, same problems as per row.

Every comparison runs both real paths: ``seal_campaign`` as shipped (column-wise where the
file allows) and the per-row path forced with ``REPROBUNDLE_SEAL_PER_ROW=1``, the
reference. Expected values are the per-row path's; nothing is copied from the
column-wise code.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundler.campaign.comparison_columns import MAX_METRIC_CELLS, read_comparisons
from bundler.campaign.load import load_campaign
from bundler.campaign.stream import StreamLimits
from bundler.format.container import read_container
from tests.campaign_builder import receipts, write_campaign
from tests.seal_paths import both

REQUESTS = [r["request_id"] for r in receipts()]
KNOWN = (
    "comparison_id",
    "attempt_id",
    "baseline_request_id",
    "candidate_request_id",
    "baseline_sha256",
    "candidate_sha256",
)
# Metric names: plain, Unicode, JSON escapes, a secret-looking name (values are numbers,
# never redacted), a dotted name, the empty name.
NAMES = ("rouge_l", "exact.match", "BLEU", "größe", 'q"uote', "a\\b", "api_key", "", "lpips")
# Plain names (letters, digits, `_.-`): an entry absent in some row is told from `null`.
PLAIN = ("rouge_l", "exact.match", "BLEU", "lpips-v2")
# Names the sanitizer changes (addresses, hosts, credentials): the per-row path numbers
# their pseudonyms in row and key order.
SCRUBBED = ("10.0.0.7", "10.0.0.2", "gpu-node7.internal", "Bearer abcdefghijklmnop")


def _campaign(root: Path, rel: str, text: str) -> Path:
    if root.exists():
        shutil.rmtree(root)
    camp = write_campaign(root)
    (camp / rel).write_bytes(text.encode("utf-8"))
    return camp


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def _csv(rows: list[dict[str, Any]]) -> str:
    metric_cols = [f"metrics.{n}" for n in dict.fromkeys(n for r in rows for n in r["metrics"])]
    others = [k for k in dict.fromkeys(k for r in rows for k in r) if k != "metrics"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, [*others, *metric_cols], lineterminator="\n")
    w.writeheader()
    for r in rows:
        cells = {k: v for k, v in r.items() if k != "metrics"}
        cells.update({f"metrics.{k}": repr(float(v)) for k, v in r["metrics"].items()})
        w.writerow(cells)
    return buf.getvalue()


def _honest(n: int, names: tuple[str, ...] = ("rouge_l", "bleu", "exact_match")) -> list[Any]:
    return [
        {
            "comparison_id": f"cmp-{i}",
            "attempt_id": "a2",
            "baseline_request_id": REQUESTS[i % len(REQUESTS)],
            "candidate_request_id": REQUESTS[(i + 1) % len(REQUESTS)],
            "baseline_sha256": f"{i:064x}",
            "metrics": {k: round(0.5 + (i * 7 + j) % 100 / 200, 4) for j, k in enumerate(names)},
        }
        for i in range(n)
    ]


def _metrics_column(bundle: bytes, tmp: Path) -> list[Any]:
    path = tmp / "m.bundle"
    path.write_bytes(bundle)
    member = next(m for m in read_container(path) if m.name == "tables/comparisons.parquet")
    import pyarrow.parquet as pq

    return pq.read_table(pa.BufferReader(member.data)).column("metrics").to_pylist()


# --- generated tables ----------------------------------------------------------------------

_value = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x != 0 or str(x)[0] != "-"),
    st.integers(-(2**70), 2**70),
)


@st.composite
def _row(draw: st.DrawFn, i: int, names: tuple[str, ...]) -> dict[str, Any]:
    chosen = draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names)))
    row: dict[str, Any] = {
        "comparison_id": f"cmp-{i}",
        "attempt_id": draw(st.sampled_from(["a1", "a2"])),
        "baseline_request_id": draw(st.sampled_from(REQUESTS)),
        "candidate_request_id": draw(st.sampled_from(REQUESTS)),
        "metrics": {k: draw(_value) for k in chosen},
    }
    sha = draw(st.sampled_from(["absent", "null", "value"]))
    if sha != "absent":
        row["candidate_sha256"] = None if sha == "null" else f"{i:064x}"
    if draw(st.booleans()):
        row["scorer_note"] = draw(st.one_of(st.none(), st.text(max_size=5), st.just("10.0.0.9")))
    keys = list(row)
    order = draw(st.permutations(keys))
    return {k: row[k] for k in order}


@st.composite
def _table(draw: st.DrawFn, names: tuple[str, ...]) -> list[dict[str, Any]]:
    n = draw(st.integers(1, 8))
    rows = [draw(_row(i, names)) for i in range(n)]
    rows[0]["metrics"] = rows[0]["metrics"] or {names[0]: 1.0}
    return rows


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.sampled_from([NAMES, PLAIN]).flatmap(_table), fmt=st.sampled_from(["jsonl", "csv"]))
def test_column_wise_seal_matches_per_row(tmp_path: Path, rows: list[Any], fmt: str) -> None:
    if fmt == "csv":
        # A CSV row has every metric column: a cell left empty is a null entry per row.
        names = list(dict.fromkeys(k for r in rows for k in r["metrics"]))
        for r in rows:
            r["metrics"] = {k: r["metrics"].get(k, 0.5) for k in names}
    text = _jsonl(rows) if fmt == "jsonl" else _csv(rows)
    col, row = both(_campaign(tmp_path / "c", f"comparisons.{fmt}", text))
    assert col == row


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=_table(NAMES[:3] + SCRUBBED))
def test_scrubbed_metric_names_seal_as_per_row(tmp_path: Path, rows: list[Any]) -> None:
    """Names the rules change are numbered in row and key order: the table goes per row."""
    col, row = both(_campaign(tmp_path / "c", "comparisons.jsonl", _jsonl(rows)))
    assert col == row


def test_scrubbed_names_keep_key_order_numbering(tmp_path: Path) -> None:
    """Derived by hand: 10.0.0.7 is met first, so it is <ip-1>, though 10.0.0.2 sorts first."""
    rows = _honest(2)
    rows[0]["metrics"] = {"ok": 0.0}
    rows[1]["metrics"] = {"10.0.0.7": 2.0, "10.0.0.2": 3.0}
    camp = _campaign(tmp_path / "c", "comparisons.jsonl", _jsonl(rows))
    col, row = both(camp)
    assert isinstance(col, bytes)
    assert col == row
    assert _metrics_column(col, tmp_path) == [[("ok", 0.0)], [("<ip-1>", 2.0), ("<ip-2>", 3.0)]]


def test_metric_names_that_scrub_alike_are_refused_as_per_row(tmp_path: Path) -> None:
    rows = _honest(3)
    rows[2]["metrics"] = {"Bearer abcdefghijklmnop": 1.0, "Bearer qrstuvwxyzabcdef": 2.0}
    camp = _campaign(tmp_path / "c", "comparisons.jsonl", _jsonl(rows))
    col, row = both(camp)
    assert isinstance(row, list)
    assert any("two keys become" in p[3] for p in row)
    assert col == row


# --- which path ----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_large_valid_file_takes_the_column_wise_path(tmp_path: Path, fmt: str) -> None:
    rows = _honest(3000)
    if fmt == "jsonl":
        rows[5]["metrics"].pop("bleu")  # absent in one row
    rows[7]["candidate_sha256"] = None
    text = _jsonl(rows) if fmt == "jsonl" else _csv(rows)
    camp = _campaign(tmp_path / "c", f"comparisons.{fmt}", text)
    loaded, problems = load_campaign(camp, columnar=True)
    assert problems == []
    assert "comparisons" in loaded.columns
    assert loaded.tables["comparisons"] == []
    col, row = both(camp)
    assert isinstance(col, bytes)
    assert col == row
    m = _metrics_column(col, tmp_path)
    assert m[0] == sorted((k, float(v)) for k, v in rows[0]["metrics"].items())


def test_names_and_fields_first_met_late_are_read_column_wise(tmp_path: Path) -> None:
    """Names met after the first lines are found by the survey, not lost."""
    rows = _honest(4000)
    rows[3500]["metrics"]["late"] = 0.75
    rows[3600]["scorer"] = "v2"
    camp = _campaign(tmp_path / "c", "comparisons.jsonl", _jsonl(rows))
    ct = read_comparisons(camp / "comparisons.jsonl")
    assert ct is not None
    assert ct.column("metrics")[3500].as_py()[1] == (
        "exact_match",
        rows[3500]["metrics"]["exact_match"],
    )
    assert ("late", 0.75) in ct.column("metrics")[3500].as_py()
    assert [u.name for u in ct.unknown] == ["scorer"]
    col, row = both(camp)
    assert isinstance(col, bytes)
    assert col == row


def test_names_times_rows_beyond_the_budget_go_per_row(tmp_path: Path) -> None:
    """Arrow gives every name a slot in every row: too many names per row go per row."""
    n = 600
    rows = _honest(n)
    for i, r in enumerate(rows):
        r["metrics"] = {f"m{i}_{j}": 1.0 for j in range(MAX_METRIC_CELLS // n**2 + 2)}
    camp = _campaign(tmp_path / "c", "comparisons.jsonl", _jsonl(rows))
    assert read_comparisons(camp / "comparisons.jsonl") is None
    col, row = both(camp)
    assert isinstance(col, bytes)
    assert col == row


def test_metric_cited_by_a_claim_is_found_in_columns(tmp_path: Path) -> None:
    camp = _campaign(tmp_path / "c", "comparisons.jsonl", _jsonl(_honest(4)))
    claims = json.loads((camp / "claims.json").read_text())
    for metric in ("rouge_l", "nowhere"):
        claims.append(
            {
                "claim_id": f"max-{metric}",
                "statistic": "metric_max",
                "params": {"metric": metric},
                "value": "0.52",
                "unit": "1",
                "decimals": 2,
            }
        )
    (camp / "claims.json").write_text(json.dumps(claims))
    loaded, _ = load_campaign(camp, columnar=True)
    assert "comparisons" in loaded.columns
    col, row = both(camp)
    assert isinstance(row, list)
    assert [p for p in row if p[2] == "params.metric"] == [
        ("claims.json", "#2", "params.metric", "'nowhere' is neither gated nor recorded")
    ]
    assert col == row


def test_streamed_receipts_find_the_requests_of_column_wise_comparisons(tmp_path: Path) -> None:
    rows = _honest(5)
    rows[3]["candidate_request_id"] = "no-such-request"
    camp = _campaign(tmp_path / "c", "comparisons.jsonl", _jsonl(rows))
    stream = StreamLimits(min_bytes=1, block_bytes=700, row_group_rows=7)
    loaded, _ = load_campaign(camp, columnar=True, stream=stream)
    assert "comparisons" in loaded.columns
    assert "receipts" in loaded.streamed
    for st_ in loaded.streamed.values():
        st_.close()
    col, row = both(camp, stream)
    assert isinstance(row, list)
    assert (
        "comparisons.jsonl",
        "line 4",
        "candidate_request_id",
        "'no-such-request' is not a known request (receipts table)",
    ) in row
    assert col == row
    rows[3]["candidate_request_id"] = REQUESTS[0]
    camp = _campaign(tmp_path / "c", "comparisons.jsonl", _jsonl(rows))
    col, row = both(camp, stream)
    assert isinstance(col, bytes)
    assert col == row


# --- invalid or doubtful files: problems (or bytes) as per row ------------------------------

_JSON_CASES = {
    "null metric": '"metrics": {"rouge_l": null, "bleu": 1}',
    "null metric, sha null": '"metrics": {"bleu": 1, "rouge_l": null}, "baseline_sha256": null',
    "string metric": '"metrics": {"rouge_l": "0.5"}',
    "boolean metric": '"metrics": {"rouge_l": true}',
    "object metric": '"metrics": {"rouge_l": {"x": 1}}',
    "array metrics": '"metrics": [1, 2]',
    "null metrics": '"metrics": null',
    "number metrics": '"metrics": 5',
    "duplicate metric": '"metrics": {"bleu": 1, "bleu": 2}',
    "duplicate metrics": '"metrics": {"bleu": 1}, "metrics": {"x": 2}',
    "integer -0": '"metrics": {"bleu": -0}',
    "float -0.0": '"metrics": {"bleu": -0.0}',
    "overflow": '"metrics": {"bleu": 1e400}',
    "underflow": '"metrics": {"bleu": 1e-400}',
    "integer beyond double": '"metrics": {"bleu": 1' + "0" * 400 + "}",
    "exponent": '"metrics": {"bleu": 1E2, "rouge_l": 12345678901234567890123}',
    "escaped name null": '"metrics": {"\\u0062leu": null}',
    "escaped name": '"metrics": {"\\u0062leu": 0.25, "x\\"y": 1}',
    "empty metrics": '"metrics": {}',
    "unknown request": '"metrics": {"bleu": 1}, "baseline_request_id": "nope"',
    "unknown attempt": '"metrics": {"bleu": 1}, "attempt_id": "a9"',
    "empty id": '"metrics": {"bleu": 1}, "comparison_id": ""',
    "bad sha": '"metrics": {"bleu": 1}, "baseline_sha256": "xyz"',
}


@pytest.mark.parametrize("case", sorted(_JSON_CASES))
def test_json_spellings_are_sealed_or_reported_as_per_row(tmp_path: Path, case: str) -> None:
    rows = _honest(6)
    lines = []
    for i, r in enumerate(rows):
        if i in (1, 4):
            for k in ("metrics", "baseline_request_id", "attempt_id", "comparison_id"):
                if f'"{k}"' in _JSON_CASES[case]:
                    r.pop(k, None)
            r.pop("baseline_sha256", None)
            lines.append(json.dumps(r)[:-1] + ", " + _JSON_CASES[case] + "}")
        else:
            lines.append(json.dumps(r))
    camp = _campaign(tmp_path / "c", "comparisons.jsonl", "\n".join(lines) + "\n")
    col, row = both(camp)
    assert col == row


def test_missing_metrics_and_duplicate_ids_are_reported_as_per_row(tmp_path: Path) -> None:
    rows = _honest(6)
    del rows[2]["metrics"]
    rows[4]["comparison_id"] = rows[1]["comparison_id"]
    camp = _campaign(tmp_path / "c", "comparisons.jsonl", _jsonl(rows))
    col, row = both(camp)
    assert isinstance(row, list)
    assert ("comparisons.jsonl", "line 3", "metrics", "is required") in row
    assert col == row


@pytest.mark.parametrize("cell", ["", "nan", "+5", " 5", "1_0", "inf", "x", "-0", "1e400"])
def test_csv_metric_cells_are_sealed_or_reported_as_per_row(tmp_path: Path, cell: str) -> None:
    rows = _honest(6)
    rows[3]["metrics"]["bleu"] = 0.125
    text = _csv(rows).replace("0.125", cell if cell else "", 1)
    camp = _campaign(tmp_path / "c", "comparisons.csv", text)
    col, row = both(camp)
    assert col == row


def test_csv_without_metric_columns_is_reported_as_per_row(tmp_path: Path) -> None:
    rows = _honest(4, names=())
    text = _csv(rows)
    camp = _campaign(tmp_path / "c", "comparisons.csv", text)
    col, row = both(camp)
    assert isinstance(row, list)
    assert col == row


@pytest.mark.parametrize("first", ["metrics", "metrics.bleu"])
@pytest.mark.parametrize("cell", ["x", ""])
def test_csv_metrics_column_beside_metric_columns_is_a_problem(
    tmp_path: Path, first: str, cell: str
) -> None:
    """Was a traceback (TypeError) per row: now one located problem, either path."""
    other = "metrics.bleu" if first == "metrics" else "metrics"
    head = "comparison_id,attempt_id,baseline_request_id,candidate_request_id"
    cells = {"metrics": cell, "metrics.bleu": "0.5"}
    text = f"{head},{first},{other}\ncmp-1,a2,b1-0,b1-1,{cells[first]},{cells[other]}\n"
    camp = _campaign(tmp_path / "c", "comparisons.csv", text)
    col, row = both(camp)
    assert row == [
        (
            "comparisons.csv",
            "line 1",
            "metrics",
            "a `metrics` column beside `metrics.<name>` columns; keep only the latter",
        )
    ]
    assert col == row
