"""Replay's cost is bounded: hostile content is refused up front, or replayed under 1 GiB.

Issue 19, defect 7. Each hostile bundle is small (hundreds of KiB), signed and
verifies (``tests/hostile_content.py``): 50,000 arms made replay allocate an
arms x servers grid of 18.6 GiB; 10^6 claims peaked at 1.7 GiB; 10^6 gates at
1.3 GiB. ``bundle replay`` runs in a subprocess (``tests/test_memory_bound.py``:
address-space cap, peak RSS by ``wait4``); it must end in a located refusal
(exit 1, the member and the limit named) or finish under 1 GiB of peak RSS, and
within a generous bound that only detects a blow-up (not a performance test).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from bundler.content import check_content_limits
from bundler.errors import BundleFormatError
from bundler.format.container import ContentLimits
from bundler.format.trust import Trust
from bundler.verified import open_verified
from tests.hostile_content import hostile_bundle as build_hostile
from tests.hostile_content import many_arms, many_claims, many_gates, table_bytes
from tests.test_memory_bound import GIB, ROOT, SAFETY_CAP, _env, run_capped

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="RLIMIT_AS and wait4 peak RSS are Linux's"
)

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
BLOW_UP_S = 120  # a bound that catches a blow-up, far above the few seconds replay takes


@pytest.fixture(scope="module")
def pub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("key") / "author.pub"
    p.write_bytes(KEY.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
    return p


def _replay(bundle: Path, pub: Path) -> tuple[int, str, int, float]:
    run = run_capped(["replay", str(bundle), "--key", str(pub), "--json"], SAFETY_CAP)
    assert "Traceback" not in run.text, run.text[-3000:]
    assert run.rc >= 0, f"killed by signal {-run.rc}"
    assert run.peak_rss < GIB, f"peak RSS {run.peak_rss / (1 << 20):.0f} MiB"
    assert run.seconds < BLOW_UP_S, f"{run.seconds:.0f} s"
    return run.rc, run.out, run.peak_rss, run.seconds


@pytest.mark.parametrize(
    ("case", "located"),
    [
        ("arms", ("campaign.json", "arms", "max_arm_pairs")),
        ("claims", ("tables/claims.parquet", None, "max_claims")),
        ("gates", ("tables/gates.parquet", None, "max_gates")),
    ],
)
def test_hostile_content_is_refused_up_front(
    case: str, located: tuple[str, str | None, str], pub: Path, tmp_path: Path
) -> None:
    where, field, limit = located
    build = {"arms": many_arms, "claims": many_claims, "gates": many_gates}[case]
    bundle = build(tmp_path / f"{case}.bundle", KEY)
    assert bundle.stat().st_size < 1 << 20  # a small, signed file...
    rc, out, _, _ = _replay(bundle, pub)  # ...that costs no more than a normal one
    assert rc == 1, out[-3000:]
    doc = json.loads(out)
    assert "content over replay's limits" in doc["error"]
    got = [(p["where"], p["field"]) for p in doc["problems"] if limit in p["message"]]
    assert got == [(where, field)], doc["problems"]


def test_fifty_thousand_arms_name_every_limit(tmp_path: Path) -> None:
    bundle = open_verified(
        many_arms(tmp_path / "a.bundle", KEY), trust=Trust.keys([KEY.public_key()])
    )
    campaign = bundle.document("campaign.json") or {}
    with pytest.raises(BundleFormatError) as err:
        check_content_limits(bundle.members, campaign)
    # 50,000 arms, half baseline: 25,000 x 25,000 pairs.
    assert [str(p) for p in err.value.problems] == [
        "campaign.json, field 'arms': 50,000 arms, over replay's limit of 1,000 "
        "(ContentLimits.max_arms; specs/bundle-format.md)",
        "campaign.json, field 'arms': 625,000,000 baseline x candidate pairs, over replay's "
        "limit of 10,000 (ContentLimits.max_arm_pairs; specs/bundle-format.md)",
    ]


@pytest.mark.parametrize(("case", "n"), [("arms", 200), ("claims", 100_000), ("gates", 10_000)])
def test_content_at_the_limits_replays_under_1_gib(
    case: str, n: int, pub: Path, tmp_path: Path
) -> None:
    # 200 arms: 100 x 100 = 10,000 pairs, the max_arm_pairs limit.
    build = {"arms": many_arms, "claims": many_claims, "gates": many_gates}[case]
    rc, out, _, _ = _replay(build(tmp_path / f"{case}.bundle", KEY, n), pub)
    assert rc in (0, 4, 5), out[-3000:]
    assert json.loads(out)["outcome"]


def test_distinct_servers_and_gate_checks_are_bounded(tmp_path: Path) -> None:
    # Four servers in the mini campaign's receipts; 3 gates x 2 recorded lpips values.
    comparisons = table_bytes(
        "comparisons",
        {
            "comparison_id": ["c1", "c2"],
            "attempt_id": ["a2", "a2"],
            "baseline_request_id": ["b1-2", "b1-3"],
            "candidate_request_id": ["c1-2", "c1-3"],
            "metrics": [[("lpips", 0.01), ("ssim", 0.9)], [("lpips", 0.02)]],
        },
    )
    gates = table_bytes(
        "gates",
        {
            "gate_id": ["g1", "g2", "g3"],
            "metric": ["lpips", "lpips", "psnr"],
            "op": ["<=", "<=", ">="],
            "threshold": [0.1, 0.05, 30.0],
            "definition": ["lpips/alex"] * 3,
        },
    )
    path = build_hostile(
        tmp_path / "g.bundle",
        KEY,
        {"tables/comparisons.parquet": comparisons, "tables/gates.parquet": gates},
    )
    bundle = open_verified(path, trust=Trust.keys([KEY.public_key()]))
    campaign = bundle.document("campaign.json") or {}
    check_content_limits(bundle.members, campaign)  # within the defaults
    # Gate evaluations by hand: g1 and g2 each see 2 lpips values, g3 no psnr value: 4.
    tight = ContentLimits(max_servers=3, max_gate_checks=3, max_metric_entries=3)
    with pytest.raises(BundleFormatError) as err:
        check_content_limits(bundle.members, campaign, tight)
    assert [(p.where, p.field, p.message.split(",")[0]) for p in err.value.problems] == [
        ("tables/receipts.parquet", "server", "4 distinct servers"),
        ("tables/gates.parquet", "metric", "4 gate evaluations"),
    ]
    with pytest.raises(BundleFormatError) as err:
        check_content_limits(bundle.members, campaign, ContentLimits(max_metric_entries=2))
    assert [(p.where, p.field, p.message.split(",")[0]) for p in err.value.problems] == [
        ("tables/comparisons.parquet", "metrics", "3 metric entries"),
    ]


_SPARSE = """
import json, resource, sys
import numpy as np, pyarrow.parquet as pq, io
cap = 2 << 30
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
from bundler.format.container import read_container
from replay.inputs import ReplayInputs
from replay.sections.latency import compute_latency
from replay.sections.conformance import check_conformance
from replay.sections.attempts import Window
tables = {m.name: m.data for m in read_container(sys.argv[1])}
receipts = pq.read_table(io.BytesIO(tables["tables/receipts.parquet"]))
campaign = {"arms": [
    {"id": "baseline", "role": "baseline"}, {"id": "candidate", "role": "candidate"}
]}
from bundler.format.plan_model import Plan, PlanRequest
plan = Plan("1", "p", PlanRequest("videos-async", "post_to_delete"))
inputs = ReplayInputs(campaign, plan, "plans/p.json", None, {"receipts": receipts})
lat = compute_latency(inputs, "a2")
conf = check_conformance(inputs, "a2", Window(None, None), None)
print(json.dumps([lat.samples_used, [len(a.servers) for a in lat.arms], len(conf.servers)]))
"""


def test_latency_and_conformance_group_sparsely(tmp_path: Path) -> None:
    # 50,000 arms on 50,000 servers, replay's statistics called without the limits:
    # one group per (arm, server) that occurs, under a 2 GiB address-space cap (the
    # dense grid was 50,000^2 doubles, 18.6 GiB).
    bundle = many_arms(tmp_path / "a.bundle", KEY)
    proc = subprocess.run(
        [sys.executable, "-c", _SPARSE, str(bundle)],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    samples, servers_per_arm, servers = json.loads(proc.stdout)
    assert (samples, servers_per_arm, servers) == (50_000, [1, 1], 50_000)
