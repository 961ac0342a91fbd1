"""``bundle replay``'s terminal text: verdict first, a one-screen summary, tables with -v.

Expected figures come from the factory's spec (tests/replay_factory.py), by hand.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bundler.format.trust import Trust
from replay.api import replay_bundle
from replay.report.html.render import render_bundle
from replay.report.text import render_text
from replay.result import ReplayResult
from tests.conftest import Keys
from tests.replay_factory import build, seed_like


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> ReplayResult:
    from tests.conftest import make_keys

    tmp = tmp_path_factory.mktemp("text")
    keys = make_keys(tmp)
    bundle = build(seed_like()).seal(tmp, keys.private)
    return replay_bundle(bundle, trust=Trust.keys([keys.public]))


def test_default_output_is_the_verdict_then_a_summary(seeded: ReplayResult) -> None:
    lines = render_text(seeded).splitlines()
    assert lines[0] == "REPLAY"
    assert lines[1].strip() == (
        "CONFIRMED (exit 0) — re-derived from the author's receipts; media not re-scored; "
        "hardware not re-run"
    )
    assert len(lines) <= 24  # one screen
    assert "SECTIONS" in lines
    # seed_like: 4 servers x 8 workers, all clean; 14 comparisons, all passing.
    assert any(re.fullmatch(r"  lifecycle +32/32 worker exits clean", x) for x in lines)
    assert any(x.startswith("  quality ") and "14/14 comparisons pass" in x for x in lines)
    assert "-v" in lines[-1]
    assert "CLAIMS" not in lines and not any(x.startswith("  limit:") for x in lines)


def test_verbose_output_lists_every_table_with_units_as_units(seeded: ReplayResult) -> None:
    text = render_text(seeded, verbose=True)
    lines = text.splitlines()
    assert lines[1].startswith("  CONFIRMED (exit 0) — ")
    assert "CLAIMS" in lines and "LATENCY" in lines and "  limit: " in text
    claims = lines[
        lines.index("CLAIMS") + 3 : lines.index("CLAIMS") + 3 + len(seeded.claims.checks)
    ]
    assert len(claims) == len(seeded.claims.checks)
    for row in claims:
        # Columns: status, claim, statistic, claimed (2+ spaces separate columns).
        claimed = re.split(r"\s{2,}", row.strip())[3]
        assert not claimed.endswith((" 1", " count")), row
    by_stat = {re.split(r"\s{2,}", r.strip())[2]: re.split(r"\s{2,}", r.strip())[3] for r in claims}
    # The factory states every count claim: 26 requests (4 x (2 + 3) + 6 quality).
    assert by_stat["requests_passed"] == "26 requests"
    assert by_stat["worker_exits_clean"] == "32 worker exits"
    # baseline-1 measured 396.10, 396.30, 396.50 s: min and max at the means' 2 decimals.
    row = next(x for x in lines if x.split()[:2] == ["baseline", "baseline-1"])
    assert row.split()[3:] == ["396.30", "0.20", "396.10", "396.50"]


def test_a_one_server_arm_is_not_written_as_an_average(tmp_path: Path, keys: Keys) -> None:
    spec = seed_like()
    spec.servers = [s for s in spec.servers if s.name in ("baseline-1", "candidate-1")]
    bundle = build(spec).seal(tmp_path, keys.private)
    md = render_bundle(bundle, "md", trust=Trust.keys([keys.public])).text
    assert ") / 1 =" not in md
    assert "Arm mean of baseline: its one server's mean = **396.30 s**" in md
    assert "Arm mean of candidate: its one server's mean = **106.66 s**" in md


def test_default_output_names_every_contradicted_claim(tmp_path: Path, keys: Keys) -> None:
    """Issue 24: which claim failed, claimed and recomputed, without -v."""
    files = build(seed_like())
    # 4 servers x (2 warmups + 3 measured) + 6 quality requests = 26, by the factory's spec.
    files.claim("requests")["value"] = "27"
    files.claim("requests-ok")["value"] = "25"
    r = replay_bundle(files.seal(tmp_path, keys.private), trust=Trust.keys([keys.public]))
    lines = render_text(r).splitlines()
    assert "CONTRADICTED CLAIMS" in lines
    named = [x for x in lines if x.startswith("  ✗ claim ")]
    assert len(named) == 2
    assert any(x.startswith("  ✗ claim requests (requests_total): claimed 27") for x in named)
    assert any(x.startswith("  ✗ claim requests-ok (requests_passed): claimed 25") for x in named)
    assert all("recomputed 26" in x for x in named)


def test_unscored_comparisons_are_counted_so_the_quality_line_adds_up(
    tmp_path: Path, keys: Keys
) -> None:
    # A rerun records its comparisons before anyone scores the media: no gated metric.
    # "0/14 pass, 0 fail, 0 unattested" left 14 unaccounted for.
    spec = seed_like()
    spec.comparisons = [{} for _ in spec.comparisons]
    bundle = build(spec).seal(tmp_path, keys.private)
    lines = render_text(replay_bundle(bundle, trust=Trust.keys([keys.public]))).splitlines()
    quality = next(x for x in lines if x.startswith("  quality "))
    assert "0/14 comparisons pass, 0 fail, 0 unattested, 14 not scored" in quality, quality
