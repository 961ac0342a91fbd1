"""Benchmark: hashing speed of ``bundle seal`` and ``bundle verify --media``.

Generates a campaign with external media (default ~2 GiB in 50 MiB files) and
100,000 receipts, warms the page cache, then times in the same run, on the
same files: a plain ``hashlib.sha256`` read loop on one and two processes (the
OpenSSL limit), ``sha256sum``, bagit-python's ``make_bag``/``validate`` and
the ``bundle`` CLI. The hashing throughput of seal and verify is separated
from their fixed costs (validation, Parquet, zstd) by also timing each with no
media to hash. Target (issue 2): seal and verify hash at >= 0.9x the
two-process hashlib figure, with peak memory independent of media size.

Run: ``.venv/bin/python bench/seal_verify.py [--media-gib 2] [--rss-check]``
(see ``bench/README.md``). Exit status 0 whatever the speed; 1 if a tool
failed to run or hashed a file to the wrong digest.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import logging
import math
import os
import platform
import resource
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

MB = 1_000_000
MIB = 1 << 20
GIB = 1 << 30
CHUNK = 1 << 20
SEED = 20_240_601
TARGET = 0.9
CONTENTION_WARN = 0.10  # share of the CPUs others may take before we warn or wait
ARMS = ("base", "cand")
ARM_ORDER = ("base", "cand", "cand", "base")  # one entry per server, A/B/B/A


class BenchFailure(Exception):
    """A tool failed to run or produced a wrong digest: the figures cannot be trusted."""


def note(msg: str) -> None:
    """Progress and caveats go to stderr so that stdout holds only the result."""
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class MediaFile:
    """One generated media file: its path relative to the media folder, size and digest."""

    rel: str
    size: int
    sha256: str
    request_id: str
    arm: str


@dataclass(frozen=True)
class Layout:
    """Everything the bench generated, by role."""

    root: Path
    media_dir: Path
    files: list[MediaFile]
    campaign: Path  # artifacts without sha256: seal must hash every file
    campaign_recorded: Path  # same rows with sha256 and bytes: seal hashes nothing
    campaign_half: Path  # lists only the first half of the media bytes (--rss-check)
    half_bytes: int
    receipts: int

    @property
    def media_bytes(self) -> int:
        """Total bytes of media."""
        return sum(f.size for f in self.files)

    def paths(self) -> list[Path]:
        """Absolute paths of every media file."""
        return [self.media_dir / f.rel for f in self.files]


def _file_sizes(total: int, file_bytes: int) -> list[int]:
    n = math.ceil(total / file_bytes)
    sizes = [file_bytes] * n
    if n:
        sizes[-1] = total - file_bytes * (n - 1)
    return sizes


def generate_media(media_dir: Path, total: int, file_bytes: int) -> list[MediaFile]:
    """Write ``total`` pseudorandom bytes in files of ``file_bytes``, recording each digest.

    Random bytes stand for encoded video: incompressible, like real media. The
    PCG64 stream is seeded, so every run hashes the same content. The digest
    taken here while writing is the reference every tool's output is checked
    against.
    """
    rng = np.random.PCG64(SEED)
    out: list[MediaFile] = []
    piece = 8 * MIB
    for i, size in enumerate(_file_sizes(total, file_bytes)):
        arm = ARMS[i % 2]
        rid = f"r{i:06d}"
        rel = f"outputs/{arm}/{rid}.bin"
        path = media_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        h = hashlib.sha256()
        left = size
        with path.open("wb") as fh:
            while left:
                n = min(piece, left)
                # random_raw yields whole 64-bit words; trim the last one to size.
                data = rng.random_raw(math.ceil(n / 8)).tobytes()[:n]
                fh.write(data)
                h.update(data)
                left -= n
        out.append(MediaFile(rel, size, h.hexdigest(), rid, arm))
    return out


def _ts(ns: int) -> str:
    secs, frac = divmod(ns, 1_000_000_000)
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
    return f"{base}.{frac:09d}Z"


def _receipt_lines(n: int, media: Sequence[MediaFile]) -> list[str]:
    """``n`` receipts over four servers; the first ones produced the media files."""
    by_request = {m.request_id: m for m in media}
    t0 = 1_735_689_600 * 1_000_000_000  # 2025-01-01T00:00:00Z
    lines = []
    for i in range(n):
        server = i % len(ARM_ORDER)
        seq = i // len(ARM_ORDER)
        rid = f"r{i:06d}"
        m = by_request.get(rid)
        arm = m.arm if m else ARM_ORDER[server]
        e2e_ns = 40_000_000_000 + (i * 7_919_003 % 9_000_000_000)
        start = t0 + seq * 60_000_000_000 + server * 1_000_000
        digest = m.sha256 if m else hashlib.sha256(rid.encode()).hexdigest()
        row = {
            "request_id": rid,
            "attempt_id": "a1",
            "arm": arm,
            "server": f"s{server}",
            "phase": "warmup" if seq == 0 else "measured",
            "seq": seq,
            "start": _ts(start),
            "end": _ts(start + e2e_ns),
            "e2e_s": e2e_ns / 1e9,
            "status": "ok",
            "http_status": 200,
            "output_sha256": digest,
        }
        lines.append(json.dumps(row, separators=(",", ":")))
    return lines


def _write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def write_campaign(
    camp: Path, receipts_file: Path, media: Sequence[MediaFile], *, recorded: bool
) -> None:
    """A valid campaign whose artifacts table lists ``media`` (external, never carried).

    With ``recorded`` the rows carry sha256 and bytes, so a seal without
    ``--media`` attests them without reading a byte of media.
    """
    (camp / "plans").mkdir(parents=True)
    doc = {
        "layout_version": "1",
        "id": "bench-seal-verify",
        "title": "Synthetic campaign for the seal/verify hashing benchmark",
        "kind": "campaign",
        "hardware": {"accelerator": "none", "count": 0},
        "arms": [
            {"id": "base", "role": "baseline", "runtime_commit": "0123abc"},
            {"id": "cand", "role": "candidate", "runtime_commit": "89abcde"},
        ],
        "plan": "plans/p.json",
    }
    plan = {
        "plan_version": "1",
        "id": "p",
        "arm_order": list(ARM_ORDER),
        "warmups_per_server": 1,
        "measured_per_server": 1,
        "request": {"api": "videos-async", "timing_boundary": "POST to last byte of video"},
        "timeouts": {"request_s": 900},
        "teardown": {a: {"term_wait_s": 30, "kill_wait_s": 10} for a in ARMS},
    }
    (camp / "campaign.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    (camp / "plans" / "p.json").write_text(json.dumps(plan, indent=2), encoding="utf-8")
    _write_jsonl(camp / "attempts.jsonl", [{"attempt_id": "a1", "status": "accepted"}])
    # Hard link: the receipts are identical in every variant and seal only reads them.
    os.link(receipts_file, camp / "receipts.jsonl")
    n_receipts = sum(1 for _ in receipts_file.open(encoding="utf-8"))
    _write_jsonl(
        camp / "claims.jsonl",
        [
            {
                "claim_id": "c1",
                "statistic": "requests_total",
                "value": str(n_receipts),
                "unit": "count",
                "decimals": 0,
            }
        ],
    )
    rows = [
        {
            "path": m.rel,
            "kind": "media",
            "availability": "bench media folder",
            **({"sha256": m.sha256, "bytes": m.size} if recorded else {}),
        }
        for m in media
    ]
    _write_jsonl(camp / "artifacts.jsonl", rows)


def build_layout(root: Path, total: int, file_bytes: int, receipts: int) -> Layout:
    """Generate media and the three campaign variants under ``root``."""
    media_dir = root / "media"
    t = time.perf_counter()
    files = generate_media(media_dir, total, file_bytes)
    note(f"generated {len(files)} media files, {total:,} bytes in {time.perf_counter() - t:.1f} s")
    receipts_file = root / "receipts.jsonl"
    receipts_file.write_text(
        "".join(line + "\n" for line in _receipt_lines(receipts, files)), encoding="utf-8"
    )
    half: list[MediaFile] = []
    for m in files:
        if sum(f.size for f in half) + m.size > total // 2:
            break
        half.append(m)
    layout = Layout(
        root=root,
        media_dir=media_dir,
        files=files,
        campaign=root / "campaign",
        campaign_recorded=root / "campaign-recorded",
        campaign_half=root / "campaign-half",
        half_bytes=sum(f.size for f in half),
        receipts=receipts,
    )
    write_campaign(layout.campaign, receipts_file, files, recorded=False)
    write_campaign(layout.campaign_recorded, receipts_file, files, recorded=True)
    write_campaign(layout.campaign_half, receipts_file, half, recorded=False)
    return layout


# --------------------------------------------------------------------------- tools


def sha256_file(path: Path) -> str:
    """SHA-256 of one file: 1 MiB ``readinto`` a reused buffer, the fastest pure-Python loop."""
    h = hashlib.sha256()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    with path.open("rb", buffering=0) as fh:
        while n := fh.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def _hash_list(paths: list[Path]) -> dict[str, str]:
    return {str(p): sha256_file(p) for p in paths}


def split_largest_first(paths: Sequence[Path], n: int) -> list[list[Path]]:
    """Greedy largest-first partition of ``paths`` into ``n`` lists of near-equal bytes."""
    bins: list[list[Path]] = [[] for _ in range(n)]
    load = [0] * n
    for p in sorted(paths, key=lambda p: (-p.stat().st_size, str(p))):
        i = load.index(min(load))
        bins[i].append(p)
        load[i] += p.stat().st_size
    return [b for b in bins if b]


def hashlib_processes(paths: Sequence[Path], n: int) -> dict[str, str]:
    """Hash ``paths`` with ``n`` processes (one list each); process start-up is included."""
    if n == 1:
        return _hash_list(list(paths))
    out: dict[str, str] = {}
    parts = split_largest_first(paths, n)
    with ProcessPoolExecutor(max_workers=len(parts)) as pool:
        for part in pool.map(_hash_list, parts):
            out.update(part)
    return out


@dataclass
class CmdResult:
    """One finished subprocess: wall seconds, exit status, peak RSS and captured output."""

    seconds: float
    returncode: int
    max_rss_kib: int
    stdout: str
    stderr: str


def run_cmd(cmd: Sequence[str], log_dir: Path, tag: str) -> CmdResult:
    """Run ``cmd`` and reap it with ``wait4`` to get its own peak RSS (``ru_maxrss``).

    Output goes to files, not pipes, so a large output never blocks the child
    while we are in ``wait4``.
    """
    out_p, err_p = log_dir / f"{tag}.out", log_dir / f"{tag}.err"
    with out_p.open("wb") as out, err_p.open("wb") as err:
        t = time.perf_counter()
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    return CmdResult(
        seconds,
        proc.returncode,
        usage.ru_maxrss,  # KiB on Linux
        out_p.read_text(encoding="utf-8", errors="replace"),
        err_p.read_text(encoding="utf-8", errors="replace"),
    )


def _bundle_exe() -> str:
    beside = Path(sys.executable).parent / "bundle"
    if beside.is_file():
        return str(beside)
    found = shutil.which("bundle")
    if found is None:
        raise BenchFailure("the bundle CLI is not installed (pip install -e .)")
    return found


def _machine_cpu_s() -> float:
    """CPU seconds the whole machine spent busy or stolen by the hypervisor (``/proc/stat``)."""
    try:
        fields = Path("/proc/stat").read_text(encoding="ascii").splitlines()[0].split()[1:9]
    except (OSError, IndexError):
        return math.nan
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields)
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    """CPU seconds of this process and of every child it has reaped."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class Contention:
    """Measures how much CPU other processes took while one tool was being timed.

    The bench machine may be shared: a busy neighbour halves what two
    processes can do, so each timing carries the share of the machine that
    was not ours (other processes plus hypervisor steal). It also keeps our
    own CPU seconds (this process and the children reaped meanwhile), which a
    neighbour disturbs far less than wall time.
    """

    def __enter__(self) -> Contention:
        self.t = time.perf_counter()
        self.machine = _machine_cpu_s()
        self.own = _own_cpu_s()
        self.share = 0.0
        self.cpu = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self.t
        self.cpu = _own_cpu_s() - self.own
        others = (_machine_cpu_s() - self.machine) - self.cpu
        capacity = wall * len(os.sched_getaffinity(0))
        self.share = max(0.0, others / capacity) if capacity > 0 else 0.0


def wait_for_quiet(max_wait: float, threshold: float = CONTENTION_WARN) -> tuple[float, float]:
    """Wait until other processes use under ``threshold`` of the CPUs for half a second.

    Gives up after ``max_wait`` seconds. Returns (seconds waited, last share seen).
    """
    t0 = time.monotonic()
    while True:
        with Contention() as c:
            time.sleep(0.5)
        waited = time.monotonic() - t0
        if c.share < threshold or waited >= max_wait:
            return waited, c.share


class _Marks:
    """First and last (wall, process CPU) instants of a run of progress events."""

    def __init__(self) -> None:
        self.first: tuple[float, float] | None = None
        self.last = (0.0, 0.0)

    def __call__(self, *_: object) -> None:
        own = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process
        now = (time.perf_counter(), own.ru_utime + own.ru_stime)
        if self.first is None:
            self.first = now
        self.last = now

    def span(self) -> tuple[float, float]:
        if self.first is None:
            raise BenchFailure("no hash progress event: nothing was hashed")
        return self.last[0] - self.first[0], self.last[1] - self.first[1]


def _probe_seal(campaign: Path, out: Path, media: Path) -> tuple[float, float]:
    """Wall and CPU seconds of seal's hashing phase, first to last hash progress event."""
    from bundler.seal import seal_campaign

    marks = _Marks()

    def cb(stage: str, done: int, total: int) -> None:
        if stage == "hash":
            marks()

    out.unlink(missing_ok=True)
    seal_campaign(campaign, out, artifact_dirs=[media], progress=cb)
    return marks.span()


def _probe_verify(bundle: Path, media: Path) -> tuple[float, float]:
    """Wall and CPU seconds of verify's media hashing phase, first to last progress event."""
    from bundler.format.trust import Trust
    from bundler.verify import check_bundle

    marks = _Marks()
    rep = check_bundle(bundle, trust=Trust.allow_unsigned(), media_dirs=[media], progress=marks)
    if not rep.ok:
        raise BenchFailure(f"check_bundle: {rep.problems[:3]}")
    return marks.span()


# --------------------------------------------------------------------------- runs


@dataclass
class Series:
    """Repeated timings of one tool."""

    tool: str
    bytes_hashed: int
    seconds: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)
    contention: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        """Median wall seconds."""
        return statistics.median(self.seconds)


class Bench:
    """Holds the layout and the timings; each ``step_*`` runs one tool once."""

    def __init__(self, layout: Layout, work: Path) -> None:
        self.layout = layout
        self.work = work
        self.logs = work / "logs"
        self.logs.mkdir(exist_ok=True)
        self.bundle = _bundle_exe()
        self.expected = {str(layout.media_dir / m.rel): m.sha256 for m in layout.files}
        self.series: dict[str, Series] = {}
        self.round = 0

    def record(
        self,
        key: str,
        tool: str,
        nbytes: int,
        seconds: float,
        *,
        meter: Contention,
        cpu: float | None = None,
        rss: int = 0,
    ) -> None:
        """Add one timing to series ``key``, with our CPU seconds and the share others took."""
        s = self.series.setdefault(key, Series(tool, nbytes))
        s.seconds.append(seconds)
        s.contention.append(meter.share)
        s.cpu.append(meter.cpu if cpu is None else cpu)
        if rss:
            s.rss_kib.append(rss)

    def timed_cmd(self, cmd: Sequence[str], tag: str) -> tuple[CmdResult, Contention]:
        """``run_cmd`` under a :class:`Contention` meter."""
        with Contention() as c:
            r = run_cmd(cmd, self.logs, tag)
        return r, c

    def check_digests(self, tool: str, got: dict[str, str]) -> None:
        """Fail unless ``got`` maps every media path to its reference digest."""
        if got != self.expected:
            bad = sorted(k for k in self.expected if got.get(k) != self.expected[k])[:3]
            raise BenchFailure(f"{tool}: wrong or missing digests for {bad}")

    def step_hashlib(self, n: int) -> None:
        """Plain hashlib on ``n`` processes."""
        with Contention() as c:
            t = time.perf_counter()
            got = hashlib_processes(self.layout.paths(), n)
            dt = time.perf_counter() - t
        self.check_digests(f"hashlib x{n}", got)
        word = "process" if n == 1 else "processes"
        tool = f"hashlib sha256, {n} {word}"
        self.record(f"hashlib{n}", tool, self.layout.media_bytes, dt, meter=c)

    def step_sha256sum(self) -> None:
        """coreutils ``sha256sum`` over every file, one process."""
        paths = [str(p) for p in self.layout.paths()]
        r, meter = self.timed_cmd(["sha256sum", "--", *paths], "sha256sum")
        if r.returncode != 0:
            raise BenchFailure(f"sha256sum exited {r.returncode}: {r.stderr.strip()}")
        got = {}
        for line in r.stdout.splitlines():
            digest, _, name = line.partition("  ")
            got[name] = digest
        self.check_digests("sha256sum", got)
        nbytes = self.layout.media_bytes
        self.record("sha256sum", "sha256sum", nbytes, r.seconds, meter=meter, rss=r.max_rss_kib)

    def step_bagit(self, processes: int) -> None:
        """bagit-python make_bag then validate, on a hard-linked copy of the media."""
        import bagit

        logging.getLogger("bagit").setLevel(logging.ERROR)
        bag = self.work / f"bag-p{processes}"
        if bag.exists():
            shutil.rmtree(bag)
        for m in self.layout.files:
            dst = bag / m.rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.link(self.layout.media_dir / m.rel, dst)
        cwd = Path.cwd()
        try:
            with Contention() as c_make:
                t = time.perf_counter()
                bagit.make_bag(str(bag), checksums=["sha256"], processes=processes)
                t_make = time.perf_counter() - t
            got = {}
            for line in (bag / "manifest-sha256.txt").read_text(encoding="utf-8").splitlines():
                digest, _, name = line.partition("  ")
                got[str(self.layout.media_dir / name.removeprefix("data/"))] = digest
            self.check_digests(f"bagit make_bag p={processes}", got)
            with Contention() as c_val:
                t = time.perf_counter()
                try:
                    bagit.Bag(str(bag)).validate(processes=processes)
                except bagit.BagError as exc:
                    raise BenchFailure(f"bagit validate p={processes}: {exc}") from exc
                t_val = time.perf_counter() - t
        finally:
            os.chdir(cwd)  # make_bag changes directory and restores it only on success
            shutil.rmtree(bag, ignore_errors=True)
        nbytes = self.layout.media_bytes
        tool = f"bagit make_bag, processes={processes}"
        self.record(f"bag_make{processes}", tool, nbytes, t_make, meter=c_make)
        tool = f"bagit validate, processes={processes}"
        self.record(f"bag_val{processes}", tool, nbytes, t_val, meter=c_val)

    def seal(self, campaign: Path, out: Path, *, artifacts: bool) -> tuple[CmdResult, Contention]:
        """``bundle seal`` one campaign (unsigned), checking what it reports."""
        out.unlink(missing_ok=True)
        cmd = [self.bundle, "seal", str(campaign), "-o", str(out), "--unsigned", "--no-progress"]
        if artifacts:
            cmd += ["--media", str(self.layout.media_dir)]
        # --json costs a few ms and lets us check every digest seal recorded.
        cmd.append("--json")
        r, meter = self.timed_cmd(cmd, f"seal-{campaign.name}")
        if r.returncode != 0:
            raise BenchFailure(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr}{r.stdout}")
        ext = json.loads(r.stdout)["external"]
        hashed = {
            str(self.layout.media_dir / e["path"]): e["sha256"] for e in ext if e["hashed_at_seal"]
        }
        if artifacts and campaign == self.layout.campaign:
            self.check_digests("bundle seal", hashed)
        elif not artifacts and hashed:
            raise BenchFailure("bundle seal hashed media it was not given")
        return r, meter

    def verify(self, bundle: Path, *, media: bool, n_external: int) -> tuple[CmdResult, Contention]:
        """``bundle verify`` (unsigned accepted), checking every external's status."""
        cmd = [self.bundle, "verify", str(bundle), "--allow-unsigned", "--no-progress"]
        if media:
            cmd += ["--media", str(self.layout.media_dir)]
        cmd.append("--json")
        r, meter = self.timed_cmd(cmd, f"verify-{bundle.stem}")
        if r.returncode != 0:
            raise BenchFailure(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr}{r.stdout}")
        statuses = [e["status"] for e in json.loads(r.stdout)["external"]]
        want = "ok" if media else "external"
        if statuses != [want] * n_external:
            raise BenchFailure(f"bundle verify: external statuses {statuses}, want all {want!r}")
        return r, meter

    def step_seal_verify(self) -> None:
        """Seal with and without media hashing, then verify with and without ``--media``."""
        lay, nbytes, n = self.layout, self.layout.media_bytes, len(self.layout.files)
        full, none = self.work / "full.bundle", self.work / "none.bundle"
        r, c = self.seal(lay.campaign_recorded, none, artifacts=False)
        self.record(
            "seal0", "bundle seal, no media hashed", 0, r.seconds, meter=c, rss=r.max_rss_kib
        )
        r, c = self.seal(lay.campaign, full, artifacts=True)
        self.record(
            "seal", "bundle seal (whole command)", nbytes, r.seconds, meter=c, rss=r.max_rss_kib
        )
        r, c = self.verify(full, media=False, n_external=n)
        self.record(
            "verify0", "bundle verify, no --media", 0, r.seconds, meter=c, rss=r.max_rss_kib
        )
        r, c = self.verify(full, media=True, n_external=n)
        self.record(
            "verify", "bundle verify --media (whole)", nbytes, r.seconds, meter=c, rss=r.max_rss_kib
        )

    def step_phase(self) -> None:
        """Time the hashing phase inside seal and verify from their progress callbacks.

        A cross-check of the whole-minus-no-media figures, which subtract two
        long, noisy timings to get a short one. Runs the library in a fresh
        worker process so that its memory never lingers in the bench.
        """
        lay, nbytes = self.layout, self.layout.media_bytes
        probe_out = self.work / "probe.bundle"
        with Contention() as c, ProcessPoolExecutor(max_workers=1) as pool:
            dt, cpu = pool.submit(_probe_seal, lay.campaign, probe_out, lay.media_dir).result()
        tool = "  => seal hashing phase (timed inside)"
        self.record("seal_phase", tool, nbytes, dt, meter=c, cpu=cpu)
        with Contention() as c, ProcessPoolExecutor(max_workers=1) as pool:
            dt, cpu = pool.submit(_probe_verify, probe_out, lay.media_dir).result()
        tool = "  => verify hashing phase (timed inside)"
        self.record("verify_phase", tool, nbytes, dt, meter=c, cpu=cpu)

    def rss_check(self) -> dict[str, Any]:
        """Peak RSS of seal and verify with half the media, for comparison with the full runs."""
        lay = self.layout
        half = self.work / "half.bundle"
        n_half = sum(1 for _ in (lay.campaign_half / "artifacts.jsonl").open(encoding="utf-8"))
        s, _ = self.seal(lay.campaign_half, half, artifacts=True)
        v, _ = self.verify(half, media=True, n_external=n_half)
        return {
            "half_media_bytes": lay.half_bytes,
            "full_media_bytes": lay.media_bytes,
            "seal_rss_kib": {
                "0": max(self.series["seal0"].rss_kib),
                "half": s.max_rss_kib,
                "full": max(self.series["seal"].rss_kib),
            },
            "verify_rss_kib": {
                "0": max(self.series["verify0"].rss_kib),
                "half": v.max_rss_kib,
                "full": max(self.series["verify"].rss_kib),
            },
        }


def warm_cache(paths: Sequence[Path]) -> tuple[int, float]:
    """Read every file once so that every tool starts from the same (warm) page cache."""
    buf = bytearray(8 * MIB)
    total = 0
    t = time.perf_counter()
    for p in paths:
        with p.open("rb", buffering=0) as fh:
            while n := fh.readinto(buf):
                total += n
    return total, time.perf_counter() - t


def _source_state() -> str:
    """Version and commit of the code measured; ``+dirty`` if bundler/ has local changes."""
    from bundler import __version__

    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "bundler"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return __version__
    return f"{__version__} ({head}{'+dirty' if dirty else ''})"


# Optional peers: each row is skipped, saying what to install, when its tool is missing.
PEER_INSTALL = {
    "bagit": "pip install -e '.[bench]'  (bagit-python, the `bench` extra)",
    "sha256sum": "apt-get install coreutils  (GNU sha256sum on PATH)",
}


def missing_peers() -> dict[str, str]:
    """Peer tools this machine lacks, each with what to install."""
    missing = {}
    if importlib.util.find_spec("bagit") is None:
        missing["bagit"] = PEER_INSTALL["bagit"]
    if shutil.which("sha256sum") is None:
        missing["sha256sum"] = PEER_INSTALL["sha256sum"]
    return missing


def environment() -> dict[str, Any]:
    """Machine and tool versions, printed with the figures."""
    try:
        import bagit

        bagit_version = bagit.VERSION
    except ImportError:
        bagit_version = "not installed"
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        sha = subprocess.run(
            ["sha256sum", "--version"], capture_output=True, text=True, check=False
        ).stdout.splitlines()
    except OSError:
        sha = ["not installed"]
    return {
        "reprobundle": _source_state(),
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "openssl": ssl.OPENSSL_VERSION,
        "bagit": bagit_version,
        "sha256sum": sha[0] if sha else "?",
        "platform": platform.platform(),
    }


# --------------------------------------------------------------------------- report


def _row(
    key: str,
    tool: str,
    seconds: list[float],
    nbytes: int,
    ref: float,
    *,
    x: Series | None,
    cpu: float | None = None,
) -> dict[str, Any]:
    med = statistics.median(seconds)
    mbps = nbytes / med / MB if nbytes and med > 0 else None
    rss = max(x.rss_kib, default=0) if x else 0
    if x is not None:
        cpu = statistics.median(x.cpu)
    return {
        "key": key,
        "tool": tool,
        "seconds": med,
        "seconds_all": seconds,
        "cpu_seconds": cpu,
        "cpu_seconds_per_GB": cpu / nbytes * 1e9 if cpu is not None and nbytes else None,
        "MBps": mbps,
        "ratio": mbps / ref if mbps else None,
        "peak_rss_mib": rss / 1024 if rss else None,
        "others_cpu_share": statistics.median(x.contention) if x else None,
    }


def summarize(bench: Bench) -> dict[str, Any]:
    """Medians, MB/s, ratios against two-process hashlib, derived hashing-only figures."""
    s = bench.series
    ref = s["hashlib2"].bytes_hashed / s["hashlib2"].median / MB
    nbytes = bench.layout.media_bytes
    rows: list[dict[str, Any]] = []
    plain = ["hashlib1", "hashlib2", "sha256sum", "bag_make1", "bag_make2", "bag_val1", "bag_val2"]
    for key in (k for k in plain if k in s):  # a missing peer's rows were skipped
        rows.append(_row(key, s[key].tool, s[key].seconds, s[key].bytes_hashed, ref, x=s[key]))
    for cmd in ("seal", "verify"):
        whole, none, phase = s[cmd], s[f"{cmd}0"], s[f"{cmd}_phase"]
        rows.append(_row(cmd, whole.tool, whole.seconds, nbytes, ref, x=whole))
        rows.append(_row(f"{cmd}0", none.tool, none.seconds, 0, ref, x=none))
        # Hashing only: the whole command less the same command with nothing to hash.
        diff = whole.median - none.median
        row = _row(
            f"{cmd}_hash",
            f"  => {cmd} hashing only (whole - no media)",
            [diff],
            nbytes,
            ref,
            x=None,
            cpu=statistics.median(whole.cpu) - statistics.median(none.cpu),
        )
        row["seconds_paired"] = [a - b for a, b in zip(whole.seconds, none.seconds, strict=True)]
        rows.append(row)
        rows.append(_row(f"{cmd}_phase", phase.tool, phase.seconds, nbytes, ref, x=phase))
    by_key = {r["key"]: r for r in rows}

    def met(a: str, b: str) -> bool:
        ra, rb = by_key[a]["ratio"], by_key[b]["ratio"]
        return bool(ra and rb and ra >= TARGET and rb >= TARGET)

    shares = {k: x.contention for k, x in s.items()}
    worst = max(shares, key=lambda k: statistics.median(shares[k]))
    return {
        "reference_MBps": ref,
        "rows": rows,
        "seal_hash_ratio": by_key["seal_hash"]["ratio"],
        "verify_hash_ratio": by_key["verify_hash"]["ratio"],
        "seal_phase_ratio": by_key["seal_phase"]["ratio"],
        "verify_phase_ratio": by_key["verify_phase"]["ratio"],
        "target_ratio": TARGET,
        "target_met": met("seal_hash", "verify_hash"),
        "target_met_phase": met("seal_phase", "verify_phase"),
        "cpu_seconds_per_GB": {
            k: by_key[k]["cpu_seconds_per_GB"]
            for k in (
                "hashlib1",
                "hashlib2",
                "seal_hash",
                "seal_phase",
                "verify_hash",
                "verify_phase",
            )
        },
        "others_cpu_share_all": statistics.median([v for x in shares.values() for v in x]),
        "others_cpu_share_worst": {
            "tool": s[worst].tool,
            "share": statistics.median(shares[worst]),
        },
    }


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def print_table(result: dict[str, Any]) -> None:
    """The human-readable table and verdict."""
    lay = result["workload"]
    env = result["environment"]
    print(
        f"seal/verify hashing bench: {lay['media_files']} media files, "
        f"{lay['media_bytes']:,} bytes ({lay['media_bytes'] / MB:,.0f} MB), "
        f"{lay['receipts']:,} receipts; {result['repeat']} interleaved rounds, medians"
    )
    print(
        f"reprobundle {env['reprobundle']}; machine: {env['cpu']}, {env['cores']} cores; "
        f"Python {env['python']}, {env['openssl']}, bagit {env['bagit']}"
    )
    print(
        f"page cache warmed first: read {lay['warm_bytes']:,} bytes in "
        f"{lay['warm_seconds']:.2f} s; every tool reads from a warm cache (MB = 10^6 bytes)"
    )
    print()
    head = (
        f"{'tool':<46} {'median s':>8} {'min-max s':>12} {'MB/s':>7} {'vs hashlib x2':>13} "
        f"{'CPU s':>6} {'peak RSS':>9} {'others':>6}"
    )
    print(head)
    print("-" * len(head))
    for r in result["summary"]["rows"]:
        rss = "-" if r["peak_rss_mib"] is None else f"{r['peak_rss_mib']:.0f} MiB"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        spread = r.get("seconds_paired") or r["seconds_all"]
        span = f"{min(spread):.2f}-{max(spread):.2f}" if len(spread) > 1 else "-"
        others = "-" if r["others_cpu_share"] is None else f"{r['others_cpu_share']:.0%}"
        print(
            f"{r['tool']:<46} {r['seconds']:>8.2f} {span:>12} {_fmt(r['MBps'], ',.0f'):>7} "
            f"{ratio:>13} {_fmt(r['cpu_seconds'], '.2f'):>6} {rss:>9} {others:>6}"
        )
    for tool, how in result.get("skipped", {}).items():
        print(f"{tool + ' (skipped: not installed)':<46} install with: {how}")
    sm = result["summary"]
    print()
    print(
        "CPU s = our own CPU seconds (all processes and threads of the tool); others = median "
        "share of the machine's CPU taken by other processes and hypervisor steal meanwhile"
    )
    target = f"target >= {sm['target_ratio']}x of hashlib x2 ({sm['reference_MBps']:,.0f} MB/s)"
    print(
        f"verdict: {target} {'MET' if sm['target_met'] else 'NOT MET'}: "
        f"seal hashing {_fmt(sm['seal_hash_ratio'], '.2f')}x, "
        f"verify hashing {_fmt(sm['verify_hash_ratio'], '.2f')}x (whole command - no media)"
    )
    print(
        f"cross-check: hashing phase timed inside seal/verify "
        f"{'MET' if sm['target_met_phase'] else 'NOT MET'}: "
        f"seal {_fmt(sm['seal_phase_ratio'], '.2f')}x, "
        f"verify {_fmt(sm['verify_phase_ratio'], '.2f')}x"
    )
    per_gb = sm["cpu_seconds_per_GB"]
    print(
        "CPU seconds per GB hashed (less disturbed by neighbours than wall time): "
        + ", ".join(f"{k.replace('_', ' ')} {_fmt(v, '.2f')}" for k, v in per_gb.items())
    )
    worst = sm["others_cpu_share_worst"]
    if worst["share"] > CONTENTION_WARN:
        print(
            f"WARNING: the machine was shared: other processes took a median "
            f"{sm['others_cpu_share_all']:.0%} of the CPUs (up to {worst['share']:.0%} during "
            f"{worst['tool'].strip()}); ratios are unreliable, rerun on a quiet machine"
        )
    rc = result.get("rss_check")
    if rc:
        for what in ("seal", "verify"):
            peaks = rc[f"{what}_rss_kib"]
            print(
                f"peak RSS of bundle {what}: {peaks['0'] / 1024:.0f} MiB with no media, "
                f"{peaks['half'] / 1024:.0f} MiB hashing {rc['half_media_bytes'] / GIB:.2f} GiB, "
                f"{peaks['full'] / 1024:.0f} MiB hashing {rc['full_media_bytes'] / GIB:.2f} GiB"
            )


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--media-gib", type=float, default=2.0, help="media to generate (GiB)")
    ap.add_argument("--file-mib", type=float, default=50.0, help="size of each media file (MiB)")
    ap.add_argument("--receipts", type=int, default=100_000, help="receipt rows")
    ap.add_argument("--workdir", type=Path, help="parent folder for the data (default: temp)")
    ap.add_argument("--keep", action="store_true", help="keep the generated data")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; medians are reported")
    ap.add_argument("--rss-check", action="store_true", help="also seal/verify half the media")
    ap.add_argument(
        "--quiet-wait",
        type=float,
        default=30.0,
        metavar="S",
        help="before each tool, wait up to S seconds for other processes to go idle (0: never)",
    )
    ap.add_argument("--json", action="store_true", help="print a JSON result instead of a table")
    args = ap.parse_args(argv)
    if args.media_gib <= 0 or args.file_mib <= 0 or args.receipts < 1 or args.repeat < 1:
        ap.error("--media-gib, --file-mib, --receipts and --repeat must be positive")
    return args


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Generate, warm, time every tool ``--repeat`` times (interleaved), summarize."""
    total = int(args.media_gib * GIB)
    file_bytes = max(1, int(args.file_mib * MIB))
    free = shutil.disk_usage(work).free
    if free < total * 1.2:
        raise BenchFailure(f"{work}: {free:,} bytes free, need about {int(total * 1.2):,}")
    layout = build_layout(work, total, file_bytes, args.receipts)
    warm_bytes, warm_s = warm_cache(layout.paths())
    note(f"page cache warmed: {warm_bytes:,} bytes read in {warm_s:.2f} s")
    bench = Bench(layout, work)
    missing = missing_peers()
    for tool, how in missing.items():
        note(f"{tool} is not installed: its rows are skipped (to include them: {how})")
    steps: list[tuple[str, Callable[[], None]]] = [
        ("hashlib, 1 process", lambda: bench.step_hashlib(1)),
        ("hashlib, 2 processes", lambda: bench.step_hashlib(2)),
        ("sha256sum", bench.step_sha256sum),
        ("bagit, processes=1", lambda: bench.step_bagit(1)),
        ("bagit, processes=2", lambda: bench.step_bagit(2)),
        ("bundle seal/verify", bench.step_seal_verify),
        ("seal/verify hashing phase", bench.step_phase),
    ]
    steps = [(label, f) for label, f in steps if label.split(",")[0] not in missing]
    # Interleaved rounds: a slow drift of the machine spreads over every tool alike.
    for i in range(args.repeat):
        for label, step in steps:
            if args.quiet_wait > 0:
                waited, share = wait_for_quiet(args.quiet_wait)
                if share >= CONTENTION_WARN:
                    note(f"  machine still busy ({share:.0%} others) after {waited:.0f} s")
                elif waited > 1:
                    note(f"  waited {waited:.0f} s for other processes to calm down")
            note(f"round {i + 1}/{args.repeat}: {label}")
            step()
    result: dict[str, Any] = {
        "environment": environment(),
        "repeat": args.repeat,
        "workload": {
            "media_files": len(layout.files),
            "media_bytes": layout.media_bytes,
            "file_bytes": file_bytes,
            "receipts": layout.receipts,
            "warm_bytes": warm_bytes,
            "warm_seconds": warm_s,
        },
        "summary": summarize(bench),
        "skipped": missing,
    }
    if args.rss_check:
        note("rss check: seal and verify with half the media")
        result["rss_check"] = bench.rss_check()
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; 0 even when the target is missed, 1 if a tool failed."""
    args = parse_args(argv)
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="seal-verify-", dir=args.workdir))
    else:
        work = Path(tempfile.mkdtemp(prefix="reprobundle-bench-"))
    note(f"working in {work}")
    try:
        result = run(args, work)
    except BenchFailure as exc:
        note(f"bench failed: {exc}")
        return 1
    finally:
        if args.keep:
            note(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
