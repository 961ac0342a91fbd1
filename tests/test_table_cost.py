"""Issue 19, defect 7 continued: a verified table cannot make a reader decode gigabytes.

A 14 KB bundle whose gates table names one 1 MB string from each of 5,000
dictionary-coded rows verifies, and made ``bundle replay`` allocate 5 GB (under a
3 GB cap it reached 1.9 GB and failed). ``open_verified`` now bounds the decoded
size from the Parquet page headers before any consumer reads a table.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bundler.format import parquet_cost
from bundler.format.parquet_cost import Cost, TableCostLimits, add_file_cost, table_cost_problems
from bundler.format.tables import arrow_schema
from bundler.format.trust import Trust
from bundler.verify import open_bundle
from tests.conftest import Keys, make_keys
from tests.hostile_content import hostile_bundle

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = [sys.executable, "-m", "reprobundle.cli"]


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return make_keys(tmp_path_factory.mktemp("keys"))


def gates_parquet(groups: int, per_group: int, definition: str, dictionary: bool = True) -> bytes:
    """A gates table of ``groups`` row groups, every row's definition ``definition``."""
    schema = arrow_schema("gates")
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, schema, use_dictionary=dictionary, compression="zstd") as w:
        for g in range(groups):
            cols: dict[str, list[Any]] = {
                "gate_id": [f"g{g}-{i}" for i in range(per_group)],
                "metric": ["ssim"] * per_group,
                "op": [">="] * per_group,
                "threshold": [0.9] * per_group,
                "definition": [definition] * per_group,
            }
            arrays = [
                pa.array(cols[f.name], f.type) if f.name in cols else pa.nulls(per_group, f.type)
                for f in schema
            ]
            w.write_table(pa.Table.from_arrays(arrays, schema=schema))
    return buf.getvalue()


def test_a_page_header_is_read_as_the_thrift_compact_protocol_spells_it() -> None:
    # A dictionary page header pyarrow wrote, decoded by hand: 0x15 = field 1 (delta 1) i32,
    # 0x04 = zigzag 2 (DICTIONARY_PAGE); 0x15 0x18 = field 2, 12 bytes uncompressed;
    # 0x15 0x2a = field 3, 21 bytes compressed; 0x4c = field 7 (delta 4) struct: 0x15 0x04 =
    # num_values 2, 0x15 0x00 = encoding PLAIN, 0x12 = is_sorted false, 0x00 stop; 0x00 stop.
    header = bytes.fromhex("15041518152a4c150415001200" + "00")
    page = parquet_cost._page_header(header + b"\xff" * 8)
    assert (page.kind, page.uncompressed, page.compressed, page.header, page.values) == (
        2,
        12,
        21,
        14,
        2,
    )


@pytest.mark.parametrize(
    "bad",
    [
        b"",  # nothing
        bytes.fromhex("1504"),  # a header cut short
        bytes.fromhex("150400"),  # no sizes
        bytes.fromhex("1504150315"),  # uncompressed -2, then cut
        bytes.fromhex("1f"),  # an unknown wire type
    ],
)
def test_a_malformed_page_header_is_a_page_header_error(bad: bytes) -> None:
    with pytest.raises(parquet_cost.PageHeaderError):
        parquet_cost._page_header(bad)


def test_the_bound_is_an_upper_bound_close_to_what_decoding_costs() -> None:
    # Independent figure: the string bytes are the sum of the UTF-8 lengths of what was
    # written. The bound must never be below it, and close above it.
    words = [f"definition number {i % 37} " * (1 + i % 5) for i in range(3000)]
    schema = arrow_schema("gates")
    n = len(words)
    cols: dict[str, list[Any]] = {
        "gate_id": [f"g{i}" for i in range(n)],
        "metric": ["ssim"] * n,
        "op": [">="] * n,
        "threshold": [0.5] * n,
        "definition": words,
    }
    arrays = [
        pa.array(cols[f.name], f.type) if f.name in cols else pa.nulls(n, f.type) for f in schema
    ]
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), buf, compression="zstd")
    decoded = sum(len(s.encode()) for s in words) + sum(len(f"g{i}") for i in range(n))
    decoded += n * (len("ssim") + len(">="))
    cost = Cost()
    add_file_cost(
        io.BytesIO(buf.getvalue()),
        pq.read_metadata(io.BytesIO(buf.getvalue())),
        cost,
        TableCostLimits(),
    )
    # Dictionary-coded pages count each value at the dictionary's longest entry: the
    # definitions repeat a phrase 1 to 5 times (mean 3), so at most 5/3 of the real size.
    assert decoded <= cost.string_bytes <= 5 / 3 * decoded


def test_a_dictionary_bomb_is_refused_before_decoding(tmp_path: Path, keys: Keys) -> None:
    # 50 row groups x 100 rows, each naming one 1 MB string: 5 GB decoded from ~74 KB.
    data = gates_parquet(50, 100, "x" * 1_000_000)
    assert len(data) < 200_000
    bundle = hostile_bundle(tmp_path / "bomb.bundle", keys.private, {"tables/gates.parquet": data})
    script = (
        "import resource, sys, runpy\n"
        "cap = 1536 << 20\n"
        "resource.setrlimit(resource.RLIMIT_AS, (cap, cap))\n"
        "sys.argv = ['bundle', 'replay', sys.argv[1], '--key', sys.argv[2], '--json']\n"
        "runpy.run_module('reprobundle.cli', run_name='__main__')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(bundle), str(keys.public_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "tables/gates.parquet" in proc.stdout
    assert "TableCostLimits.max_string_bytes" in proc.stdout


def test_export_refuses_the_bomb_too(tmp_path: Path, keys: Keys) -> None:
    data = gates_parquet(50, 100, "y" * 1_000_000)
    bundle = hostile_bundle(tmp_path / "bomb.bundle", keys.private, {"tables/gates.parquet": data})
    out = tmp_path / "out"
    proc = subprocess.run(
        [*BUNDLE, "export", str(bundle), str(out), "--key", str(keys.public_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "max_string_bytes" in proc.stderr
    assert not out.exists()


def test_page_bytes_over_the_bound_are_named_without_reading_the_pages(
    tmp_path: Path, keys: Keys
) -> None:
    # A plain (not dictionary-coded) page of 2,000,000 bytes, against a 1 MB bound: the
    # page header says so, and the bound holds before the page is decompressed.
    data = gates_parquet(1, 1, "z" * 2_000_000, dictionary=False)
    bundle = hostile_bundle(tmp_path / "big.bundle", keys.private, {"tables/gates.parquet": data})
    opened = open_bundle(bundle, trust=Trust.keys([keys.public]))
    problems = table_cost_problems(opened.members, TableCostLimits(max_page_bytes=1_000_000))
    assert [(p.where, "max_page_bytes" in p.message) for p in problems] == [
        ("tables/gates.parquet", True)
    ]
    cost = Cost()
    with opened.members["tables/gates.parquet"].open() as fh:
        add_file_cost(fh, pq.read_metadata(fh), cost, TableCostLimits())
    assert cost.page_bytes >= 2_000_000


def test_a_corrupt_page_header_is_a_located_refusal(tmp_path: Path, keys: Keys) -> None:
    data = bytearray(gates_parquet(1, 3, "ok"))
    meta = pq.read_metadata(io.BytesIO(bytes(data)))
    col = meta.row_group(0).column(0)
    at = col.dictionary_page_offset or col.data_page_offset
    data[at] = 0x1F  # an unknown Thrift type where the first header field starts
    bundle = hostile_bundle(
        tmp_path / "bad.bundle", keys.private, {"tables/gates.parquet": bytes(data)}
    )
    proc = subprocess.run(
        [*BUNDLE, "replay", str(bundle), "--key", str(keys.public_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 1
    assert "tables/gates.parquet" in proc.stderr
    assert "not readable Parquet" in proc.stderr


def test_honest_bundles_are_far_below_the_bounds() -> None:
    for path in (ROOT / "tests" / "vectors" / "mini.bundle",):
        opened = open_bundle(path, trust=Trust.allow_unsigned())
        assert table_cost_problems(opened.members) == []
