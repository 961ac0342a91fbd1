"""Crafted archives are rejected clearly: bad paths, links, duplicates, bombs, truncation."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
import zstandard

from bundler.container import Limits, read_container, write_container
from bundler.errors import BundleFormatError
from bundler.verify import check_bundle


def craft(path: Path, entries: list[tuple[str, bytes, bytes]]) -> Path:
    """Write a tar+zstd archive without any of the writer's safety checks.

    Each entry is (name, data, tar type).
    """
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, kind in entries:
            ti = tarfile.TarInfo(name)
            ti.type = kind
            if kind in {tarfile.SYMTYPE, tarfile.LNKTYPE}:
                ti.linkname = "manifest.json"
                tar.addfile(ti)
            else:
                ti.size = len(data)
                tar.addfile(ti, io.BytesIO(data))
    path.write_bytes(zstandard.ZstdCompressor().compress(raw.getvalue()))
    return path


REG = tarfile.REGTYPE


def test_round_trip_keeps_order_and_bytes(tmp_path: Path) -> None:
    members = [("b.txt", b"bee"), ("a/x.bin", bytes(range(256)) * 10)]
    with (tmp_path / "x.bundle").open("wb") as fh:
        write_container(fh, members)
    got = read_container(tmp_path / "x.bundle")
    assert [(m.name, m.data) for m in got] == members


def test_writer_is_deterministic(tmp_path: Path) -> None:
    outs = []
    for i in range(2):
        p = tmp_path / f"{i}.bundle"
        with p.open("wb") as fh:
            write_container(fh, [("m", b"same")])
        outs.append(p.read_bytes())
    assert outs[0] == outs[1]
    # Headers carry no time, owner or mode from the environment.
    raw = zstandard.ZstdDecompressor().decompress(outs[0])
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        ti = tar.getmembers()[0]
    assert (ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname, ti.mode) == (0, 0, 0, "", "", 0o644)


@pytest.mark.parametrize(
    ("name", "kind", "why"),
    [
        ("../escape", REG, "climbs out"),
        ("a/../../escape", REG, "climbs out"),
        ("/etc/passwd", REG, "absolute"),
        ("link", tarfile.SYMTYPE, "symbolic link"),
        ("hard", tarfile.LNKTYPE, "hard link"),
        ("dir", tarfile.DIRTYPE, "directory"),
        ("fifo", tarfile.FIFOTYPE, "FIFO"),
        ("a\\b", REG, "backslash"),
        ("a//b", REG, "empty or '.'"),
        ("./a", REG, "empty or '.'"),
        ("e\u0301", REG, "NFC"),
    ],
)
def test_bad_member_is_rejected_by_name(tmp_path: Path, name: str, kind: bytes, why: str) -> None:
    p = craft(tmp_path / "bad.bundle", [("manifest.json", b"{}", REG), (name, b"x", kind)])
    with pytest.raises(BundleFormatError) as exc:
        read_container(p)
    assert any(why in pr.message and pr.record == name for pr in exc.value.problems)


def test_all_bad_members_are_reported_together(tmp_path: Path) -> None:
    p = craft(
        tmp_path / "bad.bundle",
        [("../a", b"", REG), ("/b", b"", REG), ("c", b"", REG), ("c", b"", REG)],
    )
    with pytest.raises(BundleFormatError) as exc:
        read_container(p)
    assert [pr.record for pr in exc.value.problems] == ["../a", "/b", "c"]
    assert "duplicate" in exc.value.problems[2].message


def test_truncated_archive_is_rejected(tmp_path: Path) -> None:
    p = tmp_path / "ok.bundle"
    with p.open("wb") as fh:
        write_container(fh, [("m", bytes(range(256)) * 400)])
    data = p.read_bytes()
    for cut in (len(data) // 2, len(data) - 1, 10):
        t = tmp_path / f"cut{cut}.bundle"
        t.write_bytes(data[:cut])
        with pytest.raises(BundleFormatError, match=r"truncated|corrupt"):
            read_container(t)


def test_trailing_bytes_are_rejected(tmp_path: Path) -> None:
    p = tmp_path / "t.bundle"
    with p.open("wb") as fh:
        write_container(fh, [("m", b"x")])
    p.write_bytes(p.read_bytes() + b"extra")
    with pytest.raises(BundleFormatError, match="trailing"):
        read_container(p)


def test_not_an_archive(tmp_path: Path) -> None:
    (tmp_path / "x").write_bytes(b"PK\x03\x04 not ours")
    with pytest.raises(BundleFormatError, match="not a reprobundle archive"):
        read_container(tmp_path / "x")


def test_member_over_the_default_bound_is_refused_before_reading(tmp_path: Path) -> None:
    # A header declaring 2 GiB (over the documented 1 GiB bound) followed by no data:
    # the reader must refuse on the header, not try to read or allocate 2 GiB.
    ti = tarfile.TarInfo("big")
    ti.size = 2 << 30
    header = ti.tobuf(format=tarfile.PAX_FORMAT)
    p = tmp_path / "bomb.bundle"
    p.write_bytes(zstandard.ZstdCompressor().compress(header + b"\0" * 1024))
    with pytest.raises(BundleFormatError, match=r"over the 1,073,741,824-byte bound"):
        read_container(p)


def test_decompression_bomb_stops_at_the_total_bound(tmp_path: Path) -> None:
    # 64 MiB of zeros compress to a few KiB; with a 1 MiB total bound the reader
    # must stop after about 1 MiB of output.
    p = craft(tmp_path / "zeros.bundle", [("z", bytes(64 << 20), REG)])
    assert p.stat().st_size < 100_000
    with pytest.raises(BundleFormatError, match="decompression bomb"):
        read_container(p, Limits(max_total_bytes=1 << 20))


def test_member_bound_is_configurable(tmp_path: Path) -> None:
    p = craft(tmp_path / "m.bundle", [("m", b"x" * 2048, REG)])
    with pytest.raises(BundleFormatError, match="over the 1,024-byte bound"):
        read_container(p, Limits(max_member_bytes=1024))


def test_member_count_bound(tmp_path: Path) -> None:
    p = craft(tmp_path / "n.bundle", [(f"m{i}", b"", REG) for i in range(5)])
    with pytest.raises(BundleFormatError, match="more than 3 members"):
        read_container(p, Limits(max_members=3))


def test_verify_reports_crafted_archive_as_problem_not_traceback(tmp_path: Path) -> None:
    p = craft(tmp_path / "bad.bundle", [("../x", b"", REG)])
    report = check_bundle(p, allow_unsigned=True)
    assert not report.ok
    assert any("climbs out" in pr.message for pr in report.problems)
