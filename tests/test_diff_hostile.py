"""``bundle diff`` on pairs whose members are built to make the diff itself expensive.

Both bundles verify (the sample sealed by its author after an edit): a signature says
who sealed a bundle, not that its text members are cheap to compare.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from bundler.format.trust import Trust
from bundler.seal import seal_campaign
from bundler.verified import open_verified
from replay.diff import DiffLimits, diff_bundles
from tests.conftest import Keys, make_keys

FIVE = Path(__file__).resolve().parents[1] / "samples" / "h3-ref2va-5s"
NOTE = "notes/five-second-delivery.md"


@pytest.fixture(scope="module")
def author(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return make_keys(tmp_path_factory.mktemp("keys"))


def _sealed_with_note(tmp: Path, author: Keys, name: str, text: str) -> Path:
    camp = tmp / f"campaign-{name}"
    shutil.copytree(FIVE, camp)
    (camp / NOTE).write_text(text, encoding="utf-8")
    out = tmp / f"{name}.bundle"
    seal_campaign(camp, out, keys=[author.private])
    return out


def test_a_quadratic_text_member_is_not_line_diffed(tmp_path: Path, author: Keys) -> None:
    # 16,000 lines each, 150 distinct values, each one 107 times: under difflib's
    # "popular line" cut (1% of 16,000 = 160), so every line of one side is matched
    # against ~107 of the other at every step of its recursion. 60 KB a side, under the
    # 64 KiB text bound; difflib took 90 s on this one member before the line bound.
    n, distinct = 16_000, 150
    old_text = "".join(f"{i % distinct}\n" for i in range(n))
    new_text = "".join(f"{(i * 7) % distinct}\n" for i in range(n))
    assert max(len(old_text), len(new_text)) <= DiffLimits().max_text_bytes
    old = _sealed_with_note(tmp_path, author, "old", old_text)
    new = _sealed_with_note(tmp_path, author, "new", new_text)
    trust = Trust.keys([author.public])
    t0 = time.monotonic()
    d = diff_bundles(open_verified(old, trust=trust), open_verified(new, trust=trust))
    assert time.monotonic() - t0 < 20
    (member,) = [m for m in d.members_changed if m.path == f"files/{NOTE}"]
    assert member.text is None
    assert member.text_note == "16,000 lines: over 2,000 lines, no text diff"


def test_a_note_of_at_most_2000_lines_is_still_line_diffed(tmp_path: Path, author: Keys) -> None:
    # The bound keeps the ordinary case: 2,000 lines, one appended, one hunk.
    old_text = "".join(f"line {i}\n" for i in range(1_999))
    old = _sealed_with_note(tmp_path, author, "old", old_text)
    new = _sealed_with_note(tmp_path, author, "new", old_text + "appended\n")
    trust = Trust.keys([author.public])
    d = diff_bundles(open_verified(old, trust=trust), open_verified(new, trust=trust))
    (member,) = [m for m in d.members_changed if m.path == f"files/{NOTE}"]
    assert member.text is not None and member.text_note is None
    # Header (2 lines), hunk line, 3 lines of context, the added line.
    assert member.text.lines[-1] == "+appended"
    assert len(member.text.lines) == 7


def _receipts_with_end(camp: Path, request_id: str, end: str) -> None:
    path = camp / "receipts.jsonl"
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    (row,) = [r for r in rows if r["request_id"] == request_id]
    row["end"] = end
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_nanosecond_receipt_times_are_compared_not_a_traceback(
    tmp_path: Path, author: Keys
) -> None:
    # RFC 3339 allows nine decimals and seal keeps them (timestamp[ns]); pyarrow cannot
    # make a datetime of 02:15:22.240000001 without pandas and raised ValueError. The
    # sample's first receipt ends at 02:15:22.240; only its last nanosecond changes.
    rid = "audio-own-1-candidate-ao-00"
    old_camp, new_camp = tmp_path / "old-c", tmp_path / "new-c"
    shutil.copytree(FIVE, old_camp)
    shutil.copytree(FIVE, new_camp)
    _receipts_with_end(old_camp, rid, "2026-02-03T02:15:22.240000001Z")
    _receipts_with_end(new_camp, rid, "2026-02-03T02:15:22.240000002Z")
    old, new = tmp_path / "old.bundle", tmp_path / "new.bundle"
    seal_campaign(old_camp, old, keys=[author.private])
    seal_campaign(new_camp, new, keys=[author.private])
    trust = Trust.keys([author.public])
    d = diff_bundles(open_verified(old, trust=trust), open_verified(new, trust=trust))
    (table,) = [t for t in d.tables if t.table == "receipts"]
    assert table.changed_count == 1
    (row,) = table.changed
    assert [(f.field, f.old, f.new) for f in row.fields] == [
        ("end", "2026-02-03T02:15:22.240000001+00:00", "2026-02-03T02:15:22.240000002+00:00")
    ]


def test_a_key_repeated_20000_times_is_numbered_in_linear_time(
    tmp_path: Path, author: Keys
) -> None:
    # not_claimed rows are keyed by "what", which the table contract does not require to
    # be unique; repeats are numbered "#2", "#3"... Searching for the first free number
    # from 1 for every row was quadratic: 8,000 repeats took 4.4 s, 200,000 would take
    # most of an hour. Each side: 20,000 rows with one "what"; NEW changes every note.
    n = 20_000

    def rows(note: str) -> str:
        return "".join(json.dumps({"what": "tails", "note": note}) + "\n" for _ in range(n))

    def sealed(name: str, note: str) -> Path:
        camp = tmp_path / f"campaign-{name}"
        shutil.copytree(FIVE, camp)
        (camp / "not_claimed.jsonl").write_text(rows(note), encoding="utf-8")
        out = tmp_path / f"{name}.bundle"
        seal_campaign(camp, out, keys=[author.private])
        return out

    old, new = sealed("old", "before"), sealed("new", "after")
    trust = Trust.keys([author.public])
    t0 = time.monotonic()
    d = diff_bundles(open_verified(old, trust=trust), open_verified(new, trust=trust))
    assert time.monotonic() - t0 < 15
    (table,) = [t for t in d.tables if t.table == "not_claimed"]
    # Row k of OLD is matched with row k of NEW ("tails #k"), and each note changed.
    assert (table.changed_count, table.added_count, table.removed_count) == (n, 0, 0)
    assert table.changed[0].key == "tails"
    assert table.changed[1].key == "tails #10"  # sorted as text: #10 before #100, #2
