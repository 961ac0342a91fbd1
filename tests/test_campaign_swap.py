"""Seal reads only the files it walked: a file swapped for a link after the walk is refused.

Issue 19, defect 12. ``load_campaign`` walks the campaign folder (refusing
symbolic links) and then reads what it found. Before the fix, the reads went by
path: a file replaced by a symbolic link between the walk and the read was
followed, and content from outside the campaign was sealed and signed.

The race is made deterministic: the real walk runs, then (before anything is
read) the test swaps a file, exactly as a concurrent process could. The
campaign, the seal and the outside files are all real.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import bundler.campaign.load
from bundler._internal.confined import ChangedFileError, ConfinedTree, FileIdentity
from bundler.campaign.columnar import PER_ROW_ENV
from bundler.errors import CampaignError
from bundler.seal import seal_campaign
from tests.campaign_builder import receipts, write_campaign
from tests.conftest import Keys

MARK = "OUTSIDEMARK"


def _swap_after_walk(monkeypatch: pytest.MonkeyPatch, swap: Callable[[], None]) -> None:
    """Run ``swap`` right after the campaign walk returns, before any file is read."""
    real_walk = bundler.campaign.load._walk

    def walk_then_swap(*args: Any, **kwargs: Any) -> Any:
        out = real_walk(*args, **kwargs)
        swap()
        return out

    monkeypatch.setattr(bundler.campaign.load, "_walk", walk_then_swap)


def _link_in(target: Path, link: Path) -> Callable[[], None]:
    def swap() -> None:
        link.unlink()
        link.symlink_to(target)

    return swap


def _outside_file(tmp_path: Path, rel: str, campaign: Path) -> Path:
    """A valid stand-in for campaign file ``rel``, outside the campaign, carrying MARK."""
    out = tmp_path / "outside" / rel.replace("/", "_")
    out.parent.mkdir(parents=True, exist_ok=True)
    if rel == "campaign.json":
        doc = json.loads((campaign / rel).read_text())
        doc["title"] = f"{MARK} title"
        out.write_text(json.dumps(doc))
    elif rel == "receipts.jsonl":
        rows = [{**r, "request_id": f"{MARK}-{r['request_id']}"} for r in receipts()]
        out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        out.write_text(f"{MARK} from outside the campaign\n")
    return out


@pytest.mark.parametrize("per_row", [False, True], ids=["columnar", "per-row"])
@pytest.mark.parametrize("rel", ["notes.txt", "logs/run.log", "campaign.json", "receipts.jsonl"])
def test_a_file_swapped_for_a_link_after_the_walk_is_refused(
    tmp_path: Path, keys: Keys, monkeypatch: pytest.MonkeyPatch, rel: str, per_row: bool
) -> None:
    if per_row:
        monkeypatch.setenv(PER_ROW_ENV, "1")
    camp = write_campaign(
        tmp_path / "c", **{"notes.txt": "honest notes\n", "logs/run.log": "honest log\n"}
    )
    outside = _outside_file(tmp_path, rel, camp)
    _swap_after_walk(monkeypatch, _link_in(outside, camp / rel))
    out = tmp_path / "out.bundle"
    with pytest.raises(CampaignError) as err:
        seal_campaign(camp, out, keys=[keys.private])
    assert err.value.exit_code == 2
    named = [p for p in err.value.problems if p.where == rel]
    assert named and "symbolic link" in named[0].message, err.value.problems
    assert not out.exists()  # nothing sealed, so nothing from outside signed


def test_a_folder_swapped_for_a_link_after_the_walk_is_refused(
    tmp_path: Path, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    camp = write_campaign(tmp_path / "c", **{"extra/notes.txt": "honest notes\n"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text(f"{MARK}\n")

    def swap() -> None:
        (camp / "extra").rename(tmp_path / "extra.orig")
        (camp / "extra").symlink_to(elsewhere, target_is_directory=True)

    _swap_after_walk(monkeypatch, swap)
    out = tmp_path / "out.bundle"
    with pytest.raises(CampaignError) as err:
        seal_campaign(camp, out, keys=[keys.private])
    named = [p for p in err.value.problems if p.where == "extra/notes.txt"]
    assert named and "folder 'extra'" in named[0].message, err.value.problems
    assert not out.exists()


def test_a_file_replaced_by_another_regular_file_is_refused(
    tmp_path: Path, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No link at all: a hard link to an outside file renamed over the walked name.
    camp = write_campaign(tmp_path / "c", **{"notes.txt": "honest notes\n"})
    outside = _outside_file(tmp_path, "notes.txt", camp)

    def swap() -> None:
        os.link(outside, camp / "incoming")
        (camp / "incoming").replace(camp / "notes.txt")

    _swap_after_walk(monkeypatch, swap)
    out = tmp_path / "out.bundle"
    with pytest.raises(CampaignError) as err:
        seal_campaign(camp, out, keys=[keys.private])
    named = [p for p in err.value.problems if p.where == "notes.txt"]
    assert named and "not the file walked" in named[0].message, err.value.problems
    assert not out.exists()


def test_confined_tree_reads_the_walked_files_and_refuses_others(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f").write_bytes(b"walked")
    (tmp_path / "outside").write_bytes(b"outside")
    with ConfinedTree(root) as tree:
        for rel_dir, _, _, entries in tree.walk():
            for name, st in entries:
                tree.files[f"{rel_dir}/{name}" if rel_dir else name] = FileIdentity.of(st)
        assert tree.read("d/f") == b"walked"
        with pytest.raises(ChangedFileError, match="not a file found"):
            tree.read("d/g")
        (root / "d" / "f").unlink()
        os.mkfifo(root / "d" / "f")  # a FIFO in its place: refused without blocking
        with pytest.raises(ChangedFileError, match="no longer a regular file"):
            tree.read("d/f")


def test_an_external_artifact_in_the_campaign_swapped_for_a_link_is_not_hashed(
    tmp_path: Path, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The artifact is not carried, but its digest is signed as "hashed at seal":
    # hashing the outside file would attest content the campaign never held.
    row = {"path": "media/a.mp4", "kind": "media", "availability": "with the author"}
    camp = write_campaign(
        tmp_path / "c",
        **{"media/a.mp4": b"honest media", "artifacts.jsonl": [row]},
    )
    outside = tmp_path / "outside.mp4"
    outside.write_bytes(f"{MARK} media".encode())
    _swap_after_walk(monkeypatch, _link_in(outside, camp / "media" / "a.mp4"))
    out = tmp_path / "out.bundle"
    with pytest.raises(CampaignError) as err:
        seal_campaign(camp, out, keys=[keys.private])
    named = [p for p in err.value.problems if p.where == "artifacts.jsonl" and p.field == "path"]
    assert named and "symbolic link" in named[0].message, err.value.problems
    assert not out.exists()


def test_an_external_artifact_in_the_campaign_is_still_hashed(tmp_path: Path, keys: Keys) -> None:
    row = {"path": "media/a.mp4", "kind": "media", "availability": "with the author"}
    camp = write_campaign(
        tmp_path / "c", **{"media/a.mp4": b"honest media", "artifacts.jsonl": [row]}
    )
    res = seal_campaign(camp, tmp_path / "out.bundle", keys=[keys.private])
    # printf 'honest media' | sha256sum
    want = "d5a33400b20fee02980de263ac0215e9785f4a70f33b1691138e8fe48f670303"
    assert res.external[0]["sha256"] == want
    assert res.external[0]["hashed_at_seal"] is True
