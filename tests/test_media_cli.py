"""``bundle replay --media``: the CLI wiring of media re-scoring on the committed media sample."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bundler.seal import seal_campaign
from reprobundle.cli.replay_cmd import replay_command
from tests.conftest import Keys

pytest.importorskip("av")

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "media-mini"


@pytest.fixture
def sealed(tmp_path: Path, keys: Keys) -> Path:
    out = tmp_path / "mm.bundle"
    seal_campaign(SAMPLE, out, keys=[keys.private], artifact_dirs=[SAMPLE / "media"])
    return out


def test_truncated_audio_in_both_arms_fails_through_the_cli(sealed: Path, keys: Keys) -> None:
    res = CliRunner().invoke(
        replay_command,
        [str(sealed), "--key", str(keys.public_path), "--media", str(SAMPLE / "media"), "--json"],
    )
    doc = json.loads(res.output)
    media = doc["media"]
    by_id = {c["comparison_id"]: c for c in media["comparisons"]}
    # cmp-03 carries the same 0.5 s of audio in both arms: equal shapes, coverage must FAIL.
    assert by_id["cmp-03"]["verdict"] == "FAIL"
    assert by_id["cmp-01"]["verdict"] != "FAIL"
    # No --scorer-weights: the LPIPS gate cannot be attested, and FAIL (4) outranks that (5).
    assert res.exit_code == 4


def test_scorer_weights_without_media_is_a_usage_error(
    sealed: Path, keys: Keys, tmp_path: Path
) -> None:
    res = CliRunner().invoke(
        replay_command,
        [str(sealed), "--key", str(keys.public_path), "--scorer-weights", str(tmp_path)],
    )
    assert res.exit_code == 2
    assert "--scorer-weights needs --media" in res.output
