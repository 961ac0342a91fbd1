"""``bundle plan check`` on the seed's two failing pilot plans, their corrections, and edge cases.

Every expected number is derived by hand in the comments from the plan's own
values (policy in specs/plan-check.md): a position's nominal duration is
start-up budget + requests x expected_request_s (0 when undeclared) + TERM wait
+ KILL wait; its worst case is min(arm_s, start-up + min(wave_s, requests x
request_s)) + TERM wait + KILL wait.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bundler._internal.schemas import document_errors
from bundler.campaign.plan_check import (
    Finding,
    PlanCheckResult,
    check_plan,
    check_plan_document,
    plan_slots,
    seal_plan_findings,
)
from bundler.errors import Problem
from bundler.format.plan_model import Plan
from bundler.seal import seal_campaign
from reprobundle.cli.plan_cmd import plan_group
from tests.reference_server.campaign import write_campaign

PLANS = Path(__file__).parent / "fixtures" / "plans"


def load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((PLANS / name).read_text(encoding="utf-8"))
    return doc


def check(doc: dict[str, Any], *, elapsed_s: float = 0.0) -> PlanCheckResult:
    """Plan check of a schema-valid plan document, typed as every reader gets it.

    The lenient front end (a plan file given by path) must find the same, in the same order.
    """
    assert document_errors("plan", doc) == []
    typed = check_plan(Plan.from_dict(copy.deepcopy(doc), "plan.json"), elapsed_s=elapsed_s)
    assert check_plan_document(doc, elapsed_s=elapsed_s) == typed
    return typed


def codes(result: PlanCheckResult, level: str) -> list[str]:
    return [f.code for f in result.findings if f.level == level]


# The seed plans ask MiniMax H3 for 1280x720: 720 = 22 x 32 + 16, so H3's canvas, floored to a
# multiple of 32, is 1280x704 (bundler/campaign/plan_omni.py), a warning after the timing ones.
H3_CANVAS = (
    "warning",
    "h3-canvas",
    "request.payload.size",
    "MiniMax H3 floors its canvas to a multiple of 32: 1280x720 yields 1280x704",
)


def request_findings(result: PlanCheckResult) -> list[tuple[str, str, str, str]]:
    """The findings about the request (the ones after the timing findings)."""
    omni = {"h3-canvas", "h3-fps", "task-implicit", "payload-refused", "model-not-served"}
    omni.add("sync-cap")
    return [(f.level, f.code, f.path, f.message) for f in result.findings if f.code in omni]


@pytest.mark.parametrize("name", sorted(p.name for p in PLANS.glob("*.json")))
def test_fixtures_are_valid_plans(name: str) -> None:
    assert document_errors("plan", load(name)) == []


def test_seed_plan_1_reservation_fires_first_and_later_arms_starve() -> None:
    # kv2 -> kvdevice2 -> kvdevice8; request = wave = 14,400 s; soft TERM 165 min = 9,900 s,
    # hard 3 h = 10,800 s; no start-up budget or kill grace published (taken as 0);
    # teardown 60 + 90 = 150 s; 2 warmups + 1 measured = 3 requests per position.
    r = check(load("seed-kv-residency-pilot.json"))
    assert not r.ok
    # Nominal positions take 0 + 3 x 0 + 150 = 150 s, so position k starts at 150 (k - 1).
    starts = [0.0, 150.0, 300.0]
    # Its stuck first request would time out at start + 0 + 14,400 (wave: the same instant),
    # but the soft TERM comes at 9,900 s: the reservation fires first in every position.
    assert [s.starts_at_s for s in r.scenarios] == starts
    assert [dict(s.deadlines)["request"] for s in r.scenarios] == [14400.0, 14550.0, 14700.0]
    assert [dict(s.deadlines)["wave"] for s in r.scenarios] == [14400.0, 14550.0, 14700.0]
    assert [(s.fires, s.fires_at_s) for s in r.scenarios] == [("reservation", 9900.0)] * 3
    # Once the reservation fires, no later position gets a sample.
    assert [s.starved for s in r.scenarios] == [
        ("kvdevice2-1", "kvdevice8-1"),
        ("kvdevice8-1",),
        (),
    ]
    assert codes(r, "error") == [
        "stuck-request-outer-level",
        "later-arms-starved",
        "stuck-request-outer-level",
        "later-arms-starved",
        "stuck-request-outer-level",
    ]
    # Worst case per position: 0 + min(14,400, 3 x 14,400) + 150 = 14,550 s; 3 of them = 43,650 s.
    assert [b.worst_case_s for b in r.slots] == [14550.0] * 3
    assert r.worst_case_total_s == 43650.0
    assert sorted(codes(r, "warning")) == [
        "h3-canvas",
        "no-startup-budget",
        "worst-case-exceeds-reservation",
    ]
    assert request_findings(r) == [H3_CANVAS]
    first = r.errors[0]
    assert first.path == "timeouts.request_s"
    assert "9,900 s (2 h 45 min)" in first.message and "14,400 s (4 h)" in first.message


def test_seed_plan_2_four_arms_two_hour_reservation() -> None:
    # Four arms; request = wave = 14,400 s; hard 2 h = 7,200 s, soft TERM 105 min = 6,300 s,
    # kill grace 180 s (6,300 + 180 = 6,480 <= 7,200: no KILL after the hard limit);
    # 2 warmups + 3 measured = 5 requests; teardown 150 s <= the 180 s grace.
    r = check(load("seed-cache-range-pilot.json"))
    servers = ["cache-none-1", "cache-f1b0-1", "cache-f4b0-1", "cache-f8b0-1"]
    assert [s.slot.server for s in r.scenarios] == servers
    assert [(s.fires, s.fires_at_s) for s in r.scenarios] == [("reservation", 6300.0)] * 4
    assert [dict(s.deadlines)["request"] for s in r.scenarios] == [14400, 14550, 14700, 14850]
    assert [s.starved for s in r.scenarios] == [
        tuple(servers[1:]),
        tuple(servers[2:]),
        tuple(servers[3:]),
        (),
    ]
    assert codes(r, "error").count("stuck-request-outer-level") == 4
    assert codes(r, "error").count("later-arms-starved") == 3
    assert "kill-after-hard" not in codes(r, "error")
    assert "teardown-exceeds-kill-grace" not in codes(r, "warning")
    # Worst case: 4 x (0 + min(14,400, 5 x 14,400) + 150) = 4 x 14,550 = 58,200 s.
    assert r.worst_case_total_s == 58200.0


def test_corrected_plan_1_passes_with_no_finding() -> None:
    # start-up 600, request 800, wave 2,400, arm 3,000; soft 9,900, grace 180, hard 10,800.
    r = check(load("seed-kv-residency-pilot.corrected.json"))
    # No timing finding; the one warning is about the request's canvas.
    assert r.ok and [(f.level, f.code, f.path, f.message) for f in r.findings] == [H3_CANVAS]
    # Nominal position: 600 + 0 + 150 = 750 s; starts 0, 750, 1,500; a stuck first request
    # times out at start + 600 + 800, before the wave (start + 3,000) and arm (start + 3,000).
    assert [(s.fires, s.fires_at_s) for s in r.scenarios] == [
        ("request", 1400.0),
        ("request", 2150.0),
        ("request", 2900.0),
    ]
    assert all(s.starved == () and s.cut == () and s.clean_up_fits for s in r.scenarios)
    # Worst case: min(3,000, 600 + min(2,400, 3 x 800)) + 150 = 3,150; x 3 = 9,450 <= 9,900.
    assert r.worst_case_total_s == 9450.0


def test_corrected_plan_2_passes_with_no_finding() -> None:
    # start-up 300, request 600, wave 1,100, arm 1,400; soft 6,300, grace 180, hard 7,200.
    r = check(load("seed-cache-range-pilot.corrected.json"))
    assert r.ok and [(f.level, f.code, f.path, f.message) for f in r.findings] == [H3_CANVAS]
    # Nominal 300 + 150 = 450 s: stuck requests time out at 900, 1,350, 1,800, 2,250 s.
    assert [s.fires_at_s for s in r.scenarios] == [900.0, 1350.0, 1800.0, 2250.0]
    # Worst case: min(1,400, 300 + min(1,100, 5 x 600)) + 150 = 1,550; x 4 = 6,200 <= 6,300.
    assert [b.worst_case_s for b in r.slots] == [1550.0] * 4
    assert r.worst_case_total_s == 6200.0


def test_declared_watchdog_boundary_turns_the_errors_into_warnings() -> None:
    r = check(load("seed-cache-range-pilot.watchdog-boundary.json"))
    assert r.ok
    assert codes(r, "warning").count("stuck-request-outer-level") == 4
    assert codes(r, "warning").count("later-arms-starved") == 3
    assert any("evidence:" in f.message for f in r.warnings)


def test_watchdog_boundary_without_evidence_is_an_error() -> None:
    r = check(load("seed-cache-range-pilot.boundary-no-evidence.json"))
    assert codes(r, "error") == ["boundary-without-evidence"]
    assert r.errors[0].path == "reservation.unfinished_arm_evidence"


def test_reservation_used_before_the_first_arm_can_starve_the_last() -> None:
    # The corrected plan 1, started 7,000 s into the reservation (the seed's final-1 was
    # started in a reservation already partly used by set-up). Position 1 starts at 7,000:
    # its stuck request times out at 7,000 + 600 + 800 = 8,400 and the position ends at
    # 8,550; position 2 (nominal 750 s) runs 8,550 to 9,300; position 3 would start at
    # 9,300 and be ready at 9,900 = the soft TERM: no sample.
    r = check(load("seed-kv-residency-pilot.corrected.json"), elapsed_s=7000)
    s1 = r.scenarios[0]
    assert (s1.fires, s1.fires_at_s, s1.slot_ends_at_s) == ("request", 8400.0, 8550.0)
    assert s1.starved == ("kvdevice8-1",)
    assert "later-arms-starved" in codes(r, "error")


def final_like_plan() -> dict[str, Any]:
    """A plan shaped like the seed's final one (values as in samples/h3-ref2va-5s)."""
    return {
        "plan_version": "1",
        "id": "final-like",
        "arm_order": ["baseline", "candidate", "candidate", "baseline"],
        "servers": ["baseline-1", "candidate-1", "candidate-2", "baseline-2"],
        "warmups_per_server": 2,
        "measured_per_server": 3,
        "request": {"api": "videos-async", "timing_boundary": "post_to_delete"},
        "quality": {
            "prompts": [{"id": "q1"}, {"id": "q2"}],
            "render_on": ["baseline-1", "candidate-1", "candidate-2"],
        },
        "timeouts": {"request_s": 1200, "wave_s": 3600},
        "startup_budget_s": 900,
        "reservation": {"hard_limit_s": 10800, "soft_term_s": 9900, "kill_grace_s": 180},
        "teardown": {
            "baseline": {"term_wait_s": 60, "kill_wait_s": 90},
            "candidate": {"term_wait_s": 30, "kill_wait_s": 60},
        },
    }


def test_final_like_plan_passes_but_its_full_budgets_overrun() -> None:
    r = check(final_like_plan())
    # Requests: 2 + 3 + 2 quality = 7 on the three quality servers, 5 on baseline-2.
    assert [s.requests for s in plan_slots(Plan.from_dict(final_like_plan(), "plan.json"))] == [
        7,
        7,
        7,
        5,
    ]
    assert r.ok
    # Worst cases: baseline-1 900 + min(3,600, 7 x 1,200) + 150 = 4,650; candidates
    # 900 + 3,600 + 90 = 4,590; baseline-2 900 + min(3,600, 6,000) + 150 = 4,650. Running
    # totals 4,650, 9,240, 13,830, 18,480: the last two pass the 9,900 s soft TERM.
    assert [b.worst_case_s for b in r.slots] == [4650.0, 4590.0, 4590.0, 4650.0]
    assert [(f.level, f.code, f.path) for f in r.findings] == [
        ("warning", "worst-case-exceeds-reservation", "reservation.soft_term_s")
    ]
    msg = r.findings[0].message
    assert msg.startswith(
        "if every arm position used its whole budget (18,480 s (5 h 8 min) in all), the soft "
        "TERM at 9,900 s (2 h 45 min) would cut: candidate-2, baseline-2. A risk, not a certainty"
    )
    # What to change: start-ups 4 x 900 + teardowns 150 + 90 + 90 + 150 = 4,080 s are fixed,
    # leaving (9,900 - 4,080) / 4 = 1,455 s of wave per position; or a soft TERM of 18,480 s.
    assert "set timeouts.wave_s to at most 1,455 s" in msg
    assert "reservation.soft_term_s to at least 18,480 s" in msg


def test_declared_expected_latencies_make_the_schedule_realistic() -> None:
    plan = final_like_plan()
    plan["expected_request_s"] = {"baseline": 410, "candidate": 110}
    r = check(plan)
    s1 = r.scenarios[0]
    # baseline-1 is stuck: ready at 900, its request times out at 900 + 1,200 = 2,100; the
    # other 6 requests at 410 s would end at 2,100 + 2,460 = 4,560, but the wave ends at
    # 900 + 3,600 = 4,500; teardown 150 -> the position ends at 4,650. candidate-1 and -2
    # take 900 + 7 x 110 + 90 = 1,760 each: 6,410, then 8,170. baseline-2's first measured
    # request would end at 8,170 + 900 + 3 x 410 = 10,300 >= 9,900: no samples.
    assert (s1.fires, s1.fires_at_s, s1.slot_ends_at_s) == ("request", 2100.0, 4650.0)
    assert s1.starved == ("baseline-2",)
    assert not r.ok


def test_reservation_structure_errors() -> None:
    plan = load("seed-cache-range-pilot.corrected.json")
    late_kill = copy.deepcopy(plan)
    late_kill["reservation"]["soft_term_s"] = 7100  # 7,100 + 180 = 7,280 > 7,200
    assert "kill-after-hard" in codes(check(late_kill), "error")
    soft_after = copy.deepcopy(plan)
    soft_after["reservation"]["soft_term_s"] = 7300
    assert "soft-after-hard" in codes(check(soft_after), "error")
    short_grace = copy.deepcopy(plan)
    short_grace["reservation"]["kill_grace_s"] = 100  # teardown 60 + 90 = 150 > 100
    assert codes(check(short_grace), "warning").count("teardown-exceeds-kill-grace") == 4


def test_wave_shorter_than_request_fires_first() -> None:
    plan = load("seed-kv-residency-pilot.corrected.json")
    plan["timeouts"] = {"request_s": 800, "wave_s": 500}
    r = check(plan)
    # Ready at 600: the wave ends at 600 + 500 = 1,100 before the request at 1,400.
    assert (r.scenarios[0].fires, r.scenarios[0].fires_at_s) == ("wave", 1100.0)
    assert "stuck-request-outer-level" in codes(r, "error")


def test_malformed_plans_are_findings_not_exceptions() -> None:
    r = check_plan_document({"id": "broken"})
    assert codes(r, "error") == ["invalid"]
    plan = load("seed-kv-residency-pilot.corrected.json")
    plan["timeouts"]["request_s"] = -5
    bad = check_plan_document(plan)
    assert ("invalid", "timeouts.request_s") in [(f.code, f.path) for f in bad.errors]
    del plan["teardown"]["kv2"]
    plan["timeouts"]["request_s"] = 800
    missing = check_plan_document(plan)
    assert [f.path for f in missing.errors] == ["teardown.kv2"]
    with pytest.raises(ValueError, match="level"):
        Finding("info", "x", "y", "z")


def test_seal_policy_blocks_campaigns_and_warns_for_pilots_and_reruns() -> None:
    plan = load("seed-kv-residency-pilot.json")
    blocking, warnings = seal_plan_findings(plan, kind="campaign", where="plans/p.json")
    assert len(blocking) == 5 and len(warnings) == 3  # 2 timing warnings + the H3 canvas
    assert isinstance(blocking[0], Problem) and blocking[0].field == "timeouts.request_s"
    for kind in ("pilot", "rerun"):
        blocking, warnings = seal_plan_findings(plan, kind=kind, where="plans/p.json")
        assert blocking == [] and len(warnings) == 8


def test_cli_plan_check_on_files_and_bundles(tmp_path: Path) -> None:
    runner = CliRunner()
    bad = runner.invoke(plan_group, ["check", str(PLANS / "seed-kv-residency-pilot.json")])
    assert bad.exit_code == 2, bad.output
    assert "reservation soft TERM at 9,900 s (2 h 45 min)" in bad.output
    assert "no samples for kvdevice2-1, kvdevice8-1" in bad.output
    good = runner.invoke(
        plan_group, ["check", str(PLANS / "seed-cache-range-pilot.corrected.json")]
    )
    assert good.exit_code == 0, good.output
    strict = runner.invoke(
        plan_group,
        ["check", "--strict", str(PLANS / "seed-cache-range-pilot.watchdog-boundary.json")],
    )
    assert strict.exit_code == 2
    out = runner.invoke(plan_group, ["check", "--json", str(PLANS / "seed-cache-range-pilot.json")])
    doc = json.loads(out.output)
    assert doc["ok"] is False and doc["scenarios"][0]["fires"] == "reservation"
    camp = write_campaign(tmp_path / "camp")
    seal_campaign(camp, tmp_path / "c.bundle")
    via_bundle = runner.invoke(plan_group, ["check", str(tmp_path / "c.bundle")])
    assert via_bundle.exit_code == 0, via_bundle.output
    assert "plans/reference-ab.json" in via_bundle.output


def omni_plan(payload: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A final-like plan with a video ``payload`` (nothing about timing wrong)."""
    plan = final_like_plan()
    plan["request"] = {**plan["request"], "poll_interval_s": 5, "payload": payload}
    plan.update(changes)
    return plan


GOOD_PAYLOAD: dict[str, Any] = {
    "model": "MiniMax-H3-Ref2VA",
    "prompt": "a violinist",
    "input_reference": "inputs/ref.png",
    "seconds": 5,
    "fps": 24,
    "size": "1280x704",
    "seed": 42,
    "extra_params": {"task": "ref2va"},
}


def test_a_payload_the_real_server_accepts_gives_no_request_finding() -> None:
    r = check(omni_plan(GOOD_PAYLOAD))
    assert request_findings(r) == []
    # An integral float is sent as integer text (rerun.client.form_text): accepted.
    assert request_findings(check(omni_plan({**GOOD_PAYLOAD, "seconds": 5.0}))) == []


def test_payload_values_the_real_request_model_refuses() -> None:
    bad = {**GOOD_PAYLOAD, "size": "1280*720", "seconds": "5.0", "seed": 4.5, "fps": 30}
    got = [(f[1], f[2]) for f in request_findings(check(omni_plan(bad)))]
    assert got == [
        ("payload-refused", "request.payload.size"),
        ("payload-refused", "request.payload.seconds"),
        ("payload-refused", "request.payload.seed"),
        ("h3-fps", "request.payload.fps"),
    ]
    # Without an explicit task an image-only reference runs FL2VA on a combined H3 server.
    implicit = {k: v for k, v in GOOD_PAYLOAD.items() if k != "extra_params"}
    assert [f[1] for f in request_findings(check(omni_plan(implicit)))] == ["task-implicit"]


def test_a_launch_template_that_cannot_serve_the_payloads_model() -> None:
    def served(command: str, **per_arm: Any) -> list[str]:
        launch = {"command": command, "baseline": per_arm, "candidate": per_arm}
        return [f[2] for f in request_findings(check(omni_plan(GOOD_PAYLOAD, launch=launch)))]

    # vllm serve MODEL: served as the model id, which is not the payload's model name.
    assert served("vllm serve MiniMaxAI/MiniMax-H3 --omni --port {port}") == [
        "launch.baseline",
        "launch.candidate",
    ]
    assert served("vllm serve MiniMaxAI/MiniMax-H3 --omni --served-model-name {model}") == []
    assert (
        served("vllm serve /w/h3 --omni", args=["--served-model-name", "MiniMax-H3-Ref2VA"]) == []
    )
    assert served("vllm serve --omni --port {port}", args=["--model", "MiniMax-H3-Ref2VA"]) == []
    # Nothing names the model: it cannot be told, so nothing is claimed.
    assert served("{python} -m my_server --port {port}") == []


def test_a_sync_request_timeout_above_the_servers_cap() -> None:
    sync = {"api": "videos-sync", "timing_boundary": "post_to_response", "payload": GOOD_PAYLOAD}
    plan = final_like_plan()
    plan["request"] = sync
    findings = request_findings(check(plan))
    # request_s 1,200 s > VLLM_OMNI_VIDEO_SYNC_TIMEOUT's default 600 s.
    assert [(f[1], f[2]) for f in findings] == [("sync-cap", "timeouts.request_s")]
    # Findings about the request come after every timing finding.
    assert check(plan).findings[-1].code == "sync-cap"
    env = {"env": {"VLLM_OMNI_VIDEO_SYNC_TIMEOUT": "1800"}}
    plan["launch"] = {"baseline": env, "candidate": env}
    assert request_findings(check(plan)) == []


def test_an_arm_id_with_a_dot_has_its_teardown_budget_read() -> None:
    # Arm ids may contain dots (campaign schema: ^[A-Za-z0-9._-]{1,64}$). On a70afa3 the
    # check looked teardown.v0.6.term_wait_s up as teardown -> "v0" -> "6" and reported the
    # budget of arm "v0.6" missing: two errors, so a campaign of such arms could not be sealed.
    plan = final_like_plan()
    plan["arm_order"] = ["v0.6", "v0.7", "v0.7", "v0.6"]
    plan["teardown"] = {
        "v0.6": {"term_wait_s": 60, "kill_wait_s": 90},
        "v0.7": {"term_wait_s": 30, "kill_wait_s": 60},
    }
    r = check(plan)
    assert r.errors == ()
    # The same budgets as final_like_plan's baseline and candidate: worst cases 4,650 and 4,590.
    assert [b.worst_case_s for b in r.slots] == [4650.0, 4590.0, 4590.0, 4650.0]
    blocking, _ = seal_plan_findings(plan, kind="campaign", where="plans/p.json")
    assert blocking == []


def test_cli_on_a_schema_invalid_plan_file_gives_findings_not_a_crash(tmp_path: Path) -> None:
    # A plan file given by path is checked leniently (check_plan_document): the typed Plan
    # could not even be parsed from this one (timeouts is a string, a teardown a list).
    plan = load("seed-kv-residency-pilot.corrected.json")
    plan["timeouts"] = "soon"
    plan["teardown"]["kv2"] = [60, 90]
    assert document_errors("plan", plan) != []
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(plan), encoding="utf-8")
    res = CliRunner().invoke(plan_group, ["check", "--json", str(path)])
    assert res.exit_code == 2, res.output
    doc = json.loads(res.output)
    # timeouts.request_s cannot be read, so the check stops after the reservation's findings.
    assert [(f["code"], f["path"]) for f in doc["findings"] if f["level"] == "error"] == [
        ("missing", "timeouts.request_s")
    ]
