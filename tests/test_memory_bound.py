"""``bundle verify`` of crafted bundles stays under 512 MiB and ends in a clear error.

Issue 12, defect 4: the reader held members in RAM, so a 73 KB file cost
3.2 GB and a pax header declaring 1.5 GiB cost 4.6 GB. Each case here is a
small file (tens of KB) crafted to make an unbounded reader allocate
gigabytes; ``bundle verify`` must refuse or fail it (exit 1, integrity, or 2,
input) with a message saying why, never a traceback, never killed.

How memory is measured. Each verify runs as a subprocess under an
address-space cap of 512 MiB: ``prlimit --as`` (util-linux), or
``RLIMIT_AS`` set in the child when ``prlimit`` is missing. Past the cap an
allocation fails with MemoryError, which shows as a traceback and a failure
here. Measured on the development machine (Python 3.11, pyarrow, numpy,
cryptography, zstandard all imported): ``bundle --version`` runs under
``--as`` of 512 MiB and verify of the sealed sample under 384 MiB (peak RSS
about 135 MiB), so the issue's cap of 512 MiB of *address space* is usable
as is, and stricter than a cap on RSS (reserved but untouched memory counts
too). Each run's peak RSS is also read with ``wait4`` and asserted under
512 MiB. The fixture first verifies a normal sealed bundle under the cap: if
even that fails (an interpreter or BLAS build reserving more address space
than ours), the cap cannot tell a bounded reader from an unbounded one, and
the tests fall back to the peak-RSS assertion alone, with a 4 GiB cap only to
protect the machine. BLAS/OpenMP threads are pinned to one: OpenBLAS
reserves address space per thread.

Each case failed before the streaming reader, except the two header-size
claims, which were already refused on the header (kept as guards). Under the
cap: MemoryError tracebacks, or RecursionError tracebacks (pax chain, deep
JSON). Peak RSS of ``bundle verify FILE --allow-unsigned`` measured with
wait4, before (no cap but a 6 GiB safety cap) -> after (512 MiB cap):
three 1 GiB zero members (99 KB file) 5,283 -> 97 MiB; five of them (total
bound) 5,424 -> 98; pax header of 1.5 GiB (49 KB) 4,985 -> 99; GNU long name
of 1 GiB 3,239 -> 99; GNU sparse 1.0 map over 6 GiB (MemoryError at the
safety cap) -> 99; old GNU sparse extension blocks 923 -> 99; 30 MiB JSON
manifest or envelope of ``{}`` 950 -> 159; 256 MiB table 933 -> 159; Parquet
footer claiming 190 MiB 748 -> 159; 128 MiB zstd window 747 -> 232; the
sealed sample 202 -> 159.
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
import zstandard

from bundler.format.container import Limits, read_container
from bundler.format.trust import Trust
from bundler.verify import check_bundle, json_cost

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "h3-ref2va-5s"
MIB = 1 << 20
GIB = 1 << 30
CAP = 512 * MIB
SAFETY_CAP = 4 * GIB
TIMEOUT_S = 300

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="RLIMIT_AS and wait4 peak RSS are Linux's"
)

REG = tarfile.REGTYPE


# --- crafting, without tarfile's checks and without holding the content ------------------


class CraftedTar:
    """A tar stream written by hand into one zstd frame, streamed: gigabytes cost nothing here."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh = path.open("wb")
        self._w = zstandard.ZstdCompressor(level=3).stream_writer(self._fh)
        self.pos = 0

    def write(self, data: bytes) -> None:
        self._w.write(data)
        self.pos += len(data)

    def repeat(self, unit: bytes, size: int) -> None:
        """``size`` bytes of ``unit`` repeated."""
        block = unit * max(1, MIB // len(unit))
        while size >= len(block):
            self.write(block)
            size -= len(block)
        full, rest = divmod(size, len(unit))
        self.write(unit * full + unit[:rest])

    def pad(self) -> None:
        self.write(b"\0" * (-self.pos % tarfile.BLOCKSIZE))

    def header(
        self,
        name: str,
        size: int,
        kind: bytes = REG,
        pax: dict[str, str] | None = None,
        fmt: Literal[0, 1, 2] = tarfile.PAX_FORMAT,
    ) -> None:
        ti = tarfile.TarInfo(name)
        ti.size = size
        ti.type = kind
        if pax:
            ti.pax_headers = pax
        self.write(ti.tobuf(format=fmt))

    def member(self, name: str, data: bytes) -> None:
        self.header(name, len(data))
        self.write(data)
        self.pad()

    def filled(self, name: str, size: int, unit: bytes = b"\0", tail: bytes = b"") -> None:
        """A member of ``size`` bytes: ``unit`` repeated, then ``tail``."""
        self.header(name, size)
        self.repeat(unit, size - len(tail))
        self.write(tail)
        self.pad()

    def close(self) -> Path:
        self.write(b"\0" * 1024)
        self._w.flush(zstandard.FLUSH_FRAME)
        self._fh.close()
        return self.path


def _checksummed(block: bytearray) -> bytes:
    block[148:156] = b" " * 8
    block[148:155] = b"%06o\0" % sum(block)
    return bytes(block)


def craft_zero_members(path: Path) -> Path:
    """Three 1 GiB members of zeros, each under the per-member bound (the issue's 73 KB file)."""
    t = CraftedTar(path)
    for i in range(3):
        t.filled(f"files/zero{i}.bin", GIB)
    return t.close()


def craft_total_bomb(path: Path) -> Path:
    """Five 1 GiB members: more than the 4 GiB bound on the whole stream."""
    t = CraftedTar(path)
    for i in range(5):
        t.filled(f"files/zero{i}.bin", GIB)
    return t.close()


def craft_wide_window(path: Path) -> Path:
    """A frame whose window is 128 MiB (the decoder's largest): the decoder's own buffer."""
    params = zstandard.ZstdCompressionParameters.from_level(3, window_log=27, enable_ldm=True)
    chunk = random.Random(7).randbytes(MIB)
    with path.open("wb") as fh:
        w = zstandard.ZstdCompressor(compression_params=params).stream_writer(fh)
        w.write(_tar_block("files/noise", 256 * MIB, REG, tarfile.PAX_FORMAT))
        for _ in range(256):
            w.write(chunk)
        w.write(b"\0" * 1024)
        w.flush(zstandard.FLUSH_FRAME)
    return path


def craft_pax_header(path: Path) -> Path:
    """A pax extended header declaring 1.5 GiB (one record), then a member."""
    size = 3 * GIB // 2
    t = CraftedTar(path)
    t.header("././@PaxHeader", size, tarfile.XHDTYPE, fmt=tarfile.USTAR_FORMAT)
    prefix = b"%d comment=" % size
    t.write(prefix)
    t.repeat(b"a", size - len(prefix) - 1)
    t.write(b"\n")
    t.pad()
    t.member("files/a", b"x")
    return t.close()


def craft_gnu_longname(path: Path) -> Path:
    """A GNU long-name header declaring 1 GiB of name."""
    t = CraftedTar(path)
    t.header("././@LongLink", GIB, tarfile.GNUTYPE_LONGNAME, fmt=tarfile.GNU_FORMAT)
    t.repeat(b"n", GIB)
    t.pad()
    t.member("files/a", b"x")
    return t.close()


def craft_size_claim(path: Path) -> Path:
    """A member whose header claims 1 GiB + 1 byte, followed by almost nothing."""
    t = CraftedTar(path)
    t.header("files/big", GIB + 1)
    t.write(b"\0" * 1024)
    return t.close()


def craft_pax_size_claim(path: Path) -> Path:
    """A member whose pax ``size`` record claims 1 TiB."""
    t = CraftedTar(path)
    t.header("files/big", 0, pax={"size": str(1 << 40)})
    t.write(b"\0" * 1024)
    return t.close()


def craft_sparse_map(path: Path) -> Path:
    """GNU sparse 1.0: a map of 128 Mi numbers in front of the data (tarfile lists them all)."""
    fields = 64 << 20
    area = b"%d\n" % fields
    t = CraftedTar(path)
    pax = {
        "GNU.sparse.major": "1",
        "GNU.sparse.minor": "0",
        "GNU.sparse.name": "files/sparse",
        "GNU.sparse.realsize": "1024",
    }
    t.header("files/GNUSparseFile.0/sparse", len(area) + 4 * fields, pax=pax)
    t.write(area)
    t.repeat(b"1\n", 4 * fields)
    t.pad()
    return t.close()


def craft_old_sparse(path: Path) -> Path:
    """An old GNU sparse member ('S') followed by 512 Ki extension blocks of 21 entries each."""
    head = bytearray(_tar_block("files/s", 0, tarfile.GNUTYPE_SPARSE, tarfile.GNU_FORMAT))
    head[482] = 1  # isextended
    ext = bytearray(b"".join(b"%011o\0%011o\0" % (i + 1, 1) for i in range(21)).ljust(512, b"\0"))
    ext[504] = 1
    last = bytearray(ext)
    last[504] = 0
    t = CraftedTar(path)
    t.write(_checksummed(head))
    t.repeat(bytes(ext), 512 * 512 * 1024)
    t.write(bytes(last))
    return t.close()


def _tar_block(name: str, size: int, kind: bytes, fmt: Literal[0, 1, 2]) -> bytes:
    ti = tarfile.TarInfo(name)
    ti.size = size
    ti.type = kind
    return ti.tobuf(format=fmt)


def craft_pax_chain(path: Path) -> Path:
    """3,000 pax headers in a row in front of one member (tarfile recurses once per header)."""
    ti = tarfile.TarInfo("files/a")
    ti.size = 1
    ti.pax_headers = {"comment": "x"}
    full = ti.tobuf(format=tarfile.PAX_FORMAT)
    t = CraftedTar(path)
    t.repeat(full[:1024], 3000 * 1024)  # the 'x' header block and its record block
    t.write(full + b"x".ljust(512, b"\0"))
    return t.close()


def _json_bomb(size: int) -> bytes:
    return b"[" + b"{}," * (size // 3) + b"{}]"


def craft_manifest_bomb(path: Path) -> Path:
    """manifest.json of 30 MiB of ``[{},{},…]``: about 750 MB once parsed."""
    t = CraftedTar(path)
    t.member("manifest.json", _json_bomb(30 * MIB))
    return t.close()


def craft_envelope_bomb(path: Path) -> Path:
    """signatures.dsse.json of 30 MiB of ``[{},{},…]``."""
    t = CraftedTar(path)
    t.member("signatures.dsse.json", _json_bomb(30 * MIB))
    return t.close()


def craft_deep_json(path: Path) -> Path:
    """manifest.json nested 100,000 deep (RecursionError in the JSON parser)."""
    t = CraftedTar(path)
    t.member("manifest.json", b"[" * 100_000)
    return t.close()


def _sample_members(sealed: Path) -> list[tuple[str, bytes]]:
    return [(m.name, m.data) for m in read_container(sealed)]


def craft_big_table(sealed: Path) -> Callable[[Path], Path]:
    """The sealed sample with ``tables/receipts.parquet`` replaced by 256 MiB of zeros."""

    def craft(path: Path) -> Path:
        t = CraftedTar(path)
        for name, data in _sample_members(sealed):
            if name == "tables/receipts.parquet":
                t.filled(name, 256 * MIB)
            else:
                t.member(name, data)
        return t.close()

    return craft


def craft_parquet_footer(sealed: Path) -> Callable[[Path], Path]:
    """The sample with a receipts table of 200 MiB whose footer claims 190 MiB."""
    tail = (190 * MIB).to_bytes(4, "little") + b"PAR1"

    def craft(path: Path) -> Path:
        t = CraftedTar(path)
        for name, data in _sample_members(sealed):
            if name == "tables/receipts.parquet":
                t.filled(name, 200 * MIB, unit=b"PAR1", tail=tail)
            else:
                t.member(name, data)
        return t.close()

    return craft


# --- running verify under the cap ---------------------------------------------------------


class Run:
    """One finished ``bundle verify``: exit status, output and peak RSS."""

    def __init__(self, rc: int, out: str, err: str, peak_rss: int, seconds: float) -> None:
        self.rc = rc
        self.out = out
        self.err = err
        self.peak_rss = peak_rss
        self.seconds = seconds

    @property
    def text(self) -> str:
        return self.out + self.err


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


_SETRLIMIT_EXEC = (
    "import os, resource, sys; cap = int(sys.argv[1]); "
    "resource.setrlimit(resource.RLIMIT_AS, (cap, cap)); os.execv(sys.argv[2], sys.argv[2:])"
)


# Linux charges a child's peak RSS (``ru_maxrss``) with the RSS of the process it was
# forked from: started straight from pytest (torch and all imported), every run would
# "peak" at pytest's size. A small launcher process forks the capped command and reports
# the command's own rusage back.
_LAUNCHER = (
    "import json, os, subprocess, sys; p = subprocess.Popen(sys.argv[2:]); "
    "_, st, ru = os.wait4(p.pid, 0); "
    "open(sys.argv[1], 'w').write(json.dumps([os.waitstatus_to_exitcode(st), ru.ru_maxrss]))"
)


def run_capped(args: list[str], cap: int) -> Run:
    """Run ``python -m reprobundle.cli ARGS`` under an address-space cap, with its peak RSS."""
    cmd = [sys.executable, "-m", "reprobundle.cli", *args]
    prlimit = shutil.which("prlimit")
    if prlimit:
        cmd = [prlimit, f"--as={cap}", "--", *cmd]
    else:  # the same, without util-linux: set RLIMIT_AS, then exec in place
        cmd = [sys.executable, "-c", _SETRLIMIT_EXEC, str(cap), *cmd]

    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryDirectory() as tmp,
    ):
        report = Path(tmp) / "rusage.json"
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(report), *cmd],
            stdout=out,
            stderr=err,
            env=_env(),
            cwd=ROOT,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail(f"{' '.join(args)}: still running after {TIMEOUT_S} s")
        seconds = time.monotonic() - t0
        rc, maxrss_kib = json.loads(report.read_text())
        out.seek(0)
        err.seek(0)
        return Run(
            rc,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            maxrss_kib * 1024,  # KiB on Linux
            seconds,
        )


def verify_args(bundle: Path) -> list[str]:
    return ["verify", str(bundle), "--allow-unsigned", "--no-progress"]


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seed sample, sealed unsigned."""
    out = tmp_path_factory.mktemp("sealed") / "sample.bundle"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "reprobundle.cli",
            "seal",
            str(SAMPLE),
            "-o",
            str(out),
            "--unsigned",
        ],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def cap(sealed: Path) -> int:
    """512 MiB of address space, unless even a normal bundle cannot be verified under it."""
    run = run_capped(verify_args(sealed), CAP)
    if run.rc == 0:
        return CAP
    # The interpreter itself needs more address space here: peak RSS alone decides.
    return SAFETY_CAP


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="reprobundle-crafted-") as d:
        yield Path(d)


CASES: list[tuple[str, str]] = [
    ("zero_members", r"missing member"),
    ("total_bomb", r"possible decompression bomb"),
    ("wide_window", r"missing member"),
    ("pax_header", r"pax extended header at tar offset 0 declares 1,610,612,736 bytes"),
    ("gnu_longname", r"GNU long-name header at tar offset 0 declares 1,073,741,824 bytes"),
    ("size_claim", r"declares 1,073,741,825 bytes, over the 1,073,741,824-byte bound"),
    ("pax_size_claim", r"declares 1,099,511,627,776 bytes, over the 1,073,741,824-byte bound"),
    ("sparse_map", r"GNU sparse map at tar offset 0 runs past the 8,192-byte bound"),
    ("old_sparse", r"GNU sparse map at tar offset 0 runs past the 8,192-byte bound"),
    ("pax_chain", r"more than 8 extension headers in a row"),
    ("manifest_bomb", r"manifest.json: .*estimated .* bytes of memory, over the"),
    ("envelope_bomb", r"signatures.dsse.json: .*estimated .* bytes of memory, over the"),
    ("deep_json", r"nested too deeply"),
]
CRAFTERS: dict[str, Callable[[Path], Path]] = {
    "zero_members": craft_zero_members,
    "total_bomb": craft_total_bomb,
    "wide_window": craft_wide_window,
    "pax_header": craft_pax_header,
    "gnu_longname": craft_gnu_longname,
    "size_claim": craft_size_claim,
    "pax_size_claim": craft_pax_size_claim,
    "sparse_map": craft_sparse_map,
    "old_sparse": craft_old_sparse,
    "pax_chain": craft_pax_chain,
    "manifest_bomb": craft_manifest_bomb,
    "envelope_bomb": craft_envelope_bomb,
    "deep_json": craft_deep_json,
}


def _assert_clear_failure(run: Run, want: str, cap: int) -> None:
    import re

    assert "Traceback" not in run.text, run.text[-3000:]
    assert "MemoryError" not in run.text, run.text[-3000:]
    assert run.rc >= 0, f"killed by signal {-run.rc}"
    assert run.rc in (1, 2), (run.rc, run.text[-3000:])
    assert re.search(want, run.text), run.text[-3000:]
    assert run.peak_rss < CAP, f"peak RSS {run.peak_rss / MIB:.0f} MiB (cap {cap / MIB:.0f} MiB)"


@pytest.mark.parametrize(("case", "want"), CASES, ids=[c for c, _ in CASES])
def test_crafted_bundle_is_refused_within_512_mib(
    case: str, want: str, cap: int, workdir: Path
) -> None:
    bundle = CRAFTERS[case](workdir / f"{case}.bundle")
    assert bundle.stat().st_size < 2 * MIB  # a small file...
    run = run_capped(verify_args(bundle), cap)
    _assert_clear_failure(run, want, cap)  # ...that must not cost gigabytes


@pytest.mark.parametrize(
    ("case", "want"),
    [
        ("big_table", r"tables/receipts.parquet.*not a readable Parquet file"),
        ("parquet_footer", r"footer of 199,229,440 bytes, over the 8,388,608-byte bound"),
    ],
)
def test_crafted_table_is_refused_within_512_mib(
    case: str, want: str, cap: int, sealed: Path, workdir: Path
) -> None:
    # The sample's manifest parses, so the tables are checked: the oversized table is
    # spilled to a temporary file and only its footer is read.
    crafter = craft_big_table if case == "big_table" else craft_parquet_footer
    bundle = crafter(sealed)(workdir / f"{case}.bundle")
    assert bundle.stat().st_size < 2 * MIB
    run = run_capped(verify_args(bundle), cap)
    _assert_clear_failure(run, want, cap)


def test_normal_bundle_verifies_under_the_cap(sealed: Path, cap: int) -> None:
    run = run_capped(verify_args(sealed), cap)
    assert run.rc == 0, run.text[-3000:]
    assert run.peak_rss < CAP


# --- the verify-level bounds, in process ----------------------------------------------------


def _bundle(path: Path, members: list[tuple[str, bytes]]) -> Path:
    t = CraftedTar(path)
    for name, data in members:
        t.member(name, data)
    return t.close()


def test_json_cost_is_above_what_parsing_takes() -> None:
    import json
    import tracemalloc

    docs = {
        "objects": _json_bomb(MIB),
        "arrays": b"[" + b"[]," * (MIB // 3) + b"[]]",
        "numbers": b"[" + b"0," * (MIB // 2) + b"0]",
        "pairs": b"[" + b'{"a":0},' * (MIB // 8) + b"{}]",
        "strings": b"[" + b'"ab",' * (MIB // 5) + b'"ab"]',
    }
    for what, doc in docs.items():
        tracemalloc.start()
        parsed: Any = json.loads(doc)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        del parsed
        assert json_cost(doc) > peak + len(doc), what


def test_manifest_over_the_json_cost_bound_is_a_problem(tmp_path: Path) -> None:
    p = _bundle(tmp_path / "m.bundle", [("manifest.json", _json_bomb(64 << 10))])
    report = check_bundle(p, trust=Trust.allow_unsigned(), limits=Limits(max_json_cost=1 << 20))
    assert any(
        pr.where == "manifest.json" and "over the reader's 1,048,576-byte bound" in pr.message
        for pr in report.problems
    ), report.problems


def test_sample_verifies_with_tables_spilled(sealed: Path) -> None:
    # Every member over 1 KiB goes to the spill file: same verdict as in memory.
    report = check_bundle(
        sealed,
        trust=Trust.allow_unsigned(),
        limits=Limits(inline_member_bytes=1024, inline_total_bytes=0),
    )
    assert report.ok, report.problems


def test_parquet_footer_over_the_bound_is_a_problem(sealed: Path) -> None:
    report = check_bundle(
        sealed, trust=Trust.allow_unsigned(), limits=Limits(max_parquet_footer_bytes=64)
    )
    assert not report.ok
    assert any(
        "footer of" in pr.message and "64-byte bound" in pr.message for pr in report.problems
    )


def test_crafting_helpers_write_what_tarfile_reads(tmp_path: Path) -> None:
    p = _bundle(tmp_path / "ok.bundle", [("a", b"1"), ("b", b"")])
    with p.open("rb") as fh:
        raw = zstandard.ZstdDecompressor().stream_reader(fh).read()
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        assert [(ti.name, ti.size) for ti in tar] == [("a", 1), ("b", 0)]
