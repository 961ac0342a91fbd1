"""``bundle replay``: integrity first, trust labelling, exit codes, outputs, attempts, rounding.

Campaigns come from ``tests/replay_factory.py``; expected values are derived
by hand in comments (the factory's seed-like campaign has server means 396.30,
418.24, 106.66 and 109.58 s by construction: three values symmetric about each).
"""

from __future__ import annotations

import io
import json
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import jsonschema
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bundler._internal.schemas import load_schema
from bundler.errors import IntegrityError
from bundler.format.container import read_container, write_container
from bundler.format.trust import Trust
from replay.api import replay_bundle
from replay.engine.exact import Root, group_sums, round_half_even
from replay.report.json_view import result_to_dict
from replay.result import SECTIONS, UNTRUSTED_NOTE
from replay.sections.claims import CONFIRMED, CONTRADICTED, UNVERIFIABLE
from reprobundle.cli.replay_cmd import replay_command
from tests.conftest import Keys
from tests.replay_factory import Server, build, seed_like


@pytest.fixture
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def repack(src: Path, dst: Path, member: str, data: bytes) -> Path:
    """Copy ``src`` to ``dst`` with ``member`` replaced; manifest and signature unchanged."""
    members = read_container(src)
    with dst.open("wb") as fh:
        write_container(fh, [(m.name, data if m.name == member else m.data) for m in members])
    return dst


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(replay_command, list(args))
    return res.exit_code, res.stdout


# --- integrity first ------------------------------------------------------------------


def test_tampered_number_is_refused_before_any_statistic(
    tmp_path: Path, key: Ed25519PrivateKey, keys: Keys
) -> None:
    bundle = build(seed_like()).seal(tmp_path, keys.private)
    member = next(m for m in read_container(bundle) if m.name == "tables/receipts.parquet")
    table = pq.read_table(io.BytesIO(member.data))
    e2e = table.column("e2e_s").to_pylist()
    e2e[5] = 300.0  # a faster baseline request
    i = table.schema.get_field_index("e2e_s")
    table = table.set_column(i, table.schema.field(i), pa.array(e2e, pa.float64()))
    buf = io.BytesIO()
    pq.write_table(table, buf)
    bad = repack(bundle, tmp_path / "bad.bundle", "tables/receipts.parquet", buf.getvalue())
    with pytest.raises(IntegrityError) as info:
        replay_bundle(bad, trust=Trust.keys([keys.public]))
    assert any(p.where == "tables/receipts.parquet" for p in info.value.problems)
    code, out = run(str(bad), "--key", str(keys.public_path), "--json")
    assert code == 1
    assert json.loads(out)["exit_code"] == 1
    # --allow-unsigned does not excuse tampering.
    code, _ = run(str(bad), "--allow-unsigned")
    assert code == 1


def test_unsigned_and_untrusted_are_refused_unless_allowed(tmp_path: Path, keys: Keys) -> None:
    unsigned = build(seed_like()).seal(tmp_path, None, "unsigned")
    other = build(seed_like()).seal(tmp_path, Ed25519PrivateKey.generate(), "other")
    for b in (unsigned, other):
        with pytest.raises(IntegrityError):
            replay_bundle(b, trust=Trust.keys([keys.public]))
        assert run(str(b), "--key", str(keys.public_path))[0] == 1
    code, out = run(str(unsigned), "--allow-unsigned", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["integrity"]["trusted"] is False
    for section in SECTIONS:
        assert doc[section]["limits"][0] == UNTRUSTED_NOTE, section
    code, text = run(str(other), "--key", str(keys.public_path), "--allow-unsigned")
    assert code == 0
    assert "UNSIGNED/UNTRUSTED" in text.splitlines()[1]
    assert text.count(f"limit: {UNTRUSTED_NOTE}") == 1  # the summary says it once
    code, text = run(str(other), "--key", str(keys.public_path), "--allow-unsigned", "-v")
    assert code == 0
    assert text.count(f"limit: {UNTRUSTED_NOTE}") == len(SECTIONS)  # -v: in every section


def test_usage_and_io_errors(tmp_path: Path, keys: Keys) -> None:
    bundle = build(seed_like()).seal(tmp_path, keys.private)
    assert run(str(bundle))[0] == 2  # neither --key nor --allow-unsigned
    assert run(str(bundle), "--key", str(tmp_path / "missing.pub"))[0] == 2
    # A bundle path that does not exist is an input error, as for verify and inspect.
    assert run(str(tmp_path / "missing.bundle"), "--allow-unsigned")[0] == 2


# --- an honest campaign ---------------------------------------------------------------


def test_honest_campaign_is_confirmed_with_hand_derived_figures(tmp_path: Path, keys: Keys) -> None:
    bundle = build(seed_like()).seal(tmp_path, keys.private)
    r = replay_bundle(bundle, trust=Trust.keys([keys.public]))
    assert r.exit_code == 0, (r.failures(), r.gaps())
    assert {c.status for c in r.claims.checks} == {CONFIRMED}
    base = r.latency.arm("baseline")
    assert base is not None
    assert base.mean_s is not None
    assert round_half_even(base.mean_s, 2) == Decimal("407.27")  # (396.30 + 418.24) / 2
    pair = r.latency.pair("baseline", "candidate")
    assert pair is not None
    # (1 - 108.12 / 407.27) * 100 = 73.4525... ; 407.27 / 108.12 = 3.7668...
    assert round_half_even(pair.percent_lower or Fraction(0), 2) == Decimal("73.45")
    assert round_half_even(pair.speedup or Fraction(0), 2) == Decimal("3.77")
    assert pair.interval is not None
    assert "very weak" in pair.interval_note
    # Welch df with two servers per arm lies between 1 and 2 (n - 1 each).
    assert 1 <= pair.interval.df <= 2
    assert pair.interval.low_s < float(pair.difference_s) < pair.interval.high_s
    assert r.conformance.ok
    assert r.conformance.observed_order == ("baseline", "candidate", "candidate", "baseline")
    # 4 servers x 8 workers, each within 2 * 17 = 34 s (baseline, TERM wait 60 s)
    # or 17 s (candidate, TERM wait 30 s).
    assert (r.lifecycle.total, r.lifecycle.clean) == (32, 32)


def test_json_matches_its_schema_and_markdown_is_written(tmp_path: Path, keys: Keys) -> None:
    bundle = build(seed_like()).seal(tmp_path, keys.private)
    md = tmp_path / "out" / "report.md"
    md.parent.mkdir()
    code, out = run(str(bundle), "--key", str(keys.public_path), "--json", "--markdown", str(md))
    assert code == 0
    doc = json.loads(out)
    jsonschema.Draft202012Validator(load_schema("replay-report")).validate(doc)
    text = md.read_text(encoding="utf-8")
    assert text.startswith("# Replay report: replay test campaign")
    assert "CONFIRMED (exit 0)" in text.split("\n## ")[1]  # the headline section
    assert "mean-baseline" in text
    assert [p.name for p in md.parent.iterdir()] == ["report.md"]  # no temp file left


# --- attempts -------------------------------------------------------------------------


def with_rejected() -> list[Server]:
    return [Server("candidate-r", "candidate", [90.0, 91.0, 92.0])]


def test_other_attempts_rows_are_counted_and_proved_absent(tmp_path: Path, keys: Keys) -> None:
    spec = seed_like()
    spec.rejected = with_rejected()
    files = build(spec)
    r = replay_bundle(files.seal(tmp_path, keys.private), trust=Trust.keys([keys.public]))
    rejected = next(a for a in r.attempts.attempts if a.attempt_id == "rejected-1")
    # 2 warmups + 3 measured on candidate-r, the factory's defaults.
    assert rejected.receipts_by_phase == {"warmup": 2, "measured": 3}
    assert rejected.reason == "failed RPC attempt"
    assert rejected.entered_accepted == 0
    assert r.attempts.accepted_request_ids == len(files.receipts())
    accepted_ids = {x["request_id"] for x in files.receipts()}
    assert not accepted_ids & {x["request_id"] for x in files.receipts("rejected-1")}
    assert r.attempts.isolated
    assert r.latency.samples_used == 12  # 4 servers x 3 measured, none of candidate-r's
    assert r.exit_code == 0


def test_a_claim_may_name_another_attempt(tmp_path: Path, keys: Keys) -> None:
    spec = seed_like()
    spec.rejected = with_rejected()
    files = build(spec)
    files.tables["claims"].append(
        {
            "claim_id": "rejected-mean",
            "statistic": "arm_mean_s",
            "params": {"arm": "candidate", "attempt": "rejected-1"},
            "value": "91.00",  # (90 + 91 + 92) / 3, its only server
            "unit": "s",
        }
    )
    r = replay_bundle(files.seal(tmp_path, keys.private), trust=Trust.keys([keys.public]))
    c = r.claims.by_id("rejected-mean")
    assert (c.status, c.attempt) == (CONFIRMED, "rejected-1")


# --- claims that cannot be checked, and the rounding rule --------------------------------


def test_missing_evidence_makes_a_claim_unverifiable(tmp_path: Path, keys: Keys) -> None:
    files = build(seed_like())
    files.tables["telemetry"] = []
    files.tables["claims"] += [
        {
            "claim_id": "ghost-server",
            "statistic": "server_mean_s",
            "params": {"arm": "baseline", "server": "baseline-9"},
            "value": "400.00",
            "unit": "s",
        },
    ]
    r = replay_bundle(files.seal(tmp_path, keys.private), trust=Trust.keys([keys.public]))
    ghost = r.claims.by_id("ghost-server")
    assert ghost.status == UNVERIFIABLE
    assert "baseline-9" in (ghost.explanation or "")
    hbm = r.claims.by_id("hbm-change")
    assert hbm.status == UNVERIFIABLE
    assert "telemetry" in (hbm.explanation or "")
    assert r.exit_code == 5
    assert run(str(r.bundle), "--key", str(keys.public_path))[0] == 5


def test_claims_round_the_recomputed_double_exactly(tmp_path: Path, keys: Keys) -> None:
    # specs/claims-vocabulary.md: the double 2.675 is 2.67499999999999982236...,
    # so it rounds to 2.67, not 2.68.
    spec = seed_like()
    for m in spec.comparisons:
        m["flow"] = 3.0
    spec.comparisons[0]["flow"] = 2.675
    files = build(spec)
    for cid, value in (("flow-267", "2.67"), ("flow-268", "2.68")):
        files.tables["claims"].append(
            {
                "claim_id": cid,
                "statistic": "metric_min",
                "params": {"metric": "flow"},
                "value": value,
                "unit": "1",
            }
        )
    r = replay_bundle(files.seal(tmp_path, keys.private), trust=Trust.keys([keys.public]))
    assert r.claims.by_id("flow-267").status == CONFIRMED
    wrong = r.claims.by_id("flow-268")
    assert (wrong.status, wrong.recomputed) == (CONTRADICTED, "2.67")


def test_exact_helpers_against_hand_values() -> None:
    assert round_half_even(Fraction(1, 8), 2) == Decimal("0.12")  # 0.125 is a double: tie, even
    assert round_half_even(Fraction(3, 8), 2) == Decimal("0.38")
    assert round_half_even(Root(Fraction(9, 4)), 1) == Decimal("1.5")  # sqrt(2.25)
    assert round_half_even(Root(Fraction(2)), 4) == Decimal("1.4142")
    assert round_half_even(26, 0) == Decimal("26")
    codes = np.array([1, 0, 1, 1], dtype=np.int64)
    values = np.array([0.1, 1e6, 0.2, 1e-9])
    sums = group_sums(codes, values)
    assert sums[1].total == Fraction(0.1) + Fraction(0.2) + Fraction(1e-9)
    assert sums[1].squares == Fraction(0.1) ** 2 + Fraction(0.2) ** 2 + Fraction(1e-9) ** 2
    assert (sums[0].n, sums[0].total) == (1, Fraction(10**6))


def test_json_sections_all_present(tmp_path: Path, keys: Keys) -> None:
    bundle = build(seed_like()).seal(tmp_path, keys.private)
    doc = result_to_dict(replay_bundle(bundle, trust=Trust.keys([keys.public])))
    assert set(SECTIONS) <= set(doc)
    assert doc["headline"][0].startswith("CONFIRMED")


def test_wrong_count_is_contradicted_without_a_rounding_excuse(tmp_path: Path, keys: Keys) -> None:
    files = build(seed_like())
    files.claim("requests")["value"] = "27"  # 4 servers x (2 + 3) + 6 quality = 26
    r = replay_bundle(files.seal(tmp_path, keys.private), trust=Trust.keys([keys.public]))
    c = r.claims.by_id("requests")
    assert (c.status, c.recomputed) == (CONTRADICTED, "26")
    assert c.explanation == "the claimed value does not follow from the tables"


def test_requires_scorer_adds_a_requirement_but_cannot_waive_one(
    tmp_path: Path, keys: Keys
) -> None:
    # The requirement is a property of the metric (specs/gates.md): LPIPS is model-based,
    # so an author's ``requires_scorer: false`` does not let it pass without scorer.json;
    # ``true`` on a model-free metric adds the requirement.
    spec = seed_like()
    spec.scorer = False
    for g in spec.gates:
        if g["metric"] == "lpips":
            g["requires_scorer"] = False  # an attempted waiver
        if g["metric"] == "audio_spectral_cosine":
            g["requires_scorer"] = True  # frozen as needing one, whatever its definition
    r = replay_bundle(build(spec).seal(tmp_path, keys.private), trust=Trust.keys([keys.public]))
    verdicts = {(c.metric, c.verdict) for c in r.quality.checks}
    assert verdicts == {
        ("lpips", "unattested"),
        ("ssim", "pass"),
        ("audio_spectral_cosine", "unattested"),
    }
    assert r.exit_code == 5
