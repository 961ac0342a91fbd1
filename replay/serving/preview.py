"""Which imported claims replay will not be able to check, and why, said at import.

``bundle import`` writes a claim for every aggregate the tool printed; some cannot
be re-derived from what the tool recorded (a file without ``--save-detailed``, a
metric the tool keeps no per-request values of). This evaluates each claim the way
replay does, on the runs just parsed, so a newcomer learns it before sealing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bundler.format.serving_run import ServingRun
from replay.serving.claims import SERVING_EVALUATORS
from replay.serving.inputs import ServingData
from replay.serving.stats import RunStats

__all__ = ["Unverifiable", "missing_load_points", "unverifiable_claims"]


@dataclass(frozen=True)
class Unverifiable:
    """One reason, and the ids of the claims it leaves unverifiable."""

    reason: str
    claim_ids: tuple[str, ...]


def unverifiable_claims(
    runs: Iterable[ServingRun], claims: Sequence[Mapping[str, Any]]
) -> tuple[Unverifiable, ...]:
    """The claims replay will report unverifiable, grouped by reason (first seen first)."""
    data = ServingData({(r.arm, r.load_point): RunStats(r) for r in runs})
    by_reason: dict[str, list[str]] = {}
    for c in claims:
        ev = SERVING_EVALUATORS.get(str(c.get("statistic")))
        params = c.get("params")
        if ev is None or not isinstance(params, Mapping):
            continue
        res = ev(data, params, str(c.get("unit", "")))
        if isinstance(res, str):
            by_reason.setdefault(res, []).append(str(c.get("claim_id")))
    return tuple(Unverifiable(k, tuple(v)) for k, v in by_reason.items())


def missing_load_points(runs: Sequence[ServingRun]) -> dict[str, tuple[str, ...]]:
    """Load point -> the arms with no run at it, for each load point some arm lacks.

    Replay reports each as a deviation (a planned load point with no source): a
    GuideLLM sweep picks its constant rates from what each arm measured, so two
    arms' sweeps share only their synchronous and throughput points.
    """
    arms = list(dict.fromkeys(r.arm for r in runs))
    have = {(r.arm, r.load_point) for r in runs}
    out: dict[str, tuple[str, ...]] = {}
    for lp in sorted({r.load_point for r in runs}):
        lacking = tuple(a for a in arms if (a, lp) not in have)
        if lacking:
            out[lp] = lacking
    return out
