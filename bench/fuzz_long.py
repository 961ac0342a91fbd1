"""Long fuzz run: the strategies and properties of ``tests/fuzz/`` for 100,000 cases or more.

Every case draws a bundle mutant (``tests.fuzz.strategies.bundle_mutants``) and
checks it with the library (``tests.fuzz.properties.check_verify``); one case
in ``--cli-every`` also runs ``bundle verify --json`` in a child process, and
one in ``--seal-every`` seals a mutated campaign instead. Hypothesis runs in
chunks of ``--chunk`` cases, each with its own seed (printed), generation only:
a failing case is counted and printed, never shrunk, and the run goes on.

Prints progress to stderr every chunk and a summary at the end, also when
interrupted (SIGINT, SIGTERM) or when ``--seconds`` runs out: cases, tracebacks,
accepted content changes, unlocated seal errors, peak RSS
(``resource.getrusage``), cases/s. Exit status 1 if any property failed.

Run: ``nice -n 10 .venv/bin/python bench/fuzz_long.py --cases 100000`` (see
``bench/README.md``).
"""

from __future__ import annotations

import argparse
import json
import resource
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

# The strategies live in tests/fuzz (one definition for CI and the long run): import them from
# this checkout whether or not the install put the repository root on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisException

from tests.fuzz.profiles import FUZZ_LONG
from tests.fuzz.properties import Outcome, check_cli_verify, check_seal, check_verify
from tests.fuzz.strategies import (
    Base,
    CampaignFiles,
    base_campaign_files,
    bundle_mutants,
    campaign_mutants,
    make_base,
)


@dataclass
class Tally:
    """Running totals."""

    cases: int = 0
    library: int = 0
    cli: int = 0
    seal: int = 0
    accepted: int = 0
    tracebacks: int = 0
    content_changes: int = 0
    unlocated: int = 0
    families: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def add(self, how: str, out: Outcome) -> None:
        """Count one outcome."""
        self.cases += 1
        setattr(self, how, getattr(self, how) + 1)
        self.accepted += out.accepted
        self.families[out.kind.split("-")[0].split(":")[0]] += 1
        if out.traceback:
            self.tracebacks += 1
        if out.content_change:
            self.content_changes += 1
        if out.unlocated:
            self.unlocated += 1
        if out.failed and len(self.failures) < 20:
            self.failures.append(
                f"[{how}] {out.kind}: {out.traceback or out.content_change or out.unlocated}"
            )


STOP = {"why": ""}


def _stop(signum: int, _frame: FrameType | None) -> None:
    STOP["why"] = signal.Signals(signum).name


def peak_rss_mib() -> float:
    """Peak resident set size of this process, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_chunk(  # noqa: PLR0917
    base: Base,
    files: CampaignFiles,
    workdir: Path,
    tally: Tally,
    args: argparse.Namespace,
    chunk_seed: int,
    n: int,
    deadline: float,
) -> None:
    """Run up to ``n`` cases with Hypothesis seeded by ``chunk_seed``."""

    @seed(chunk_seed)
    @settings(FUZZ_LONG, max_examples=n)
    @given(data=st.data())
    def one(data: st.DataObject) -> None:
        if STOP["why"] or tally.cases >= args.cases or time.monotonic() > deadline:
            return
        # What to run is drawn too: Hypothesis requires the draws to depend on nothing else.
        pick = data.draw(st.integers(0, 999_999))
        if args.seal_every and pick % args.seal_every == 0:
            tally.add("seal", check_seal(base, data.draw(campaign_mutants(files)), workdir))
            return
        m = data.draw(bundle_mutants(base))
        if args.cli_every and (pick // 7) % args.cli_every == 0:
            tally.add("cli", check_cli_verify(base, m.kind, m.data, workdir))
        else:
            tally.add("library", check_verify(base, m.kind, m.data, workdir))

    try:
        one()
    except HypothesisException:
        # Cases skipped after a stop draw nothing, which Hypothesis may call flaky.
        if not (STOP["why"] or tally.cases >= args.cases or time.monotonic() > deadline):
            raise


def summary(tally: Tally, elapsed: float, args: argparse.Namespace, why: str) -> dict[str, object]:
    """The figures the closing note quotes."""
    return {
        "command": " ".join(sys.argv),
        "stopped": why,
        "cases": tally.cases,
        "library_cases": tally.library,
        "cli_cases": tally.cli,
        "seal_cases": tally.seal,
        "accepted_with_trusted_key": tally.accepted,
        "tracebacks": tally.tracebacks,
        "accepted_content_changes": tally.content_changes,
        "unlocated_seal_errors": tally.unlocated,
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "seconds": round(elapsed, 1),
        "cases_per_s": round(tally.cases / elapsed, 1) if elapsed else 0.0,
        "families": dict(sorted(tally.families.items())),
        "first_seed": args.seed,
        "failures": tally.failures,
    }


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print the summary; 1 if any property failed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--seconds", type=float, default=0.0, help="stop after this long (0: never)")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--chunk", type=int, default=1000)
    ap.add_argument("--cli-every", type=int, default=200, help="0: no CLI cases")
    ap.add_argument("--seal-every", type=int, default=10, help="0: no campaign cases")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    base, files = make_base(), base_campaign_files()
    tally = Tally()
    start = time.monotonic()
    deadline = start + args.seconds if args.seconds else float("inf")
    chunk_seed = args.seed
    with tempfile.TemporaryDirectory(prefix="fuzz-long-") as d:
        while tally.cases < args.cases and not STOP["why"] and time.monotonic() < deadline:
            before = tally.cases
            run_chunk(base, files, Path(d), tally, args, chunk_seed, args.chunk, deadline)
            el = time.monotonic() - start
            print(
                f"seed {chunk_seed}: {tally.cases:,} cases, {tally.tracebacks} tracebacks, "
                f"{tally.content_changes} accepted content changes, {tally.unlocated} unlocated, "
                f"peak RSS {peak_rss_mib():.0f} MiB, {tally.cases / el:.1f} cases/s",
                file=sys.stderr,
                flush=True,
            )
            if tally.cases == before:
                break  # nothing ran (stopped or out of time)
            chunk_seed += 1
    elapsed = time.monotonic() - start
    why = STOP["why"] or ("--seconds" if time.monotonic() >= deadline else "done")
    doc = summary(tally, elapsed, args, why)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        for k, v in doc.items():
            if k != "failures":
                print(f"{k:28} {v}")
        for f in tally.failures:
            print(f"FAILURE {f[:2000]}")
    failed = tally.tracebacks or tally.content_changes or tally.unlocated
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
