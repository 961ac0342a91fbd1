"""The one gate evaluator (``replay/sections/gates.py``, ``specs/gates.md``) and its use by quality.

Expected values are worked out by hand: thresholds and values are dyadic
fractions (0.5, 0.75, …) wherever a margin is compared exactly, so the
expected margin is plain arithmetic, not a re-run of the code under test.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pyarrow as pa
import pytest

from bundler.errors import BundleFormatError
from bundler.format.plan_model import ScorerDoc
from replay.inputs import ReplayInputs
from replay.sections.gates import (
    FAIL,
    METRIC_TABLE,
    OPS,
    PASS,
    UNATTESTED,
    UNKNOWN_METRIC,
    Gate,
    count_verdicts,
    reproduces,
    scorer_requirement,
    worst,
)
from replay.sections.quality import check_quality


def gate(op: str = ">=", threshold: float = 0.5, **kw: Any) -> Gate:
    row = {
        "gate_id": "g",
        "metric": "ssim",
        "op": op,
        "threshold": threshold,
        "definition": "ssim/ffmpeg-y-frame-mean",
        **kw,
    }
    return Gate.from_row(row)


# ---------------------------------------------------------------- operators and margins


@pytest.mark.parametrize(
    ("op", "value", "passes", "margin"),
    [
        # threshold 0.5; margins by hand: v - t for >=/>; t - v for <=/<; -|v - t| for ==
        (">=", 0.75, True, Fraction(1, 4)),
        (">=", 0.5, True, Fraction(0)),
        (">=", 0.25, False, Fraction(-1, 4)),
        (">", 0.75, True, Fraction(1, 4)),
        (">", 0.5, False, Fraction(0)),  # exclusive: the threshold itself fails
        ("<=", 0.25, True, Fraction(1, 4)),
        ("<=", 0.5, True, Fraction(0)),
        ("<=", 0.75, False, Fraction(-1, 4)),
        ("<", 0.5, False, Fraction(0)),
        ("<", 0.25, True, Fraction(1, 4)),
        ("==", 0.5, True, Fraction(0)),
        ("==", 0.75, False, Fraction(-1, 4)),
        ("==", 0.25, False, Fraction(-1, 4)),
    ],
)
def test_operator_and_exact_margin(op: str, value: float, passes: bool, margin: Fraction) -> None:
    ev = gate(op).evaluate(value, attested=False)
    assert ev.passes_value is passes
    assert ev.verdict == (PASS if passes else FAIL)  # ssim needs no scorer
    assert ev.margin == margin


def test_margin_is_exact_not_float() -> None:
    # 0.1 + 0.2 != 0.3 in floats; the margin of 0.3 against >= 0.1 is the exact
    # difference of the two doubles, Fraction(0.3) - Fraction(0.1).
    ev = gate(">=", 0.1).evaluate(0.3, attested=False)
    assert ev.margin == Fraction(0.3) - Fraction(0.1)
    assert ev.margin != Fraction(1, 5)


def test_close_is_a_passing_margin_at_most_warn_within() -> None:
    g = gate(">=", 0.5, warn_within=0.25)
    assert g.evaluate(0.75, attested=False).close  # margin 1/4 == warn_within: close
    assert not g.evaluate(0.875, attested=False).close  # margin 3/8
    assert not g.evaluate(0.25, attested=False).close  # failing is not "close"
    strict = gate(">", 0.5, warn_within=0.25)
    assert not strict.evaluate(0.5, attested=False).close  # margin 0 but failing
    assert not gate(">=", 0.5).evaluate(0.5, attested=False).close  # no warn_within


def test_non_finite_values() -> None:
    for op in OPS:
        ev = gate(op).evaluate(math.nan, attested=False)
        assert ev.verdict == FAIL and ev.margin is None
    ev = gate(">=").evaluate(math.inf, attested=False)
    assert ev.verdict == PASS and ev.margin is None and not ev.close


def test_an_unknown_operator_is_a_format_error() -> None:
    with pytest.raises(BundleFormatError, match="operator '=>'"):
        gate("=>")


def test_optional_fields_read_as_null() -> None:
    g = Gate.from_row(
        {"gate_id": "g", "metric": "psnr", "op": "<", "threshold": 40, "definition": "psnr/x"}
    )
    assert (g.warn_within, g.requires_scorer, g.threshold) == (None, None, 40.0)


# ---------------------------------------------------------------- the scorer requirement


@pytest.mark.parametrize(
    ("metric", "definition", "requires", "needed", "basis"),
    [
        ("lpips", "lpips/alex-v0.1-frame-mean", None, True, "model-based"),
        ("lpips", "perceptual/alex-v0.1", None, True, "model-based"),  # definition renamed
        ("LPIPS", "LPIPS/alex-v0.1-frame-mean", None, True, "model-based"),  # capitalised
        ("lpips_alex", "frame-mean/alex", None, True, "model-based"),
        ("perceptual", "LPIPS/alex", None, True, "model-based"),  # only the definition says it
        ("lpips", "lpips/alex-v0.1-frame-mean", False, True, "model-based"),  # waiver ignored
        ("dists", "dists/vgg16", None, True, "model-based"),
        ("vmaf", "vmaf/v0.6.1", None, True, "model-based"),
        ("VMAF_NEG", "libvmaf/vmaf_v0.6.1neg", None, True, "model-based"),
        ("fid", "fid/inception-v3", None, True, "model-based"),
        ("fvd", "fvd/i3d", None, True, "model-based"),
        ("clip_score", "clip/vit-b-32", None, True, "model-based"),
        ("ssim", "ssim/lpips-hybrid", None, True, "model-based"),  # a model in the definition
        ("ssim", "ssim/ffmpeg-y-frame-mean", None, False, "model-free"),
        ("SSIM", "SSIM/ffmpeg-y", None, False, "model-free"),
        ("ssim", "ssim/wang-gaussian-y-frame-mean", False, False, "model-free"),
        ("ms-ssim", "ms-ssim/y", None, False, "model-free"),
        ("psnr", "psnr/y-mse-mean-db", None, False, "model-free"),
        ("audio_spectral_cosine", "audio/stft-cosine-512-1024-2048", None, False, "model-free"),
        ("audio_rms_ratio", "audio/rms-ratio-candidate-over-baseline", None, False, "model-free"),
        ("audio_sample_rate", "audio/decoded-sample-rate-hz", None, False, "model-free"),
        ("audio_samples", "audio/decoded-samples-per-channel", None, False, "model-free"),
        ("frame_count", "video/decoded-frame-count", None, False, "model-free"),
        ("ssim", "ssim/ffmpeg-y-frame-mean", True, True, "declared"),  # strengthened
        ("flow", "flow/raft", None, True, "unknown"),
        ("sharpness", "ssim/ffmpeg-y-frame-mean", False, True, "unknown"),
        ("ssim", "my-own-ssim", None, True, "unknown"),  # definition not in the table
        ("audio_spectral_cosine", "audio/clap-similarity", None, True, "unknown"),
    ],
)
def test_scorer_requirement_is_a_property_of_the_metric(
    metric: str, definition: str, requires: bool | None, needed: bool, basis: str
) -> None:
    req = scorer_requirement(metric, definition, requires)
    assert (req.needed, req.basis) == (needed, basis)
    assert req.overridden is (requires is False and needed)
    if basis == "unknown":
        assert req.reason.startswith("unknown metric: not in the table, treated as model-based")
    if req.overridden:
        assert "requires_scorer: false was ignored" in req.reason


def test_unknown_metric_phrase() -> None:
    assert UNKNOWN_METRIC == "unknown metric: not in the table, treated as model-based"


def test_every_implemented_definition_is_classified_as_its_kind() -> None:
    pytest.importorskip("scipy")
    from replay.media.definitions import ALIASES, DEFINITIONS

    for d in DEFINITIONS.values():
        req = scorer_requirement(d.metric, d.id)
        assert req.needed is (d.kind == "lpips"), d.id
        assert req.basis == ("model-based" if d.kind == "lpips" else "model-free"), d.id
    for alias, target in ALIASES.items():
        metric = DEFINITIONS[target].metric
        assert not scorer_requirement(metric, alias).needed


def test_the_table_is_closed_and_each_row_says_why() -> None:
    names = [e.name for e in METRIC_TABLE]
    assert len(names) == len(set(names))
    assert {"lpips", "dists", "vmaf", "fid", "clip_score"} <= {
        e.name for e in METRIC_TABLE if e.needs_model
    }
    assert {"ssim", "psnr", "audio_spectral_cosine", "audio_rms_ratio", "frame_count"} <= {
        e.name for e in METRIC_TABLE if not e.needs_model
    }
    assert all(e.why for e in METRIC_TABLE)


def test_unattested_without_a_scorer_never_pass() -> None:
    g = gate("<=", 0.5, metric="lpips", definition="lpips/alex-v0.1-frame-mean")
    ev = g.evaluate(0.25, attested=False)
    assert (ev.verdict, ev.passes_value) == (UNATTESTED, True)
    assert "lpips is model-based" in ev.note
    assert g.evaluate(0.25, attested=True).verdict == PASS
    assert g.evaluate(0.75, attested=True).verdict == FAIL
    # Even a failing value is unattested without a scorer: the model could be anything.
    assert g.evaluate(0.75, attested=False).verdict == UNATTESTED


# ---------------------------------------------------------------- reproduction and tallies


def test_reproduction_within_the_definition_tolerance() -> None:
    assert reproduces(0.5, 0.75, 0.25)  # |Δ| 1/4 == tolerance: reproduced
    assert not reproduces(0.5, 0.8125, 0.25)  # |Δ| 5/16
    assert reproduces(64512.0, 64512.0, 0.0)
    assert not reproduces(64512.0, 64513.0, 0.0)
    assert reproduces(math.inf, math.inf, 0.05)  # PSNR of identical planes
    assert not reproduces(99.0, math.inf, 0.05)
    assert not reproduces(math.nan, math.nan, 1.0)


def test_worst_and_counts() -> None:
    assert worst([PASS, UNATTESTED, PASS]) == UNATTESTED
    assert worst([UNATTESTED, FAIL]) == FAIL
    assert worst([PASS]) == PASS
    assert worst([]) is None
    with pytest.raises(ValueError, match="not ranked"):
        worst(["maybe"])
    assert count_verdicts([PASS, FAIL, PASS]) == {PASS: 2, FAIL: 1}


# ---------------------------------------------------------------- quality uses it


GATE_COLUMNS: dict[str, pa.DataType] = {
    "gate_id": pa.string(),
    "metric": pa.string(),
    "op": pa.string(),
    "threshold": pa.float64(),
    "definition": pa.string(),
    "warn_within": pa.float64(),
    "requires_scorer": pa.bool_(),
}


def inputs(
    gates: list[dict[str, Any]], metrics: list[dict[str, float]], scorer: bool
) -> ReplayInputs:
    full = [
        {"warn_within": None, "requires_scorer": None, **g} for g in gates
    ]  # every column present
    comparisons = pa.table(
        {
            "comparison_id": [f"cmp-{i}" for i in range(len(metrics))],
            "attempt_id": ["a"] * len(metrics),
            "metrics": pa.array(
                [list(m.items()) for m in metrics], type=pa.map_(pa.string(), pa.float64())
            ),
        }
    )
    return ReplayInputs(
        campaign={},
        plan=None,
        plan_path=None,
        scorer=(
            ScorerDoc.from_dict({"name": "lpips", "version": "0.1.4", "weights": []})
            if scorer
            else None
        ),
        tables={
            "gates": pa.Table.from_pylist(
                full,
                schema=pa.schema(GATE_COLUMNS),
            ),
            "comparisons": comparisons,
        },
    )


LPIPS_GATE = {
    "gate_id": "lpips-max",
    "metric": "lpips",
    "op": "<=",
    "threshold": 0.2,
    "definition": "lpips/alex-v0.1-frame-mean",
}
SSIM_GATE = {
    "gate_id": "ssim-min",
    "metric": "ssim",
    "op": ">=",
    "threshold": 0.5,
    "definition": "ssim/ffmpeg-y-frame-mean",
    "warn_within": 0.25,
}


@pytest.mark.parametrize(
    "change",
    [
        {"definition": "perceptual/alex-v0.1-frame-mean"},  # renamed definition
        {"definition": "LPIPS/alex-v0.1-frame-mean"},  # capitalised
        {"requires_scorer": False},  # waived by the author
        {"metric": "LPIPS", "definition": "LPIPS/alex"},
        {"metric": "perceptual_distance", "definition": "perceptual/alex"},  # unknown
    ],
    ids=["renamed", "capitalised", "waived", "upper-metric", "unknown"],
)
def test_lpips_gate_is_unattested_without_scorer_json(change: dict[str, Any]) -> None:
    g = {**LPIPS_GATE, **change}
    metric = g["metric"]
    # Recorded values 0.0625 and 0.125 are both <= 0.2: they would pass if attested.
    r = check_quality(
        inputs([g, SSIM_GATE], [{metric: 0.0625, "ssim": 0.75}, {metric: 0.125}], False), "a"
    )
    lp = [c for c in r.checks if c.gate_id == "lpips-max"]
    assert [(c.comparison_id, c.verdict, c.passes_recorded) for c in lp] == [
        ("cmp-0", UNATTESTED, True),
        ("cmp-1", UNATTESTED, True),
    ]
    assert r.comparisons_passed == 0
    assert (r.comparisons_unattested, r.comparisons_passed_if_attested) == (2, 2)
    summary = next(s for s in r.gates if s.gate.gate_id == "lpips-max")
    assert summary.gate.needs_scorer
    assert (summary.passed, summary.unattested) == (0, 2)
    m = r.metric(metric)
    assert m is not None and m.needs_scorer
    assert any("lpips-max" in x for x in r.limits)
    if change.get("requires_scorer") is False:
        assert any("requires_scorer: false was ignored" in x for x in r.limits)
    if metric == "perceptual_distance":
        assert any(UNKNOWN_METRIC in x for x in r.limits)


def test_with_scorer_json_the_recorded_values_decide() -> None:
    g = {**LPIPS_GATE, "definition": "LPIPS/alex-v0.1-frame-mean", "requires_scorer": False}
    r = check_quality(inputs([g], [{"lpips": 0.0625}, {"lpips": 0.25}], True), "a")
    assert [c.verdict for c in r.checks] == [PASS, FAIL]  # 0.0625 <= 0.2; 0.25 > 0.2
    assert (r.comparisons_passed, r.comparisons_failed) == (1, 1)


def test_quality_margins_and_close_from_the_one_evaluator() -> None:
    strengthened = {**SSIM_GATE, "gate_id": "ssim-attested", "requires_scorer": True}
    r = check_quality(
        inputs([SSIM_GATE, strengthened], [{"ssim": 0.75}, {"ssim": 0.875}, {"ssim": 0.25}], False),
        "a",
    )
    plain = [c for c in r.checks if c.gate_id == "ssim-min"]
    # margins v - 0.5: 1/4 (close: <= warn_within 1/4), 3/8, -1/4 (failing: not close)
    assert [(c.margin, c.close, c.verdict) for c in plain] == [
        (Fraction(1, 4), True, PASS),
        (Fraction(3, 8), False, PASS),
        (Fraction(-1, 4), False, FAIL),
    ]
    # requires_scorer: true strengthens a model-free metric: unattested without scorer.json.
    assert {c.verdict for c in r.checks if c.gate_id == "ssim-attested"} == {UNATTESTED}
    closest = next(s for s in r.gates if s.gate.gate_id == "ssim-min").closest
    assert closest is not None and closest.comparison_id == "cmp-2"
