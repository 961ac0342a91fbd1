"""``bundle plan check``: does every deadline of a frozen plan fit?

Parses, calls :func:`bundler.campaign.plan_check.check_plan_document`, and prints text or
``--json``. A bundle's plan is read through :func:`bundler.verified.open_verified`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bundler._internal.jsonload import JsonLoadError, loads
from bundler._internal.userfile import DOCUMENT_MAX_BYTES, open_user_file, read_bounded
from bundler.errors import BundleFormatError, Problem, UsageError
from reprobundle.cli.common import (
    QUIET,
    cli_errors,
    emit_json,
    examples,
    json_option,
    say,
    verbosity_options,
)

if TYPE_CHECKING:
    from bundler.campaign.plan_check import PlanCheckResult

__all__ = ["PLAN_EXIT_HELP", "plan_group"]

PLAN_EXIT_HELP = """\b
Exit codes:
  0  no error (warnings allowed unless --strict)
  1  integrity: the bundle given is tampered or malformed
  2  the plan has errors (or warnings with --strict); SOURCE missing; bad arguments
  3  could not run: I/O error
"""


def _load_plan(source: Path) -> tuple[str, dict[str, Any]]:
    """The plan in a JSON file, or the plan in force inside a bundle.

    A bundle is read through :func:`bundler.verified.open_verified`: any integrity
    problem refuses it; an unsigned or untrusted one is accepted (checking a plan's
    timeouts judges nothing the bundle claims).
    """
    with open_user_file(source, what="plan") as fh:
        head = fh.read(4)
        # A bundle is read (and bounded) by open_verified; a plan is a small document.
        is_bundle = head == b"\x28\xb5\x2f\xfd"  # zstd frame magic
        if not is_bundle:
            data = read_bounded(fh, source, what="plan", max_bytes=DOCUMENT_MAX_BYTES, head=head)
    if is_bundle:
        from bundler.format.trust import Trust
        from bundler.verified import open_verified

        bundle = open_verified(source, trust=Trust.allow_unsigned())
        campaign = bundle.document("campaign.json") or {}
        name = str(campaign.get("plan", ""))
        member = bundle.member_bytes(name)
        if member is None:
            raise UsageError(f"{source}: campaign.json names plan {name!r}, which is absent")
        data = member
        label = f"{source}:{name}"
    else:
        label = str(source)
    # A bundle's plan is the signer's content: malformed, it is a malformed bundle (exit 1).
    refused = BundleFormatError if is_bundle else UsageError
    try:
        # Bounded: a 400-digit timeout or count overflowed a double in the check, and
        # nesting 100,000 deep raised RecursionError.
        doc = loads(data.decode("utf-8"), source=data)
    except JsonLoadError as exc:
        problem = Problem(label, None, exc.field, str(exc))
        raise refused(f"{label}: not a usable plan", [problem]) from None
    except ValueError as exc:
        raise refused(f"{label}: not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise refused(f"{label}: a plan must be a JSON object")
    return label, doc


def _secs(value: object) -> str:
    # A timeout the plan leaves out is no deadline at all, not a value "None".
    return "none set" if value is None else f"{value} s"


def _print_check(label: str, result: PlanCheckResult, verbosity: int) -> None:
    verdict = "FAILS" if result.errors else "passes"
    if verbosity <= QUIET:
        for f in result.errors:
            say(f"  {f.level.upper():<7} {f.path}: {f.message} [{f.code}]")
        say(
            f"plan {result.plan_id} ({label}) {verdict}: {len(result.errors)} error(s), "
            f"{len(result.warnings)} warning(s)"
        )
        return
    t = result.timeouts
    say(f"plan {result.plan_id} ({label})")
    say(
        f"  timeouts  request {_secs(t.get('request_s'))}, wave {_secs(t.get('wave_s'))}, "
        f"arm {_secs(t.get('arm_s'))}; start-up budget {_secs(t.get('startup_budget_s'))}"
    )
    res = result.reservation
    if res is not None:
        say(
            f"  reservation  hard {res.hard_limit_s:g} s, soft TERM {res.soft_term_s:g} s, "
            f"kill grace {res.kill_grace_s:g} s"
            + (
                "; watchdog is the declared failure boundary"
                if res.watchdog_is_failure_boundary
                else ""
            )
        )
    say("  arm positions (worst case = start-up + wave budget + TERM/KILL budgets):")
    for b in result.slots:
        s = b.slot
        say(
            f"    {s.position}. {s.arm:<12} {s.server:<14} {s.requests} requests  "
            f"worst case {b.worst_case_s:,.0f} s"
        )
    if result.slots:
        say(f"    all positions at their worst case: {result.worst_case_total_s:,.0f} s")
    say("  a stuck first request in each arm position:")
    for sc in result.scenarios:
        say(f"    - {sc.describe()}")
    for a in result.assumptions:
        say(f"  assuming {a}")
    if result.detectable is None:
        say(
            "  detectable difference: not stated (give --pilot BUNDLE, a sealed pilot or "
            "baseline, for the server-to-server spread)"
        )
    for d in result.detectable or ():
        say(f"  detectable {d.baseline} − {d.candidate}: {d.statement}")
    for f in result.findings:
        say(f"  {f.level.upper():<7} {f.path}: {f.message} [{f.code}]")
    say(f"  {verdict}: {len(result.errors)} error(s), {len(result.warnings)} warning(s)")


@click.group("plan", epilog=examples("bundle plan check campaign/plans/reference-ab.json"))
def plan_group() -> None:
    """Frozen plans: check their timeout hierarchy."""


@plan_group.command(
    "check",
    epilog=examples(
        "bundle plan check campaign/plans/reference-ab.json",
        "bundle plan check run.bundle --json",
        "bundle plan check campaign/plans/reference-ab.json --pilot run.bundle",
    )
    + PLAN_EXIT_HELP,
)
@click.argument("source", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--reservation-used",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Seconds of the reservation already used before the first arm position.",
)
@click.option("--strict", is_flag=True, help="Fail on warnings too.")
@click.option(
    "--pilot",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A sealed pilot or baseline bundle: its baseline arm's server-to-server spread "
    "gives the smallest difference of arm means the plan's servers per arm can resolve.",
)
@verbosity_options
@json_option
def plan_check_command(
    source: Path,
    reservation_used: float,
    strict: bool,
    pilot: Path | None,
    verbosity: int,
    as_json: bool,
) -> None:
    """Check SOURCE (a plan JSON file, or a bundle's plan in force): does every deadline fit?"""
    from bundler.campaign.plan_check import check_plan_document

    with cli_errors(as_json):
        label, plan = _load_plan(source)
        spread = None
        if pilot is not None:
            from replay.pilot import pilot_spread

            spread = pilot_spread(pilot)
        result = check_plan_document(plan, elapsed_s=reservation_used, spread=spread)
        if as_json:
            emit_json({"source": label, **result.to_dict()})
        else:
            _print_check(label, result, verbosity)
        failed = bool(result.errors) or (strict and bool(result.warnings))
        sys.exit(2 if failed else 0)
