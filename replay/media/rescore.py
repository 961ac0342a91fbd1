"""Re-score a bundle's quality comparisons from raw media instead of trusting recorded metrics.

For each ``comparisons`` row: find both media files by SHA-256 (the bundle's
``artifacts`` table; names may differ), verify them, decode each once, check
coverage on each arm against the frozen plan, recompute every metric by its
frozen definition, compare with the recorded values, and re-evaluate every
gate from the recomputed values. LPIPS runs only from attested weights; when
they are missing or mismatch, LPIPS gates are ``unattested`` and the rest runs.

Entry point: :func:`rescore_bundle`. :func:`format_report` renders the result
as text for the CLI (the library never prints).
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any

from bundler.verify import OpenedBundle
from replay.media.audio import rms_ratio, spectral_cosine
from replay.media.coverage import (
    FAIL,
    PASS,
    CoverageCheck,
    CoverageParams,
    check_coverage,
    coverage_params,
)
from replay.media.definitions import DEFAULT_DEFINITION, DEFINITIONS, canonical
from replay.media.identity import OK, ArtifactRef, IdentityError, Location, locate, read_verified
from replay.media.lpips_attested import (
    LPIPS_DEFINITION,
    AttestedLpips,
    ScorerIdentity,
    check_device,
    load_attested_lpips,
    yuv420p_to_rgb,
)
from replay.media.probe import (
    DecodedMedia,
    MediaDecodeError,
    MediaProbe,
    MediaReader,
    YuvFrame,
    prefetch,
)
from replay.media.psnr import psnr_from_mses
from replay.media.ssim import ssim_ffmpeg_y_with_sse, ssim_wang_y

__all__ = [
    "ArmMedia",
    "ComparisonReplay",
    "Disagreement",
    "GateResult",
    "GateSummary",
    "MediaProgress",
    "MediaReplayResult",
    "MetricCheck",
    "PairScores",
    "format_report",
    "rescore_bundle",
    "score_pair",
]

UNATTESTED = "unattested"
NOT_COMPUTED = "not-computed"
UNSUPPORTED = "unsupported-definition"
NOT_RECORDED = "not-recorded"

LPIPS_BATCH_PIXELS = 1_000_000
LPIPS_BATCH_MAX = 8
"""Frames per LPIPS forward pass: as many as fit ``LPIPS_BATCH_PIXELS`` (at least 1, at
most ``LPIPS_BATCH_MAX``). Batching amortizes per-call overhead on small frames; at
720p one frame per pass is fastest on CPU (4 per pass measured 1.3× slower)."""


# ---------------------------------------------------------------- result types


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
    """One side of a comparison: which file, whether it was verified, what decoding found."""

    role: str  # baseline | candidate
    request_id: str
    sha256: str | None
    location: Location | None
    probe: MediaProbe | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "role": self.role,
            "request_id": self.request_id,
            "sha256": self.sha256,
            "location": self.location.to_dict() if self.location else None,
            "probe": self.probe.to_dict() if self.probe else None,
        }


@dataclass(frozen=True)
class MetricCheck:
    """A recorded metric next to its recomputation."""

    metric: str
    definition: str
    recorded: float | None
    recomputed: float | None
    tolerance: float | None
    status: (
        str  # agree | disagree | not-recorded | not-computed | unattested | unsupported-definition
    )
    detail: str = ""

    @property
    def delta(self) -> float | None:
        """``recomputed − recorded`` when both exist and are finite."""
        if self.recorded is None or self.recomputed is None:
            return None
        if not (math.isfinite(self.recorded) and math.isfinite(self.recomputed)):
            return None
        return self.recomputed - self.recorded

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (infinite values as the strings ``inf``/``-inf``)."""
        return {
            "metric": self.metric,
            "definition": self.definition,
            "recorded": _num(self.recorded),
            "recomputed": _num(self.recomputed),
            "delta": _num(self.delta),
            "tolerance": self.tolerance,
            "status": self.status,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class GateResult:
    """One gate on one comparison, from the recorded and from the recomputed value."""

    gate_id: str
    comparison_id: str
    metric: str
    definition: str
    op: str
    threshold: float
    recorded_value: float | None
    recorded_verdict: str  # PASS | FAIL | not-recorded
    recomputed_value: float | None
    recomputed_verdict: str  # PASS | FAIL | unattested | not-computed | unsupported-definition
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
            "recorded_value": _num(self.recorded_value),
            "recorded_verdict": self.recorded_verdict,
            "recomputed_value": _num(self.recomputed_value),
            "recomputed_verdict": self.recomputed_verdict,
            "close": self.close,
            "detail": self.detail,
        }


@dataclass
class ComparisonReplay:
    """Everything the replay established about one comparison."""

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
    def coverage_ok(self) -> bool:
        """No coverage check failed (not-frozen checks do not fail)."""
        return all(c.status != FAIL for c in self.coverage)

    @property
    def verdict(self) -> str:
        """``FAIL``, ``INCOMPLETE`` or ``PASS`` for this comparison.

        FAIL: a replayed gate or a coverage check fails, or a recorded metric
        disagrees; INCOMPLETE: something could not be re-scored.
        """
        if (
            not self.coverage_ok
            or any(g.recomputed_verdict == FAIL for g in self.gates)
            or any(m.status == "disagree" for m in self.metrics)
        ):
            return FAIL
        if self.problems or any(g.recomputed_verdict != PASS for g in self.gates):
            return "INCOMPLETE"
        return PASS

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
            d["per_frame"] = {k: [_num(x) for x in v] for k, v in self.per_frame.items()}
        return d


@dataclass(frozen=True)
class GateSummary:
    """One gate over every comparison."""

    gate_id: str
    metric: str
    definition: str
    op: str
    threshold: float
    recorded_verdict: str
    recomputed_verdict: str
    counts: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class Disagreement:
    """A place where the record and the replay differ, side by side."""

    comparison_id: str
    kind: str  # metric | gate | coverage | identity
    name: str
    recorded: str
    recomputed: str
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return dict(self.__dict__)


@dataclass
class MediaReplayResult:
    """The media replay of one bundle."""

    comparisons: list[ComparisonReplay]
    gates: list[GateSummary]
    scorer: ScorerIdentity | None
    coverage_params: CoverageParams
    disagreements: list[Disagreement]
    problems: list[str]
    jobs: int
    device: str
    seconds: float

    @property
    def identity_failed(self) -> bool:
        """Some media file was present but did not match its sealed digest."""
        return any(
            arm.location is not None and arm.location.status == "mismatch"
            for c in self.comparisons
            for arm in (c.baseline, c.candidate)
        )

    @property
    def failed(self) -> bool:
        """A gate or coverage check FAILs on recomputed values, or a metric disagrees."""
        return (
            any(g.recomputed_verdict == FAIL for g in self.gates)
            or any(not c.coverage_ok for c in self.comparisons)
            or any(m.status == "disagree" for c in self.comparisons for m in c.metrics)
        )

    @property
    def incomplete(self) -> bool:
        """Something could not be re-scored (absent media, unattested scorer, unknown id)."""
        return bool(self.problems) or any(
            g.recomputed_verdict != PASS for g in self.gates if g.recomputed_verdict != FAIL
        )

    @property
    def verdict(self) -> str:
        """``MISMATCH``, ``FAIL``, ``INCOMPLETE`` or ``PASS``, in that precedence."""
        if self.identity_failed:
            return "MISMATCH"
        if self.failed:
            return "FAIL"
        if self.incomplete:
            return "INCOMPLETE"
        return PASS

    @property
    def exit_code(self) -> int:
        """The project's exit codes: 1 integrity, 4 contradicted/failed, 5 unverifiable, 0 ok."""
        return {"MISMATCH": 1, "FAIL": 4, "INCOMPLETE": 5, PASS: 0}[self.verdict]

    def to_dict(self, *, per_frame: bool = False) -> dict[str, Any]:
        """A JSON-ready form of the whole result."""
        used = sorted(
            {g.definition for g in self.gates}
            | {m.definition for c in self.comparisons for m in c.metrics}
        )
        return {
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "jobs": self.jobs,
            "device": self.device,
            "seconds": round(self.seconds, 3),
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


def _num(x: float | None) -> float | str | None:
    if x is None:
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if math.isnan(x):
        return "nan"
    return x


# ---------------------------------------------------------------- bundle reading


@dataclass(frozen=True)
class _Gate:
    gate_id: str
    metric: str
    op: str
    threshold: float
    definition: str
    warn_within: float | None


@dataclass(frozen=True)
class _Cmp:
    comparison_id: str
    attempt_id: str
    baseline_request_id: str
    candidate_request_id: str
    baseline_sha256: str | None
    candidate_sha256: str | None
    metrics: dict[str, float]


def _rows(opened: OpenedBundle, table: str, columns: Sequence[str]) -> list[dict[str, Any]]:
    t = opened.table(table)
    rows: list[dict[str, Any]] = t.select([c for c in columns if c in t.column_names]).to_pylist()
    return rows


def _plan(opened: OpenedBundle) -> dict[str, Any] | None:
    camp = opened.document("campaign.json") or {}
    name = camp.get("plan")
    if not isinstance(name, str) or name not in opened.members:
        return None
    doc = json.loads(opened.members[name].data)
    return doc if isinstance(doc, dict) else None


def _read_bundle(opened: OpenedBundle) -> tuple[list[_Cmp], list[_Gate], list[ArtifactRef]]:
    receipts = {
        r["request_id"]: r.get("output_sha256")
        for r in _rows(opened, "receipts", ["request_id", "output_sha256"])
    }
    cmps: list[_Cmp] = []
    for r in _rows(
        opened,
        "comparisons",
        [
            "comparison_id",
            "attempt_id",
            "baseline_request_id",
            "candidate_request_id",
            "baseline_sha256",
            "candidate_sha256",
            "metrics",
        ],
    ):
        m = r.get("metrics") or []
        metrics = {str(k): float(v) for k, v in (m.items() if isinstance(m, dict) else m)}
        cmps.append(
            _Cmp(
                r["comparison_id"],
                r["attempt_id"],
                r["baseline_request_id"],
                r["candidate_request_id"],
                r.get("baseline_sha256") or receipts.get(r["baseline_request_id"]),
                r.get("candidate_sha256") or receipts.get(r["candidate_request_id"]),
                metrics,
            )
        )
    gates = [
        _Gate(
            g["gate_id"],
            g["metric"],
            g["op"],
            float(g["threshold"]),
            g["definition"],
            g.get("warn_within"),
        )
        for g in _rows(
            opened, "gates", ["gate_id", "metric", "op", "threshold", "definition", "warn_within"]
        )
    ]
    refs = [
        ArtifactRef(a["path"], a["sha256"], a.get("bytes"))
        for a in _rows(opened, "artifacts", ["path", "sha256", "bytes", "kind"])
        if a.get("sha256")
    ]
    return cmps, gates, refs


# ---------------------------------------------------------------- one comparison


_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": lambda v, t: v >= t,
    "<=": lambda v, t: v <= t,
    ">": lambda v, t: v > t,
    "<": lambda v, t: v < t,
    "==": lambda v, t: v == t,
}


class _Progress:
    """Serializes progress callbacks from worker threads and counts comparisons."""

    def __init__(self, cb: Callable[[MediaProgress], None] | None, total: int) -> None:
        self._cb = cb
        self._lock = threading.Lock()
        self.total = total
        self.done = 0

    def emit(self, stage: str, cid: str | None = None, **kw: Any) -> None:
        if stage == "comparison-done":
            with self._lock:
                self.done += 1
        if self._cb is None:
            return
        with self._lock:
            self._cb(MediaProgress(stage, self.done, self.total, cid, **kw))


@dataclass
class _Computed:
    values: dict[str, float] = field(default_factory=dict)  # definition id -> value
    why: dict[str, str] = field(default_factory=dict)  # definition id -> why not computed


@dataclass(frozen=True)
class _Context:
    """What every comparison of one bundle shares."""

    gates: Sequence[_Gate]
    locs: Mapping[str, Location]
    params: CoverageParams
    scorer: AttestedLpips | None
    progress: _Progress
    threads: int


SSIM_FFMPEG = "ssim/ffmpeg-y-frame-mean"
SSIM_WANG = "ssim/wang-gaussian-y-frame-mean"
PSNR = "psnr/y-mse-mean-db"
COSINE = "audio/stft-cosine-512-1024-2048"
RMS = "audio/rms-ratio"


class _FrameScores:
    """Per-frame video metrics of one comparison, fed pair by pair in decode order."""

    def __init__(self, defs: set[str], scorer: AttestedLpips | None) -> None:
        self.scorer = scorer if LPIPS_DEFINITION in defs else None
        self.wang = SSIM_WANG in defs
        self.per_frame: dict[str, list[float]] = {SSIM_FFMPEG: [], "mse/y": []}
        if self.wang:
            self.per_frame[SSIM_WANG] = []
        if self.scorer is not None:
            self.per_frame[LPIPS_DEFINITION] = []
        self._a: list[Any] = []
        self._b: list[Any] = []
        self.problem: str | None = None

    @property
    def frames(self) -> int:
        return len(self.per_frame[SSIM_FFMPEG])

    def add(self, fa: YuvFrame, fb: YuvFrame) -> None:
        if self.problem is not None:
            return
        if fa.y.shape != fb.y.shape:
            self.problem = f"resolutions differ: baseline {fa.y.shape}, candidate {fb.y.shape}"
            return
        s, sse = ssim_ffmpeg_y_with_sse(fa.y, fb.y)
        self.per_frame[SSIM_FFMPEG].append(s)
        self.per_frame["mse/y"].append(sse / fa.y.size)
        if self.wang:
            self.per_frame[SSIM_WANG].append(ssim_wang_y(fa.y, fb.y))
        if self.scorer is not None:
            if fa.u is None or fa.v is None or fb.u is None or fb.v is None:
                raise MediaDecodeError("chroma planes missing for LPIPS")
            self._a.append(yuv420p_to_rgb(fa.y, fa.u, fa.v))
            self._b.append(yuv420p_to_rgb(fb.y, fb.u, fb.v))
            batch = min(LPIPS_BATCH_MAX, max(1, LPIPS_BATCH_PIXELS // fa.y.size))
            if len(self._a) >= batch:
                self.flush()

    def flush(self) -> None:
        if self.scorer is not None and self._a:
            self.per_frame[LPIPS_DEFINITION].extend(self.scorer.distances(self._a, self._b))
            self._a.clear()
            self._b.clear()

    def into(self, out: _Computed, defs: set[str]) -> None:
        self.flush()
        for d in (SSIM_FFMPEG, SSIM_WANG, LPIPS_DEFINITION):
            if d != SSIM_FFMPEG and d not in defs:
                continue
            vals = self.per_frame.get(d)
            if d == LPIPS_DEFINITION and vals is None:
                out.why[d] = UNATTESTED
            elif self.problem or not vals:
                out.why[d] = self.problem or "no frame to compare"
            else:
                out.values[d] = math.fsum(vals) / len(vals)
        mses = self.per_frame["mse/y"]
        if mses and not self.problem:
            out.values[PSNR] = psnr_from_mses(mses)
        else:
            out.why[PSNR] = self.problem or "no frame to compare"


@dataclass
class PairScores:
    """Every metric of one (baseline, candidate) pair, from one decode of each file."""

    values: dict[str, float]
    """definition id -> value."""
    why: dict[str, str]
    """definition id -> why it was not computed."""
    per_frame: dict[str, list[float]]
    frames_compared: int
    baseline: DecodedMedia
    candidate: DecodedMedia
    problems: list[str]


def score_pair(
    baseline: bytes | Path,
    candidate: bytes | Path,
    *,
    definitions: Iterable[str] = (SSIM_FFMPEG, PSNR, COSINE, RMS),
    scorer: AttestedLpips | None = None,
    threads: int = 0,
    on_frame: Callable[[int], None] | None = None,
) -> PairScores:
    """Decode both files once, in lockstep on two threads, and score them.

    FFmpeg-definition SSIM and PSNR are always computed; Wang SSIM and LPIPS
    when their definition ids are asked for (LPIPS needs ``scorer``); audio
    and probe metrics always. Frames only one file has are counted (see the
    probes) but never scored.

    Args:
        baseline: the baseline file's verified bytes (or a path).
        candidate: the candidate's.
        definitions: definition ids to compute (see ``specs/metrics.md``).
        scorer: an attested LPIPS scorer, or None.
        threads: FFmpeg decoder threads per file (0: FFmpeg chooses).
        on_frame: called with the number of frame pairs decoded so far.

    Raises:
        MediaDecodeError: a file cannot be decoded as the definitions need.
    """
    defs = {c for d in definitions if (c := canonical(d))}
    scores = _FrameScores(defs, scorer)
    chroma = scores.scorer is not None
    ra = MediaReader(baseline, chroma=chroma, threads=threads)
    rb = MediaReader(candidate, chroma=chroma, threads=threads)
    pairs = zip_longest(prefetch(ra.frames()), prefetch(rb.frames()))
    for n, (fa, fb) in enumerate(pairs, start=1):
        if fa is not None and fb is not None:
            scores.add(fa, fb)
        if on_frame is not None:
            on_frame(n)
    out = _Computed()
    scores.into(out, defs)
    da, db = ra.finish(), rb.finish()
    _audio_metrics(out, da, db)
    _probe_metrics(out, db.probe)
    return PairScores(
        out.values,
        out.why,
        {k: v for k, v in scores.per_frame.items() if v},
        scores.frames,
        da,
        db,
        [scores.problem] if scores.problem else [],
    )


def _audio_metrics(out: _Computed, da: DecodedMedia, db: DecodedMedia) -> None:
    if da.audio is None or db.audio is None:
        out.why[COSINE] = out.why[RMS] = "an arm has no audio stream"
        return
    try:
        out.values[COSINE] = spectral_cosine(da.audio, db.audio)
        out.values[RMS] = rms_ratio(da.audio, db.audio)
    except ValueError as exc:
        out.why[COSINE] = out.why[RMS] = str(exc)


def _probe_metrics(out: _Computed, cand: MediaProbe) -> None:
    rate, samples, frames = (
        "audio/decoded-sample-rate-hz",
        "audio/decoded-samples-per-channel",
        "video/decoded-frame-count",
    )
    if cand.audio is not None:
        out.values[rate] = float(cand.audio.sample_rate)
        out.values[samples] = float(cand.audio.samples)
    else:
        out.why[rate] = out.why[samples] = "the candidate has no audio stream"
    if cand.video is not None:
        out.values[frames] = float(cand.video.frames)
    else:
        out.why[frames] = "the candidate has no video stream"


def _metric_defs(cmp: _Cmp, gates: Sequence[_Gate]) -> dict[str, str]:
    """metric name -> definition id its recorded value is compared under."""
    out: dict[str, str] = {}
    for g in gates:
        out.setdefault(g.metric, g.definition)
    for name in cmp.metrics:
        if name not in out and name in DEFAULT_DEFINITION:
            out[name] = DEFAULT_DEFINITION[name]
    return out


def _lookup(comp: _Computed, def_id: str, scorer_ok: bool) -> tuple[float | None, str]:
    """The recomputed value under ``def_id``, or None and why not."""
    c = canonical(def_id)
    if c is None:
        return None, UNSUPPORTED
    if c == LPIPS_DEFINITION and not scorer_ok:
        return None, UNATTESTED
    if c in comp.values:
        return comp.values[c], ""
    return None, comp.why.get(c, NOT_COMPUTED)


def _metric_checks(
    cmp: _Cmp, gates: Sequence[_Gate], comp: _Computed, scorer_ok: bool
) -> list[MetricCheck]:
    out: list[MetricCheck] = []
    for name, def_id in sorted(_metric_defs(cmp, gates).items()):
        c = canonical(def_id)
        value, why = _lookup(comp, def_id, scorer_ok)
        rec = cmp.metrics.get(name)
        tol = DEFINITIONS[c].tolerance if c else None
        if c is None:
            status = UNSUPPORTED
        elif value is None:
            status = UNATTESTED if why == UNATTESTED else NOT_COMPUTED
        elif rec is None:
            status = NOT_RECORDED
        elif value == rec or (tol is not None and abs(value - rec) <= tol):
            status = "agree"
        else:
            status = "disagree"
        out.append(MetricCheck(name, def_id, rec, value, tol, status, why))
    # FFmpeg SSIM and PSNR are always recomputed; show them even when not recorded.
    shown = {m.definition for m in out} | {m.metric for m in out}
    for def_id in (SSIM_FFMPEG, PSNR):
        d = DEFINITIONS[def_id]
        if def_id not in shown and d.metric not in shown and def_id in comp.values:
            out.append(
                MetricCheck(d.metric, def_id, None, comp.values[def_id], d.tolerance, NOT_RECORDED)
            )
    return out


def _gate_results(
    cmp: _Cmp, gates: Sequence[_Gate], comp: _Computed, scorer_ok: bool
) -> list[GateResult]:
    out: list[GateResult] = []
    for g in gates:
        op = _OPS.get(g.op)
        rec = cmp.metrics.get(g.metric)
        if rec is None or op is None:
            rec_verdict = NOT_RECORDED
        else:
            rec_verdict = PASS if op(rec, g.threshold) else FAIL
        value, why = _lookup(comp, g.definition, scorer_ok)
        if value is None or op is None:
            verdict = why if why in (UNATTESTED, UNSUPPORTED) else NOT_COMPUTED
        else:
            verdict = PASS if op(value, g.threshold) else FAIL
        margin = _margin(g.op, value, g.threshold)
        close = margin is not None and g.warn_within is not None and 0 <= margin <= g.warn_within
        out.append(
            GateResult(
                g.gate_id,
                cmp.comparison_id,
                g.metric,
                g.definition,
                g.op,
                g.threshold,
                rec,
                rec_verdict,
                value,
                verdict,
                close,
                "" if verdict in (PASS, FAIL) else why,
            )
        )
    return out


def _margin(op: str, value: float | None, threshold: float) -> float | None:
    """Distance to the threshold on the passing side (negative when failing)."""
    if value is None or not math.isfinite(value):
        return None
    if op in (">=", ">"):
        return value - threshold
    if op in ("<=", "<"):
        return threshold - value
    return -abs(value - threshold)


def _arm(role: str, request_id: str, sha: str | None, ctx: _Context) -> ArmMedia:
    return ArmMedia(role, request_id, sha, ctx.locs.get(sha) if sha else None)


def _read_arm(arm: ArmMedia, rep: ComparisonReplay) -> bytes | None:
    """The arm's verified bytes, or None with the reason in ``rep.problems``."""
    if arm.sha256 is None:
        rep.problems.append(f"{arm.role}: no media digest recorded for {arm.request_id}")
        return None
    loc = arm.location
    if loc is None or loc.status != OK or loc.path is None:
        st = loc.status if loc else "absent"
        rep.problems.append(f"{arm.role} media {st}: {loc.detail if loc else ''}".rstrip(": "))
        return None
    try:
        return read_verified(Path(loc.path), arm.sha256)
    except (OSError, IdentityError) as exc:
        rep.problems.append(f"{arm.role} media: {exc}")
        return None


def _coverage(rep: ComparisonReplay, da: DecodedMedia, db: DecodedMedia, ctx: _Context) -> None:
    rep.coverage.extend(check_coverage(da.probe, ctx.params, "baseline"))
    rep.coverage.extend(check_coverage(db.probe, ctx.params, "candidate"))
    fa = da.probe.video.frames if da.probe.video else None
    fb = db.probe.video.frames if db.probe.video else None
    if fa is not None and fb is not None:
        rep.coverage.append(
            CoverageCheck(
                "video/frames-equal",
                "both",
                PASS if fa == fb else FAIL,
                f"{fa} vs {fb}",
                "baseline frames == candidate frames",
                "metrics cover the frames both arms have; a mismatch is judged here",
            )
        )


def _rescore_one(cmp: _Cmp, ctx: _Context) -> ComparisonReplay:
    t0 = time.perf_counter()
    rep = ComparisonReplay(
        cmp.comparison_id,
        cmp.attempt_id,
        _arm("baseline", cmp.baseline_request_id, cmp.baseline_sha256, ctx),
        _arm("candidate", cmp.candidate_request_id, cmp.candidate_sha256, ctx),
    )
    ctx.progress.emit("comparison-start", cmp.comparison_id, frames_total=ctx.params.num_frames)
    comp = _Computed()
    data_a = _read_arm(rep.baseline, rep)
    data_b = _read_arm(rep.candidate, rep)
    defs = {c for g in ctx.gates if (c := canonical(g.definition))}
    defs |= {DEFAULT_DEFINITION[m] for m in cmp.metrics if m in DEFAULT_DEFINITION}
    if data_a is not None and data_b is not None:

        def on_frame(n: int) -> None:
            ctx.progress.emit(
                "frame", cmp.comparison_id, frames_done=n, frames_total=ctx.params.num_frames
            )

        try:
            ps = score_pair(
                data_a,
                data_b,
                definitions=defs,
                scorer=ctx.scorer,
                threads=ctx.threads,
                on_frame=on_frame,
            )
        except (MediaDecodeError, ValueError) as exc:
            rep.problems.append(f"decode: {exc}")
        else:
            comp = _Computed(ps.values, ps.why)
            rep.frames_compared = ps.frames_compared
            rep.per_frame = ps.per_frame
            rep.problems.extend(ps.problems)
            rep.baseline.probe, rep.candidate.probe = ps.baseline.probe, ps.candidate.probe
            _coverage(rep, ps.baseline, ps.candidate, ctx)
    for d in DEFINITIONS:
        if d not in comp.values and d not in comp.why:
            comp.why[d] = (
                "media not available" if data_a is None or data_b is None else NOT_COMPUTED
            )
    scorer_ok = ctx.scorer is not None
    rep.metrics = _metric_checks(cmp, ctx.gates, comp, scorer_ok)
    rep.gates = _gate_results(cmp, ctx.gates, comp, scorer_ok)
    rep.seconds = time.perf_counter() - t0
    ctx.progress.emit("comparison-done", cmp.comparison_id)
    return rep


# ---------------------------------------------------------------- the bundle


def _summaries(gates: Sequence[_Gate], reps: Sequence[ComparisonReplay]) -> list[GateSummary]:
    order = (FAIL, UNSUPPORTED, UNATTESTED, NOT_COMPUTED)
    out: list[GateSummary] = []
    for g in gates:
        results = [r for c in reps for r in c.gates if r.gate_id == g.gate_id]
        counts: dict[str, int] = {}
        for r in results:
            counts[r.recomputed_verdict] = counts.get(r.recomputed_verdict, 0) + 1
        recomputed = next((v for v in order if v in counts), PASS if results else NOT_COMPUTED)
        recs = {r.recorded_verdict for r in results}
        recorded = (
            FAIL if FAIL in recs else NOT_RECORDED if NOT_RECORDED in recs or not recs else PASS
        )
        out.append(
            GateSummary(
                g.gate_id, g.metric, g.definition, g.op, g.threshold, recorded, recomputed, counts
            )
        )
    return out


def _fmt(x: float | None) -> str:
    if x is None:
        return "—"
    if math.isinf(x):
        return "inf"
    if float(x).is_integer() and abs(x) >= 1000:
        return str(int(x))
    return f"{x:.6g}"


def _disagreements(reps: Sequence[ComparisonReplay]) -> list[Disagreement]:
    out: list[Disagreement] = []
    for c in reps:
        for arm in (c.baseline, c.candidate):
            if arm.location is not None and arm.location.status == "mismatch":
                out.append(
                    Disagreement(
                        c.comparison_id,
                        "identity",
                        f"{arm.role} media",
                        arm.sha256 or "—",
                        "mismatch",
                        arm.location.detail,
                    )
                )
        for m in c.metrics:
            if m.status == "disagree":
                out.append(
                    Disagreement(
                        c.comparison_id,
                        "metric",
                        f"{m.metric} ({m.definition})",
                        _fmt(m.recorded),
                        _fmt(m.recomputed),
                        f"|Δ| {_fmt(abs(m.delta)) if m.delta is not None else '—'} > "
                        f"tolerance {m.tolerance}",
                    )
                )
        for g in c.gates:
            if g.recorded_verdict not in (g.recomputed_verdict, NOT_RECORDED):
                out.append(
                    Disagreement(
                        c.comparison_id,
                        "gate",
                        g.gate_id,
                        f"{g.recorded_verdict} ({_fmt(g.recorded_value)})",
                        f"{g.recomputed_verdict} ({_fmt(g.recomputed_value)})",
                        f"{g.metric} {g.op} {_fmt(g.threshold)}; {g.detail}".rstrip("; "),
                    )
                )
        for cov in c.coverage:
            if cov.status == FAIL:
                out.append(
                    Disagreement(
                        c.comparison_id,
                        "coverage",
                        f"{cov.check} [{cov.arm}]",
                        "not checked by the record",
                        f"FAIL ({cov.observed})",
                        f"expected {cov.expected}. {cov.detail}".strip(),
                    )
                )
    return out


def _gate_problems(gates: Sequence[_Gate]) -> list[str]:
    problems: list[str] = []
    seen: dict[str, str] = {}
    for g in gates:
        if seen.setdefault(g.metric, g.definition) != g.definition:
            problems.append(
                f"gates freeze two definitions for metric {g.metric!r}: "
                f"{seen[g.metric]} and {g.definition}; recorded values are compared with the first"
            )
        if canonical(g.definition) is None:
            problems.append(f"gate {g.gate_id}: definition {g.definition!r} is not implemented")
    return problems


def _scorer(
    opened: OpenedBundle,
    gates: Sequence[_Gate],
    cmps: Sequence[_Cmp],
    *,
    weights_dir: Path | None,
    device: str,
    jobs: int,
) -> tuple[AttestedLpips | None, ScorerIdentity | None]:
    """The attested LPIPS scorer when some gate or record needs LPIPS (else no identity)."""
    need = any(canonical(g.definition) == LPIPS_DEFINITION for g in gates) or any(
        "lpips" in c.metrics for c in cmps
    )
    if not need:
        return None, None
    check_device(device)
    scorer, identity = load_attested_lpips(
        opened.document("scorer.json"), weights_dir, device, jobs=jobs
    )
    if scorer is not None and jobs > 1 and len(cmps) > 1:
        scorer.cpu_threads = max(1, (os.cpu_count() or 1) // jobs)
    return scorer, identity


def rescore_bundle(
    opened: OpenedBundle,
    media_dirs: Sequence[Path],
    *,
    weights_dir: Path | None = None,
    jobs: int = 1,
    device: str = "cpu",
    progress: Callable[[MediaProgress], None] | None = None,
    comparison_ids: Collection[str] | None = None,
) -> MediaReplayResult:
    """Re-score every comparison of ``opened`` from the media found under ``media_dirs``.

    Args:
        opened: the bundle, from :func:`bundler.verify.open_bundle` (verify it
            first: this trusts its tables).
        media_dirs: directories searched recursively for media, matched by
            SHA-256 against the bundle's ``artifacts`` table.
        weights_dir: ``--scorer-weights DIR`` for LPIPS; None makes LPIPS
            gates ``unattested``.
        jobs: comparisons re-scored in parallel (threads), and hashing threads.
        device: torch device for LPIPS: ``cpu``, ``cuda[:N]`` or ``npu[:N]``.
        progress: called per hashing step, per comparison and per frame;
            calls are serialized.
        comparison_ids: re-score only these comparisons (None: all). An id
            the bundle does not have is reported in ``problems``.

    Returns:
        The result: per comparison recorded vs recomputed metrics, coverage,
        gate verdicts re-evaluated from recomputed values, and disagreements.

    Raises:
        replay.media.lpips_attested.DeviceError: ``device`` is not available
            (a usage error), raised before any media work.
    """
    t0 = time.perf_counter()
    jobs = max(1, int(jobs))
    cmps, gates, refs = _read_bundle(opened)
    problems: list[str] = []
    if comparison_ids is not None:
        wanted_ids = set(comparison_ids)
        problems.extend(
            f"no comparison {cid!r} in the bundle"
            for cid in sorted(wanted_ids - {c.comparison_id for c in cmps})
        )
        cmps = [c for c in cmps if c.comparison_id in wanted_ids]
    params = coverage_params(_plan(opened))
    prog = _Progress(progress, len(cmps))
    problems.extend(_gate_problems(gates))
    scorer, identity = _scorer(
        opened, gates, cmps, weights_dir=weights_dir, device=device, jobs=jobs
    )
    if identity is not None and not identity.attested:
        problems.append(f"LPIPS unattested: {identity.reason}")

    wanted = {d for c in cmps for d in (c.baseline_sha256, c.candidate_sha256) if d}

    def hashed(n: int) -> None:
        prog.emit("hash", bytes_hashed=n)

    locs = locate(wanted, refs, list(media_dirs), jobs=jobs, progress=hashed if progress else None)
    parallel = jobs > 1 and len(cmps) > 1
    # One comparison at a time lets FFmpeg thread each decoder; in parallel, one thread each.
    ctx = _Context(gates, locs, params, scorer, prog, 1 if parallel else 0)

    def one(c: _Cmp) -> ComparisonReplay:
        return _rescore_one(c, ctx)

    if not parallel:
        reps = [one(c) for c in cmps]
    else:
        with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="media-replay") as pool:
            reps = list(pool.map(one, cmps))
    for c in reps:
        problems.extend(f"{c.comparison_id}: {p}" for p in c.problems)
    return MediaReplayResult(
        comparisons=reps,
        gates=_summaries(gates, reps),
        scorer=identity,
        coverage_params=params,
        disagreements=_disagreements(reps),
        problems=problems,
        jobs=jobs,
        device=device,
        seconds=time.perf_counter() - t0,
    )


# ---------------------------------------------------------------- text


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def format_report(result: MediaReplayResult) -> str:
    """Render ``result`` as text: gates, disagreements side by side, per-comparison detail."""
    lines = [
        f"media replay: {result.verdict} ({len(result.comparisons)} comparisons, "
        f"{result.seconds:.1f} s, jobs {result.jobs}, device {result.device})"
    ]
    if result.scorer is not None:
        s = result.scorer
        lines.append(f"LPIPS scorer: {s.status} — {s.reason}")
        for w in s.weights:
            lines.append(
                f"  {w.role}: {w.status} sha256 {w.sha256[:16]}… "
                f"({w.found_at or w.recorded_file}) {w.detail}".rstrip()
            )
    p = result.coverage_params
    lines.append(
        "coverage: frames == "
        f"{p.num_frames}, audio samples in [expected, expected + "
        f"{p.padding_tolerance_samples}] (expected from {p.expected_seconds_from}), "
        f"A/V start/end within {p.av_tolerance_s} s"
    )
    if result.gates:
        lines.append("")
        rows = [["gate", "metric", "definition", "rule", "recorded", "replayed", "per comparison"]]
        for g in result.gates:
            counts = ", ".join(f"{k} {v}" for k, v in sorted(g.counts.items()))
            rows.append(
                [
                    g.gate_id,
                    g.metric,
                    g.definition,
                    f"{g.op} {_fmt(g.threshold)}",
                    g.recorded_verdict,
                    g.recomputed_verdict,
                    counts,
                ]
            )
        lines.extend(_table(rows))
    if result.disagreements:
        lines.append("")
        lines.append("disagreements (recorded | replayed):")
        rows = [["comparison", "kind", "what", "recorded", "replayed", "detail"]]
        rows.extend(
            [d.comparison_id, d.kind, d.name, d.recorded, d.recomputed, d.detail]
            for d in result.disagreements
        )
        lines.extend(_table(rows))
    for c in result.comparisons:
        lines.append("")
        lines.append(
            f"{c.comparison_id}: {c.verdict}, {c.frames_compared} frames compared, "
            f"{c.seconds:.2f} s"
        )
        rows = [["metric", "definition", "recorded", "replayed", "Δ", "status"]]
        for m in c.metrics:
            rows.append(
                [
                    m.metric,
                    m.definition,
                    _fmt(m.recorded),
                    _fmt(m.recomputed),
                    _fmt(m.delta),
                    m.status + (f" ({m.detail})" if m.detail and m.status != "agree" else ""),
                ]
            )
        lines.extend("  " + ln for ln in _table(rows))
        bad = [cv for cv in c.coverage if cv.status != PASS]
        if bad:
            for cv in bad:
                lines.append(
                    f"  coverage {cv.check} [{cv.arm}]: {cv.status} "
                    f"observed {cv.observed}, expected {cv.expected}"
                )
        for prob in c.problems:
            lines.append(f"  problem: {prob}")
    return "\n".join(lines)
