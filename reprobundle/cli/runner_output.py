"""What `bundle run` and `bundle rerun` print: the dry run, progress, the attempt's result.

One copy, so that an author's first run and a third party's rerun read alike; the
commands differ only in their name and the next step an accepted attempt suggests.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from reprobundle.cli.common import QUIET, emit_json, say

if TYPE_CHECKING:
    from bundler.verified import VerifiedBundle
    from rerun.options import RerunEvent, RerunOptions
    from rerun.prepare import PreparedRerun
    from rerun.runner import RerunResult

__all__ = ["EXIT_CODES", "run_and_report", "show_dry_run", "show_result"]

# The attempt's status -> the exit code (docs/exit-codes.md).
EXIT_CODES = {"accepted": 0, "rejected": 4, "interrupted": 3}


def _print_dry_run(prep: PreparedRerun, verbosity: int) -> None:
    status = "passes" if prep.check.ok else "FAILS"
    if verbosity <= QUIET:
        say(
            f"dry run: {len(prep.schedule)} arm positions, {prep.total_requests} requests; "
            f"plan check {status}"
        )
        return
    say(
        f"frozen plan {prep.source.plan_name} of {prep.source.campaign.get('id')}: "
        f"{len(prep.schedule)} arm positions, {prep.total_requests} requests, api {prep.api}, "
        f"boundary {prep.timing_boundary}, poll every {prep.poll_interval_s:g} s"
    )
    low = high = 0.0
    known = True
    for sp, est in zip(prep.schedule, prep.estimates, strict=True):
        phases = ", ".join(f"{r.phase} #{r.seq}" for r in sp.requests)
        say(f"  {sp.slot.position}. {sp.arm} on {sp.server} ({sp.commit[:12]}): {phases}")
        if est.sealed_requests_s is None:
            known = False
        else:
            low += est.sealed_requests_s
            high += est.sealed_requests_s + est.startup_budget_s + est.teardown_budget_s
    for argv in prep.launch_commands():
        say(f"  launch: {shlex.join(argv)}")
    if known:
        say(
            f"  expected duration: {low:,.0f} s of requests as sealed "
            f"({low / 3600:.2f} h); at most {high:,.0f} s ({high / 3600:.2f} h) with every "
            "start-up and teardown budget used"
        )
    say(
        f"  plan check {status}: {len(prep.check.errors)} error(s), "
        f"{len(prep.check.warnings)} warning(s) (bundle plan check for details)"
    )


def show_dry_run(prep: PreparedRerun, as_json: bool, verbosity: int) -> None:
    """Print the schedule, launch commands, estimate and plan check of a dry run."""
    if not as_json:
        _print_dry_run(prep, verbosity)
        return
    emit_json(
        {
            "ok": True,
            "slots": [
                {"arm": s.arm, "server": s.server, "requests": len(s.requests)}
                for s in prep.schedule
            ],
            "launch": prep.launch_commands(),
            "estimates": [e.__dict__ for e in prep.estimates],
            "plan_check": prep.check.to_dict(),
        }
    )


def _show_event(e: RerunEvent) -> None:
    count = f"[{e.done}/{e.total}] " if e.total else ""
    say(f"{count}{e.kind}: {e.message}", err=True)


def _no_event(e: RerunEvent) -> None:
    del e


def show_result(
    result: RerunResult, as_json: bool, verbosity: int, command: str, accepted_next: str
) -> None:
    """Print the attempt's result line (``command`` names it) and, unless -q, its reason,
    row counts and next step (``accepted_next``, its ``{out_dir}`` filled in, when it was
    accepted)."""
    if as_json:
        emit_json({"ok": result.status == "accepted", **result.to_dict()})
        return
    say(f"{command} {result.attempt_id} -> {result.out_dir}: {result.status.upper()}")
    if verbosity <= QUIET:
        return
    if result.reason:
        say(f"  reason   {result.reason}")
    say("  rows     " + ", ".join(f"{k} {v}" for k, v in result.counts.items()))
    if result.status == "accepted":
        say("  next     " + accepted_next.format(out_dir=result.out_dir))
    else:
        say("  next     run again with the same -o to add an attempt; this one stays recorded")


def run_and_report(
    source: Path | VerifiedBundle,
    out_dir: Path,
    options: RerunOptions,
    prepared: PreparedRerun,
    as_json: bool,
    verbosity: int,
    command: str,
    accepted_next: str,
) -> NoReturn:
    """Run the attempt (SIGINT/SIGTERM stop it cleanly), print its result as
    :func:`show_result` does, and exit with the code of its status."""
    from rerun.runner import RerunControl, run_rerun

    control = RerunControl()
    restore = control.install_signal_handlers()
    try:
        result = run_rerun(
            source,
            out_dir,
            options,
            # -q: the result line only; progress events are detail.
            progress=_show_event if verbosity > QUIET else _no_event,
            control=control,
            prepared=prepared,
        )
    finally:
        restore()
    show_result(result, as_json, verbosity, command, accepted_next)
    sys.exit(EXIT_CODES[result.status])
