"""Peak memory and time of ``bundle replay`` on small signed bundles with hostile content.

Issue 19, defect 7: a 523 KiB bundle with 50,000 arms made replay ask for
18.6 GiB, 10^6 claims took 2.4 GB, 10^6 gates ran past a minute. This builds
each case (``tests/hostile_content.py``), runs ``bundle replay`` on it in a
subprocess under an address-space cap and prints exit code, peak RSS (wait4)
and wall time. ``--scale`` shrinks the row counts (per-row cost figures).

    python bench/replay_amplification.py [--cap-gib 3] [--scale 1.0] [CASE...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402
from cryptography.hazmat.primitives.serialization import (  # noqa: E402
    Encoding,
    PublicFormat,
)

from tests.hostile_content import HOSTILE  # noqa: E402

_LAUNCHER = (
    "import json, os, resource, subprocess, sys; cap = int(sys.argv[2]); "
    "p = subprocess.Popen(sys.argv[3:], preexec_fn=lambda: resource.setrlimit("
    "resource.RLIMIT_AS, (cap, cap))); _, st, ru = os.wait4(p.pid, 0); "
    "open(sys.argv[1], 'w').write(json.dumps([os.waitstatus_to_exitcode(st), ru.ru_maxrss]))"
)


def run_replay(bundle: Path, pub: Path, cap: int) -> tuple[int, int, float, str]:
    """(exit code, peak RSS bytes, seconds, last output) of ``bundle replay`` under ``cap``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as d:
        report = Path(d) / "ru.json"
        cmd = [sys.executable, "-m", "reprobundle.cli", "replay", str(bundle), "--key", str(pub)]
        t0 = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, str(report), str(cap), *cmd],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        seconds = time.monotonic() - t0
        rc, kib = json.loads(report.read_text())
    return rc, kib * 1024, seconds, (proc.stdout + proc.stderr)[-400:]


def main() -> None:
    """Build each case, replay it, print the figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="*", default=["arms", "claims", "gates"])
    ap.add_argument("--cap-gib", type=float, default=3.0)
    ap.add_argument("--scale", type=float, default=1.0)
    args = ap.parse_args()
    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    counts = {"arms": 50_000, "claims": 1_000_000, "gates": 1_000_000, "receipts": 1_000_000}
    builders = HOSTILE
    with tempfile.TemporaryDirectory() as d:
        pub = Path(d) / "k.pub"
        pub.write_bytes(
            key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
        )
        for case in args.cases:
            n = max(2, int(counts[case] * args.scale))
            bundle = builders[case](Path(d) / f"{case}.bundle", key, n)
            rc, peak, secs, tail = run_replay(bundle, pub, int(args.cap_gib * (1 << 30)))
            print(
                f"{case:7} n={n:>9,} file={bundle.stat().st_size / 1024:8.0f} KiB  exit {rc:>3}  "
                f"peak RSS {peak / (1 << 20):7.0f} MiB  {secs:6.1f} s"
            )
            print("   ", tail.strip().splitlines()[-1] if tail.strip() else "")


if __name__ == "__main__":
    main()
