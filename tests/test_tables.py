"""Table schemas: the columnar checker agrees with jsonschema; Arrow schemas follow the spec."""

from __future__ import annotations

from typing import Any

import jsonschema
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundler._internal.schemas import load_schema
from bundler._internal.timefmt import format_ns, parse_rfc3339_ns
from bundler.format.tables import TABLE_NAMES, arrow_schema, check_rows, rows_to_table, table_schema
from bundler.format.vocabulary import STATISTICS
from tests.campaign_builder import receipts

# Values of every JSON type, including near-misses of each field's constraints.
json_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 9.3e18, 2.0**63]),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.sampled_from(
        [
            "",
            "ok",
            "measured",
            "warmup",
            "quality",
            "timeout",
            "request",
            "SIGTERM",
            "sigterm",
            "2026-03-01T10:00:00Z",
            "2026-03-01T10:00:00.123456789+08:00",
            "2026-03-01 10:00",
            "a" * 64,
            "A" * 64,
            "0" * 63,
            "accepted",
            ">=",
            "=>",
            "media",
            "x" * 201,
        ]
    ),
    st.text(max_size=5),
    st.dictionaries(
        st.text(max_size=3), st.floats(allow_nan=False, allow_infinity=False), max_size=2
    ),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
)


def _jsonschema_fields(name: str, row: dict[str, Any]) -> set[str]:
    """Fields jsonschema finds wrong, with format checks done the way our spec defines them."""
    schema = table_schema(name)
    v = jsonschema.Draft202012Validator(schema)
    bad: set[str] = set()
    for err in v.iter_errors(row):
        if err.validator == "required":
            missing = err.message.split("'")[1]
            bad.add(missing)
        else:
            bad.add(str(err.path[0]))
    # jsonschema does not check "date-time" without extra packages; our spec says RFC 3339
    # with an offset, which parse_rfc3339_ns is the reference for (tested below). The spec
    # also bounds integer fields to int64 (Parquet's type), which JSON Schema cannot say.
    for f, p in schema["properties"].items():
        t = p.get("type")
        if (t == "integer" or (isinstance(t, list) and "integer" in t)) and f not in bad:
            value = row.get(f)
            if (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and not (-(2**63) <= value <= 2**63 - 1)
            ):
                bad.add(f)
        if p.get("format") == "date-time" and isinstance(row.get(f), str):
            try:
                parse_rfc3339_ns(row[f])
            except ValueError:
                bad.add(f)
    return bad


@pytest.mark.parametrize("name", TABLE_NAMES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_columnar_checker_agrees_with_jsonschema(name: str, data: st.DataObject) -> None:
    props = list(table_schema(name)["properties"])
    row = data.draw(st.dictionaries(st.sampled_from(props), json_values, max_size=len(props)))
    ours = {e.field for e in check_rows(name, [row])}
    # jsonschema accepts NaN-free floats like 1e308 as numbers too; both sides see the same row.
    assert ours == _jsonschema_fields(name, row)


def test_valid_receipts_pass_both_checkers() -> None:
    rows = receipts()
    assert check_rows("receipts", rows) == []
    assert all(_jsonschema_fields("receipts", r) == set() for r in rows)


def test_errors_name_row_and_field() -> None:
    rows = receipts()
    rows[4]["seq"] = 1.5
    rows[7]["output_sha256"] = "XYZ"
    errs = check_rows("receipts", rows)
    assert [(e.index, e.field) for e in errs] == [(4, "seq"), (7, "output_sha256")]


def test_arrow_schema_covers_every_spec_field_plus_extra() -> None:
    for name in TABLE_NAMES:
        props = list(table_schema(name)["properties"])
        schema = arrow_schema(name)
        assert schema.names == [*props, "extra"]
        assert schema.metadata[b"format_version"] == b"1"


def test_arrow_types_follow_json_types() -> None:
    s = arrow_schema("receipts")
    assert s.field("e2e_s").type == pa.float64()
    assert s.field("seq").type == pa.int64()
    assert s.field("start").type == pa.timestamp("ns", tz="UTC")
    assert not s.field("request_id").nullable
    assert s.field("output_sha256").nullable
    assert arrow_schema("comparisons").field("metrics").type == pa.map_(pa.string(), pa.float64())


def test_claims_vocabulary_and_schema_enum_are_the_same_set() -> None:
    enum = load_schema("table.claims")["properties"]["statistic"]["enum"]
    assert sorted(enum) == sorted(STATISTICS)


def test_rows_to_table_keeps_nanoseconds_and_unknown_fields() -> None:
    rows = receipts()[:1]
    rows[0]["start"] = "2026-03-01T10:00:00.123456789+01:00"
    rows[0]["end"] = "2026-03-01T10:00:01Z"
    rows[0]["vendor"] = {"b": 1, "a": [1, 2]}
    t = rows_to_table("receipts", rows)
    # 2026-03-01T09:00:00Z is 1772355600 s after the epoch (date -u -d ... +%s).
    assert t.column("start").cast(pa.int64()).to_pylist() == [1772355600_123456789]
    assert t.column("extra").to_pylist() == ['{"vendor":{"a":[1,2],"b":1}}']


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("1970-01-01T00:00:00Z", 0),
        ("1970-01-01T00:00:01.5Z", 1_500_000_000),
        ("1970-01-01T01:00:00+01:00", 0),
        ("1969-12-31T23:00:00-01:00", 0),
        ("2000-01-01T00:00:00.000000001Z", 946_684_800_000_000_001),
    ],
)
def test_rfc3339_parsing(text: str, ns: int) -> None:
    assert parse_rfc3339_ns(text) == ns


@pytest.mark.parametrize(
    "bad", ["2026-03-01T10:00:00", "2026-03-01", "yesterday", "2026-03-01T10:00:00.1234567890Z"]
)
def test_rfc3339_rejects_naive_and_malformed(bad: str) -> None:
    with pytest.raises(ValueError, match="RFC 3339"):
        parse_rfc3339_ns(bad)


@given(st.integers(min_value=0, max_value=4_000_000_000 * 10**9))
def test_format_ns_round_trips(ns: int) -> None:
    assert parse_rfc3339_ns(format_ns(ns)) == ns


rfc3339 = st.builds(
    lambda y, mo, d, h, mi, s, frac, t, off: (
        f"{y:04d}-{mo:02d}-{d:02d}{t}{h:02d}:{mi:02d}:{s:02d}{frac}{off}"
    ),
    st.integers(1971, 2100),
    st.integers(1, 12),
    st.integers(1, 28),
    st.integers(0, 23),
    st.integers(0, 59),
    st.integers(0, 59),
    st.one_of(st.just(""), st.from_regex(r"\.[0-9]{1,9}", fullmatch=True)),
    st.sampled_from(["T", "t"]),
    st.one_of(
        st.sampled_from(["Z", "z"]),
        st.builds(
            lambda sg, hh, mm: f"{sg}{hh:02d}:{mm:02d}",
            st.sampled_from("+-"),
            st.integers(0, 23),
            st.integers(0, 59),
        ),
    ),
)


@settings(max_examples=300)
@given(st.lists(rfc3339, min_size=1, max_size=5))
def test_bulk_timestamp_parse_equals_reference(texts: list[str]) -> None:
    from bundler.format.tables import timestamps_ns

    bulk = timestamps_ns(texts).cast(pa.int64()).to_pylist()
    assert bulk == [parse_rfc3339_ns(t) for t in texts]
