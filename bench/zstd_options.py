"""zstd settings on a serving campaign's members: what the container's frame would cost.

Issue 22 asks what zstandard's options (worker threads, long-distance matching, a
level per member kind) would save in ``bundle seal``. This measures them on the bytes
a sealed serving campaign carries, without changing the format: generates the
``bench/serving_scale.py`` sources, imports them into a campaign directory, then
compresses the campaign's files (concatenated, as the tar holds them) at each setting
and prints wall and CPU time, size and decompression time side by side.

    .venv/bin/python bench/zstd_options.py                      # 1M requests, 178 MiB
    .venv/bin/python bench/zstd_options.py --requests 5000      # smoke run
    .venv/bin/python bench/zstd_options.py --bundle x.bundle    # any bundle's tar
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import serving_scale  # the generator lives beside this script

from bundler.format.container import ZSTD_LEVEL
from bundler.importers.write import import_campaign


def _settings() -> list[tuple[str, dict[str, Any]]]:
    ldm = zstandard.ZstdCompressionParameters.from_level(
        ZSTD_LEVEL,
        enable_ldm=True,
        window_log=27,
        threads=0,
        write_checksum=True,
        write_content_size=True,
    )
    return [
        (f"level {ZSTD_LEVEL} (today), 1 thread", {"level": ZSTD_LEVEL}),
        (f"level {ZSTD_LEVEL} (today), 2 worker threads", {"level": ZSTD_LEVEL, "threads": 2}),
        (f"level {ZSTD_LEVEL} + long-distance matching", {"compression_params": ldm}),
        *(
            (f"level {level}, 2 worker threads", {"level": level, "threads": 2})
            for level in (1, 2, 3, 6)
            if level != ZSTD_LEVEL
        ),
    ]


def _serving_bytes(requests: int, load_points: int) -> bytes:
    """The files of the imported serving campaign, concatenated as the tar holds them."""
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "results").mkdir()
        for i, arm in enumerate(("baseline", "candidate")):
            for lp in range(load_points):
                path = d / "results" / f"{arm}-c{lp + 1}.json"
                serving_scale.generate(path, 100 * i + lp, requests, lp + 1)
        files = sorted((d / "results").glob("*.json"))
        commits = {"baseline": "a" * 7, "candidate": "b" * 7}
        import_campaign("vllm", [(f.name.split("-")[0], f) for f in files], d / "camp", commits)
        members = sorted(p for p in (d / "camp").rglob("*") if p.is_file())
        print(f"{len(members)} campaign files", end=", ")
        return b"".join(p.read_bytes() for p in members)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=50_000)
    ap.add_argument("--load-points", type=int, default=10)
    ap.add_argument(
        "--bundle",
        type=Path,
        help="measure on this bundle's tar instead (e.g. a sealed 10M-row receipts table)",
    )
    a = ap.parse_args()
    if a.bundle is not None:
        with a.bundle.open("rb") as fh:
            data = zstandard.ZstdDecompressor().stream_reader(fh).read()
        print(f"the tar of {a.bundle}", end=", ")
    else:
        data = _serving_bytes(a.requests, a.load_points)
    print(f"{len(data) / 2**20:.0f} MiB")
    print(
        f"{'setting':40s} {'wall s':>7s} {'CPU s':>7s} {'MiB':>7s} {'ratio':>6s} {'unzstd s':>9s}"
    )
    for name, kw in _settings():
        # Content size and checksum as the container writes them (the LDM setting's
        # parameters carry them).
        framing: dict[str, Any] = {}
        if "compression_params" not in kw:
            framing = {"write_checksum": True, "write_content_size": True}
        cctx = zstandard.ZstdCompressor(**framing, **kw)
        t0, c0 = time.perf_counter(), time.process_time()
        out = cctx.compress(data)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        t1 = time.perf_counter()
        back = zstandard.ZstdDecompressor().decompress(out)
        unz = time.perf_counter() - t1
        assert back == data
        print(
            f"{name:40s} {wall:7.2f} {cpu:7.2f} {len(out) / 2**20:7.1f} "
            f"{len(data) / len(out):6.2f} {unz:9.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
