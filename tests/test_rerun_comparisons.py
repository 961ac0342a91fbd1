"""A rerun's re-paired comparisons: how they are paired, and that unscored ones never pass.

The rerun writes the sealed campaign's comparisons onto its own clips with no
metric values (``rerun/writer.py``, ``pair_comparisons``). The
statistical replay (``replay/sections/quality.py``) must then count them as neither
passing nor failing; media replay scores them (``tests/test_rerun_e2e.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bundler.format.trust import Trust
from replay.api import replay_bundle
from replay.sections.claims import CONFIRMED
from rerun.writer import SealedSource, pair_comparisons
from tests.replay_factory import build, seed_like

A = "a" * 64
B = "b" * 64


def _source(comparisons: list[dict[str, Any]]) -> SealedSource:
    return SealedSource(
        "0" * 64,
        {"id": "c"},
        "plans/p.json",
        b"{}",
        comparisons=comparisons,
        requests={
            "s-b1-01": ("baseline-1", 1, "measured"),
            "s-c1-01": ("candidate-1", 1, "measured"),
            "s-b1-00": ("baseline-1", 0, "warmup"),
            "s-c1-00": ("candidate-1", 0, "warmup"),
            "s-c2-01": ("candidate-2", 1, "measured"),
            "s-c1-02": ("candidate-1", 2, "measured"),
        },
    )


def test_pairing_follows_server_and_seq_and_skips_what_has_no_rerun_clip() -> None:
    def cmp(cid: str, base: str, cand: str) -> dict[str, Any]:
        return {"comparison_id": cid, "baseline_request_id": base, "candidate_request_id": cand}

    source = _source(
        [
            cmp("s-cmp-1", "s-b1-01", "s-c1-01"),  # pairs with r-b1-01 / r-c1-01
            cmp("s-cmp-2", "s-b1-00", "s-c1-00"),  # warmups pair too: same server and seq
            cmp("s-cmp-3", "s-b1-01", "s-c2-01"),  # candidate-2 never ran in the rerun
            cmp("s-cmp-4", "s-b1-01", "s-gone"),  # not in the sealed receipts
            cmp("s-cmp-5", "s-b1-01", "s-c1-02"),  # the rerun's request timed out: no clip
        ]
    )

    def receipt(rid: str, phase: str, sha: str | None) -> dict[str, Any]:
        return {"request_id": rid, "phase": phase, "output_sha256": sha}

    rerun = {
        ("baseline-1", 0): receipt("r-b1-00", "warmup", A),
        ("baseline-1", 1): receipt("r-b1-01", "measured", A),
        ("candidate-1", 0): receipt("r-c1-00", "warmup", B),
        ("candidate-1", 1): receipt("r-c1-01", "measured", B),
        ("candidate-1", 2): receipt("r-c1-02", "measured", None),
    }
    rows, skipped = pair_comparisons(source, "rerun-2", rerun)
    assert rows == [
        {
            "comparison_id": "rerun-2-cmp-001",
            "attempt_id": "rerun-2",
            "baseline_request_id": "r-b1-01",
            "candidate_request_id": "r-c1-01",
            "baseline_sha256": A,
            "candidate_sha256": B,
            "metrics": {},
            "sealed_comparison_id": "s-cmp-1",
        },
        {
            "comparison_id": "rerun-2-cmp-002",
            "attempt_id": "rerun-2",
            "baseline_request_id": "r-b1-00",
            "candidate_request_id": "r-c1-00",
            "baseline_sha256": A,
            "candidate_sha256": B,
            "metrics": {},
            "sealed_comparison_id": "s-cmp-2",
        },
    ]
    assert skipped == [
        "s-cmp-3: the rerun made no request candidate-2 #1",
        "s-cmp-4: candidate request s-gone is not in the sealed receipts",
        "s-cmp-5: the rerun's r-c1-02 has no clip",
    ]


def test_a_comparison_recording_no_metric_is_not_a_pass(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    spec = seed_like()
    # Three comparisons recording nothing, beside the seed's 14 that pass every gate
    # (the seed publishes 14 of 14 passing).
    spec.comparisons += [{}, {}, {}]
    files = build(spec)
    files.claim("cmp-ok")["value"] = "14"
    r = replay_bundle(files.seal(tmp_path, key), trust=Trust.keys([key.public_key()]))
    q = r.quality
    assert (q.comparisons_total, q.comparisons_passed, q.comparisons_failed) == (17, 14, 0)
    assert (q.comparisons_passed_if_attested, q.ungated_comparisons) == (14, 3)
    assert r.claims.by_id("cmp-ok").status == CONFIRMED
    assert any("3 comparison(s) record no value for any gated metric" in x for x in q.limits)
    # Unrecorded is not a failure either: nothing else in this campaign is wrong.
    assert r.exit_code == 0
