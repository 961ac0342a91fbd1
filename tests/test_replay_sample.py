"""The seed sample replays to exactly the published figures.

Every expected literal comes from ``/work/shared/docs/product.md`` ("Published
figures of the seed campaign") or is derived from those literals by hand in a
comment; none is taken from replay's own output.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bundler.format.trust import Trust
from bundler.seal import seal_campaign
from replay.api import replay_bundle
from replay.engine.exact import Exact, round_half_even
from replay.report.text import render_text
from replay.result import ReplayResult
from replay.sections.claims import CONFIRMED
from reprobundle.cli.replay_cmd import replay_command

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "h3-ref2va-5s"

pytestmark = pytest.mark.skipif(
    not (SAMPLE / "campaign.json").exists(), reason="sample campaign not present"
)


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Ed25519PrivateKey]:
    """The sample sealed once for the module, with its public key on disk."""
    from cryptography.hazmat.primitives import serialization

    key = Ed25519PrivateKey.generate()
    d = tmp_path_factory.mktemp("sample")
    out = d / "h3-ref2va-5s.bundle"
    seal_campaign(SAMPLE, out, keys=[key])
    pub = d / "author.pub"
    pub.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return out, pub, key


@pytest.fixture(scope="module")
def result(sealed: tuple[Path, Path, Ed25519PrivateKey]) -> ReplayResult:
    bundle, _, key = sealed
    return replay_bundle(bundle, trust=Trust.keys([key.public_key()]))


def cents(value: Exact | None) -> Decimal:
    assert value is not None
    return round_half_even(value, 2)


def test_server_and_arm_means_are_the_published_ones(result: ReplayResult) -> None:
    # product.md: server means 396.30 and 418.24 s (baseline), 106.66 and 109.58 s (candidate).
    means = {s.server: cents(s.mean_s) for s in result.latency.servers()}
    assert means == {
        "baseline-1": Decimal("396.30"),
        "baseline-2": Decimal("418.24"),
        "candidate-1": Decimal("106.66"),
        "candidate-2": Decimal("109.58"),
    }
    # product.md: arm means 407.27 and 108.12 s.
    base, cand = result.latency.arm("baseline"), result.latency.arm("candidate")
    assert base is not None
    assert cand is not None
    assert cents(base.mean_s) == Decimal("407.27")
    assert cents(cand.mean_s) == Decimal("108.12")


def test_percent_lower_and_speedup_are_the_published_ones(result: ReplayResult) -> None:
    pair = result.latency.pair("baseline", "candidate")
    assert pair is not None
    assert cents(pair.percent_lower) == Decimal("73.45")  # product.md: 73.45 % lower
    assert cents(pair.speedup) == Decimal("3.77")  # product.md: 3.77x speedup


def test_sd_is_across_server_means_and_labelled_apart(result: ReplayResult) -> None:
    base = result.latency.arm("baseline")
    assert base is not None
    assert len(base.servers) == 2  # product.md: sample SD across server means (n = 2)
    # By hand: |418.24 - 396.30| / sqrt(2) = 21.94 / 1.41421... = 15.5139... -> 15.51.
    assert cents(base.sd_server_means_s) == Decimal("15.51")
    # ... "not across the six measured requests": that SD is reported too, but apart.
    assert base.n_requests == 6
    assert cents(base.sd_requests_s) != Decimal("15.51")
    text = render_text(result, verbose=True)
    assert "SD across server means" in text
    assert "SD across requests" in text


def test_counts_hbm_and_gate_margins_are_the_published_ones(result: ReplayResult) -> None:
    # product.md: 26 requests, 14 quality comparisons, 32 worker exits, all passing.
    acc = next(a for a in result.attempts.attempts if a.attempt_id == "final-2")
    assert acc.receipts == 26
    assert result.quality.comparisons_total == 14
    assert result.quality.comparisons_passed == 14
    assert (result.lifecycle.total, result.lifecycle.clean) == (32, 32)
    # product.md: mean sampled peak HBM +3.10 %.
    (hbm,) = result.telemetry.pairs
    assert cents(hbm.change_pct) == Decimal("3.10")
    # product.md: closest audio spectral cosine 0.813411 (gate 0.80), SSIM 0.976 (gate 0.97),
    # largest LPIPS 0.026 (gate 0.20).
    audio = result.quality.metric("audio_spectral_cosine")
    ssim = result.quality.metric("ssim")
    lpips = result.quality.metric("lpips")
    assert audio is not None
    assert ssim is not None
    assert lpips is not None
    assert audio.closest is not None
    assert ssim.closest is not None
    assert audio.closest.value == 0.813411
    assert audio.closest.close  # flagged: within the gate's warn distance
    assert round_half_even(audio.closest.margin, 6) == Decimal("0.013411")  # 0.813411 - 0.80
    assert ssim.closest.value == 0.976
    assert float(lpips.max_value) == 0.026


def test_every_claim_is_confirmed_and_nothing_else_is_claimed(result: ReplayResult) -> None:
    assert result.exit_code == 0
    assert result.claims.checks
    assert {c.status for c in result.claims.checks} == {CONFIRMED}
    claimed = {c.claimed for c in result.claims.checks}
    # The seed's headline figures are among the claims, as published.
    assert {"407.27", "108.12", "73.45", "3.77", "26", "14", "32", "3.10", "0.813411"} <= claimed
    # product.md: no p95/p99, throughput, CUDA or 15-second result is claimed.
    not_claimed = " ".join(n.what for n in result.claims.not_claimed)
    for what in ("p95/p99", "throughput", "CUDA", "15-second"):
        assert what in not_claimed


def test_other_attempts_are_listed_and_kept_out(result: ReplayResult) -> None:
    # product.md: rejected audio ownership, failed RPC attempts and the interrupted first
    # final campaign are retained without mixing their samples into the accepted result.
    others = [a for a in result.attempts.attempts if a.attempt_id != "final-2"]
    assert {a.status for a in others} == {"rejected", "interrupted"}
    assert all(a.reason for a in others)
    assert all(a.receipts > 0 for a in others)
    assert all(a.entered_accepted == 0 for a in others)
    assert result.attempts.isolated


def test_cli_replays_the_sample_with_headline_first(
    sealed: tuple[Path, Path, Ed25519PrivateKey], tmp_path: Path
) -> None:
    bundle, pub, _ = sealed
    md = tmp_path / "report.md"
    run = CliRunner().invoke(
        replay_command, [str(bundle), "--key", str(pub), "--markdown", str(md)]
    )
    assert run.exit_code == 0, run.output
    lines = run.output.splitlines()
    assert lines[1].strip().startswith("CONFIRMED (exit 0)")
    assert "407.27 s" in run.output.split("\n\n")[0]
    assert "73.45 % lower" in run.output.split("\n\n")[0]
    assert md.read_text(encoding="utf-8").startswith("# Replay report: MiniMax-H3 Ref2VA")
    js = CliRunner().invoke(replay_command, [str(bundle), "--key", str(pub), "--json"])
    doc = json.loads(js.stdout)
    assert doc["exit_code"] == 0
    assert doc["claims"]["counts"]["contradicted"] == 0
