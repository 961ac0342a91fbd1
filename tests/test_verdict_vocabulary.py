"""One verdict vocabulary (issue 20): the enums print the words outputs carry, and the
media section's verdict is the one precedence over its own reasons."""

from __future__ import annotations

import json

from replay.engine.verdicts import (
    ClaimStatus,
    GateVerdict,
    MediaVerdict,
    Outcome,
    Reproduction,
    decide,
)
from replay.media.coverage import coverage_params
from replay.media.result import MediaGateSummary, MediaReplayResult


def test_members_are_the_words_the_outputs_carry() -> None:
    # The strings of the outputs before the enums (specs/replay-report.md, specs/gates.md).
    assert [str(v) for v in GateVerdict] == [
        "pass",
        "fail",
        "unattested",
        "not-recorded",
        "not-computed",
        "unsupported-definition",
    ]
    assert [str(v) for v in ClaimStatus] == ["confirmed", "contradicted", "unverifiable"]
    assert [str(v) for v in MediaVerdict] == ["MISMATCH", "FAIL", "INCOMPLETE", "PASS"]
    assert json.dumps({GateVerdict.PASS: [ClaimStatus.CONFIRMED]}) == '{"pass": ["confirmed"]}'
    assert f"{Reproduction.of(False)}" == "NOT reproduced"
    assert {"fail": 1}[GateVerdict.FAIL] == 1  # a member finds its word's key


def test_precedence_integrity_then_failure_then_gap() -> None:
    assert decide(["x"], ["y"], ["z"]) is Outcome.INTEGRITY_FAILED
    assert decide([], ["y"], ["z"]) is Outcome.CONTRADICTED
    assert decide([], [], ["z"]) is Outcome.UNVERIFIED
    assert decide([], [], []) is Outcome.CONFIRMED
    # The media words and exit codes of specs/gates.md ("The media re-score's verdict").
    outcomes = (
        Outcome.INTEGRITY_FAILED,
        Outcome.CONTRADICTED,
        Outcome.UNVERIFIED,
        Outcome.CONFIRMED,
    )
    assert [(MediaVerdict.of(o), o.exit_code) for o in outcomes] == [
        ("MISMATCH", 1),
        ("FAIL", 4),
        ("INCOMPLETE", 5),
        ("PASS", 0),
    ]


def test_a_frozen_gate_no_comparison_was_rescored_for_is_a_gap() -> None:
    # A bundle that freezes a gate but whose re-score evaluated no comparison: the gate is
    # not-computed, which specs/gates.md makes INCOMPLETE (exit 5). Before, the media
    # result said INCOMPLETE on its own while giving the replay no reason (no gap line),
    # so the replay's one outcome could not see it.
    gate = MediaGateSummary(
        "ssim-min",
        "ssim",
        "ssim/ffmpeg-y-frame-mean",
        ">=",
        0.97,
        GateVerdict.NOT_RECORDED,
        GateVerdict.NOT_COMPUTED,
        {},
    )
    r = MediaReplayResult(
        comparisons=[],
        gates=[gate],
        scorer=None,
        coverage_params=coverage_params(None),
        disagreements=[],
        problems=[],
        jobs=1,
        device="cpu",
        seconds=0.0,
    )
    gaps = r.gaps()
    assert len(gaps) == 1 and "ssim-min" in gaps[0] and "not-computed" in gaps[0]
    assert decide(r.integrity_failures(), r.failures(), gaps) is Outcome.UNVERIFIED
