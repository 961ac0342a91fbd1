"""Quality verdicts re-evaluated from recorded metrics against the frozen gates.

Each comparison of the attempt is checked against every gate whose metric it
records, by the one gate evaluator (:mod:`replay.sections.gates`, ``specs/gates.md``):
the gate's own operator and threshold (inclusive ``>=``/``<=`` or exclusive
``>``/``<`` exactly as frozen), the exact margin on the passing side (``value
- threshold`` for ``>=``/``>``, ``threshold - value`` for ``<=``/``<``,
``-|value - threshold|`` for ``==``; negative when failing), and *close* for a
passing check whose margin is at most ``warn_within``.

Whether a gate needs an attested scorer is a property of its metric (the closed
table of :mod:`replay.sections.gates`: LPIPS in any spelling and every model-based or
unknown metric need one; an author's ``requires_scorer: false`` cannot waive
it). The bundle attests a scorer when it records ``scorer.json``; without it
every check of such a gate is ``unattested``, never ``pass``, whatever the
recorded value.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from bundler.format.plan_model import ScorerDoc
from replay.engine.arrow import IntArray, equals, filter_table, flatten_map, rows
from replay.engine.exact import fraction_of
from replay.inputs import ReplayInputs
from replay.sections.gates import FAIL, PASS, UNATTESTED, Gate, Verdict

FloatArray = npt.NDArray[np.float64]

__all__ = [
    "FAIL",
    "PASS",
    "UNATTESTED",
    "Gate",
    "GateCheck",
    "GateSummary",
    "MetricSummary",
    "QualityResult",
    "check_quality",
]


@dataclass(frozen=True)
class GateCheck:
    """One (comparison, gate) evaluation."""

    comparison_id: str
    gate_id: str
    metric: str
    value: float
    verdict: Verdict
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
    scorer: ScorerDoc | None
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
    return [Gate.from_row(g) for g in rows(inputs.table("gates"), cols)]


def _limits(scorer: ScorerDoc | None, gates: list[Gate]) -> tuple[str, ...]:
    out = [
        "Verdicts are re-derived from the recorded metric values: media not re-scored "
        "(that needs the raw media, which stays outside the bundle).",
    ]
    needing = [g for g in gates if g.needs_scorer]
    if scorer is None:
        if needing:
            out.append(
                "No scorer identity (scorer.json) in the bundle: every check of a gate whose "
                "metric needs an attested model is unattested, never PASS ("
                + ", ".join(g.gate_id for g in needing)
                + "; specs/gates.md)."
            )
    else:
        out.append(
            f"Scorer identity recorded ({scorer.name} {scorer.version}, "
            f"{len(scorer.weights)} weight file(s) by SHA-256); the weights "
            "themselves were not re-hashed at this level."
        )
    for g in needing:
        if g.scorer.basis == "unknown" or g.scorer.overridden:
            out.append(f"Gate {g.gate_id}: {g.scorer.reason}.")
    return tuple(out)


def _closest(checks: list[GateCheck]) -> GateCheck | None:
    return min(checks, key=lambda c: (c.margin, c.comparison_id), default=None)


@dataclass(frozen=True)
class _Recorded:
    """The attempt's ``comparisons.metrics`` flattened: one entry per (comparison, metric)."""

    ids: list[str]  # comparison ids, by row
    parents: IntArray  # entry -> row
    key_codes: IntArray  # entry -> index into keys
    keys: tuple[str, ...]
    values: FloatArray

    @functools.cached_property
    def by_key(self) -> dict[str, IntArray]:
        """Entries per metric name, grouped by one stable sort (not one scan per metric)."""
        order = np.argsort(self.key_codes, kind="stable")
        bounds = np.searchsorted(self.key_codes[order], np.arange(len(self.keys) + 1))
        return {name: order[bounds[k] : bounds[k + 1]] for k, name in enumerate(self.keys)}

    def of(self, metric: str) -> list[int]:
        """Entries recording ``metric``."""
        got = self.by_key.get(metric)
        return [] if got is None else [int(i) for i in got]


def _check_gate(g: Gate, rec: _Recorded, attested: bool) -> list[GateCheck]:
    """Every recorded value of the gate's metric, evaluated by the gate."""
    out = []
    for i in rec.of(g.metric):
        value = float(rec.values[i])
        ev = g.evaluate(value, attested=attested)
        # Recorded values are finite (seal rejects NaN and infinities); fraction_of
        # raises for a table sealed by another tool that holds one.
        margin = ev.margin if ev.margin is not None else fraction_of(value)
        out.append(
            GateCheck(
                rec.ids[rec.parents[i]],
                g.gate_id,
                g.metric,
                value,
                ev.verdict,
                ev.passes_value,
                margin,
                ev.close,
            )
        )
    return out


def _summary(g: Gate, mine: list[GateCheck]) -> GateSummary:
    return GateSummary(
        gate=g,
        checks=len(mine),
        passed=sum(c.verdict == PASS for c in mine),
        failed=sum(c.verdict == FAIL for c in mine),
        unattested=sum(c.verdict == UNATTESTED for c in mine),
        closest=_closest(mine),
    )


def _metric_summaries(
    gates: list[Gate], checks: list[GateCheck], rec: _Recorded
) -> list[MetricSummary]:
    metrics = []
    gated = {g.metric for g in gates}
    needs_scorer = {g.metric for g in gates if g.needs_scorer}
    checks_of: dict[str, list[GateCheck]] = {}
    for c in checks:
        checks_of.setdefault(c.metric, []).append(c)
    for name, entries in rec.by_key.items():
        vals = rec.values[entries]
        if not vals.size:
            continue
        metrics.append(
            MetricSummary(
                metric=name,
                recorded=int(vals.size),
                min_value=fraction_of(float(vals.min())),
                max_value=fraction_of(float(vals.max())),
                gated=name in gated,
                needs_scorer=name in needs_scorer,
                closest=_closest(checks_of.get(name, [])),
            )
        )
    return sorted(metrics, key=lambda m: m.metric)


def check_quality(inputs: ReplayInputs, attempt: str) -> QualityResult:
    """Evaluate every (comparison, gate) pair of ``attempt`` with the frozen operators."""
    comps = inputs.table("comparisons")
    comps = filter_table(comps, equals(comps, "attempt_id", attempt))
    ids = [str(c) for c in comps.column("comparison_id").to_pylist()]
    rec = _Recorded(ids, *flatten_map(comps.column("metrics")))
    attested = inputs.scorer is not None
    gates = _gates(inputs)
    checks: list[GateCheck] = []
    summaries = []
    for g in gates:
        mine = _check_gate(g, rec, attested)
        checks += mine
        summaries.append(_summary(g, mine))
    by_comp: dict[str, list[GateCheck]] = {i: [] for i in ids}
    for c in checks:
        by_comp[c.comparison_id].append(c)
    verdicts = [{c.verdict for c in cs} for cs in by_comp.values()]
    # A comparison with no check (nothing recorded for any gate, e.g. a rerun's unscored
    # pairs) passes nothing: an empty verdict set is not a pass.
    unrecorded = sum(not cs for cs in by_comp.values())
    limits = _limits(inputs.scorer, gates)
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
        metrics=tuple(_metric_summaries(gates, checks, rec)),
        checks=tuple(checks),
        never_evaluated=tuple(s.gate.gate_id for s in summaries if s.checks == 0),
        limits=limits,
    )
