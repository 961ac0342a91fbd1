"""Media replay of sealed bundles: identity, coverage, re-evaluated gates, disagreements.

The sample ``samples/media-mini`` records metrics computed by its generator
with independent methods (FFmpeg's filters, scipy's STFT, a bare lpips). The
expected verdicts below follow from the sample's design (README): cmp-01
passes, cmp-02's candidate audio is truncated, cmp-03 carries the same
truncated audio in both arms (equal shapes, every recorded gate passing).
These tests run without torch: no ``--scorer-weights``, so LPIPS is
``unattested``.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("av")

from bundler.format.trust import Trust
from bundler.seal import seal_campaign
from bundler.verified import VerifiedBundle, open_verified
from replay.engine.verdicts import MediaVerdict, Outcome, decide
from replay.media import (
    DeviceError,
    MediaProgress,
    MediaReplayResult,
    format_report,
    rescore_bundle,
)
from tests.conftest import make_keys


def outcome(r: MediaReplayResult) -> Outcome:
    """The media section's outcome alone, by the one precedence of the replay's result."""
    return decide(r.integrity_failures(), r.failures(), r.gaps())


ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "media-mini"
SEED = ROOT / "samples" / "h3-ref2va-5s"


def seal(campaign: Path, out_dir: Path) -> VerifiedBundle:
    keys = make_keys(out_dir, "author")
    out = out_dir / f"{campaign.name}.bundle"
    seal_campaign(campaign, out, keys=[keys.private])
    bundle = open_verified(out, trust=Trust.keys([keys.public]))
    assert bundle.trusted
    return bundle


@pytest.fixture(scope="module")
def sample_bundle(tmp_path_factory: pytest.TempPathFactory) -> VerifiedBundle:
    return seal(SAMPLE, tmp_path_factory.mktemp("mini"))


@pytest.fixture(scope="module")
def replayed(sample_bundle: VerifiedBundle) -> MediaReplayResult:
    return rescore_bundle(sample_bundle, [SAMPLE / "media"])


def cmp(result: MediaReplayResult, cid: str) -> Any:
    return next(c for c in result.comparisons if c.comparison_id == cid)


def gate(c: Any, gate_id: str) -> Any:
    return next(g for g in c.gates if g.gate_id == gate_id)


def test_without_weights_lpips_is_unattested_and_the_rest_runs(replayed: MediaReplayResult) -> None:
    assert replayed.scorer is not None
    assert replayed.scorer.status == "unattested"
    assert replayed.scorer.reason == "no directory of scorer weight files was given"
    lp = next(g for g in replayed.gates if g.gate_id == "lpips-max")
    assert lp.recorded_verdict == "pass"  # scorer.json is in the bundle
    assert lp.recomputed_verdict == "unattested"
    for c in replayed.comparisons:
        assert gate(c, "lpips-max").recomputed_verdict == "unattested"
        # Everything else was recomputed.
        assert gate(c, "ssim-min").recomputed_verdict in ("pass", "fail")
        assert c.frames_compared == 48


def test_full_comparison_passes_with_recorded_values_confirmed(replayed: MediaReplayResult) -> None:
    c = cmp(replayed, "cmp-01")
    assert c.coverage_ok
    assert {m.metric: m.status for m in c.metrics} == {
        "audio_rms_ratio": "agree",
        "audio_sample_rate": "agree",
        "audio_samples": "agree",
        "audio_spectral_cosine": "agree",
        "frame_count": "agree",
        "lpips": "unattested",
        "psnr": "agree",
        "ssim": "agree",
    }
    verdicts = {g.gate_id: g.recomputed_verdict for g in c.gates}
    assert verdicts == {
        "lpips-max": "unattested",
        "ssim-min": "pass",
        "audio-cosine-min": "pass",
        "audio-rms-ratio-min": "pass",
        "audio-rms-ratio-max": "pass",
        "audio-sample-rate": "pass",
        "frame-count": "pass",
    }
    assert c.verdict == "INCOMPLETE"  # only because LPIPS is unattested


def test_both_arms_equally_truncated_fail_coverage_although_every_gate_passes(
    replayed: MediaReplayResult,
) -> None:
    c = cmp(replayed, "cmp-03")
    # Equal shapes, a near-perfect cosine: every recorded and recomputed gate passes...
    assert all(g.recorded_verdict == "pass" for g in c.gates)
    assert all(g.recomputed_verdict == "pass" for g in c.gates if g.gate_id != "lpips-max")
    b = c.baseline.probe.audio
    k = c.candidate.probe.audio
    assert b.samples == k.samples == 16 * 1024
    # ...and the coverage checks catch it on each arm: 16,384 samples, not >= 2 s × 32 kHz.
    failed = {(x.check, x.arm) for x in c.coverage if x.status == "FAIL"}
    assert failed == {
        ("audio/samples-cover-duration", "baseline"),
        ("audio/samples-cover-duration", "candidate"),
        ("av/end-agree", "baseline"),
        ("av/end-agree", "candidate"),
    }
    assert c.verdict == "FAIL"
    assert MediaVerdict.of(outcome(replayed)) == "FAIL"
    assert outcome(replayed).exit_code == 4
    kinds = {(d.comparison_id, d.kind) for d in replayed.disagreements}
    assert ("cmp-03", "coverage") in kinds


def test_truncated_candidate_fails_the_audio_gates_and_coverage(
    replayed: MediaReplayResult,
) -> None:
    c = cmp(replayed, "cmp-02")
    assert gate(c, "audio-cosine-min").recomputed_verdict == "fail"
    assert gate(c, "audio-cosine-min").recorded_verdict == "fail"
    failed = {(x.check, x.arm) for x in c.coverage if x.status == "FAIL"}
    assert failed == {
        ("audio/samples-cover-duration", "candidate"),
        ("av/end-agree", "candidate"),
    }


def test_report_shows_gates_and_disagreements_side_by_side(replayed: MediaReplayResult) -> None:
    text = format_report(replayed)
    assert text.startswith("media replay: FAIL")
    assert "disagreements (recorded | replayed):" in text
    assert "audio/samples-cover-duration [baseline]" in text
    doc = replayed.to_dict()
    json.dumps(doc)  # JSON-ready
    assert outcome(replayed).exit_code == 4
    assert doc["definitions"]["ssim/ffmpeg-y-frame-mean"].startswith("FFmpeg vf_ssim")
    assert doc["coverage_params"]["sources"]["av_sync_tolerance_s"] == "plan"


def test_hash_mismatch_is_reported_and_the_other_comparisons_still_run(
    sample_bundle: VerifiedBundle, tmp_path: Path
) -> None:
    media = tmp_path / "media"
    shutil.copytree(SAMPLE / "media", media)
    target = media / "candidate-00.mp4"
    data = bytearray(target.read_bytes())
    data[1000] ^= 0xFF
    target.write_bytes(bytes(data))
    r = rescore_bundle(sample_bundle, [media])
    c1 = cmp(r, "cmp-01")
    assert c1.candidate.location is not None
    assert c1.candidate.location.status == "mismatch"
    assert any("candidate media mismatch" in p for p in c1.problems)
    assert {g.recomputed_verdict for g in c1.gates if g.gate_id != "lpips-max"} == {"not-computed"}
    assert cmp(r, "cmp-03").frames_compared == 48
    assert MediaVerdict.of(outcome(r)) == "MISMATCH"
    assert outcome(r).exit_code == 1
    assert any(d.kind == "identity" and d.comparison_id == "cmp-01" for d in r.disagreements)


def test_media_under_other_names_are_found(sample_bundle: VerifiedBundle, tmp_path: Path) -> None:
    for i, p in enumerate(sorted((SAMPLE / "media").glob("*.mp4"))):
        shutil.copy(p, tmp_path / f"clip{i}.mp4")
    r = rescore_bundle(sample_bundle, [tmp_path])
    assert all(c.frames_compared == 48 for c in r.comparisons)
    assert all(c.candidate.location and c.candidate.location.status == "ok" for c in r.comparisons)


def test_absent_media_are_reported_never_skipped(
    sample_bundle: VerifiedBundle, tmp_path: Path
) -> None:
    r = rescore_bundle(sample_bundle, [tmp_path])
    assert MediaVerdict.of(outcome(r)) == "INCOMPLETE"
    assert outcome(r).exit_code == 5
    for c in r.comparisons:
        assert c.baseline.location is not None and c.baseline.location.status == "absent"
        assert any("baseline media absent" in p for p in c.problems)
        assert all(g.recomputed_verdict in ("not-computed", "unattested") for g in c.gates)


def test_a_wrong_recorded_value_is_a_disagreement(tmp_path: Path) -> None:
    camp = tmp_path / "camp"
    shutil.copytree(SAMPLE, camp)
    lines = (camp / "comparisons.jsonl").read_text().splitlines()
    row = json.loads(lines[0])
    assert row["comparison_id"] == "cmp-01"
    row["metrics"]["ssim"] = 0.95  # recorded below the 0.97 gate; the media say ~0.984
    lines[0] = json.dumps(row)
    (camp / "comparisons.jsonl").write_text("\n".join(lines) + "\n")
    r = rescore_bundle(seal(camp, tmp_path), [camp / "media"])
    c = cmp(r, "cmp-01")
    m = next(x for x in c.metrics if x.metric == "ssim")
    assert m.status == "disagree"
    assert m.recorded == 0.95
    g = gate(c, "ssim-min")
    assert (g.recorded_verdict, g.recomputed_verdict) == ("fail", "pass")
    rows = [d for d in r.disagreements if d.comparison_id == "cmp-01"]
    # Not reproduced, but the re-derived value passes its gate: a distinct kind.
    assert {d.kind for d in rows} == {"not-reproduced-but-passes", "gate"}
    text = format_report(r)
    # Side by side: recorded 0.95, replayed 0.984….
    assert re.search(
        r"cmp-01\s+not-reproduced-but-passes\s+ssim \(ssim/ffmpeg-y-frame-mean\)\s+0\.95\s+0\.984",
        text,
    )


def test_jobs_and_progress(sample_bundle: VerifiedBundle, replayed: MediaReplayResult) -> None:
    events: list[MediaProgress] = []
    r = rescore_bundle(sample_bundle, [SAMPLE / "media"], jobs=2, progress=events.append)

    def same(c: Any) -> dict[str, Any]:
        d: dict[str, Any] = c.to_dict(per_frame=True)
        d.pop("seconds")
        return d

    # Two comparisons at a time (one decoder thread each) give identical results.
    assert [same(c) for c in r.comparisons] == [same(c) for c in replayed.comparisons]
    stages = [e.stage for e in events]
    assert stages.count("comparison-start") == 3
    assert stages.count("comparison-done") == 3
    assert stages.count("frame") == 3 * 48
    assert events[-1].comparisons_done == 3
    assert all(e.comparisons_total == 3 for e in events)
    assert {e.frames_total for e in events if e.stage == "frame"} == {48}


def test_seed_bundle_without_media_reports_every_comparison(tmp_path: Path) -> None:
    r = rescore_bundle(seal(SEED, tmp_path), [tmp_path])
    assert len(r.comparisons) == 14
    for c in r.comparisons:
        assert c.baseline.location is not None and c.baseline.location.status == "absent"
    # The seed names its RMS definition with a longer id: an alias of audio/rms-ratio.
    assert not any("rms-ratio" in p for p in r.problems)
    assert r.coverage_params.expected_seconds_from == "num_frames/fps"
    assert r.scorer is not None and r.scorer.status == "unattested"


def test_a_subset_of_comparisons(sample_bundle: VerifiedBundle) -> None:
    r = rescore_bundle(sample_bundle, [SAMPLE / "media"], comparison_ids=["cmp-03", "cmp-99"])
    assert [c.comparison_id for c in r.comparisons] == ["cmp-03"]
    assert "no comparison 'cmp-99' in the bundle" in r.problems
    counts = next(g for g in r.gates if g.gate_id == "ssim-min").counts
    assert counts == {"pass": 1}


def test_a_malformed_device_is_refused_before_any_media_work(sample_bundle: VerifiedBundle) -> None:
    with pytest.raises(DeviceError, match="expected cpu"):
        rescore_bundle(sample_bundle, [SAMPLE / "media"], device="gpu0")
