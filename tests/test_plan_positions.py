"""A plan of very many arm positions, read by ``bundle plan check``, the seal and ``bundle run``.

For a stuck first request in each arm position the plan check names every later
server that would lose samples. Until 2026-12-03 it also re-summed every earlier
position and walked every later one for each position, and ``arm_order`` had no
bound but the plan file's size (64 MiB: millions of entries): on the seed's
kv-residency plan, whose reservation ends every stuck request, 2,000 positions
took 3.3 s and 600 MB, 4,000 took 14 s and 2.3 GB (``plan check --json``), so a
signed plan of 10^4-10^5 positions made seal, plan check and rerun hang.

Now a plan has at most 1,000 positions (``MAX_ARM_POSITIONS``, an ``invalid`` error
naming the count, found in one pass over the list), and the check adds up each
position's start as it goes and skips the walk when no later position can reach the
soft TERM. What the report names for a plan whose reservation cannot hold a stuck
request still grows with the square of its positions; the bound keeps that below
half a million names.
"""

from __future__ import annotations

import importlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundler.campaign.plan_check import PlanCheckResult, check_plan_document
from bundler.campaign.plan_slots import MAX_ARM_POSITIONS
from tests.reference_server.campaign import campaign_plan
from tests.test_memory_bound import run_capped

ROOT = Path(__file__).resolve().parents[1]
SEED_PLAN = ROOT / "tests" / "fixtures" / "plans" / "seed-kv-residency-pilot.json"
MIB = 1 << 20
# Under this address-space cap the check before the bound ran out of memory on 20,000
# positions within seconds (it held about 200 million server names); the bounded check
# of the same file peaks near 40 MiB of RSS.
CAP = 1 << 30
N = 20_000


def _seed_plan(positions: int) -> dict[str, Any]:
    """The seed's kv-residency pilot (3 arms) with ``positions`` arm positions, A/B/C/A/B/C...

    Its 4 h request timeout sits inside a 2 h 45 min soft TERM: a stuck first request
    in any position is ended by the reservation, which starves every later position.
    """
    plan: dict[str, Any] = json.loads(SEED_PLAN.read_text("utf-8"))
    arms = list(plan["arm_order"])
    plan["arm_order"] = [arms[i % len(arms)] for i in range(positions)]
    return plan


def _write(tmp: Path, plan: dict[str, Any], name: str = "plan.json") -> Path:
    path = tmp / name
    path.write_text(json.dumps(plan), encoding="utf-8")
    return path


def test_plan_check_refuses_20_000_positions_in_bounded_memory(tmp_path: Path) -> None:
    run = run_capped(["plan", "check", str(_write(tmp_path, _seed_plan(N)))], CAP)
    assert "Traceback" not in run.text, run.text[-2000:]
    assert run.rc == 2, run.text[-2000:]  # the plan has errors (docs/exit-codes.md)
    assert "arm_order has 20,000 positions" in run.out, run.text[-2000:]
    assert "at most 1,000" in run.out and "[invalid]" in run.out
    assert run.peak_rss < 192 * MIB, f"peak RSS {run.peak_rss // MIB} MiB"


def test_plan_check_json_of_a_plan_at_the_bound_in_its_worst_case(tmp_path: Path) -> None:
    # 1,000 positions, each stuck request ended by the reservation: every position names
    # every later server, 1,000 x 999 / 2 = 499,500 names in the scenarios (and as
    # many in the findings): the largest report a plan can ask for, within a few MiB.
    plan = _seed_plan(MAX_ARM_POSITIONS)
    run = run_capped(["plan", "check", str(_write(tmp_path, plan)), "--json"], CAP)
    assert "Traceback" not in run.text, run.text[-2000:]
    assert run.rc == 2, run.err
    doc = json.loads(run.out)
    assert "invalid" not in {f["code"] for f in doc["findings"]}
    assert sum(len(s["starved"]) for s in doc["scenarios"]) == 1000 * 999 // 2
    starved = [f for f in doc["findings"] if f["code"] == "later-arms-starved"]
    assert len(starved) == 999  # the last position leaves no later one
    assert run.peak_rss < 384 * MIB, f"peak RSS {run.peak_rss // MIB} MiB"


@pytest.mark.parametrize(("positions", "refused"), [(1000, False), (1001, True)])
def test_the_bound_is_on_the_count_of_positions(positions: int, refused: bool) -> None:
    plan = _seed_plan(positions)
    plan["reservation"] = {"hard_limit_s": 10**9, "soft_term_s": 10**9 - 1000}
    plan["timeouts"] = {"request_s": 600, "wave_s": 1800}
    result = check_plan_document(plan)
    invalid = [f for f in result.findings if f.code == "invalid"]
    if refused:
        assert [(f.path, f.level) for f in invalid] == [("arm_order", "error")]
        assert invalid[0].message.startswith(f"arm_order has {positions:,} positions;")
        assert not result.scenarios
    else:
        assert not invalid
        assert len(result.scenarios) == positions


def test_seal_refuses_a_campaign_whose_plan_has_20_000_positions(tmp_path: Path) -> None:
    # A campaign of kind campaign: a plan-check error blocks the seal (specs/plan-check.md),
    # an invalid campaign (exit 2, docs/exit-codes.md), nothing written.
    # Loaded by name: mypy would otherwise see bench/replay_scale.py under two names.
    write_campaign = importlib.import_module("bench.replay_scale").write_campaign

    camp = tmp_path / "camp"
    write_campaign(camp, 400)
    plan_path = camp / "plans" / "scale.json"
    plan = json.loads(plan_path.read_text("utf-8"))
    order = list(plan["arm_order"])
    plan["arm_order"] = order * (N // len(order))
    # Each stuck request ends at the reservation: before the bound, every position
    # named every later one.
    plan["reservation"] = {"hard_limit_s": 3600, "soft_term_s": 3000}
    plan_path.write_text(json.dumps(plan), "utf-8")
    out = tmp_path / "scale.bundle"
    run = run_capped(["seal", str(camp), "-o", str(out), "--unsigned"], CAP)
    assert "Traceback" not in run.text, run.text[-2000:]
    assert run.rc == 2, run.text[-2000:]
    assert "plans/scale.json" in run.text and "arm_order has 20,000 positions" in run.text
    assert not out.exists()
    assert run.peak_rss < 256 * MIB, f"peak RSS {run.peak_rss // MIB} MiB"


def test_bundle_run_dry_run_refuses_a_plan_of_20_000_positions(tmp_path: Path) -> None:
    from tests.reference_server.campaign import BASELINE_COMMIT, CANDIDATE_COMMIT, tiny_png

    plan = campaign_plan()
    plan["arm_order"] = list(plan["arm_order"]) * (N // len(plan["arm_order"]))
    # One server name per position, as the reference plan names its four.
    plan["servers"] = [f"{arm}-{i + 1}" for i, arm in enumerate(plan["arm_order"])]
    path = _write(tmp_path, plan)
    inputs = tmp_path / "inputs-dir"
    (inputs / "inputs").mkdir(parents=True)
    (inputs / "inputs" / "reference.png").write_bytes(tiny_png())
    out = tmp_path / "campaign"
    args = ["run", str(path), "-o", str(out), "--campaign-id", "c", "--inputs", str(inputs)]
    args += ["--arm", f"baseline={BASELINE_COMMIT}", "--arm", f"candidate={CANDIDATE_COMMIT}"]
    run = run_capped([*args, "--launch", "--dry-run", "--kind", "pilot"], CAP)
    assert "Traceback" not in run.text, run.text[-2000:]
    assert run.rc == 2, run.text[-2000:]
    assert "arm_order has 20,000 positions" in run.text, run.text[-2000:]
    assert not out.exists()
    assert run.peak_rss < 256 * MIB, f"peak RSS {run.peak_rss // MIB} MiB"


# --- the faster check names the same servers -------------------------------------------


def _losses_by_definition(
    result: PlanCheckResult, elapsed_s: float, soft: float
) -> list[tuple[float, tuple[str, ...], tuple[str, ...]]]:
    """Per scenario: its start and the later servers starved and cut short, from the
    definitions in specs/plan-check.md, re-summed and re-walked for every position."""
    budgets = result.slots
    t = result.timeouts
    startup = float(t["startup_budget_s"] or 0.0)
    out = []
    for i, sc in enumerate(result.scenarios):
        start = elapsed_s + sum(b.nominal_s for b in budgets[:i])
        starved: list[str] = []
        cut: list[str] = []
        at = sc.slot_ends_at_s
        for later in budgets[i + 1 :]:
            s = later.slot
            per_request = (later.nominal_s - startup - later.teardown_s) / s.requests
            first_measured = at + startup + (s.warmups + 1) * per_request
            if sc.fires == "reservation" or first_measured >= soft:
                starved.append(s.server)
            elif at + later.nominal_s > soft:
                cut.append(s.server)
            at += later.nominal_s
        out.append((start, tuple(starved), tuple(cut)))
    return out


_SECONDS = st.integers(0, 5000)


@st.composite
def _plans(draw: st.DrawFn) -> tuple[dict[str, Any], float]:
    """A plan of up to 120 positions over 1-3 arms in integral seconds (so every sum is
    exact and the definition's own order of additions cannot matter), with a soft TERM
    anywhere from the first position to past the last."""
    arms = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True))
    order = draw(st.lists(st.sampled_from(arms), min_size=1, max_size=120))
    plan: dict[str, Any] = {
        "id": "p",
        "arm_order": order,
        "warmups_per_server": draw(st.integers(0, 3)),
        "measured_per_server": draw(st.integers(1, 8)),
        "timeouts": {"request_s": draw(st.integers(1, 20_000))},
        "startup_budget_s": draw(_SECONDS),
        "teardown": {a: {"term_wait_s": draw(_SECONDS), "kill_wait_s": 30} for a in arms},
        "expected_request_s": {a: draw(st.integers(0, 300)) for a in arms},
    }
    if draw(st.booleans()):
        plan["timeouts"]["wave_s"] = draw(st.integers(1, 50_000))
    soft = draw(st.integers(1, 400_000))
    plan["reservation"] = {"hard_limit_s": soft + 600, "soft_term_s": soft, "kill_grace_s": 120}
    return plan, float(draw(st.sampled_from([0, 60, 3600])))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_plans())
def test_scenarios_name_the_servers_the_definition_names(
    case: tuple[dict[str, Any], float],
) -> None:
    plan, elapsed = case
    result = check_plan_document(plan, elapsed_s=elapsed)
    assert len(result.scenarios) == len(plan["arm_order"])
    soft = float(plan["reservation"]["soft_term_s"])
    got = [(sc.starts_at_s, sc.starved, sc.cut) for sc in result.scenarios]
    assert got == _losses_by_definition(result, elapsed, soft)
    # Every lost server is named in that scenario's finding, starved first, in run order.
    findings = iter(f for f in result.findings if f.code == "later-arms-starved")
    for sc in result.scenarios:
        if sc.starved or sc.cut:
            lost: Sequence[str] = [
                *(f"{s} (no samples)" for s in sc.starved),
                *(f"{s} (cut short)" for s in sc.cut),
            ]
            assert ", ".join(lost) in next(findings).message
    assert next(findings, None) is None
    assert all(math.isfinite(sc.starts_at_s) for sc in result.scenarios)
