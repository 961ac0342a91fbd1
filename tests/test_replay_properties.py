"""Hypothesis properties of replay's statistics.

- Row order never changes any statistic, verdict or claim status (sums are exact).
- Percent lower and speedup agree: speedup = 1 / (1 - percent_lower / 100), exactly.
- Any campaign whose claims are derived honestly (``tests/replay_factory.py``,
  with ``statistics`` and ``fractions``, no replay code) replays as all confirmed.
"""

from __future__ import annotations

import random
import tempfile
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundler.format.plan_model import Plan, ScorerDoc
from bundler.format.tables import rows_to_table
from bundler.format.trust import SignatureStatus, Trust
from replay.api import replay_bundle, replay_inputs
from replay.inputs import ReplayInputs
from replay.result import Integrity, ReplayResult
from replay.sections.claims import CONFIRMED
from tests.replay_factory import DEFAULT_GATES, Files, Server, Spec, build

# Seconds with 0 to 3 decimals, and dyadic values whose decimal ties are exact doubles.
seconds = st.one_of(
    st.integers(1_000, 900_000).map(lambda n: n / 1000),
    st.integers(10, 90_000).map(lambda n: n / 100),
    st.integers(8, 8_000).map(lambda n: n / 8),
)
unit_metric = st.integers(0, 1000).map(lambda n: n / 1000)


@st.composite
def campaigns(draw: st.DrawFn) -> Spec:
    arms = ["baseline"] * draw(st.integers(1, 3)) + ["candidate"] * draw(st.integers(1, 3))
    order = draw(st.permutations(arms))
    measured = draw(st.integers(1, 4))
    warmups = draw(st.integers(0, 2))
    servers = []
    for i, arm in enumerate(order):
        servers.append(
            Server(
                name=f"{arm}-{i}",
                arm=arm,
                measured=draw(st.lists(seconds, min_size=measured, max_size=measured)),
                warmups=draw(st.lists(seconds, min_size=warmups, max_size=warmups)),
                quality=draw(st.lists(seconds, max_size=1)),
                exit_s=draw(st.lists(st.integers(0, 100).map(float), min_size=1, max_size=3)),
                hbm=draw(
                    st.lists(
                        st.lists(st.integers(1, 65_536).map(float), min_size=1, max_size=3),
                        min_size=1,
                        max_size=2,
                    )
                ),
            )
        )
    comparisons = draw(
        st.lists(
            st.fixed_dictionaries(
                {"lpips": unit_metric, "ssim": unit_metric, "audio_spectral_cosine": unit_metric}
            ),
            min_size=1,
            max_size=4,
        )
    )
    return Spec(servers, comparisons, [dict(g) for g in DEFAULT_GATES])


INTEGRITY = Integrity(SignatureStatus.VERIFIED, ("test key",), "1", 0, 0, {}, {})


def inputs_of(files: Files, rng: random.Random | None = None) -> ReplayInputs:
    """The pure core's inputs straight from rows (optionally shuffled), no bundle."""
    tables = {}
    for name, rows in files.tables.items():
        ordered = list(rows)
        if rng is not None:
            rng.shuffle(ordered)
        tables[name] = rows_to_table(name, ordered)
    for name in ("sources", "artifacts"):
        tables[name] = rows_to_table(name, [])
    return ReplayInputs(
        campaign=files.campaign,
        plan=None if files.plan is None else Plan.from_dict(files.plan, "plans/final.json"),
        plan_path="plans/final.json",
        scorer=None if files.scorer is None else ScorerDoc.from_dict(files.scorer),
        tables=tables,
    )


def comparable(r: ReplayResult) -> dict[str, Any]:
    """Everything a result says; lists that follow a table's row order become sets."""
    return {
        "latency": r.latency,
        "telemetry": r.telemetry,
        "lifecycle": (
            r.lifecycle.arms,
            r.lifecycle.total,
            r.lifecycle.clean,
            r.lifecycle.per_server,
            frozenset(r.lifecycle.unclean),
        ),
        "gates": sorted(r.quality.gates, key=lambda g: g.gate.gate_id),
        "metrics": r.quality.metrics,
        "checks": frozenset(r.quality.checks),
        "passed": (r.quality.comparisons_passed, r.quality.comparisons_failed),
        "claims": sorted((c.claim_id, c.status, c.recomputed) for c in r.claims.checks),
        "deviations": frozenset(r.conformance.deviations),
        "servers": r.conformance.servers,
        "attempts": replace(
            r.attempts, attempts=tuple(sorted(r.attempts.attempts, key=lambda a: a.attempt_id))
        ),
        "exit": r.exit_code,
    }


@settings(max_examples=40, deadline=None)
@given(spec=campaigns(), seed=st.integers(0, 2**32 - 1))
def test_statistics_are_invariant_to_row_order(spec: Spec, seed: int) -> None:
    files = build(spec)
    ordered = replay_inputs(inputs_of(files), INTEGRITY)
    shuffled = replay_inputs(inputs_of(files, random.Random(seed)), INTEGRITY)
    assert comparable(ordered) == comparable(shuffled)


@settings(max_examples=40, deadline=None)
@given(spec=campaigns())
def test_percent_lower_and_speedup_agree(spec: Spec) -> None:
    r = replay_inputs(inputs_of(build(spec)), INTEGRITY)
    (pair,) = r.latency.pairs
    assert pair.percent_lower is not None
    assert pair.speedup is not None
    # Exact identity of the vocabulary's definitions: p = (1 - c/b) * 100, s = b / c.
    assert pair.speedup == 1 / (1 - pair.percent_lower / 100)
    assert pair.percent_lower == (1 - 1 / pair.speedup) * 100
    assert (pair.speedup > 1) == (pair.percent_lower > 0)
    base, cand = r.latency.arm("baseline"), r.latency.arm("candidate")
    assert base is not None
    assert cand is not None
    assert pair.speedup == Fraction(base.mean_s or 0) / Fraction(cand.mean_s or 1)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(spec=campaigns())
def test_honest_claims_are_all_confirmed(spec: Spec) -> None:
    files = build(spec)
    with tempfile.TemporaryDirectory() as d:
        r = replay_bundle(files.seal(Path(d), None), trust=Trust.allow_unsigned())
    not_confirmed = [c for c in r.claims.checks if c.status != CONFIRMED]
    assert not not_confirmed
    assert len(r.claims.checks) == len(files.tables["claims"])
    assert r.conformance.ok, r.conformance.deviations
    assert r.attempts.isolated
