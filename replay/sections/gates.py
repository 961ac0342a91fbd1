"""The gate rules, once: operators, margins, *close*, the scorer requirement, reproduction.

Both the statistical replay (:mod:`replay.sections.quality`, recorded metric values) and
the media re-score (:mod:`replay.media`, values re-derived from the raw media)
evaluate gates here and nowhere else. The contract is ``specs/gates.md``.

- **Operators** ``>=``, ``>``, ``<=``, ``<``, ``==``: a value passes when
  ``value op threshold`` holds, exactly as frozen (inclusive or exclusive).
- **Margin**: the exact distance on the passing side: ``v − t`` for ``>=``/``>``,
  ``t − v`` for ``<=``/``<``, ``−|v − t|`` for ``==``; negative when failing.
- **Close**: a *passing* check whose margin is at most ``warn_within``.
- **Scorer requirement**: whether a gate needs an attested model identity
  (``scorer.json``) is a property of the *metric*, looked up in the closed
  table :data:`METRIC_TABLE` on the gate's ``metric`` and ``definition``
  (case-insensitively). A metric not in the table is treated as model-based. An
  author cannot waive the requirement (``requires_scorer: false`` is ignored
  and the requirement says it was overridden); ``requires_scorer: true`` adds it
  to any metric. Without an attested scorer every check of such a gate is
  ``unattested``, never ``pass``.
- **Reproduction**: a re-derived value reproduces a recorded one when they are
  equal or differ by at most the definition's tolerance.

This module imports nothing heavier than :mod:`fractions`: statistical replay
never loads numpy-based media code through it.
"""

from __future__ import annotations

import functools
import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final, Literal, cast, get_args

from bundler.errors import BundleFormatError, Problem
from replay.engine.verdicts import GateVerdict

__all__ = [
    "FAIL",
    "METRIC_TABLE",
    "MODEL_FREE_DEFINITIONS",
    "MODEL_FREE_DEFINITION_FAMILIES",
    "OPS",
    "PASS",
    "UNATTESTED",
    "UNKNOWN_METRIC",
    "VERDICTS",
    "Gate",
    "GateEvaluation",
    "MetricEntry",
    "Op",
    "ScorerBasis",
    "ScorerRequirement",
    "Verdict",
    "count_verdicts",
    "exact",
    "reproduces",
    "scorer_requirement",
    "worst",
]

Op = Literal[">=", ">", "<=", "<", "=="]
Verdict = Literal[GateVerdict.PASS, GateVerdict.FAIL, GateVerdict.UNATTESTED]
ScorerBasis = Literal["model-based", "unknown", "model-free", "declared"]

# The names the sections import; the words are :class:`GateVerdict`'s.
PASS: Final = GateVerdict.PASS
FAIL: Final = GateVerdict.FAIL
UNATTESTED: Final = GateVerdict.UNATTESTED
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
OPS: tuple[Op, ...] = get_args(Op)

UNKNOWN_METRIC: Final = "unknown metric: not in the table, treated as model-based"
"""How a requirement that comes from an unknown metric or definition name begins."""

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
    "==": operator.eq,
}


# ---------------------------------------------------------------- the metric table


@dataclass(frozen=True)
class MetricEntry:
    """One row of the closed metric table.

    ``keys`` are matched against the words of the gate's metric name and of its
    definition id, lower-cased (a word is a run of letters and digits). With
    ``match="word"`` a key matches a whole word; with ``match="substring"`` it
    matches anywhere (used for distinctive names such as ``lpips``, so that
    ``LPIPS``, ``lpips_alex`` and ``LPIPS/alex-v0.1`` all match).
    """

    name: str
    model: str | None
    """The learned model the value depends on; None for a model-free metric."""
    why: str
    keys: tuple[str, ...]
    match: Literal["word", "substring", "exact"] = "word"

    @property
    def needs_model(self) -> bool:
        """True when the metric's value depends on a learned model."""
        return self.model is not None


METRIC_TABLE: tuple[MetricEntry, ...] = (
    # ---- model-based: the value depends on learned weights, so only an attested
    # identity (scorer.json, weights by SHA-256) makes a verdict on it mean anything.
    MetricEntry(
        "lpips",
        "a pretrained backbone (AlexNet, VGG or SqueezeNet) plus learned linear layers",
        "other weights give other distances for the same frames",
        ("lpips",),
        "substring",
    ),
    MetricEntry(
        "dists",
        "VGG16 features with learned structure/texture weights",
        "the value is a function of the trained weights",
        ("dists",),
        "substring",
    ),
    MetricEntry(
        "vmaf",
        "a trained SVM regression model (libvmaf model file, e.g. vmaf_v0.6.1)",
        "VMAF fuses model-free elementary features with a trained model; another "
        "model file (or version) gives other scores",
        ("vmaf",),
        "substring",
    ),
    MetricEntry(
        "fid",
        "Inception-v3 features",
        "Fréchet Inception Distance is computed in the feature space of a trained network",
        ("fid",),
    ),
    MetricEntry(
        "fvd",
        "I3D video features",
        "Fréchet Video Distance is computed in the feature space of a trained network",
        ("fvd",),
    ),
    MetricEntry(
        "kid",
        "Inception-v3 features",
        "Kernel Inception Distance is computed in the feature space of a trained network",
        ("kid",),
    ),
    MetricEntry(
        "clip_score",
        "a CLIP image/text encoder",
        "the score is a cosine between embeddings of a trained model",
        ("clip", "clipscore"),
    ),
    MetricEntry(
        "brisque",
        "a support-vector regressor trained on rated images",
        "the quality score is the trained regressor's output",
        ("brisque",),
        "substring",
    ),
    MetricEntry(
        "niqe",
        "a multivariate Gaussian fitted to a corpus of pristine images",
        "the fitted model parameters define the score",
        ("niqe",),
        "substring",
    ),
    MetricEntry(
        "visqol",
        "a trained support-vector regression mapping (audio mode)",
        "the MOS mapping is a trained model",
        ("visqol",),
        "substring",
    ),
    MetricEntry(
        "dnsmos",
        "a neural network trained on human ratings",
        "the score is a network's output",
        ("dnsmos",),
        "substring",
    ),
    # ---- model-free: a closed formula over the decoded samples; matched by exact
    # metric name only (lower case, '-' and ' ' read as '_').
    MetricEntry("ssim", None, "a closed formula over luma windows", ("ssim",), "exact"),
    MetricEntry("ms_ssim", None, "SSIM over a fixed image pyramid", ("ms_ssim",), "exact"),
    MetricEntry("psnr", None, "10·log10(peak² / MSE)", ("psnr",), "exact"),
    MetricEntry("mse", None, "mean squared difference of samples", ("mse",), "exact"),
    MetricEntry(
        "audio_spectral_cosine",
        None,
        "cosine of STFT magnitudes",
        ("audio_spectral_cosine",),
        "exact",
    ),
    MetricEntry("audio_rms_ratio", None, "ratio of RMS levels", ("audio_rms_ratio",), "exact"),
    MetricEntry(
        "audio_sample_rate", None, "a decoded stream property", ("audio_sample_rate",), "exact"
    ),
    MetricEntry("audio_samples", None, "a count of decoded samples", ("audio_samples",), "exact"),
    MetricEntry("frame_count", None, "a count of decoded frames", ("frame_count",), "exact"),
)
"""The closed table: whether a metric's value depends on a learned model (``specs/gates.md``)."""

MODEL_FREE_DEFINITIONS: frozenset[str] = frozenset(
    {
        "ssim/ffmpeg-y-frame-mean",
        "ssim/wang-gaussian-y-frame-mean",
        "psnr/y-mse-mean-db",
        "audio/stft-cosine-512-1024-2048",
        "audio/rms-ratio",
        "audio/rms-ratio-candidate-over-baseline",
        "audio/decoded-sample-rate-hz",
        "audio/decoded-samples-per-channel",
        "video/decoded-frame-count",
    }
)
"""Definition ids (compared lower-cased) known to be model-free."""

MODEL_FREE_DEFINITION_FAMILIES: frozenset[str] = frozenset({"ssim", "ms-ssim", "psnr", "mse"})
"""A definition whose family (the text before its first ``/``) is one of these is model-free
unless a model-based key occurs in it (``ssim/ffmpeg-y`` is; ``ssim/lpips-mix`` is not)."""

_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _matches(entry: MetricEntry, text: str) -> bool:
    low = text.lower()
    if entry.match == "substring":
        return any(k in low for k in entry.keys)
    if entry.match == "word":
        words = set(_words(low))
        return any(k in words for k in entry.keys)
    return re.sub(r"[-\s]+", "_", low.strip()) in entry.keys


def _model_free_definition(definition: str) -> bool:
    low = definition.strip().lower()
    return low in MODEL_FREE_DEFINITIONS or low.split("/", 1)[0] in MODEL_FREE_DEFINITION_FAMILIES


# ---------------------------------------------------------------- the scorer requirement


@dataclass(frozen=True)
class ScorerRequirement:
    """Whether a gate needs an attested scorer, and why."""

    needed: bool
    basis: ScorerBasis
    reason: str
    overridden: bool = False
    """True when the gate said ``requires_scorer: false`` and that was ignored."""


def scorer_requirement(
    metric: str, definition: str, requires_scorer: bool | None = None
) -> ScorerRequirement:
    """The scorer requirement of a gate on ``metric`` under ``definition``.

    Decided in this order: a model-based table entry matching the metric name or
    the definition id (any case) → needed; else both the metric name and the
    definition known model-free → needed only when ``requires_scorer`` is true;
    else (a name not in the table) → needed, as model-based. ``requires_scorer:
    false`` never lowers a requirement (``overridden`` says it was ignored).
    """
    hits = [
        e
        for e in METRIC_TABLE
        if e.needs_model and (_matches(e, metric) or _matches(e, definition))
    ]
    if hits:
        e = hits[0]
        req = ScorerRequirement(
            True,
            "model-based",
            f"{e.name} is model-based ({e.model}): {e.why}; it needs an attested scorer "
            "identity (scorer.json)",
        )
    else:
        metric_free = any(not e.needs_model and _matches(e, metric) for e in METRIC_TABLE)
        def_free = _model_free_definition(definition)
        if metric_free and def_free:
            if requires_scorer is True:
                return ScorerRequirement(True, "declared", "the gate says requires_scorer: true")
            return ScorerRequirement(False, "model-free", f"{metric} is model-free")
        unknown = [
            *([] if metric_free else [f"metric {metric!r}"]),
            *([] if def_free else [f"definition {definition!r}"]),
        ]
        req = ScorerRequirement(
            True,
            "unknown",
            f"{UNKNOWN_METRIC} ({' and '.join(unknown)}); it needs an "
            "attested scorer identity (scorer.json)",
        )
    if requires_scorer is False:
        return ScorerRequirement(
            True,
            req.basis,
            req.reason + "; the gate's requires_scorer: false was ignored (an author cannot "
            "waive the requirement)",
            overridden=True,
        )
    return req


# ---------------------------------------------------------------- one gate


def exact(value: float) -> Fraction | None:
    """The exact value of a double (its binary fraction), or None when not finite."""
    return Fraction(value) if math.isfinite(value) else None


@dataclass(frozen=True)
class GateEvaluation:
    """One value against one gate."""

    verdict: Verdict
    passes_value: bool
    """What the value gives by the operator alone, attested or not."""
    margin: Fraction | None
    """Exact margin; None when the value is not finite."""
    close: bool
    note: str = ""
    """Why the verdict is ``unattested`` (empty otherwise)."""


@dataclass(frozen=True)
class Gate:
    """One frozen gate (a ``gates`` row)."""

    gate_id: str
    metric: str
    op: Op
    threshold: float
    definition: str
    warn_within: float | None = None
    requires_scorer: bool | None = None

    def __post_init__(self) -> None:
        if self.op not in _COMPARE:
            raise BundleFormatError(
                f"gate {self.gate_id!r}: operator {self.op!r} is not one of {', '.join(OPS)}",
                [Problem("tables/gates.parquet", self.gate_id, "op", f"unknown {self.op!r}")],
            )

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Gate:
        """A gate from a ``gates`` table row (missing optional fields read as null).

        Raises:
            BundleFormatError: an operator outside :data:`OPS`.
        """
        warn = row.get("warn_within")
        req = row.get("requires_scorer")
        return cls(
            gate_id=str(row["gate_id"]),
            metric=str(row["metric"]),
            op=cast(Op, str(row["op"])),  # checked in __post_init__
            threshold=float(row["threshold"]),
            definition=str(row["definition"]),
            warn_within=None if warn is None else float(warn),
            requires_scorer=None if req is None else bool(req),
        )

    @functools.cached_property
    def scorer(self) -> ScorerRequirement:
        """The scorer requirement (from the metric table; see :func:`scorer_requirement`)."""
        return scorer_requirement(self.metric, self.definition, self.requires_scorer)

    @property
    def needs_scorer(self) -> bool:
        """True when a check of this gate needs an attested scorer identity."""
        return self.scorer.needed

    @property
    def rule(self) -> str:
        """``metric op threshold`` as text."""
        return f"{self.metric} {self.op} {self.threshold:g}"

    def passes(self, value: float) -> bool:
        """``value op threshold`` (False for NaN)."""
        return bool(_COMPARE[self.op](value, self.threshold))

    def margin(self, value: Fraction) -> Fraction:
        """Distance from ``value`` to the threshold on the passing side (negative: failing)."""
        t = Fraction(self.threshold)
        if self.op in (">=", ">"):
            return value - t
        if self.op in ("<=", "<"):
            return t - value
        return -abs(value - t)

    def evaluate(self, value: float, *, attested: bool) -> GateEvaluation:
        """Evaluate ``value``; ``attested``: an attested scorer identity is at hand."""
        ok = self.passes(value)
        v = exact(value)
        margin = None if v is None else self.margin(v)
        close = (
            ok
            and margin is not None
            and self.warn_within is not None
            and margin <= Fraction(self.warn_within)
        )
        if self.needs_scorer and not attested:
            return GateEvaluation(UNATTESTED, ok, margin, close, self.scorer.reason)
        return GateEvaluation(PASS if ok else FAIL, ok, margin, close)


# ---------------------------------------------------------------- many checks


def count_verdicts(verdicts: Iterable[str]) -> dict[str, int]:
    """How many of each verdict, in first-seen order."""
    out: dict[str, int] = {}
    for v in verdicts:
        out[v] = out.get(v, 0) + 1
    return out


def worst(verdicts: Iterable[str], order: Iterable[str] = (FAIL, UNATTESTED, PASS)) -> str | None:
    """The first verdict of ``order`` (most severe first) present in ``verdicts``, or None.

    Raises:
        ValueError: a verdict that ``order`` does not rank.
    """
    seen = set(verdicts)
    ranked = list(order)
    if unranked := seen - set(ranked):
        raise ValueError(f"verdicts not ranked: {sorted(unranked)}")
    return next((v for v in ranked if v in seen), None)


def reproduces(recorded: float, rederived: float, tolerance: float) -> bool:
    """True when ``rederived`` reproduces ``recorded``: equal, or within ``tolerance`` exactly.

    Infinite values reproduce only an equal infinity; NaN reproduces nothing.
    """
    if recorded == rederived:
        return True
    a, b = exact(recorded), exact(rederived)
    return a is not None and b is not None and abs(b - a) <= Fraction(tolerance)
