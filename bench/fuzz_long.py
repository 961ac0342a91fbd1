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

Signed-but-hostile bundles (issue 19, ``tests/fuzz/hostile.py``): with
``--hostile-cases N`` the run then draws N hostile cases (seeded like the rest,
in chunks from ``--seed``) and checks each with
``tests.fuzz.properties.check_hostile``, every command as a child process: its
peak RSS (under 1 GiB) and, when ``strace`` is installed, every ``openat`` and
``connect`` of it and its children (``strace -f``); without strace only the
sentinel snapshot sees reads and writes (said in the summary). One hostile case
in ``--hostile-live-every`` also runs its plan against the reference server.

Run: ``nice -n 10 .venv/bin/python bench/fuzz_long.py --cases 100000`` (see
``bench/README.md``).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
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

from tests.fuzz.hostile import FAMILIES, HostileBase, HostileCase, make_data_base, make_rerun_base
from tests.fuzz.profiles import FUZZ_LONG
from tests.fuzz.properties import (
    HostileOutcome,
    Outcome,
    check_cli_verify,
    check_hostile,
    check_seal,
    check_verify,
    prepare_sentinel,
)
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
    hostile: int = 0
    hostile_live: int = 0
    hostile_failed: Counter[str] = field(default_factory=Counter)
    hostile_families: Counter[str] = field(default_factory=Counter)
    hostile_examples: dict[str, str] = field(default_factory=dict)

    def add_hostile(self, out: HostileOutcome, live: bool) -> None:
        """Count one hostile case; keep the first failing example of each family."""
        self.hostile += 1
        self.hostile_live += live
        self.hostile_families[out.kind] += 1
        if out.failed:
            self.hostile_failed[out.kind] += 1
            self.hostile_examples.setdefault(out.kind, out.report()[:3000])

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


def run_hostile_chunk(  # noqa: PLR0917
    bases: dict[str, HostileBase],
    root: Path,
    pub: Path,
    tally: Tally,
    args: argparse.Namespace,
    chunk_seed: int,
    n: int,
    deadline: float,
) -> None:
    """Run up to ``n`` signed-but-hostile cases, seeded by ``chunk_seed``."""
    strace = shutil.which("strace") is not None

    @seed(chunk_seed)
    @settings(FUZZ_LONG, max_examples=n)
    @given(data=st.data())
    def one(data: st.DataObject) -> None:
        if STOP["why"] or tally.hostile >= args.hostile_cases or time.monotonic() > deadline:
            return
        family = data.draw(st.sampled_from(sorted(FAMILIES)))
        kind, strategy = FAMILIES[family]
        case: HostileCase = data.draw(strategy(bases[kind]))
        live = bool(case.rerun and args.hostile_live_every) and (
            data.draw(st.integers(0, 999_999)) % args.hostile_live_every == 0
        )
        out = check_hostile(case, root, pub, inprocess=False, strace=strace, live_rerun=live)
        tally.add_hostile(out, live)

    try:
        one()
    except HypothesisException:
        if not (STOP["why"] or tally.hostile >= args.hostile_cases or time.monotonic() > deadline):
            raise


def run_hostile(tally: Tally, args: argparse.Namespace, deadline: float) -> None:
    """The hostile phase: ``--hostile-cases`` cases in chunks, progress on stderr."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fuzz-hostile-") as d:
        root = Path(d)
        sentinel = prepare_sentinel(root)
        bases = {"data": make_data_base(sentinel), "rerun": make_rerun_base(sentinel)}
        pub = write_public_key_of(bases["data"], root)
        chunk_seed = args.seed
        while tally.hostile < args.hostile_cases and not STOP["why"]:
            if time.monotonic() > deadline:
                break
            before = tally.hostile
            run_hostile_chunk(bases, root, pub, tally, args, chunk_seed, args.chunk, deadline)
            el = time.monotonic() - start
            print(
                f"hostile seed {chunk_seed}: {tally.hostile:,} cases "
                f"({tally.hostile_live} live reruns), "
                f"{sum(tally.hostile_failed.values())} failing, {el:.0f} s",
                file=sys.stderr,
                flush=True,
            )
            if tally.hostile == before:
                break
            chunk_seed += 1


def write_public_key_of(base: HostileBase, root: Path) -> Path:
    """The hostile bases' author key (the fixed test key) as a PEM file under ``root``."""
    from cryptography.hazmat.primitives import serialization

    pub = root / "author.pub"
    pub.write_bytes(
        base.author.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pub


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
        "hostile_cases": tally.hostile,
        "hostile_live_reruns": tally.hostile_live,
        "hostile_tracing": "strace -f -e trace=openat,connect + sentinel snapshot"
        if shutil.which("strace")
        else "sentinel snapshot only (strace not installed)",
        "hostile_families": dict(sorted(tally.hostile_families.items())),
        "hostile_failing": dict(sorted(tally.hostile_failed.items())),
        "failures": tally.failures,
        "hostile_examples": tally.hostile_examples,
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
    ap.add_argument(
        "--hostile-cases", type=int, default=0, help="signed-but-hostile cases (issue 19)"
    )
    ap.add_argument(
        "--hostile-live-every",
        type=int,
        default=10,
        help="one rerun case in N also runs against the reference server (0: never)",
    )
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
    if args.hostile_cases:
        run_hostile(tally, args, deadline)
    elapsed = time.monotonic() - start
    why = STOP["why"] or ("--seconds" if time.monotonic() >= deadline else "done")
    doc = summary(tally, elapsed, args, why)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        for k, v in doc.items():
            if k not in ("failures", "hostile_examples"):
                print(f"{k:28} {v}")
        for f in tally.failures:
            print(f"FAILURE {f[:2000]}")
        for family, example in tally.hostile_examples.items():
            print(f"HOSTILE FAILURE {family}: {example}")
    failed = tally.tracebacks or tally.content_changes or tally.unlocated or tally.hostile_failed
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
