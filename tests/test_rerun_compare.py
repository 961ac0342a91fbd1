"""``compare_bundles``: a rerun bundle beside the sealed one, on the replay engine.

Every bundle here is written by hand (no server) and sealed; every expected
number is derived by hand in the test from the rule in
``specs/claims-vocabulary.md`` / ``docs/rerun.md``, and where the replay
engine computes the same quantity for one bundle, compare must agree with it
exactly (one statistics engine, issue 9 defect 6).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from bundler.format.trust import Trust
from bundler.seal import seal_campaign
from bundler.verified import VerifiedBundle, open_verified
from replay.api import compare_bundles, replay_bundle
from replay.sections.against import DEFAULT_TOLERANCE, RerunComparison
from replay.sections.against import format_comparison as fmt
from tests.conftest import Keys
from tests.reference_server.campaign import (
    BASELINE_COMMIT,
    CANDIDATE_COMMIT,
    campaign_plan,
    write_campaign,
)

# server -> (arm, measured e2e values): the rerun of tests/test_rerun_units.py's reference plan.
RERUN_BASE = {"baseline-1": ("baseline", [0.70, 0.72]), "baseline-2": ("baseline", [0.74, 0.76])}
Exit = tuple[
    str, str, str, int | None, str | None, float, bool
]  # arm server worker code sig s kill


def _jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _write(
    root: Path,
    plan: bytes,
    values: dict[str, tuple[str, list[float]]],
    *,
    kind: str = "rerun",
    campaign_id: str = "reference-ab-rerun",
    exits: Sequence[Exit] = (),
    samples: Sequence[tuple[str, str, str, float]] = (),
    statuses: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """A campaign written by hand: one accepted attempt ``r-1``, measured requests only."""
    (root / "plans").mkdir(parents=True)
    (root / "plans" / "reference-ab.json").write_bytes(plan)
    campaign = {
        "layout_version": "1",
        "id": campaign_id,
        "title": "by hand",
        "kind": kind,
        "hardware": {"accelerator": "none", "count": 8},
        "arms": [
            {"id": "baseline", "role": "baseline", "runtime_commit": BASELINE_COMMIT},
            {"id": "candidate", "role": "candidate", "runtime_commit": CANDIDATE_COMMIT},
        ],
        "plan": "plans/reference-ab.json",
        **(extra or {}),
    }
    (root / "campaign.json").write_text(json.dumps(campaign), encoding="utf-8")
    _jsonl(root / "attempts.jsonl", [{"attempt_id": "r-1", "status": "accepted"}])
    (root / "claims.json").write_text("[]", encoding="utf-8")
    receipts = [
        {
            "request_id": f"r-{server}-{seq}",
            "attempt_id": "r-1",
            "arm": arm,
            "server": server,
            "phase": "measured",
            "seq": seq,
            "start": "2026-05-01T00:00:00Z",
            "end": "2026-05-01T00:00:01Z",
            "e2e_s": e2e,
            "status": (statuses or {}).get(server, "ok"),
        }
        for server, (arm, xs) in values.items()
        for seq, e2e in enumerate(xs, start=1)
    ]
    _jsonl(root / "receipts.jsonl", receipts)
    keys = ("arm", "server", "worker", "exit_code", "signal", "exit_s", "killed")
    _jsonl(
        root / "worker_exits.jsonl",
        [{"attempt_id": "r-1", **dict(zip(keys, e, strict=True))} for e in exits],
    )
    _jsonl(
        root / "telemetry.jsonl",
        [
            {
                "attempt_id": "r-1",
                "arm": arm,
                "server": server,
                "device": dev,
                "time": "2026-05-01T00:00:00Z",
                "hbm_used_mb": mb,
            }
            for arm, server, dev, mb in samples
        ],
    )
    return root


def _seal(d: Path, keys: Keys | None = None) -> VerifiedBundle:
    out = d.with_suffix(".bundle")
    if keys is None:
        seal_campaign(d, out)
        return open_verified(out, trust=Trust.allow_unsigned())
    seal_campaign(d, out, keys=[keys.private])
    return open_verified(out, trust=Trust.keys([keys.public]))


def _reference(tmp_path: Path) -> tuple[VerifiedBundle, bytes]:
    """The reference campaign, sealed (arm means 0.6175 and 0.2175: campaign.py)."""
    sealed_dir = write_campaign(tmp_path / "sealed")
    plan = (sealed_dir / "plans" / "reference-ab.json").read_bytes()
    return _seal(sealed_dir), plan


def _rerun(tmp_path: Path, name: str, plan: bytes, cand: tuple[list[float], list[float]]) -> Any:
    values = {
        **RERUN_BASE,
        "candidate-1": ("candidate", cand[0]),
        "candidate-2": ("candidate", cand[1]),
    }
    exits: list[Exit] = [
        ("baseline", "baseline-1", "w0", 0, None, 0.5, False),  # clean: within the 0.6 s wait
        ("baseline", "baseline-1", "w1", None, "SIGKILL", 0.7, True),
    ]
    samples = [
        ("baseline", "baseline-1", "npu:0", 100.0),
        ("baseline", "baseline-1", "npu:0", 300.0),
        ("baseline", "baseline-1", "npu:1", 200.0),
        ("candidate", "candidate-1", "npu:0", 150.0),
    ]
    return _seal(_write(tmp_path / name, plan, values, exits=exits, samples=samples))


def test_comparison_arithmetic_and_tolerance_rule(tmp_path: Path) -> None:
    sealed, plan = _reference(tmp_path)

    def compare(cand: tuple[list[float], list[float]], name: str, tol: float) -> RerunComparison:
        return compare_bundles(_rerun(tmp_path, name, plan, cand), sealed, tolerance=tol)

    c = compare(([0.25, 0.27], [0.23, 0.25]), "near", 0.10)
    (e,) = c.effects
    # Sealed: arm means 0.6175 and 0.2175 (tests/reference_server/campaign.py).
    # Rerun: baseline servers 0.71 and 0.75 -> 0.73; candidate 0.26 and 0.24 -> 0.25.
    assert (e.sealed_baseline_s, e.sealed_candidate_s) == pytest.approx((0.6175, 0.2175))
    assert (e.rerun_baseline_s, e.rerun_candidate_s) == pytest.approx((0.73, 0.25))
    assert e.sealed_speedup == pytest.approx(0.6175 / 0.2175)  # 2.839080...
    assert e.rerun_speedup == pytest.approx(2.92)  # 0.73 / 0.25
    assert e.rerun_percent_lower == pytest.approx((1 - 0.25 / 0.73) * 100)  # 65.753...
    assert e.sealed_percent_lower == pytest.approx((1 - 0.2175 / 0.6175) * 100)  # 64.777...
    assert (e.baseline_ratio, e.candidate_ratio) == pytest.approx((0.73 / 0.6175, 0.25 / 0.2175))
    assert e.speedup_ratio == pytest.approx(2.92 / (0.6175 / 0.2175))  # 1.0285: +2.9 %
    assert e.reproduced is True and c.reproduced is True and c.plan_matches
    assert (c.failures(), c.gaps(), c.integrity_failures()) == ([], [], [])
    lc = c.rerun.lifecycle
    assert lc is not None and (lc.total, lc.clean, c.rerun.killed) == (2, 1, 1)
    # Peaks per (server, device): baseline 300 and 200 -> 250; candidate 150.
    assert c.rerun.hbm_peak_mean_mb == {"baseline": 250.0, "candidate": 150.0}
    assert c.sealed.hbm_peak_mean_mb == {"baseline": None, "candidate": None}
    # Candidate 0.28 and 0.30 -> 0.29: speedup 0.73 / 0.29 = 2.5172, -11.3 % from 2.8391.
    slow = compare(([0.28, 0.28], [0.30, 0.30]), "slow", 0.10)
    assert slow.effects[0].speedup_ratio == pytest.approx((0.73 / 0.29) / (0.6175 / 0.2175))
    assert slow.reproduced is False
    assert compare(([0.28, 0.28], [0.30, 0.30]), "slow-wide", 0.12).reproduced is True
    # No effect at all: candidate as slow as baseline (speedup 1) never reproduces 2.84x.
    none = compare(([0.70, 0.72], [0.74, 0.76]), "none", 0.9)
    assert none.effects[0].rerun_speedup == pytest.approx(1.0)
    assert none.reproduced is False
    assert "the effect vanished or changed direction" in none.effects[0].verdict


def test_an_exit_with_no_teardown_budget_is_unclean_in_compare_as_in_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (issue 9 defect 6): compare had its own lifecycle rule, and counted an
    exit with code 0, no signal, but no teardown budget for its arm as clean.

    The rule (specs/claims-vocabulary.md, ``worker_exits_clean``): exit code 0, no
    signal, and ``exit_s`` <= the plan's ``teardown[arm].term_wait_s``. The plan below
    has no budget for ``candidate``, so no candidate exit can satisfy the last clause:
    by hand, the sealed bundle has 2 exits, 1 clean (baseline w0, 0.3 <= 0.6 s); the
    rerun 3 exits, 1 clean (baseline w0; w1 was killed; candidate w0 has no budget).

    This sealer refuses a plan without a budget for every arm (bundler/campaign/load.py); a
    bundle sealed by another tool and accepted unsigned can hold one. It is made here by
    sealing with that one campaign check switched off.
    """
    monkeypatch.setattr("bundler.campaign.load._plan_checks", lambda camp, arms: [])
    plan = campaign_plan(teardown={"baseline": {"term_wait_s": 0.6, "kill_wait_s": 2}})
    plan_bytes = json.dumps(plan).encode()
    values = {
        **RERUN_BASE,
        "candidate-1": ("candidate", [0.25, 0.27]),
        "candidate-2": ("candidate", [0.23, 0.25]),
    }
    # A plan with a missing teardown budget seals only as a pilot (plan check error).
    sealed = _seal(
        _write(
            tmp_path / "sealed",
            plan_bytes,
            values,
            kind="pilot",
            campaign_id="reference-ab",
            exits=[
                ("baseline", "baseline-1", "w0", 0, None, 0.3, False),
                ("candidate", "candidate-1", "w0", 0, None, 0.2, False),
            ],
        )
    )
    rerun = _seal(
        _write(
            tmp_path / "rerun",
            plan_bytes,
            values,
            exits=[
                ("baseline", "baseline-1", "w0", 0, None, 0.5, False),
                ("baseline", "baseline-1", "w1", None, "SIGKILL", 0.7, True),
                ("candidate", "candidate-1", "w0", 0, None, 0.2, False),
            ],
        )
    )
    c = compare_bundles(rerun, sealed)
    s_lc, r_lc = c.sealed.lifecycle, c.rerun.lifecycle
    assert s_lc is not None and r_lc is not None
    assert (s_lc.total, s_lc.clean) == (2, 1)
    assert (r_lc.total, r_lc.clean, c.rerun.killed) == (3, 1, 1)
    # The same numbers as replay's lifecycle section of each bundle, and the same reasons.
    for side, bundle in ((c.sealed, sealed), (c.rerun, rerun)):
        replayed = replay_bundle(bundle.path, trust=Trust.allow_unsigned()).lifecycle
        assert side.lifecycle == replayed
    assert (
        "candidate-1/w0 (no teardown budget in the plan; exited 0.2 s after the TERM)"
        in c.rerun.unclean()
    )
    doc = c.to_dict()
    assert (doc["sealed"]["lifecycle"]["clean"], doc["rerun"]["lifecycle"]["clean"]) == (1, 1)
    assert (
        "unclean: candidate-1/w0 (no teardown budget in the plan; exited 0.2 s after the TERM)"
        in "\n".join(fmt(c))
    )


def test_means_speedup_and_hbm_are_the_replay_engines(tmp_path: Path) -> None:
    """Compare shows, for each bundle, exactly what replay derives for it."""
    sealed, plan = _reference(tmp_path)
    rerun = _rerun(tmp_path, "near", plan, ([0.25, 0.27], [0.23, 0.25]))
    c = compare_bundles(rerun, sealed)
    (e,) = c.effects
    for side, bundle, (base, cand, speedup, lower) in (
        (
            c.sealed,
            sealed,
            (e.sealed_baseline_s, e.sealed_candidate_s, e.sealed_speedup, e.sealed_percent_lower),
        ),
        (
            c.rerun,
            rerun,
            (e.rerun_baseline_s, e.rerun_candidate_s, e.rerun_speedup, e.rerun_percent_lower),
        ),
    ):
        r = replay_bundle(bundle.path, trust=Trust.allow_unsigned())
        b, k = r.latency.arm("baseline"), r.latency.arm("candidate")
        pair = r.latency.pair("baseline", "candidate")
        assert b is not None and k is not None and pair is not None
        assert b.mean_s is not None and k.mean_s is not None
        assert pair.speedup is not None and pair.percent_lower is not None
        assert (base, cand) == (float(b.mean_s), float(k.mean_s))
        assert (speedup, lower) == (float(pair.speedup), float(pair.percent_lower))
        assert side.attempt == r.accepted_attempt
        hbm = {
            a.arm: None if a.mean_peak_mb is None else float(a.mean_peak_mb)
            for a in r.telemetry.arms
        }
        assert side.hbm_peak_mean_mb == hbm


def test_the_tolerance_is_the_decimal_written_and_judged_exactly(tmp_path: Path) -> None:
    """Sealed 0.5 / 0.25 = 2; rerun 0.6875 / 0.3125 = 2.2 (all exact binary fractions):
    the ratio is exactly 11/10, on the 10 % boundary, which is inclusive. In doubles,
    2.2 / 2 - 1 = 0.10000000000000009 > 0.1 would have called it not reproduced."""
    plan = json.dumps(campaign_plan()).encode()

    def values(base: float, cand: float) -> dict[str, tuple[str, list[float]]]:
        return {
            "baseline-1": ("baseline", [base, base]),
            "baseline-2": ("baseline", [base, base]),
            "candidate-1": ("candidate", [cand, cand]),
            "candidate-2": ("candidate", [cand, cand]),
        }

    sealed = _seal(_write(tmp_path / "s", plan, values(0.5, 0.25), campaign_id="reference-ab"))
    rerun = _seal(_write(tmp_path / "r", plan, values(0.6875, 0.3125)))
    assert 2.2 / 2 - 1 > 0.1  # the double arithmetic the exact rule avoids
    c = compare_bundles(rerun, sealed, tolerance=DEFAULT_TOLERANCE)
    assert c.effects[0].speedup_ratio == 1.1
    assert c.reproduced is True
    assert c.effects[0].verdict == (
        "reproduced: rerun speedup 2.200× vs sealed 2.000× (+10.00 %, tolerance 10 %)"
    )
    assert compare_bundles(rerun, sealed, tolerance=0.0999).reproduced is False
    with pytest.raises(ValueError, match="tolerance"):
        compare_bundles(rerun, sealed, tolerance=-0.1)
    with pytest.raises(ValueError, match="tolerance"):
        compare_bundles(rerun, sealed, tolerance=float("nan"))


def test_failures_gaps_and_limits_say_why(tmp_path: Path, keys: Keys) -> None:
    sealed, plan = _reference(tmp_path)
    # Not reproduced: candidate 0.29 -> 0.73 / 0.29 = 2.5172x against 0.6175 / 0.2175 =
    # 2.8391x; 0.73 x 0.2175 / (0.29 x 0.6175) - 1 = 0.158775 / 0.179075 - 1 = -11.336 %.
    slow = compare_bundles(_rerun(tmp_path, "slow", plan, ([0.28, 0.28], [0.30, 0.30])), sealed)
    assert slow.failures() == [
        "the effect baseline → candidate did not reproduce: rerun speedup 2.517× vs sealed "
        "2.839× (-11.34 %, tolerance 10 %)"
    ]
    assert slow.gaps() == []
    assert slow.to_dict()["failures"] == slow.failures()
    # The sealed bundle was accepted unsigned: the limits say so (the rerun's own trust is
    # the replay result's to state, for the bundle it replays).
    assert sum("accepted unsigned or untrusted" in x for x in slow.limits) == 1
    assert not slow.rerun.trusted and slow.to_dict()["rerun"]["trusted"] is False
    assert any(x.startswith("Only the effect is judged") for x in slow.limits)

    # Could not be judged: every candidate request of the rerun failed.
    values = {
        **RERUN_BASE,
        "candidate-1": ("candidate", [0.25, 0.27]),
        "candidate-2": ("candidate", [0.23, 0.25]),
    }
    failed = _write(
        tmp_path / "failed",
        plan,
        values,
        statuses={"candidate-1": "failed", "candidate-2": "failed"},
    )
    c = compare_bundles(_seal(failed), sealed)
    assert c.reproduced is None and c.failures() == []
    assert c.gaps() == [
        "the effect baseline → candidate could not be judged: arm candidate has no measured "
        "request with status ok in the rerun bundle"
    ]
    assert c.rerun.statuses == {"ok": 4, "failed": 4}

    # Signed by a trusted key on both sides: no trust line.
    s2 = write_campaign(tmp_path / "signed-sealed")
    trusted = compare_bundles(
        _seal(_write(tmp_path / "signed-rerun", plan, values), keys), _seal(s2, keys)
    )
    assert not any("untrusted" in x for x in trusted.limits)
    assert (trusted.sealed.trusted, trusted.rerun.trusted) == (True, True)


def test_a_rerun_of_another_plan_or_campaign_is_not_judged(tmp_path: Path) -> None:
    sealed, plan = _reference(tmp_path)
    values = {
        **RERUN_BASE,
        "candidate-1": ("candidate", [0.28, 0.28]),  # would not reproduce (see above)
        "candidate-2": ("candidate", [0.30, 0.30]),
    }
    other_plan = plan.replace(b'"reference-ab"', b'"reference-ab-2"')
    assert other_plan != plan
    c = compare_bundles(_seal(_write(tmp_path / "other-plan", other_plan, values)), sealed)
    assert not c.plan_matches and c.reproduced is None
    assert c.failures() == []  # another plan's effect cannot contradict this one
    assert c.gaps() == [
        "the rerun's frozen plan (plans/reference-ab.json) is not the sealed one "
        "(plans/reference-ab.json) byte for byte: it is not a rerun of this plan"
    ]
    # The right plan, but the rerun says it reran another campaign.
    of = {"rerun_of": {"campaign_id": "someone-else", "plan": "plans/reference-ab.json"}}
    c = compare_bundles(_seal(_write(tmp_path / "other-c", plan, values, extra=of)), sealed)
    assert c.plan_matches and c.reproduced is None and c.failures() == []
    assert c.gaps() == [
        "the rerun says it reran campaign someone-else, not the sealed reference-ab"
    ]
    assert "  not comparable: the rerun says it reran campaign someone-else" in "\n".join(fmt(c))
