"""The report's charts show the effect: every arm on one axis from zero, warmups apart.

The expected values are the inputs themselves (each measured latency given to the
chart must come back as exactly one point on the shared axes) and hand-computed
ECDF fractions; the SVG is parsed as XML to check where the marks sit.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="the charts need matplotlib (the report extra)")

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from replay.report.html.charts.distribution import (
    ECDF_MARKERS_LIMIT,
    distribution_figure,
    ecdf_points,
)
from replay.report.html.charts.latency import latency_chart, latency_figure
from replay.report.html.charts.marks import ArmPanel, Effect, ServerPoints

# The seed sample's accepted attempt (samples/h3-ref2va-5s/receipts.jsonl, final-2).
BASE = (
    ServerPoints("baseline-1", (612.84, 431.57), (394.62, 398.05, 396.23), (), 396.30),
    ServerPoints("baseline-2", (598.31, 440.12), (417.06, 419.51, 418.15), (), 418.24),
)
CAND = (
    ServerPoints("candidate-1", (241.66, 128.45), (105.92, 107.31, 106.75), (), 106.66),
    ServerPoints("candidate-2", (236.09, 131.72), (110.12, 108.87, 109.75), (), 109.58),
)
PANELS = (
    ArmPanel("baseline", "baseline", 407.27, BASE),
    ArmPanel("candidate", "candidate", 108.12, CAND),
)
EFFECT = Effect("baseline", "candidate", "−73.45 %  ·  3.77×")


def _axes(fig: Figure, gid: str):  # type: ignore[no-untyped-def]
    found = [ax for ax in fig.axes if ax.get_gid() == gid]
    assert len(found) == 1, [ax.get_gid() for ax in fig.axes]
    return found[0]


def _dots(ax, marker: str) -> list[float]:  # type: ignore[no-untyped-def]
    out: list[float] = []
    for line in ax.get_lines():
        assert isinstance(line, Line2D)
        if line.get_linestyle() == "None" and line.get_marker() == marker:
            out += np.asarray(line.get_ydata(), dtype=float).tolist()
    return out


def test_both_arms_share_one_axes_that_starts_at_zero() -> None:
    fig, ids, individual = latency_figure(Figure, PANELS, [EFFECT])
    assert individual
    main = _axes(fig, "shared-axes")
    measured = [y for p in PANELS for s in p.servers for y in s.measured_ok]
    # Every measured request of BOTH arms is a dot on this one axes, each exactly once.
    assert Counter(_dots(main, "o")) == Counter(measured)
    assert min(measured) < 120 and max(measured) > 390  # both arms really are here
    low, high = main.get_ylim()
    assert low == 0
    assert high >= max(measured)
    # The warmups are not on the shared axes (they would set its scale) but on their own.
    warmups = [y for p in PANELS for s in p.servers for y in s.warmups]
    assert not set(_dots(main, "^")) & set(warmups)
    warm = _axes(fig, "warmup-axes")
    assert Counter(_dots(warm, "^")) == Counter(warmups)
    assert warm.get_ylim()[0] == 0
    # The change is written on the shared axes, and an arm mean line per arm sits there.
    assert EFFECT.label in [t.get_text() for t in main.texts]
    arm_lines = [ln for ln in main.get_lines() if str(ln.get_gid()).startswith("armmean-")]
    assert sorted(np.asarray(ln.get_ydata(), dtype=float)[0] for ln in arm_lines) == [
        108.12,
        407.27,
    ]
    assert ids.counts == {"measured": 12, "servermean": 4, "armmean": 2, "warmup": 8}


def test_the_svg_puts_every_measured_mark_inside_one_axes_group() -> None:
    chart = latency_chart(PANELS, "lat", [EFFECT])
    root = ET.fromstring(chart.svg)
    ns = "{http://www.w3.org/2000/svg}"
    groups = {g.get("id"): g for g in root.iter(f"{ns}g")}
    shared = groups["lat-shared-axes"]
    inside = {g.get("id") for g in shared.iter(f"{ns}g")}
    measured = {i for i in groups if i and re.fullmatch(r"lat-measured-\d{4}", i)}
    assert len(measured) == 12
    assert measured <= inside
    warm = {g.get("id") for g in groups["lat-warmup-axes"].iter(f"{ns}g")}
    assert len({i for i in warm if i and i.startswith("lat-warmup-0")}) == 8
    assert not {i for i in inside if i and i.startswith("lat-warmup-0")}


def test_ecdf_by_hand() -> None:
    xs, ys = ecdf_points([3.0, 1.0, 2.0, 2.0])
    assert xs == [1.0, 2.0, 2.0, 3.0]
    assert ys == [0.25, 0.5, 0.75, 1.0]


@pytest.mark.parametrize("n", [10, 100_000])
def test_distribution_is_one_shared_axis_from_zero_at_any_size(n: int) -> None:
    panels = [
        ArmPanel(
            arm,
            arm,
            mean,
            (ServerPoints("s", (), tuple(mean + (i % 97) / 10 for i in range(n)), (), mean),),
        )
        for arm, mean in (("baseline", 400.0), ("candidate", 100.0))
    ]
    fig, _ = distribution_figure(Figure, panels)
    (ax,) = fig.axes
    assert ax.get_xlim()[0] == 0
    steps = [ln for ln in ax.get_lines() if str(ln.get_gid()).startswith("ecdf-")]
    assert len(steps) == 2  # one step line per arm on the same axes
    for ln in steps:
        assert len(np.asarray(ln.get_xdata())) == n + 1
    points = [ln for ln in ax.get_lines() if str(ln.get_gid()).startswith("ecdfpoints-")]
    # Small arms show every request as a dot; large ones only the step (no overplotting).
    assert len(points) == (2 if n <= ECDF_MARKERS_LIMIT else 0)
