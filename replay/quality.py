"""Quality verdicts re-evaluated from recorded metrics against the frozen gates.

Each comparison of the attempt is checked against every gate whose metric it
records, with the gate's own operator and threshold (inclusive ``>=``/``<=``
or exclusive ``>``/``<`` exactly as frozen). The margin is the distance on the
passing side: ``value - threshold`` for ``>=``/``>``, ``threshold - value``
for ``<=``/``<``, ``-|value - threshold|`` for ``==``; negative when failing.
A check is flagged *close* when ``0 <= margin <= warn_within``.

A metric whose value depends on a learned scorer (LPIPS) is only as good as
the scorer's identity: a gate needs one when its ``requires_scorer`` says so
or, when that is null, when its definition starts with ``lpips/``. Without
``scorer.json`` every check of such a gate is ``unattested``, never ``pass``,
whatever the recorded value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from replay._arrow import equals, filter_table, flatten_map, rows
from replay.exact import fraction_of
from replay.inputs import ReplayInputs

__all__ = [
    "SCORER_DEFINITION_PREFIX",
    "Gate",
    "GateCheck",
    "GateSummary",
    "MetricSummary",
    "QualityResult",
    "check_quality",
]

SCORER_DEFINITION_PREFIX = "lpips/"
"""A gate whose ``requires_scorer`` is null needs a scorer when its definition starts so."""

PASS, FAIL, UNATTESTED = "pass", "fail", "unattested"

_OPS = {
    ">=": np.greater_equal,
    ">": np.greater,
    "<=": np.less_equal,
    "<": np.less,
    "==": np.equal,
}


@dataclass(frozen=True)
class Gate:
    """One frozen gate."""

    gate_id: str
    metric: str
    op: str
    threshold: float
    definition: str
    warn_within: float | None
    requires_scorer: bool | None = None

    @property
    def needs_scorer(self) -> bool:
        """The gate's ``requires_scorer``; when null, true for ``lpips/`` definitions."""
        if self.requires_scorer is not None:
            return self.requires_scorer
        return self.definition.startswith(SCORER_DEFINITION_PREFIX)

    def margin(self, value: Fraction) -> Fraction:
        """Distance from ``value`` to the threshold on the passing side (negative: failing)."""
        t = fraction_of(self.threshold)
        if self.op in (">=", ">"):
            return value - t
        if self.op in ("<=", "<"):
            return t - value
        return -abs(value - t)


@dataclass(frozen=True)
class GateCheck:
    """One (comparison, gate) evaluation."""

    comparison_id: str
    gate_id: str
    metric: str
    value: float
    verdict: str  # pass | fail | unattested
    passes_recorded: bool  # what the recorded value gives, attested or not
    margin: Fraction
    close: bool


@dataclass(frozen=True)
class GateSummary:
    """A gate's checks, counted, with the closest one."""

    gate: Gate
    checks: int
    passed: int
    failed: int
    unattested: int
    closest: GateCheck | None


@dataclass(frozen=True)
class MetricSummary:
    """A recorded metric over the attempt's comparisons."""

    metric: str
    recorded: int
    min_value: Fraction
    max_value: Fraction
    gated: bool
    needs_scorer: bool
    closest: GateCheck | None  # smallest margin over the metric's gates


@dataclass(frozen=True)
class QualityResult:
    """Every gate check of one attempt and the comparison verdicts."""

    attempt: str
    scorer: Mapping[str, Any] | None
    comparisons_total: int
    comparisons_passed: int
    comparisons_failed: int
    comparisons_unattested: int
    comparisons_passed_if_attested: int  # upper bound: unattested checks taken as recorded
    ungated_comparisons: int
    gates: tuple[GateSummary, ...]
    metrics: tuple[MetricSummary, ...]
    checks: tuple[GateCheck, ...]
    never_evaluated: tuple[str, ...]
    limits: tuple[str, ...]

    @property
    def scorer_attested(self) -> bool:
        """True when the bundle records a scorer identity."""
        return self.scorer is not None

    def count(self, verdict: str) -> int:
        """Checks with ``verdict``."""
        return sum(1 for c in self.checks if c.verdict == verdict)

    def metric(self, name: str) -> MetricSummary | None:
        """The summary of metric ``name``, if recorded."""
        return next((m for m in self.metrics if m.metric == name), None)


def _gates(inputs: ReplayInputs) -> list[Gate]:
    cols = ["gate_id", "metric", "op", "threshold", "definition", "warn_within", "requires_scorer"]
    return [Gate(**g) for g in rows(inputs.table("gates"), cols)]


def _limits(scorer: Mapping[str, Any] | None) -> tuple[str, ...]:
    out = [
        "Verdicts are re-derived from the recorded metric values: media not re-scored "
        "(that needs the raw media, which stays outside the bundle).",
    ]
    if scorer is None:
        out.append(
            "No scorer identity (scorer.json) in the bundle: every LPIPS verdict is "
            "unattested, never PASS."
        )
    else:
        out.append(
            f"Scorer identity recorded ({scorer.get('name')} {scorer.get('version')}, "
            f"{len(scorer.get('weights', []))} weight file(s) by SHA-256); the weights "
            "themselves were not re-hashed at this level."
        )
    return tuple(out)


def _closest(checks: list[GateCheck]) -> GateCheck | None:
    return min(checks, key=lambda c: (c.margin, c.comparison_id), default=None)


def check_quality(inputs: ReplayInputs, attempt: str) -> QualityResult:
    """Evaluate every (comparison, gate) pair of ``attempt`` with the frozen operators."""
    comps = inputs.table("comparisons")
    comps = filter_table(comps, equals(comps, "attempt_id", attempt))
    ids = [str(c) for c in comps.column("comparison_id").to_pylist()]
    parents, key_codes, keys, values = flatten_map(comps.column("metrics"))
    attested = inputs.scorer is not None
    gates = _gates(inputs)
    checks: list[GateCheck] = []
    summaries = []
    for g in gates:
        k = keys.index(g.metric) if g.metric in keys else -1
        sel = np.flatnonzero(key_codes == k) if k >= 0 else np.zeros(0, dtype=np.int64)
        passes = _OPS[g.op](values[sel], g.threshold)
        warn = fraction_of(g.warn_within) if g.warn_within is not None else None
        mine = []
        for i, ok in zip(sel.tolist(), passes.tolist(), strict=True):
            margin = g.margin(fraction_of(float(values[i])))
            verdict = UNATTESTED if g.needs_scorer and not attested else (PASS if ok else FAIL)
            close = warn is not None and 0 <= margin <= warn
            mine.append(
                GateCheck(
                    ids[parents[i]],
                    g.gate_id,
                    g.metric,
                    float(values[i]),
                    verdict,
                    ok,
                    margin,
                    close,
                )
            )
        checks += mine
        summaries.append(
            GateSummary(
                gate=g,
                checks=len(mine),
                passed=sum(c.verdict == PASS for c in mine),
                failed=sum(c.verdict == FAIL for c in mine),
                unattested=sum(c.verdict == UNATTESTED for c in mine),
                closest=_closest(mine),
            )
        )
    metrics = []
    gated = {g.metric for g in gates}
    for k, name in enumerate(keys):
        vals = values[key_codes == k]
        metrics.append(
            MetricSummary(
                metric=name,
                recorded=int(vals.size),
                min_value=fraction_of(float(vals.min())),
                max_value=fraction_of(float(vals.max())),
                gated=name in gated,
                needs_scorer=any(g.needs_scorer for g in gates if g.metric == name),
                closest=_closest([c for c in checks if c.metric == name]),
            )
        )
    by_comp: dict[str, list[GateCheck]] = {i: [] for i in ids}
    for c in checks:
        by_comp[c.comparison_id].append(c)
    verdicts = [{c.verdict for c in cs} for cs in by_comp.values()]
    # A comparison with no check (nothing recorded for any gate, e.g. a rerun's unscored
    # pairs) passes nothing: an empty verdict set is not a pass.
    unrecorded = sum(not cs for cs in by_comp.values())
    limits = _limits(inputs.scorer)
    if gates and unrecorded:
        limits += (
            f"{unrecorded} comparison(s) record no value for any gated metric: not recorded "
            "at this level, counted neither as passing nor as failing; re-score them from "
            "the media (bundle replay --media DIR).",
        )
    return QualityResult(
        attempt=attempt,
        scorer=inputs.scorer,
        comparisons_total=len(ids),
        comparisons_passed=sum(bool(v) and v <= {PASS} for v in verdicts),
        comparisons_failed=sum(FAIL in v for v in verdicts),
        comparisons_unattested=sum(FAIL not in v and UNATTESTED in v for v in verdicts),
        comparisons_passed_if_attested=sum(
            bool(cs) and all(c.passes_recorded for c in cs) for cs in by_comp.values()
        ),
        ungated_comparisons=unrecorded,
        gates=tuple(summaries),
        metrics=tuple(sorted(metrics, key=lambda m: m.metric)),
        checks=tuple(checks),
        never_evaluated=tuple(s.gate.gate_id for s in summaries if s.checks == 0),
        limits=limits,
    )
