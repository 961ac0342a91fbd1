"""The import's staging folder (``bundler/importers/staged_tree.py``): files written by
parse workers into ``.parts/`` are renamed into place by the caller, a file carried for
several runs lands once, parts no one adopted never reach the campaign, and a failure
leaves nothing behind."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from bundler.importers.staged_tree import PARTS, StagedFile, StagedTree, stage_bytes


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_staged_bytes_are_written_with_their_digest(tmp_path: Path) -> None:
    parts = tmp_path / "p"
    a = stage_bytes(b"first", str(parts))
    b = stage_bytes(b"first", str(parts))  # the same bytes twice: two distinct files
    assert a.path != b.path
    assert Path(a.path).read_bytes() == Path(b.path).read_bytes() == b"first"
    assert a.sha256 == hashlib.sha256(b"first").hexdigest()
    assert a.size == 5


def test_adopted_parts_land_once_and_unadopted_ones_are_dropped(tmp_path: Path) -> None:
    out = tmp_path / "camp"
    with StagedTree(out) as tree:
        one = stage_bytes(b"run file", str(tree.parts))
        tree.adopt("sources/a/r1.json", one)
        tree.adopt("sources/a/r1.json", one)  # a second run of the same file
        other = stage_bytes(b"same name, second source", str(tree.parts))
        tree.adopt("sources/a/r1.json", other)  # already there: dropped, first kept
        stage_bytes(b"never adopted (its worker died)", str(tree.parts))
        tree.put("sources/b/r2.json", b"put, not staged")
        tree.finish({"campaign.json": b"{}"})
    assert _files(out) == {
        "campaign.json": b"{}",
        "sources/a/r1.json": b"run file",
        "sources/b/r2.json": b"put, not staged",
    }
    assert not (out / PARTS).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["camp"]


def test_a_file_outside_the_parts_folder_is_not_adopted(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x").write_bytes(b"not ours")
    with StagedTree(tmp_path / "camp") as tree, pytest.raises(ValueError, match="not a part"):
        tree.adopt("sources/x", StagedFile(str(elsewhere / "x"), "0" * 64, 8))
    assert (elsewhere / "x").read_bytes() == b"not ours"
    assert not (tmp_path / "camp").exists()


def test_a_failure_after_staging_leaves_nothing(tmp_path: Path) -> None:
    def stage() -> None:
        with StagedTree(tmp_path / "camp") as tree:
            tree.adopt("sources/a.json", stage_bytes(b"parsed", str(tree.parts)))
            raise RuntimeError("a later source failed")

    with pytest.raises(RuntimeError):
        stage()
    assert list(tmp_path.iterdir()) == []
