"""The distribution chart (:func:`distribution_chart`): each arm's ECDF on one latency axis
from zero, a step line per arm, which stays readable from ten requests to a hundred
thousand (dots per request only up to :data:`ECDF_MARKERS_LIMIT` per arm).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from replay.report.html.charts.marks import ArmPanel, MarkIds, TrialChart, arm_color, short_label
from replay.report.html.charts.svg import PHONE_WIDTH_IN, clean_svg, matplotlib_figures, save_svg

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["ECDF_MARKERS_LIMIT", "distribution_chart", "distribution_figure", "ecdf_points"]

ECDF_MARKERS_LIMIT = 200
"""Up to this many requests per arm the ECDF also draws each request as a dot."""


def ecdf_points(values: Sequence[float]) -> tuple[list[float], list[float]]:
    """The empirical CDF of ``values``: sorted values and the fraction at or below each."""
    xs = sorted(v for v in values if math.isfinite(v))
    n = len(xs)
    return xs, [(i + 1) / n for i in range(n)]


def distribution_figure(
    figure_class: type[Figure], panels: Sequence[ArmPanel], phone: bool = False
) -> tuple[Figure, MarkIds]:
    """One ECDF per arm (its measured requests with status ok) on one x-axis from zero.

    Up to :data:`ECDF_MARKERS_LIMIT` requests per arm each request is also a dot on
    the step; beyond it the step line alone (a hundred thousand dots would merge into
    a smear, the line stays readable at any count). ``phone``: drawn
    :data:`~replay.report.html.charts.svg.PHONE_WIDTH_IN` wide, the legend one arm a line.
    """
    ids = MarkIds()
    size = (PHONE_WIDTH_IN, 3.4 + 0.25 * len(panels)) if phone else (9.0, 3.4)
    fig = figure_class(figsize=size, layout="constrained" if phone else None)
    ax = fig.subplots(1, 1)
    top = 0.0
    for i, p in enumerate(panels):
        values = [v for s in p.servers for v in s.measured_ok]
        if not values:
            continue
        xs, ys = ecdf_points(values)
        top = max(top, xs[-1])
        color = arm_color(p, i)
        # Start the step at 0 so the curve rises from the axis, not from nowhere.
        ax.step(
            [xs[0], *xs],
            [0.0, *ys],
            where="post",
            color=color,
            linewidth=1.5,
            label=f"{short_label(p.arm)} (n = {len(xs)})",
            gid=ids.next("ecdf"),
        )
        if len(xs) <= ECDF_MARKERS_LIMIT:
            ax.plot(
                xs,
                ys,
                linestyle="none",
                marker="o",
                markersize=4,
                color=color,
                gid=ids.next("ecdfpoints"),
            )
        if p.mean_s is not None:
            ax.axvline(p.mean_s, color=color, linestyle=(0, (5, 3)), linewidth=1.0)
    ax.set_xlim(0, (top or 1.0) * 1.08)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("end-to-end latency (s)")
    ax.set_ylabel("fraction of requests ≤ x")
    ax.grid(True, axis="both")
    ax.legend(
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=1 if phone else max(1, len(panels)),
        frameon=False,
    )
    ax.set_gid("ecdf-axes")
    if not phone:
        fig.subplots_adjust(left=0.08, right=0.98, top=0.88, bottom=0.15)
    return fig, ids


def distribution_chart(
    panels: Sequence[ArmPanel], chart_id: str = "distribution", phone: bool = False
) -> TrialChart:
    """The per-request distribution: each arm's ECDF on one shared x-axis from zero
    (``phone``: the layout for a phone's screen).

    Raises:
        CouldNotRunError: matplotlib is not installed.
    """
    with matplotlib_figures(phone) as figure_class:
        fig, ids = distribution_figure(figure_class, panels, phone)
        svg = save_svg(fig)
    title = (
        "Per-request distribution: the empirical cumulative distribution of each arm's "
        "measured requests with status ok, on one latency axis starting at zero"
    )
    individual = all(
        sum(len(s.measured_ok) for s in p.servers) <= ECDF_MARKERS_LIMIT for p in panels
    )
    return TrialChart(clean_svg(svg, chart_id, title), dict(ids.counts), individual)
