"""``bundle replay RERUN --against SEALED``: the side-by-side verdict and its exit code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from bundler.seal import seal_campaign
from reprobundle.cli.replay_cmd import replay_command
from tests.campaign_builder import SERVER_VALUES, mark_rerun_of, receipts, write_campaign
from tests.conftest import Keys


def _rerun_receipts(candidate_scale: float) -> list[dict[str, Any]]:
    rows = receipts()
    for r in rows:
        if SERVER_VALUES[r["server"]][0] == "candidate":
            r["e2e_s"] = r["e2e_s"] * candidate_scale
    return rows


def _pair(tmp_path: Path, keys: Keys, candidate_scale: float, lower: str) -> tuple[Path, Path]:
    sealed = tmp_path / "sealed.bundle"
    seal_campaign(write_campaign(tmp_path / "orig"), sealed, keys=[keys.private])
    claim = {
        "claim_id": "lower",
        "statistic": "percent_lower",
        "params": {"baseline": "baseline", "candidate": "candidate"},
        "value": lower,
        "unit": "%",
        "decimals": 2,
    }
    camp = write_campaign(
        tmp_path / "rerun",
        **{"receipts.jsonl": _rerun_receipts(candidate_scale), "claims.json": [claim]},
    )
    doc = mark_rerun_of(json.loads((camp / "campaign.json").read_text()), sealed)
    (camp / "campaign.json").write_text(json.dumps(doc))
    rerun = tmp_path / "rerun.bundle"
    seal_campaign(camp, rerun, keys=[keys.private])
    return rerun, sealed


def test_same_effect_reproduces(tmp_path: Path, keys: Keys) -> None:
    rerun, sealed = _pair(tmp_path, keys, 1.0, "60.00")
    res = CliRunner().invoke(
        replay_command,
        [str(rerun), "--against", str(sealed), "--key", str(keys.public_path), "--json"],
    )
    doc = json.loads(res.output)
    assert doc["against"]["reproduced"] is True
    # The rerun's own claim (60.00 % lower, by hand: 1 - 42/105) still holds: exit 0.
    assert res.exit_code == 0


def test_slower_candidate_does_not_reproduce(tmp_path: Path, keys: Keys) -> None:
    # Candidate 1.5x slower: speedup 105/63 = 1.667x against the sealed 105/42 = 2.5x,
    # a 33 % shortfall, far outside the 10 % tolerance. The rerun's own claim is honest
    # (1 - 63/105 = 40.00 % lower), so the exit code comes from the comparison alone.
    rerun, sealed = _pair(tmp_path, keys, 1.5, "40.00")
    res = CliRunner().invoke(
        replay_command,
        [str(rerun), "--against", str(sealed), "--key", str(keys.public_path)],
    )
    assert "  rerun " in res.output and "effect not reproduced" in res.output  # summary
    assert res.exit_code == 4
    res = CliRunner().invoke(
        replay_command,
        [str(rerun), "--against", str(sealed), "--key", str(keys.public_path), "-v"],
    )
    assert "RERUN VS SEALED" in res.output
    assert "not reproduced" in res.output
    assert res.exit_code == 4


def test_rerun_without_claims_is_judged_by_the_comparison(tmp_path: Path, keys: Keys) -> None:
    # A rerun bundle states no claims of its own (bundle rerun writes none): alone it is
    # NOT EVIDENCED (exit 5); compared with the sealed bundle and reproduced, the
    # comparison is the evidence and the one verdict is CONFIRMED (exit 0).
    _, sealed = _pair(tmp_path, keys, 1.0, "60.00")
    camp = tmp_path / "rerun"
    (camp / "claims.json").write_text("[]")
    bare = tmp_path / "bare.bundle"
    seal_campaign(camp, bare, keys=[keys.private])
    key = ["--key", str(keys.public_path), "--json"]
    alone = CliRunner().invoke(replay_command, [str(bare), *key])
    assert json.loads(alone.output)["outcome"] == "NOT EVIDENCED"
    assert alone.exit_code == 5
    both = CliRunner().invoke(replay_command, [str(bare), "--against", str(sealed), *key])
    doc = json.loads(both.output)
    assert doc["against"]["reproduced"] is True
    assert (doc["outcome"], doc["exit_code"], both.exit_code) == ("CONFIRMED", 0, 0)
    # Slower candidate: the same rerun-without-claims is contradicted by the comparison.
    (camp / "receipts.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in _rerun_receipts(1.5))
    )
    slow = tmp_path / "slow.bundle"
    seal_campaign(camp, slow, keys=[keys.private])
    res = CliRunner().invoke(replay_command, [str(slow), "--against", str(sealed), *key])
    assert (json.loads(res.output)["outcome"], res.exit_code) == ("CONTRADICTED", 4)


# --- issue 19, defect 6: --against accepts only a rerun of the sealed bundle ------------------


def _refused(res: Any, field: str | None, where: str) -> None:
    """Exit 2, the problem located, and no word of a hardware rerun."""
    assert res.exit_code == 2, res.output
    doc = json.loads(res.stdout)
    assert doc["ok"] is False and doc["exit_code"] == 2
    (problem,) = doc["problems"]
    assert (problem["field"], problem["where"]) == (field, where), problem
    assert "reproduced" not in res.output and "re-run on hardware" not in res.output


def test_same_bundle_twice_is_refused(tmp_path: Path, keys: Keys) -> None:
    _, sealed = _pair(tmp_path, keys, 1.0, "60.00")
    key = ["--key", str(keys.public_path), "--json"]
    res = CliRunner().invoke(replay_command, [str(sealed), "--against", str(sealed), *key])
    _refused(res, None, str(sealed))
    # The same bytes under another name are the same bundle too.
    copy = tmp_path / "copy.bundle"
    copy.write_bytes(sealed.read_bytes())
    res = CliRunner().invoke(replay_command, [str(copy), "--against", str(sealed), *key])
    _refused(res, None, str(sealed))


def test_a_bundle_that_is_not_a_rerun_is_refused(tmp_path: Path, keys: Keys) -> None:
    _, sealed = _pair(tmp_path, keys, 1.0, "60.00")
    other = tmp_path / "other.bundle"  # kind "campaign": another sealed campaign, not a rerun
    seal_campaign(
        write_campaign(tmp_path / "o", **{"receipts.jsonl": _rerun_receipts(0.9)}),
        other,
        keys=[keys.private],
    )
    key = ["--key", str(keys.public_path), "--json"]
    res = CliRunner().invoke(replay_command, [str(other), "--against", str(sealed), *key])
    _refused(res, "kind", f"{other}: campaign.json")


def test_a_rerun_of_another_bundle_is_refused(tmp_path: Path, keys: Keys) -> None:
    rerun, sealed = _pair(tmp_path, keys, 1.0, "60.00")
    # A second, different sealed bundle: the rerun names the first one's SHA-256.
    sealed2 = tmp_path / "sealed2.bundle"
    seal_campaign(
        write_campaign(tmp_path / "orig2", **{"claims.json": []}), sealed2, keys=[keys.private]
    )
    key = ["--key", str(keys.public_path), "--json"]
    res = CliRunner().invoke(replay_command, [str(rerun), "--against", str(sealed2), *key])
    _refused(res, "rerun_of.bundle_sha256", f"{rerun}: campaign.json")
    # A rerun campaign that names no sealed bundle at all.
    camp = write_campaign(tmp_path / "bare-rerun", **{"receipts.jsonl": _rerun_receipts(1.0)})
    doc = json.loads((camp / "campaign.json").read_text())
    doc["kind"] = "rerun"
    (camp / "campaign.json").write_text(json.dumps(doc))
    bare = tmp_path / "bare-rerun.bundle"
    seal_campaign(camp, bare, keys=[keys.private])
    res = CliRunner().invoke(replay_command, [str(bare), "--against", str(sealed), *key])
    _refused(res, "rerun_of.bundle_sha256", f"{bare}: campaign.json")


def test_report_against_goes_through_the_same_check(tmp_path: Path, keys: Keys) -> None:
    from reprobundle.cli.report_cmd import report_command

    _, sealed = _pair(tmp_path, keys, 1.0, "60.00")
    out = tmp_path / "r.md"
    res = CliRunner().invoke(
        report_command,
        [
            str(sealed),
            "-o",
            str(out),
            "--format",
            "md",
            "--against",
            str(sealed),
            "--key",
            str(keys.public_path),
            "--json",
        ],
    )
    _refused(res, None, str(sealed))
    assert not out.exists()
