"""Planted defects, each in its own sealed bundle, each caught by replay.

Every campaign starts from the factory's honest seed-like campaign
(``tests/replay_factory.py``): servers baseline-1 (396.10, 396.30, 396.50 s),
candidate-1 (106.50, 106.66, 106.82), candidate-2 (109.40, 109.58, 109.76),
baseline-2 (418.00, 418.24, 418.48), run A/B/B/A, each after two warmups of
520 and 450 s; 14 comparisons. Expected values are derived by hand below.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bundler.format.trust import Trust
from replay.api import replay_bundle
from replay.report.json_view import result_to_dict
from replay.result import ReplayResult
from replay.sections.claims import CONFIRMED, CONTRADICTED, UNVERIFIABLE
from replay.sections.quality import FAIL, UNATTESTED
from tests.replay_factory import Files, Server, build, seed_like


@pytest.fixture(scope="module")
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def replay(files: Files, tmp_path: Path, key: Ed25519PrivateKey) -> ReplayResult:
    return replay_bundle(files.seal(tmp_path, key), trust=Trust.keys([key.public_key()]))


def deviations(r: ReplayResult) -> set[tuple[str, str]]:
    return {(d.kind, d.where) for d in r.conformance.deviations}


def test_warmups_counted_in_the_published_mean(tmp_path: Path, key: Ed25519PrivateKey) -> None:
    files = build(seed_like())
    # With both warmups (520, 450 s) in: baseline-1 (520 + 450 + 396.10 + 396.30 + 396.50) / 5
    # = 431.78; baseline-2 (520 + 450 + 418.00 + 418.24 + 418.48) / 5 = 444.944;
    # arm (431.78 + 444.944) / 2 = 438.362 -> 438.36. Honest: (396.30 + 418.24) / 2 = 407.27.
    files.claim("mean-baseline")["value"] = "438.36"
    r = replay(files, tmp_path, key)
    c = r.claims.by_id("mean-baseline")
    assert (c.status, c.claimed, c.recomputed) == (CONTRADICTED, "438.36", "407.27")
    assert "warmups counted as measured" in (c.explanation or "")
    assert "396.3" in c.derivation
    assert r.exit_code == 4


def test_warmup_labelled_measured(tmp_path: Path, key: Ed25519PrivateKey) -> None:
    files = build(seed_like())
    first = files.receipts()[0]
    assert (first["server"], first["seq"], first["phase"]) == ("baseline-1", 0, "warmup")
    first["phase"] = "measured"  # the 520 s warmup now counts
    r = replay(files, tmp_path, key)
    assert {
        ("warmups", "baseline-1"),
        ("measured-extra", "baseline-1"),
        ("warmup-after-measured", "baseline-1"),
    } <= deviations(r)
    # baseline-1 (520 + 396.10 + 396.30 + 396.50) / 4 = 427.225; arm (427.225 + 418.24) / 2
    # = 422.7325 -> 422.73, against the published 407.27.
    c = r.claims.by_id("mean-baseline")
    assert (c.status, c.recomputed) == (CONTRADICTED, "422.73")
    assert r.exit_code == 4


def rejected_spec() -> list[Server]:
    return [Server("candidate-r", "candidate", [90.0, 91.0, 92.0])]


def test_rejected_attempt_mixed_into_the_published_mean(
    tmp_path: Path, key: Ed25519PrivateKey
) -> None:
    spec = seed_like()
    spec.rejected = rejected_spec()
    files = build(spec)
    # With the rejected server's mean (90 + 91 + 92) / 3 = 91 as a third candidate server:
    # (106.66 + 109.58 + 91.00) / 3 = 102.4133... -> 102.41. Honest: 108.12.
    files.claim("mean-candidate")["value"] = "102.41"
    r = replay(files, tmp_path, key)
    c = r.claims.by_id("mean-candidate")
    assert (c.status, c.recomputed) == (CONTRADICTED, "108.12")
    assert "rejected-1" in (c.explanation or "")
    rejected = next(a for a in r.attempts.attempts if a.attempt_id == "rejected-1")
    assert (rejected.receipts, rejected.entered_accepted) == (5, 0)
    assert r.exit_code == 4


def test_rejected_rows_relabelled_as_accepted(tmp_path: Path, key: Ed25519PrivateKey) -> None:
    spec = seed_like()
    spec.rejected = rejected_spec()
    files = build(spec)
    for row in files.receipts("rejected-1"):
        row["attempt_id"] = "final-2"  # timestamps stay a day before the accepted window
    r = replay(files, tmp_path, key)
    assert {
        ("servers-per-arm", "candidate"),
        ("order", "arm_order"),
        ("outside-window", "candidate-r"),
    } <= deviations(r)
    # All 5 relabelled rows (2 warmups + 3 measured) start inside rejected-1's window.
    assert r.attempts.timed_in_other_window["rejected-1"] == 5
    assert not r.attempts.isolated
    assert r.exit_code == 4


def test_claim_rounded_in_the_authors_favour(tmp_path: Path, key: Ed25519PrivateKey) -> None:
    files = build(seed_like())
    # (1 - 108.12 / 407.27) x 100 = 73.4525... -> 73.45; the author wrote 73.46.
    files.claim("lower")["value"] = "73.46"
    r = replay(files, tmp_path, key)
    c = r.claims.by_id("lower")
    assert (c.status, c.claimed, c.recomputed) == (CONTRADICTED, "73.46", "73.45")
    assert (c.exact or "").startswith("73.4525")
    assert "rounded up" in (c.explanation or "")
    assert r.exit_code == 4


def test_sd_across_requests_claimed_as_across_server_means(
    tmp_path: Path, key: Ed25519PrivateKey
) -> None:
    files = build(seed_like())
    # SD (n - 1) of the six baseline requests about their mean 407.27: deviations -11.17,
    # -10.97, -10.77, 10.73, 10.97, 11.21; squares sum 722.2406; / 5 = 144.44812;
    # sqrt = 12.0187... -> 12.02. Across the two server means: |418.24 - 396.30| / sqrt(2)
    # = 15.5139... -> 15.51.
    files.claim("sd-baseline")["value"] = "12.02"
    r = replay(files, tmp_path, key)
    c = r.claims.by_id("sd-baseline")
    assert (c.status, c.recomputed) == (CONTRADICTED, "15.51")
    assert "arm_sd_requests_s" in (c.explanation or "")
    assert r.exit_code == 4


def test_dropped_measured_request(tmp_path: Path, key: Ed25519PrivateKey) -> None:
    spec = seed_like()
    spec.servers[3].measured = [418.00, 418.24]  # 418.48 never ran; plan says 3
    r = replay(build(spec), tmp_path, key)
    # The claims were computed from what is there, so they hold; the plan does not.
    assert {c.status for c in r.claims.checks} == {CONFIRMED}
    assert ("measured-dropped", "baseline-2") in deviations(r)
    assert r.exit_code == 4
    assert any("deviation" in f for f in r.failures())


def test_gate_compared_with_the_wrong_operator(tmp_path: Path, key: Ed25519PrivateKey) -> None:
    spec = seed_like()
    ssim = next(g for g in spec.gates if g["metric"] == "ssim")
    ssim["op"] = ">"  # frozen as exclusive: 0.97 itself fails
    spec.comparisons[3]["ssim"] = 0.97
    files = build(spec)
    # The author compared with >= and published all 14 comparisons passing, and
    # 14 x 3 = 42 passing (comparison, gate) checks. With > only 13 and 41 pass.
    files.claim("cmp-ok")["value"] = "14"
    files.claim("checks-ok")["value"] = "42"
    r = replay(files, tmp_path, key)
    assert r.quality.count(FAIL) == 1
    failing = next(c for c in r.quality.checks if c.verdict == FAIL)
    assert (failing.comparison_id, failing.gate_id, failing.value) == ("cmp-03", "ssim-min", 0.97)
    for cid, recomputed in (("cmp-ok", "13"), ("checks-ok", "41")):
        c = r.claims.by_id(cid)
        assert (c.status, c.recomputed) == (CONTRADICTED, recomputed)
    assert r.exit_code == 4


def test_missing_scorer_identity(tmp_path: Path, key: Ed25519PrivateKey) -> None:
    spec = seed_like()
    spec.scorer = False
    files = build(spec)
    files.tables["claims"].append(
        {
            "claim_id": "cmp-ok",
            "statistic": "comparisons_passed",
            "params": {},
            "value": "14",
            "unit": "count",
        }
    )
    r = replay(files, tmp_path, key)
    # Every one of the 14 comparisons records LPIPS: 14 unattested checks, none PASS.
    lpips = [c for c in r.quality.checks if c.metric == "lpips"]
    assert len(lpips) == 14
    assert {c.verdict for c in lpips} == {UNATTESTED}
    assert r.quality.comparisons_passed == 0
    c = r.claims.by_id("cmp-ok")
    assert c.status == UNVERIFIABLE
    assert "scorer" in (c.explanation or "")
    assert r.claims.count(CONTRADICTED) == 0
    assert r.exit_code == 5
    doc = result_to_dict(r)
    assert doc["quality"]["checks_count"]["unattested"] == 14
    assert any("scorer" in x for x in doc["quality"]["limits"])


# --- explanations (issue 9, defect 8) -------------------------------------------------


def _percent_lower_exact() -> float:
    """The seed-like percent lower, by Fractions over the recorded doubles (by hand)."""
    from fractions import Fraction as F

    def mean(xs: list[float]) -> F:
        return sum((F(x) for x in xs), F(0)) / len(xs)

    b = (mean([396.10, 396.30, 396.50]) + mean([418.00, 418.24, 418.48])) / 2
    c = (mean([106.50, 106.66, 106.82]) + mean([109.40, 109.58, 109.76])) / 2
    return float((1 - c / b) * 100)


def test_exact_is_the_shortest_round_trip_repr(tmp_path: Path, key: Ed25519PrivateKey) -> None:
    r = replay(build(seed_like()), tmp_path, key)
    c = r.claims.by_id("lower")
    expected = _percent_lower_exact()  # 73.4525007979964...
    assert c.exact == repr(expected)
    assert float(c.exact) == expected


def test_rounding_in_the_authors_favour_is_named(tmp_path: Path, key: Ed25519PrivateKey) -> None:
    files = build(seed_like())
    # Exact 73.4525… is 73.45 at two decimals; 73.46 is the value rounded up.
    files.claim("lower")["value"] = "73.46"
    # Exact speedup 407.27 / 108.12 = 3.7668… is 3.77; 3.76 is the value rounded down.
    files.claim("speedup")["value"] = "3.76"
    r = replay(files, tmp_path, key)
    lower, speedup = r.claims.by_id("lower"), r.claims.by_id("speedup")
    assert lower.status == speedup.status == CONTRADICTED
    assert lower.explanation is not None
    assert lower.explanation.startswith(
        f"rounded up: {_percent_lower_exact()!r} is 73.45 at 2 decimal(s)"
    )
    assert lower.explanation.endswith("claimed 73.46") or "claimed 73.46" in lower.explanation
    assert speedup.explanation is not None
    assert "rounded down" in speedup.explanation
    assert "is 3.77 at 2 decimal(s)" in speedup.explanation
    assert "claimed 3.76" in speedup.explanation


def test_a_clean_exit_claim_names_the_unclean_worker(
    tmp_path: Path, key: Ed25519PrivateKey
) -> None:
    spec = seed_like()
    files = build(spec)
    # candidate-1's worker npu3 exits after 45 s, over the candidate's 30 s TERM wait.
    exits = [
        e
        for e in files.tables["worker_exits"]
        if (e["server"], e["worker"]) == ("candidate-1", "npu3")
    ]
    assert len(exits) == 1
    exits[0]["exit_s"] = 45.0
    # The author still claims every one of the 4 x 8 = 32 exits clean.
    files.claim("exits-clean")["value"] = "32"
    r = replay(files, tmp_path, key)
    c = r.claims.by_id("exits-clean")
    assert (c.status, c.recomputed) == (CONTRADICTED, "31")
    assert "worker npu3 on server candidate-1 (arm candidate)" in (c.explanation or "")


def test_a_plan_naming_servers_no_receipt_uses_is_a_deviation(
    tmp_path: Path, key: Ed25519PrivateKey
) -> None:
    files = build(seed_like())
    # The receipts' servers run as baseline-1, candidate-1, candidate-2, baseline-2.
    files.plan["servers"] = ["baseline-1", "candidate-1", "candidate-2", "baseline-9"]
    r = replay(files, tmp_path, key)
    found = {(d.kind, d.where) for d in r.conformance.deviations}
    assert ("servers-named", "baseline-9") in found  # named, never ran
    assert ("servers-named", "baseline-2") in found  # ran, never named
    assert r.exit_code == 4


def test_a_plan_naming_the_servers_that_ran_conforms(
    tmp_path: Path, key: Ed25519PrivateKey
) -> None:
    files = build(seed_like())
    files.plan["servers"] = ["baseline-1", "candidate-1", "candidate-2", "baseline-2"]
    r = replay(files, tmp_path, key)
    assert r.conformance.deviations == ()
    assert r.exit_code == 0


def test_requests_measured_counts_the_measured_phase(
    tmp_path: Path, key: Ed25519PrivateKey
) -> None:
    files = build(seed_like())
    # 4 servers x 3 measured requests, by construction of seed_like().
    files.tables["claims"].append(
        {
            "claim_id": "measured",
            "statistic": "requests_measured",
            "params": {},
            "value": "12",
            "unit": "count",
        }
    )
    r = replay(files, tmp_path, key)
    assert r.claims.by_id("measured").status == CONFIRMED
