"""A receipts file sealed in blocks (issue 22, 10M rows in bounded memory) seals to the
bytes of the one-shot path, and its problems are located at the same lines."""

from __future__ import annotations

import gc
import io
import json
import re
import tempfile
import threading
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bundler.campaign.columnar import PER_ROW_ENV, read_columnar
from bundler.campaign.load import load_campaign
from bundler.campaign.stream import StreamLimits
from bundler.errors import CampaignError
from bundler.format.container import read_container
from bundler.seal import environment, seal_campaign
from tests.campaign_builder import receipts, write_campaign
from tests.vectors.make_vectors import AUTHOR_SEED, extra_receipts

VECTORS = Path(__file__).parent / "vectors"
AUTHOR = Ed25519PrivateKey.from_private_bytes(AUTHOR_SEED)
# Blocks of a few lines each: every file below is read in several blocks.
SMALL_BLOCKS = StreamLimits(min_bytes=0, block_bytes=700)
NEVER = 1 << 40


def _same_environment() -> None:
    recorded = json.loads((VECTORS / "environment.json").read_text())
    if recorded != environment():
        pytest.skip(f"vectors were made with {recorded}, this is {environment()}")


@pytest.mark.parametrize("block", [700, 50])
@pytest.mark.parametrize(
    ("vector", "rows"), [("mini.bundle", receipts), ("extra.bundle", extra_receipts)]
)
def test_streamed_seal_writes_the_vector(
    tmp_path: Path, vector: str, rows: Any, block: int
) -> None:
    """Read in blocks of a few lines (or of less than a line: lines longer than a block),
    the vectors' campaigns seal to the vectors' bytes."""
    _same_environment()
    limits = StreamLimits(min_bytes=0, block_bytes=block)
    camp = write_campaign(tmp_path / "c", **{"receipts.jsonl": rows()})
    assert (camp / "receipts.jsonl").stat().st_size > 2 * SMALL_BLOCKS.block_bytes
    loaded, problems = load_campaign(camp, columnar=True, stream=limits)
    assert not problems
    assert "receipts" in loaded.streamed  # the streamed path, not the whole read
    out = tmp_path / "s.bundle"
    seal_campaign(camp, out, keys=[AUTHOR], stream=limits)
    assert out.read_bytes() == (VECTORS / vector).read_bytes()


def _many_receipts(n: int) -> list[dict[str, Any]]:
    """``n`` valid receipts; addresses to scrub in two columns, met in a different order
    row by row than column by column (pseudonym numbers tell the orders apart)."""
    base = receipts()
    rows = []
    for i in range(n):
        r = dict(base[i % len(base)])
        r["request_id"] = f"r{i:04d}"
        r["seq"] = i
        r["prompt_id"] = f"p{i % 3}"  # beyond the schema: kept in extra
        if i < n // 2:
            r["error"] = f"connect 10.9.9.{i % 5} refused"
        else:
            r["server"] = f"10.1.2.{i % 4}"
            r["error"] = "reset by 10.1.2.1"
        rows.append(r)
    return rows


def _row_groups(bundle: Path) -> int:
    data = next(m.data for m in read_container(bundle) if m.name == "tables/receipts.parquet")
    return int(pq.ParquetFile(io.BytesIO(data)).num_row_groups)


def test_streamed_row_groups_are_the_one_shot_row_groups(tmp_path: Path) -> None:
    """Blocks that straddle row groups, pseudonyms numbered column by column: the streamed
    bundle is the one-shot bundle, byte for byte, with the same row group size."""
    camp = write_campaign(tmp_path / "c", **{"receipts.jsonl": _many_receipts(60)})
    one = tmp_path / "one.bundle"
    streamed = tmp_path / "streamed.bundle"
    seal_campaign(camp, one, stream=StreamLimits(min_bytes=NEVER, row_group_rows=7))
    seal_campaign(
        camp, streamed, stream=StreamLimits(min_bytes=0, block_bytes=700, row_group_rows=7)
    )
    assert _row_groups(one) == 9  # 60 rows in groups of 7: eight full, one of 4
    assert streamed.read_bytes() == one.read_bytes()


def _problems(camp: Path, tmp_path: Path, stream: StreamLimits) -> set[tuple[Any, ...]]:
    with pytest.raises(CampaignError) as err:
        seal_campaign(camp, tmp_path / "x.bundle", stream=stream)
    assert not (tmp_path / "x.bundle").exists()
    return {(p.where, p.record, p.field, p.message) for p in err.value.problems}


def test_streamed_problems_are_located_at_their_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checks over all blocks (duplicate ids across blocks, unknown attempt and arm, end
    before start in a late block) name the lines the per-row path names."""
    rows = _many_receipts(60)
    rows[41]["request_id"] = rows[2]["request_id"]  # lines 3 and 42, blocks apart
    rows[55]["request_id"] = rows[54]["request_id"]  # lines 55 and 56
    rows[30]["attempt_id"] = "a9"  # line 31
    rows[47]["arm"] = "nobody"  # line 48
    rows[50]["end"] = "2026-03-01T09:00:00Z"  # line 51: ends before it starts
    camp = write_campaign(tmp_path / "c", **{"receipts.jsonl": rows})
    loaded, _ = load_campaign(camp, columnar=True, stream=SMALL_BLOCKS)
    assert "receipts" in loaded.streamed
    streamed = _problems(camp, tmp_path, SMALL_BLOCKS)
    monkeypatch.setenv(PER_ROW_ENV, "1")
    per_row = _problems(camp, tmp_path, SMALL_BLOCKS)
    assert streamed == per_row
    # Derived by hand from the edits above, not from either path.
    assert {(rec, f) for _, rec, f, _ in streamed} == {
        ("line 3", "request_id"),
        ("line 42", "request_id"),
        ("line 55", "request_id"),
        ("line 56", "request_id"),
        ("line 31", "attempt_id"),
        ("line 48", "arm"),
        ("line 51", "end"),
    }


def test_a_bad_value_in_a_late_block_is_located_per_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A block that is not surely valid sends the file to the per-row path, which names
    the line and field."""
    rows = _many_receipts(60)
    rows[57]["e2e_s"] = "slow"  # line 58
    camp = write_campaign(tmp_path / "c", **{"receipts.jsonl": rows})
    loaded, _ = load_campaign(camp, columnar=True, stream=SMALL_BLOCKS)
    assert "receipts" not in loaded.streamed
    found = _problems(camp, tmp_path, SMALL_BLOCKS)
    assert {(rec, f) for _, rec, f, _ in found} == {("line 58", "e2e_s")}
    monkeypatch.setenv(PER_ROW_ENV, "1")
    assert _problems(camp, tmp_path, SMALL_BLOCKS) == found


def test_an_integer_negative_zero_in_a_late_block_seals_as_per_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``-0`` (0.0 per row, -0.0 for Arrow) in a late block: the streamed bundle is the
    per-row bundle."""
    lines = [json.dumps(r) for r in _many_receipts(60)]
    lines[57] = re.sub(r'"e2e_s": [^,}]+', '"e2e_s": -0', lines[57])
    assert '"e2e_s": -0,' in lines[57] or '"e2e_s": -0}' in lines[57]
    camp = write_campaign(tmp_path / "c")
    (camp / "receipts.jsonl").write_text("\n".join(lines) + "\n")
    _assert_streamed_is_per_row(camp, tmp_path, monkeypatch)


def _assert_streamed_is_per_row(
    camp: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    streamed = tmp_path / "streamed.bundle"
    seal_campaign(camp, streamed, stream=SMALL_BLOCKS)
    monkeypatch.setenv(PER_ROW_ENV, "1")
    per_row = tmp_path / "per-row.bundle"
    seal_campaign(camp, per_row, stream=SMALL_BLOCKS)
    assert streamed.read_bytes() == per_row.read_bytes()


@pytest.mark.parametrize("touched_at", [None, 57])
def test_object_fields_stream_and_seal_as_per_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, touched_at: int | None
) -> None:
    """An object-valued unknown field streams block by block (its RFC 8785 text built
    column-wise); an address inside one object in a late block sends the file to the
    rows. Either way: the per-row bytes."""
    rows = _many_receipts(60)
    for i, r in enumerate(rows):
        r["usage"] = {
            "tokens": {"in": 100 + i, "out": i % 7, **({"reasoning": i} if i % 9 == 0 else {})},
            "cached": i % 2 == 0,
            "t": 0.25,
            "peer": "local",
        }  # "reasoning" absent from most objects, and from whole blocks
    if touched_at is not None:
        rows[touched_at]["usage"]["peer"] = "10.7.7.7"  # an address: scrubbed per row
    _assert_canonical_streams(rows, tmp_path, monkeypatch, streams=touched_at is None)


def _assert_canonical_streams(
    rows: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, streams: bool
) -> None:
    """The receipts are read column-wise whole; block by block they stream or not, as
    ``streams`` says; the streamed seal writes the per-row bytes."""
    camp = write_campaign(tmp_path / "c", **{"receipts.jsonl": rows})
    assert read_columnar(camp / "receipts.jsonl", "receipts") is not None
    loaded, problems = load_campaign(camp, columnar=True, stream=SMALL_BLOCKS)
    assert not problems
    assert ("receipts" in loaded.streamed) == streams
    for table in loaded.streamed.values():
        table.close()
    _assert_streamed_is_per_row(camp, tmp_path, monkeypatch)


@pytest.mark.parametrize("touched_at", [None, 57])
def test_array_fields_stream_and_seal_as_per_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, touched_at: int | None
) -> None:
    """An array-valued unknown field (numbers, strings, arrays of objects) streams block
    by block; an address in one array of a late block sends the file to the rows.
    Either way: the per-row bytes."""
    rows = _many_receipts(60)
    for i, r in enumerate(rows):
        r["tags"] = ["local", f"run-{i % 5}"]
        r["steps"] = [{"n": i, "ok": True}, {"n": -1, "ok": False}] if i % 3 else []
        r["ratios"] = [0.5, i, 1e-9]
    if touched_at is not None:
        rows[touched_at]["tags"].append("10.7.7.7")  # an address: scrubbed per row
    _assert_canonical_streams(rows, tmp_path, monkeypatch, streams=touched_at is None)


@pytest.mark.parametrize("how", ["in place", "replaced"])
def test_a_receipts_file_changed_between_the_two_reads_stops_the_seal(
    tmp_path: Path, how: str
) -> None:
    """Rewritten in place (same file, same size: the second read's digest differs) or
    replaced by another file after it was checked and before it is written: the seal
    stops, nothing is written."""
    row = {"path": "media/a.mp4", "kind": "media", "availability": "with the author"}
    camp = write_campaign(
        tmp_path / "c",
        **{
            "receipts.jsonl": _many_receipts(60),
            "media/a.mp4": b"honest media",
            "artifacts.jsonl": [row],
        },
    )
    path = camp / "receipts.jsonl"
    text = path.read_bytes()
    at = text.rindex(b'"e2e_s": ') + len(b'"e2e_s": ')
    changed = text[:at] + (b"7" if text[at : at + 1] != b"7" else b"8") + text[at + 1 :]

    def rewrite(stage: str, done: int, total: int) -> None:
        # Seal hashes external artifacts after reading the campaign, before the tables.
        if stage == "hash" and how == "in place":
            with path.open("r+b") as fh:
                fh.write(changed)
        elif stage == "hash":
            (camp / "new.tmp").write_bytes(changed)
            (camp / "new.tmp").replace(path)

    out = tmp_path / "x.bundle"
    with pytest.raises(CampaignError) as err:
        seal_campaign(camp, out, progress=rewrite, stream=SMALL_BLOCKS)
    assert [(p.where, p.message) for p in err.value.problems] == [
        ("receipts.jsonl", "changed while being sealed (read twice)")
    ]
    assert not out.exists()


def test_addresses_in_request_ids_are_numbered_as_one_shot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Request ids are distinct by contract, so the streamed survey picks their values
    to scrub without hashing the column: the pseudonyms are still numbered as the
    one-shot and per-row paths number them (issue 22)."""
    rows = _many_receipts(60)
    for i, r in enumerate(rows):
        r["request_id"] = f"10.0.{i % 3}.{i % 7}-r{i:04d}"  # distinct ids, repeated addresses
    camp = write_campaign(tmp_path / "c", **{"receipts.jsonl": rows})
    outs = {}
    for name, limits in (("one", StreamLimits(min_bytes=NEVER)), ("streamed", SMALL_BLOCKS)):
        out = tmp_path / f"{name}.bundle"
        seal_campaign(camp, out, stream=limits)
        outs[name] = out.read_bytes()
    monkeypatch.setenv(PER_ROW_ENV, "1")
    seal_campaign(camp, tmp_path / "row.bundle", stream=StreamLimits(min_bytes=NEVER))
    assert outs["streamed"] == outs["one"] == (tmp_path / "row.bundle").read_bytes()
    table = pq.read_table(
        io.BytesIO(
            next(
                m.data
                for m in read_container(tmp_path / "row.bundle")
                if m.name == "tables/receipts.parquet"
            )
        )
    )
    ids = table.column("request_id").to_pylist()
    # 21 distinct addresses (3 x 7), numbered in order of first appearance, row 0 first.
    assert ids[0] == "<ip-1>-r0000" and ids[1] == "<ip-2>-r0001"
    assert len({str(i).split("-r")[0] for i in ids}) == 21


def _mixed_receipts(n: int, scrub_from: int) -> list[dict[str, Any]]:
    """``n`` valid receipts; rows from ``scrub_from`` on carry an address to scrub (so
    the blocks before are final and written while reading, the later ones are held)."""
    rows = _many_receipts(n)
    for i, r in enumerate(rows):
        r["server"] = r["arm"] + "-1"
        r["error"] = f"connect 10.9.9.{i % 5} refused" if i >= scrub_from else None
    return rows


@pytest.mark.parametrize("hold_bytes", [1 << 40, 0])
@pytest.mark.parametrize("scrub_from", [0, 25, 1000])
def test_written_held_and_spilled_blocks_make_the_one_shot_bytes(
    tmp_path: Path, hold_bytes: int, scrub_from: int
) -> None:
    """Blocks written while reading (nothing to scrub so far), then held in memory or
    spilled to the temporary IPC file (``hold_bytes`` 0: every held block spills), then
    read again to scrub: the bundle is the one-shot bundle, byte for byte (issue 22)."""
    camp = write_campaign(tmp_path / "c", **{"receipts.jsonl": _mixed_receipts(60, scrub_from)})
    one = tmp_path / "one.bundle"
    seal_campaign(camp, one, stream=StreamLimits(min_bytes=NEVER, row_group_rows=7))
    streamed = tmp_path / "streamed.bundle"
    limits = StreamLimits(min_bytes=0, block_bytes=700, row_group_rows=7, hold_bytes=hold_bytes)
    seal_campaign(camp, streamed, stream=limits)
    assert streamed.read_bytes() == one.read_bytes()


def test_one_or_four_workers_seal_the_same_bytes(tmp_path: Path) -> None:
    """Blocks are merged in file order whatever thread finished first."""
    camp = write_campaign(tmp_path / "c", **{"receipts.jsonl": _mixed_receipts(60, 30)})
    outs = []
    for workers in (1, 4):
        out = tmp_path / f"w{workers}.bundle"
        seal_campaign(camp, out, stream=StreamLimits(min_bytes=0, block_bytes=300, workers=workers))
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


def _leftovers(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir())


@pytest.mark.parametrize("how", ["sealed", "late bad block", "plan problem"])
def test_no_temporary_file_or_thread_is_left_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Whether the seal writes a bundle, falls back per row on a late bad block, or stops
    on a problem found after the survey, the spill file, the member being written and
    the writing thread are gone when it returns (issue 22)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    rows = _mixed_receipts(60, 40)
    if how == "late bad block":
        rows[57]["e2e_s"] = "slow"
    camp = write_campaign(tmp_path / "c", **{"receipts.jsonl": rows})
    if how == "plan problem":
        # Found after the survey: the campaign's plan names an arm that is not there.
        plan_path = next((camp / "plans").glob("*.json"))
        plan = json.loads(plan_path.read_text())
        plan["arm_order"] = [*plan["arm_order"], "nobody"]
        plan_path.write_text(json.dumps(plan))
    before = {t.name for t in threading.enumerate()}
    limits = StreamLimits(min_bytes=0, block_bytes=700, row_group_rows=7, hold_bytes=0)
    out = tmp_path / "x.bundle"
    if how == "sealed":
        seal_campaign(camp, out, stream=limits)
        assert out.exists()
    else:
        with pytest.raises(CampaignError):
            seal_campaign(camp, out, stream=limits)
        assert not out.exists()
    assert _leftovers(tmp) == []
    assert {t.name for t in threading.enumerate()} - before == set()


def test_a_loaded_table_never_sealed_lets_go_of_its_files_and_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``load_campaign`` alone (a caller that only checks): once the campaign is let go,
    the writing thread stops and the temporary files are gone, with no unclosed-file
    warning (issue 22)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    camp = write_campaign(tmp_path / "c", **{"receipts.jsonl": _mixed_receipts(60, 1000)})
    before = {t.name for t in threading.enumerate()}
    loaded, problems = load_campaign(
        camp, columnar=True, stream=replace(SMALL_BLOCKS, hold_bytes=0)
    )
    assert not problems and "receipts" in loaded.streamed
    assert _leftovers(tmp)  # the member being written (and the spill file, unlinked)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del loaded
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
    assert _leftovers(tmp) == []
    assert {t.name for t in threading.enumerate()} - before == set()
