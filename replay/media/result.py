"""What a media re-score established: per arm, per metric, per gate, per comparison, overall.

The result gives its reasons as plain lines: :meth:`MediaReplayResult.integrity_failures`
(exit 1), :meth:`~MediaReplayResult.failures` (exit 4) and
:meth:`~MediaReplayResult.gaps` (exit 5); the verdict is the replay's one result's
(:class:`replay.result.ReplayResult`, by :func:`replay.engine.verdicts.decide`), not
decided here. Verdict words are those of :mod:`replay.engine.verdicts`: gates
``pass``, ``fail``, ``unattested`` plus the reasons a re-derived value may be missing
(``not-computed``, ``unsupported-definition``) or a recorded one (``not-recorded``);
comparisons ``MISMATCH``, ``FAIL``, ``INCOMPLETE``, ``PASS``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from replay.engine.verdicts import Agreement, GateVerdict, MediaVerdict
from replay.media.coverage import FAIL as COVERAGE_FAIL
from replay.media.coverage import CoverageCheck, CoverageParams
from replay.media.definitions import DEFINITIONS, canonical
from replay.media.execution import Execution
from replay.media.identity import ABSENT, MISMATCH, Location
from replay.media.lpips_identity import ScorerIdentity
from replay.media.probe import MediaProbe

__all__ = [
    "NOT_COMPUTED",
    "NOT_RECORDED",
    "UNSUPPORTED",
    "ArmMedia",
    "ComparisonReplay",
    "ComparisonVerdict",
    "DecodeStatus",
    "Disagreement",
    "DisagreementKind",
    "GateResult",
    "MediaGateSummary",
    "MediaProgress",
    "MediaReplayResult",
    "MetricCheck",
    "MetricStatus",
    "RecomputedVerdict",
    "RecordedVerdict",
    "fmt",
    "num",
]

# Names the media modules import; the words are :class:`GateVerdict`'s.
NOT_COMPUTED: Final = GateVerdict.NOT_COMPUTED
UNSUPPORTED: Final = GateVerdict.UNSUPPORTED
NOT_RECORDED: Final = GateVerdict.NOT_RECORDED

Role = Literal["baseline", "candidate"]
MetricStatus = (
    Agreement
    | Literal[
        GateVerdict.NOT_RECORDED,
        GateVerdict.NOT_COMPUTED,
        GateVerdict.UNATTESTED,
        GateVerdict.UNSUPPORTED,
    ]
)
RecordedVerdict = Literal[
    GateVerdict.PASS, GateVerdict.FAIL, GateVerdict.UNATTESTED, GateVerdict.NOT_RECORDED
]
RecomputedVerdict = Literal[
    GateVerdict.PASS,
    GateVerdict.FAIL,
    GateVerdict.UNATTESTED,
    GateVerdict.NOT_COMPUTED,
    GateVerdict.UNSUPPORTED,
]
ComparisonVerdict = MediaVerdict
DecodeStatus = Literal["ok", "does-not-decode", "unsupported", "not-decoded"]
DisagreementKind = Literal[
    "identity", "decode", "not-reproduced", "not-reproduced-but-passes", "gate", "coverage"
]


def num(x: float | None) -> float | str | None:
    """A JSON-ready number: infinities and NaN as the strings ``inf``, ``-inf``, ``nan``."""
    if x is None:
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if math.isnan(x):
        return "nan"
    return x


def fmt(x: float | None) -> str:
    """A value for text: ``—`` when missing, 6 significant digits, large integers whole."""
    if x is None:
        return "—"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if float(x).is_integer() and abs(x) >= 1000:
        return str(int(x))
    return f"{x:.6g}"


@dataclass(frozen=True)
class MediaProgress:
    """One progress event. Callbacks are serialized (never called concurrently)."""

    stage: str  # hash | comparison-start | frame | comparison-done
    comparisons_done: int
    comparisons_total: int
    comparison_id: str | None = None
    frames_done: int = 0
    frames_total: int | None = None
    bytes_hashed: int = 0


@dataclass
class ArmMedia:
    """One side of a comparison: which file, whether it verified, what decoding found."""

    role: Role
    request_id: str
    sha256: str | None
    location: Location | None
    probe: MediaProbe | None = None
    decode: DecodeStatus = "not-decoded"
    decode_error: str = ""

    @property
    def file(self) -> str:
        """The file as the bundle records it (else where it was found; else its digest)."""
        loc = self.location
        if loc is not None and (loc.recorded_path or loc.path):
            return str(loc.recorded_path or loc.path)
        return f"sha256 {self.sha256}" if self.sha256 else "no file recorded"

    @property
    def label(self) -> str:
        """``candidate output (request r1, file media/x.mp4)``: names the arm, request, file."""
        return f"{self.role} output (request {self.request_id}, file {self.file})"

    @property
    def mismatched(self) -> bool:
        """A file was found under the recorded path or name, with another digest."""
        return self.location is not None and self.location.status == MISMATCH

    @property
    def undecodable(self) -> bool:
        """The verified file does not decode: a failed output."""
        return self.decode == "does-not-decode"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "role": self.role,
            "request_id": self.request_id,
            "sha256": self.sha256,
            "location": self.location.to_dict() if self.location else None,
            "probe": self.probe.to_dict() if self.probe else None,
            "decode": self.decode,
            "decode_error": self.decode_error,
        }


@dataclass(frozen=True)
class MetricCheck:
    """A recorded metric next to its re-derivation under the frozen definition."""

    metric: str
    definition: str
    recorded: float | None
    recomputed: float | None
    tolerance: float | None
    status: MetricStatus
    detail: str = ""
    gates: tuple[tuple[str, RecomputedVerdict], ...] = ()
    """(gate id, verdict on the re-derived value) for every gate on this metric."""

    @property
    def delta(self) -> float | None:
        """``recomputed − recorded`` when both exist and are finite."""
        if self.recorded is None or self.recomputed is None:
            return None
        if not (math.isfinite(self.recorded) and math.isfinite(self.recomputed)):
            return None
        return self.recomputed - self.recorded

    @property
    def passes_anyway(self) -> bool:
        """Not reproduced, yet the re-derived value passes every gate on the metric."""
        return (
            self.status == Agreement.DISAGREE
            and bool(self.gates)
            and all(v == GateVerdict.PASS for _, v in self.gates)
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (infinite values as the strings ``inf``/``-inf``)."""
        return {
            "metric": self.metric,
            "definition": self.definition,
            "recorded": num(self.recorded),
            "recomputed": num(self.recomputed),
            "delta": num(self.delta),
            "tolerance": self.tolerance,
            "status": self.status,
            "detail": self.detail,
            "rederived_gates": dict(self.gates),
        }


@dataclass(frozen=True)
class GateResult:
    """One gate on one comparison, from the recorded and from the re-derived value."""

    gate_id: str
    comparison_id: str
    metric: str
    definition: str
    op: str
    threshold: float
    recorded_value: float | None
    recorded_verdict: RecordedVerdict
    recomputed_value: float | None
    recomputed_verdict: RecomputedVerdict
    close: bool = False
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "gate_id": self.gate_id,
            "comparison_id": self.comparison_id,
            "metric": self.metric,
            "definition": self.definition,
            "op": self.op,
            "threshold": self.threshold,
            "recorded_value": num(self.recorded_value),
            "recorded_verdict": self.recorded_verdict,
            "recomputed_value": num(self.recomputed_value),
            "recomputed_verdict": self.recomputed_verdict,
            "close": self.close,
            "detail": self.detail,
        }


@dataclass
class ComparisonReplay:
    """Everything the re-score established about one comparison."""

    comparison_id: str
    attempt_id: str
    baseline: ArmMedia
    candidate: ArmMedia
    frames_compared: int = 0
    coverage: list[CoverageCheck] = field(default_factory=list)
    metrics: list[MetricCheck] = field(default_factory=list)
    gates: list[GateResult] = field(default_factory=list)
    per_frame: dict[str, list[float]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def arms(self) -> tuple[ArmMedia, ArmMedia]:
        """(baseline, candidate)."""
        return self.baseline, self.candidate

    @property
    def coverage_failures(self) -> list[CoverageCheck]:
        """The coverage checks that failed (not-frozen checks do not fail)."""
        return [c for c in self.coverage if c.status == COVERAGE_FAIL]

    @property
    def coverage_ok(self) -> bool:
        """No coverage check failed (not-frozen checks do not fail)."""
        return not self.coverage_failures

    @property
    def failed(self) -> bool:
        """A sealed output does not decode, a gate or coverage check fails on the re-scored
        media, or a recorded metric is not reproduced."""
        return (
            any(a.undecodable for a in self.arms)
            or not self.coverage_ok
            or any(g.recomputed_verdict == GateVerdict.FAIL for g in self.gates)
            or any(m.status == Agreement.DISAGREE for m in self.metrics)
        )

    @property
    def verdict(self) -> ComparisonVerdict:
        """``MISMATCH``, ``FAIL``, ``INCOMPLETE`` or ``PASS``, in that precedence.

        MISMATCH: a file differs from its sealed digest; FAIL: see :attr:`failed`;
        INCOMPLETE: something could not be re-scored (a gate not ``pass``, a problem).
        """
        if any(a.mismatched for a in self.arms):
            return MediaVerdict.MISMATCH
        if self.failed:
            return MediaVerdict.FAIL
        if self.problems or any(g.recomputed_verdict != GateVerdict.PASS for g in self.gates):
            return MediaVerdict.INCOMPLETE
        return MediaVerdict.PASS

    def to_dict(self, *, per_frame: bool = False) -> dict[str, Any]:
        """A JSON-ready form; per-frame values only when asked (they are long)."""
        d: dict[str, Any] = {
            "comparison_id": self.comparison_id,
            "attempt_id": self.attempt_id,
            "verdict": self.verdict,
            "baseline": self.baseline.to_dict(),
            "candidate": self.candidate.to_dict(),
            "frames_compared": self.frames_compared,
            "coverage": [c.to_dict() for c in self.coverage],
            "metrics": [m.to_dict() for m in self.metrics],
            "gates": [g.to_dict() for g in self.gates],
            "problems": list(self.problems),
            "seconds": round(self.seconds, 3),
        }
        if per_frame:
            d["per_frame"] = {k: [num(x) for x in v] for k, v in self.per_frame.items()}
        return d


@dataclass(frozen=True)
class MediaGateSummary:
    """One gate over every re-scored comparison."""

    gate_id: str
    metric: str
    definition: str
    op: str
    threshold: float
    recorded_verdict: str
    recomputed_verdict: str
    counts: dict[str, int]
    needs_scorer: bool = False
    scorer_rule: str = ""
    """Why the gate does or does not need an attested scorer (``specs/gates.md``)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class Disagreement:
    """A place where the record and the re-score differ, side by side."""

    comparison_id: str
    kind: DisagreementKind
    name: str
    recorded: str
    recomputed: str
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return dict(self.__dict__)


@dataclass
class MediaReplayResult:
    """The media re-score of one bundle, and the reasons for its verdict.

    The verdict is the replay's (:meth:`replay.result.ReplayResult.media_outcome`):
    these reasons, by the one precedence of :func:`replay.engine.verdicts.decide`.
    """

    comparisons: list[ComparisonReplay]
    gates: list[MediaGateSummary]
    scorer: ScorerIdentity | None
    coverage_params: CoverageParams
    disagreements: list[Disagreement]
    problems: list[str]
    jobs: int
    device: str
    seconds: float
    execution: Execution | None = None
    """Executor, device, threads, LPIPS batches and retries (None: not recorded)."""

    # --- the reasons, one plain line each ------------------------------------------

    def integrity_failures(self) -> list[str]:
        """Media files that differ from their sealed SHA-256 (exit 1)."""
        return [
            f"{c.comparison_id}: the {a.label} differs from its sealed SHA-256"
            + (f": {a.location.detail}" if a.location and a.location.detail else "")
            for c in self.comparisons
            for a in c.arms
            if a.mismatched
        ]

    def failures(self) -> list[str]:
        """Why the re-score counts as failed (exit 4), naming comparison, arm and gate."""
        out: list[str] = []
        for c in self.comparisons:
            cid = c.comparison_id
            out += [
                f"{cid}: the sealed {a.label} does not decode: {a.decode_error}"
                for a in c.arms
                if a.undecodable
            ]
            out += [
                f"{cid}: gate {g.gate_id} fails on the re-scored value: {g.metric} "
                f"{fmt(g.recomputed_value)} is not {g.op} {fmt(g.threshold)}"
                for g in c.gates
                if g.recomputed_verdict == GateVerdict.FAIL
            ]
            out += [
                f"{cid}: coverage {x.check} fails on the {x.arm} "
                f"{'arms' if x.arm == 'both' else 'arm'}: observed {x.observed}, "
                f"expected {x.expected}"
                for x in c.coverage
                if x.status == COVERAGE_FAIL
            ]
            out += [
                f"{cid}: {_not_reproduced(m)}" for m in c.metrics if m.status == Agreement.DISAGREE
            ]
        return out

    def gaps(self) -> list[str]:
        """Why the re-score is incomplete (exit 5), one line each."""
        out = list(self.problems)
        judged_elsewhere = {
            c.comparison_id
            for c in self.comparisons
            if c.problems or any(a.mismatched or a.undecodable for a in c.arms)
        }
        for g in self.gates:
            if not any(r.gate_id == g.gate_id for c in self.comparisons for r in c.gates):
                # A frozen gate no comparison was re-scored for is not-computed: a gap,
                # never a pass (``specs/gates.md``), even with no line above naming it.
                out.append(f"gate {g.gate_id}: {g.recomputed_verdict}: no comparison re-scored")
                continue
            by_verdict: dict[str, list[GateResult]] = {}
            for c in self.comparisons:
                if c.comparison_id in judged_elsewhere:
                    continue
                for r in c.gates:
                    if r.gate_id == g.gate_id and r.recomputed_verdict not in (
                        GateVerdict.PASS,
                        GateVerdict.FAIL,
                    ):
                        by_verdict.setdefault(r.recomputed_verdict, []).append(r)
            for verdict, rs in by_verdict.items():
                ids = ", ".join(r.comparison_id for r in rs[:5]) + (", …" if len(rs) > 5 else "")
                why = next((r.detail for r in rs if r.detail), "")
                out.append(
                    f"gate {g.gate_id}: {verdict} on {len(rs)} comparison(s) ({ids})"
                    + (f": {why}" if why else "")
                )
        return out

    @property
    def limits(self) -> tuple[str, ...]:
        """What this re-score proves, and what it cannot."""
        arms = [a for c in self.comparisons for a in c.arms]
        absent = sum(1 for a in arms if a.location is None or a.location.status == ABSENT)
        out = [
            "Each media file used was found by SHA-256 and the bytes decoded are the bytes "
            "hashed: the re-scored values describe exactly the sealed outputs.",
            "Every metric was re-derived by the definition its gate freezes (specs/metrics.md), "
            "compared with the recorded value within that definition's tolerance, and every "
            "gate re-evaluated on the re-derived value by the one gate evaluator "
            "(specs/gates.md).",
            "It cannot show that the outputs came from the runs the receipts describe: a "
            "digest ties a file to a receipt, not to the hardware, the configuration or the "
            "prompt.",
            "Frames are paired in decode order (variable frame rate is not re-aligned); only "
            "8-bit 4:2:0 video is scored.",
        ]
        if absent:
            out.append(
                f"{absent} of {len(arms)} media file(s) were not supplied: their comparisons "
                "are not re-scored."
            )
        s = self.scorer
        if s is not None and s.attested:
            out.append(
                f"LPIPS ran from weights whose SHA-256 match scorer.json (lpips "
                f"{s.package_version}, torch {s.torch_version}, device {s.device}); the "
                "verdicts are as good as the weights scorer.json names."
            )
        elif s is not None:
            out.append(
                f"No attested scorer ({s.reason}): every gate whose metric needs an attested "
                "model is unattested, never pass."
            )
        defaults = sorted(k for k, v in self.coverage_params.sources.items() if v == "default")
        if defaults:
            out.append(
                "Coverage parameters the plan does not freeze use the defaults of "
                f"specs/metrics.md: {', '.join(defaults)}."
            )
        return tuple(out)

    def to_dict(self, *, per_frame: bool = False) -> dict[str, Any]:
        """A JSON-ready form of the whole result, less the verdict and its exit code (the
        replay's JSON view puts them first, from the one result)."""
        used = sorted(
            {g.definition for g in self.gates}
            | {m.definition for c in self.comparisons for m in c.metrics}
        )
        return {
            "integrity_failures": self.integrity_failures(),
            "failures": self.failures(),
            "gaps": self.gaps(),
            "limits": list(self.limits),
            "jobs": self.jobs,
            "device": self.device,
            "seconds": round(self.seconds, 3),
            "execution": self.execution.to_dict() if self.execution else None,
            "coverage_params": self.coverage_params.to_dict(),
            "definitions": {
                d: DEFINITIONS[c].summary if (c := canonical(d)) else UNSUPPORTED for d in used
            },
            "scorer": self.scorer.to_dict() if self.scorer else None,
            "gates": [g.to_dict() for g in self.gates],
            "disagreements": [d.to_dict() for d in self.disagreements],
            "problems": list(self.problems),
            "comparisons": [c.to_dict(per_frame=per_frame) for c in self.comparisons],
        }


def _not_reproduced(m: MetricCheck) -> str:
    """One line: recorded vs re-derived, the tolerance, the gate verdicts on the re-derived."""
    d = m.delta
    diff = f"|Δ| {fmt(abs(d))}" if d is not None else "differs"
    head = (
        f"recorded {m.metric} not reproduced under {m.definition}: recorded "
        f"{fmt(m.recorded)}, re-derived {fmt(m.recomputed)} ({diff} > tolerance {m.tolerance})"
    )
    if not m.gates:
        return head + "; no gate on it"
    verdicts = ", ".join(f"gate {gid} {v}" for gid, v in m.gates)
    if m.passes_anyway:
        return head + f"; the re-derived value passes its gate(s) ({verdicts})"
    return head + f"; on the re-derived value: {verdicts}"
