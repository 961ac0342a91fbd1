"""Crafted archives are rejected clearly: bad paths, links, duplicates, bombs, truncation."""

from __future__ import annotations

import contextlib
import io
import os
import random
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import zstandard

from bundler.errors import BundleFormatError
from bundler.format.container import Limits, read_container, write_container
from bundler.format.trust import Trust
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


def test_a_member_in_a_file_writes_the_same_bytes_as_in_memory(tmp_path: Path) -> None:
    """A member given as a file (a streamed table) writes the bytes it would as bytes,
    and reads back (issue 22: every frame is streamed, whatever its size)."""
    rng = random.Random(7)
    data = rng.randbytes(300_000) + b"abcdefgh" * 200_000
    members: list[tuple[str, bytes]] = [("manifest.json", b"{}"), ("tables/t.parquet", data)]
    as_bytes = io.BytesIO()
    write_container(as_bytes, members)
    spool = tmp_path / "member"
    spool.write_bytes(data)
    out = io.BytesIO()
    with spool.open("rb") as fh:
        write_container(out, [members[0], ("tables/t.parquet", fh)])
    assert out.getvalue() == as_bytes.getvalue()
    path = tmp_path / "streamed.bundle"
    path.write_bytes(out.getvalue())
    assert [(m.name, m.data) for m in read_container(path)] == members
    # The frame says its content size and carries a checksum (specs/bundle-format.md).
    params = zstandard.get_frame_parameters(out.getvalue())
    assert params.content_size == len(zstandard.ZstdDecompressor().decompress(out.getvalue()))
    assert params.has_checksum


def test_multithreaded_frame_does_not_depend_on_the_worker_count(tmp_path: Path) -> None:
    """A container larger than one zstd job (issue 22: the frame is compressed by
    ZSTD_WORKERS threads) is the same bytes with 1, 2 or 4 workers, and reads back."""
    rng = random.Random(22)
    words = [f"w{rng.randrange(10**6)}".encode() for _ in range(4000)]
    big = b" ".join(rng.choice(words) for _ in range(6_000_000))  # ~48 MB, compressible
    outs = []
    for workers in (1, 2, 4):
        buf = io.BytesIO()
        write_container(buf, [("files/big.txt", big)], workers=workers)
        outs.append(buf.getvalue())
    assert outs[0] == outs[1] == outs[2]
    path = tmp_path / "big.bundle"
    path.write_bytes(outs[0])
    assert [m.data for m in read_container(path)] == [big]


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
    report = check_bundle(p, trust=Trust.allow_unsigned())
    assert not report.ok
    assert any("climbs out" in pr.message for pr in report.problems)


# --- bounded reading (issue 12, defects 4 and 9) --------------------------------------------


def raw_bundle(path: Path, tar_bytes: bytes) -> Path:
    """Compress hand-made tar bytes as one zstd frame."""
    path.write_bytes(zstandard.ZstdCompressor().compress(tar_bytes))
    return path


def ext_header(kind: bytes, size: int, fmt: int = tarfile.USTAR_FORMAT) -> bytes:
    ti = tarfile.TarInfo("././@Header")
    ti.type = kind
    ti.size = size
    return ti.tobuf(format=fmt)  # type: ignore[arg-type]


def member_bytes(name: str, data: bytes) -> bytes:
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    return ti.tobuf(format=tarfile.PAX_FORMAT) + data.ljust(-(-len(data) // 512) * 512, b"\0")


END = b"\0" * 1024


@pytest.mark.parametrize(
    ("kind", "what"),
    [
        (tarfile.XHDTYPE, "pax extended header"),
        (tarfile.XGLTYPE, "pax global header"),
        (tarfile.GNUTYPE_LONGNAME, "GNU long-name header"),
        (tarfile.GNUTYPE_LONGLINK, "GNU long-link header"),
    ],
)
def test_oversized_extension_header_is_refused_before_reading(
    tmp_path: Path, kind: bytes, what: str
) -> None:
    # The header declares 1 MiB but no content follows: the reader must refuse on the
    # declaration (an unbounded reader would read, or fail on the truncation first).
    p = raw_bundle(tmp_path / "h.bundle", member_bytes("a", b"x") + ext_header(kind, 1 << 20))
    with pytest.raises(BundleFormatError) as exc:
        read_container(p)
    assert f"{what} at tar offset 1,024 declares 1,048,576 bytes" in exc.value.message
    assert "over the 8,192-byte bound for headers" in exc.value.message


def test_long_names_within_the_header_bound_still_read(tmp_path: Path) -> None:
    name = "files/" + "d" * 200 + "/" + "é" * 1800  # a 4 KB pax path record
    p = tmp_path / "long.bundle"
    with p.open("wb") as fh:
        write_container(fh, [(name, b"ok")])
    assert [(m.name, m.data) for m in read_container(p)] == [(name, b"ok")]


def test_global_pax_headers_are_bounded_together(tmp_path: Path) -> None:
    glob = b"".join(
        tarfile.TarInfo.create_pax_global_header({f"k{i}": "v" * 5000}) + member_bytes(f"m{i}", b"")
        for i in range(2)
    )
    p = raw_bundle(tmp_path / "g.bundle", glob + END)
    with pytest.raises(BundleFormatError, match="pax global headers together"):
        read_container(p)


def test_chain_of_extension_headers_is_refused_without_recursion(tmp_path: Path) -> None:
    ti = tarfile.TarInfo("a")
    ti.pax_headers = {"comment": "x"}
    full = ti.tobuf(format=tarfile.PAX_FORMAT)
    p = raw_bundle(tmp_path / "c.bundle", full[:1024] * 5000 + full + END)
    with pytest.raises(BundleFormatError, match="more than 8 extension headers in a row"):
        read_container(p)


@pytest.mark.parametrize(
    "pax",
    [
        {"GNU.sparse.map": "a,b"},
        {"GNU.sparse.size": "x", "GNU.sparse.name": "s"},
        {"GNU.sparse.major": "1", "GNU.sparse.minor": "0"},
    ],
)
def test_malformed_sparse_records_are_corrupt_not_a_traceback(
    tmp_path: Path, pax: dict[str, str]
) -> None:
    ti = tarfile.TarInfo("s")
    ti.size = 512
    ti.pax_headers = pax
    p = raw_bundle(tmp_path / "s.bundle", ti.tobuf(format=tarfile.PAX_FORMAT) + b"zz" * 256 + END)
    with pytest.raises(BundleFormatError, match="truncated or corrupt"):
        read_container(p)


def test_member_names_are_bounded_together(tmp_path: Path) -> None:
    p = craft(tmp_path / "n.bundle", [(f"{'n' * 90}{i}", b"", REG) for i in range(4)])
    with pytest.raises(BundleFormatError, match="member names exceed 200 characters"):
        read_container(p, Limits(max_name_chars=200))


def test_reserved_zstd_block_type_is_corrupt(tmp_path: Path) -> None:
    # magic, descriptor (single segment, 1-byte content size), size 0, then a block of type 3
    p = tmp_path / "r.bundle"
    p.write_bytes(b"\x28\xb5\x2f\xfd\x20\x00" + (1 | 3 << 1).to_bytes(3, "little"))
    with pytest.raises(BundleFormatError, match="reserved zstd block type"):
        read_container(p)


def test_decompression_output_is_bounded_per_read(tmp_path: Path) -> None:
    # 64 MiB of zeros are RLE blocks (4 bytes per 128 KiB): feeding fixed byte counts
    # would let one call regenerate tens of MiB. Whole blocks keep each step at 1 MiB.
    from bundler.format.zstd_frame import FramePull

    p = tmp_path / "z.bin"
    p.write_bytes(zstandard.ZstdCompressor(level=19).compress(bytes(64 << 20)))
    assert p.stat().st_size < 10_000
    biggest = total = 0
    with p.open("rb") as fh:
        pull = FramePull(fh, 1 << 30, "z")
        while chunk := pull.read():
            biggest = max(biggest, len(chunk))
            total += len(chunk)
    assert total == 64 << 20
    assert biggest <= 1 << 20
    assert not pull.trailing


def test_large_members_are_spilled_and_read_back(tmp_path: Path) -> None:
    import hashlib

    members = [("small", b"s" * 10), ("big", bytes(range(256)) * 4096), ("big2", b"b" * 3000)]
    p = tmp_path / "x.bundle"
    with p.open("wb") as fh:
        write_container(fh, members)
    got = read_container(p, Limits(inline_member_bytes=1024, inline_total_bytes=2048))
    assert [(m.name, m.in_memory, m.spilled) for m in got] == [
        ("small", True, False),
        ("big", False, True),
        ("big2", False, True),
    ]
    for m, (name, data) in zip(got, members, strict=True):
        assert (m.name, m.size, m.data, m.read_bytes()) == (name, len(data), data, data)
        assert m.sha256 == hashlib.sha256(data).hexdigest()
    with got[1].open() as fh:
        fh.seek(-4, io.SEEK_END)
        assert fh.read() == bytes(range(252, 256))
        fh.seek(256)
        assert fh.read(3) == b"\0\1\2"


def test_members_not_kept_are_hashed_only(tmp_path: Path) -> None:
    p = tmp_path / "x.bundle"
    with p.open("wb") as fh:
        write_container(fh, [("keep.json", b"{}"), ("files/big", b"x" * 5000)])
    got = {m.name: m for m in read_container(p, keep=lambda n: n.endswith(".json"))}
    assert got["keep.json"].data == b"{}"
    big = got["files/big"]
    assert (big.size, big.in_memory, big.spilled) == (5000, False, False)
    with pytest.raises(ValueError, match="without keeping its content"):
        big.read_bytes()


def test_a_device_is_refused_as_input_error() -> None:
    from bundler.errors import UsageError

    with pytest.raises(UsageError, match=r"not a regular file \(a device\)"):
        read_container(Path(os.devnull))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path: Path) -> None:
    # Before: open() blocked until a writer appeared, so verify hung for ever. The
    # subprocess and its timeout turn a hang into a failure instead of a stuck run.
    fifo = tmp_path / "x.bundle"
    os.mkfifo(fifo)
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-m", "reprobundle.cli", "verify", str(fifo), "--allow-unsigned"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "not a regular file (a FIFO)" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_flipped_bytes_give_format_errors_only(tmp_path: Path) -> None:
    # Any damage to the tar stream is a BundleFormatError (or still a readable archive),
    # never another exception type escaping from tarfile.
    import random

    ti = tarfile.TarInfo("files/" + "x" * 120)  # a pax header too
    ti.size = 700
    tar = (
        ti.tobuf(format=tarfile.PAX_FORMAT)
        + b"d" * 1024
        + member_bytes("manifest.json", b"{}")
        + END
    )
    rng = random.Random(12)
    for i in range(400):
        data = bytearray(tar)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        p = raw_bundle(tmp_path / f"f{i}.bundle", bytes(data))
        with contextlib.suppress(BundleFormatError):
            read_container(p)


def _mixed() -> list[tuple[str, bytes]]:
    names = [
        "a",
        "files/" + "x" * 120,  # beyond ustar's 100 characters: a pax header
        "files/caf\u00e9/na\u00efve.txt",  # non-ASCII: a pax header
        "files/" + "d/" * 60 + "deep.json",
    ]
    sizes = [0, 1, 511, 512, 513, 10240 - 1536, 10240, 70_001]
    return [(f"{names[i % len(names)]}-{i}", bytes([i]) * n) for i, n in enumerate(sizes)]


# One member of one header block: its data ends 1536, 1024, 512 or 0 bytes before a
# 10,240-byte record, so the two end-of-archive blocks land on either side of it.
_EDGES = [[("m", b"e" * n)] for n in (8704, 9216, 9217, 9728, 0)]


@pytest.mark.parametrize(
    "members", [_mixed(), *_EDGES], ids=["mixed", "8704", "9216", "9217", "9728", "0"]
)
def test_the_streamed_tar_is_what_tarfile_writes_for_any_names_and_sizes(
    tmp_path: Path, members: list[tuple[str, bytes]]
) -> None:
    """The writer declares the tar's size in the frame header before writing it (no
    temporary copy): the frame must hold exactly the tar that ``tarfile`` itself writes
    for the same members, whatever pax headers long or non-ASCII names need and
    wherever the sizes fall against 512-byte blocks and 10,240-byte records."""
    spill = tmp_path / "spilled"
    spill.write_bytes(b"from a file " * 999)
    files = [("files/spilled.bin", spill.read_bytes())] if len(members) > 1 else []
    with spill.open("rb") as fh:
        out = tmp_path / "t.bundle"
        with out.open("wb") as dest:
            write_container(
                dest, [*members, *(("files/spilled.bin", fh) for _ in files)], workers=2
            )
    expected = io.BytesIO()
    with tarfile.open(fileobj=expected, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in [*members, *files]:
            ti = tarfile.TarInfo(name)
            ti.size, ti.mtime, ti.mode, ti.uname, ti.gname = len(data), 0, 0o644, "", ""
            tar.addfile(ti, io.BytesIO(data))
    frame = out.read_bytes()
    assert zstandard.frame_content_size(frame) == len(expected.getvalue())
    assert zstandard.ZstdDecompressor().decompress(frame) == expected.getvalue()
    got = {m.name: m.data for m in read_container(out)}
    assert got == dict([*members, *files])
