"""A stand-in for one per-NPU worker process of a serving runtime.

It idles until SIGTERM (then exits 0, after ``--term-delay`` seconds) or until
its ``--max-lifetime`` runs out (exit 3). With ``--ignore-term`` it ignores
SIGTERM, so only SIGKILL or its lifetime ends it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Sequence
from types import FrameType

EXIT_LIFETIME = 3


def main(argv: Sequence[str] | None = None) -> int:
    """Run one worker; returns its exit code."""
    ap = argparse.ArgumentParser(prog="reference-worker")
    ap.add_argument("--name", required=True)
    ap.add_argument("--max-lifetime", type=float, default=120.0)
    ap.add_argument("--ignore-term", action="store_true")
    ap.add_argument("--term-delay", type=float, default=0.0)
    args = ap.parse_args(argv)
    termed: list[float] = []

    def on_term(signum: int, frame: FrameType | None) -> None:
        termed.append(time.monotonic())

    signal.signal(signal.SIGTERM, signal.SIG_IGN if args.ignore_term else on_term)
    # Tell the server we are up (its handlers installed), as a runtime's workers report ready.
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdout.close()
    deadline = time.monotonic() + args.max_lifetime
    while time.monotonic() < deadline:
        if termed:
            time.sleep(args.term_delay)
            # os._exit: a TERM forwarded by the server must not land in interpreter shutdown,
            # when Python has put the default handler back and would die of it.
            os._exit(0)
        time.sleep(0.01)
    return EXIT_LIFETIME


if __name__ == "__main__":
    sys.exit(main())
