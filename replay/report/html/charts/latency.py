"""The effect chart (:func:`latency_chart`): every arm's measured requests, server means and
arm means on ONE axes whose y-axis starts at zero, with an arrow from the baseline arm mean
to the candidate's labelled with the change the replay derived: a 3.77× speed-up looks like
one. Warmups (slower, never samples) sit on a small axes of their own, so they cannot set
the scale.

Above :data:`INDIVIDUAL_MARKS_LIMIT` requests the request marks are drawn into one
embedded PNG (still one dot per request; the means stay vectors).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from replay.report.html.charts.marks import (
    ArmPanel,
    Effect,
    MarkIds,
    TrialChart,
    arm_color,
    draw_points,
    short_label,
    spread,
)
from replay.report.html.charts.svg import (
    PHONE_WIDTH_IN,
    clean_svg,
    matplotlib_figures,
    phone_pt,
    save_svg,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["INDIVIDUAL_MARKS_LIMIT", "latency_chart", "latency_figure"]

INDIVIDUAL_MARKS_LIMIT = 2000
"""Up to this many requests every mark is its own SVG group with its own id."""
_ARM_GAP = 1.0
_WARMUP_COLOR = "#8a8a8a"
_FAIL_COLOR = "#c62828"


def _server_positions(panels: Sequence[ArmPanel]) -> list[list[float]]:
    """x of each server: arms side by side on one axis, a gap between arms."""
    out: list[list[float]] = []
    x = 0.0
    for p in panels:
        out.append([x + k for k in range(len(p.servers))])
        x += max(len(p.servers), 1) + _ARM_GAP
    return out


def _styles(individual: bool, color: str) -> tuple[dict[str, Any], dict[str, Any]]:
    measured = {
        "marker": "o",
        "markersize": 6.5,
        "color": color,
        "markeredgecolor": "white",
        "zorder": 4,
    }
    fail = {"marker": "X", "markersize": 7.5, "color": _FAIL_COLOR, "zorder": 4}
    if not individual:
        # Thousands of dots per server: small, translucent, no white edge (edges would merge
        # into a white block), and the means drawn over them instead of under.
        measured.update(markersize=2.5, markeredgewidth=0, alpha=0.35)
        fail.update(markersize=3.5, alpha=0.6)
    return measured, fail


def _measured(
    ax: Axes, panels: Sequence[ArmPanel], xs: list[list[float]], ids: MarkIds, individual: bool
) -> None:
    """Every measured request, server means and arm means of every arm, on one axes."""
    for i, panel in enumerate(panels):
        color = arm_color(panel, i)
        measured_style, fail_style = _styles(individual, color)
        for k, s in enumerate(panel.servers):
            x0 = xs[i][k]
            common: dict[str, Any] = {
                "ids": ids,
                "individual": individual,
                "group": f"s{i:02d}{k:02d}",
            }
            mx = spread(x0, 0.5, len(s.measured_ok) + len(s.measured_failed))
            ok_x, fail_x = mx[: len(s.measured_ok)], mx[len(s.measured_ok) :]
            draw_points(ax, ok_x, s.measured_ok, kind="measured", style=measured_style, **common)
            draw_points(ax, fail_x, s.measured_failed, kind="failed", style=fail_style, **common)
            if s.mean_s is not None:
                # Wider than the dots; behind a few, over a crowd: both stay visible.
                ax.plot(
                    [x0 - 0.36, x0 + 0.36],
                    [s.mean_s, s.mean_s],
                    color="#111111",
                    linewidth=1.6,
                    solid_capstyle="butt",
                    zorder=3 if individual else 5,
                    gid=ids.next("servermean"),
                )
        if panel.mean_s is not None and xs[i]:
            ax.plot(
                [xs[i][0] - 0.5, xs[i][-1] + 0.5],
                [panel.mean_s, panel.mean_s],
                color=color,
                linestyle=(0, (5, 3)),
                linewidth=1.4,
                zorder=2,
                gid=ids.next("armmean"),
            )


def _effects(
    ax: Axes, panels: Sequence[ArmPanel], xs: list[list[float]], effects: Sequence[Effect]
) -> None:
    """An arrow from each baseline arm mean to its candidate arm mean, labelled with the change."""
    where = {p.arm: i for i, p in enumerate(panels)}
    for e in effects:
        b, c = where.get(e.baseline), where.get(e.candidate)
        if b is None or c is None or not xs[b] or not xs[c]:
            continue
        yb, yc = panels[b].mean_s, panels[c].mean_s
        if yb is None or yc is None:
            continue
        # Between the two groups when they are neighbours; else just left of the candidate.
        x = (xs[b][-1] + xs[c][0]) / 2 if abs(b - c) == 1 else xs[c][0] - 0.75
        ax.annotate(
            "",
            xy=(x, yc),
            xytext=(x, yb),
            arrowprops={"arrowstyle": "-|>", "color": "#111111", "linewidth": 1.3},
            zorder=6,
        )
        ax.text(
            x,
            (yb + yc) / 2,
            e.label,
            ha="center",
            va="center",
            fontsize=9.5,
            fontweight="bold",
            color="#111111",
            bbox={"boxstyle": "round,pad=0.25", "facecolor": "white", "edgecolor": "#bbbbbb"},
            zorder=7,
        )


def _x_labels(ax: Axes, panels: Sequence[ArmPanel], xs: list[list[float]], phone: bool) -> None:
    ticks = [x for row in xs for x in row]
    names = [short_label(s.server) for p in panels for s in p.servers]
    crowded = len(ticks) > (2 if phone else 8)
    ax.set_xticks(ticks)
    ax.set_xticklabels(
        names,
        rotation=(90 if phone else 40) if crowded else 0,
        ha=("center" if phone else "right") if crowded else "center",
        fontsize=phone_pt(7, phone) if crowded else None,
    )
    last = max(ticks, default=0.0)
    ax.set_xlim(-0.7, last + 0.7)
    for i, p in enumerate(panels):
        if xs[i]:
            mean = "" if p.mean_s is None else f" · mean {p.mean_s:.2f} s"
            ax.text(
                (xs[i][0] + xs[i][-1]) / 2,
                1.01,
                short_label(p.arm) + mean,
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="bottom",
                fontsize=phone_pt(9.5, phone),
                fontweight="bold",
                color=arm_color(p, i),
            )


def _warmups(
    ax: Axes, panels: Sequence[ArmPanel], ids: MarkIds, individual: bool, phone: bool
) -> None:
    """Warmups alone, on their own small axes (they are slower and never samples)."""
    style = {
        "marker": "^",
        "markersize": 5.5,
        "markerfacecolor": "none",
        "markeredgecolor": _WARMUP_COLOR,
        "markeredgewidth": 1.1,
        "zorder": 4,
    }
    xs = _server_positions(panels)
    for i, p in enumerate(panels):
        for k, s in enumerate(p.servers):
            wx = spread(xs[i][k], 0.4, len(s.warmups))
            draw_points(
                ax,
                wx,
                s.warmups,
                kind="warmup",
                style=style,
                ids=ids,
                individual=individual,
                group=f"w{i:02d}{k:02d}",
            )
    ticks = [x for row in xs for x in row]
    centers = [(row[0] + row[-1]) / 2 for row in xs if row]
    ax.set_xticks(centers)
    ax.set_xticklabels(
        [short_label(p.arm)[:12] for p, row in zip(panels, xs, strict=True) if row],
        fontsize=phone_pt(7, phone),
    )
    ax.set_xlim(-0.7, max(ticks, default=0.0) + 0.7)
    ax.set_ylim(bottom=0)
    ax.set_title(
        "warmups (not samples)", loc="center", fontsize=phone_pt(8.5, phone), color="#555555"
    )
    ax.tick_params(labelsize=phone_pt(7.5, phone))


def _legend(fig: Figure, panels: Sequence[ArmPanel], warmups: bool, phone: bool) -> None:
    from matplotlib.lines import Line2D

    # Proxy handles: legend entries must not copy the marks' ids or add marks.
    handles: list[Any] = [
        Line2D([], [], linestyle="none", marker="o", color=arm_color(p, i), markeredgecolor="white")
        for i, p in enumerate(panels)
    ]
    labels = [f"{short_label(p.arm)}: measured request (status ok)" for p in panels]
    handles += [
        Line2D([], [], linestyle="none", marker="X", color=_FAIL_COLOR),
        Line2D([], [], color="#111111", linewidth=1.6),
        Line2D([], [], color="#777777", linestyle=(0, (5, 3))),
    ]
    labels += [
        "measured, failed (not a sample)",
        "server mean",
        "arm mean (mean of server means)",
    ]
    if warmups:
        handles.append(
            Line2D(
                [],
                [],
                linestyle="none",
                marker="^",
                markerfacecolor="none",
                markeredgecolor=_WARMUP_COLOR,
            )
        )
        labels.append("warmup (not a sample)")
    if phone:  # one entry a line, under the axes (the constrained layout makes room)
        fig.legend(handles, labels, loc="outside lower center", ncol=1, frameon=False)
    else:
        fig.legend(handles, labels, loc="lower center", ncol=3, frameon=False)


def _total(panels: Sequence[ArmPanel]) -> int:
    return sum(
        len(s.warmups) + len(s.measured_ok) + len(s.measured_failed)
        for p in panels
        for s in p.servers
    )


def _y_top(panels: Sequence[ArmPanel]) -> float:
    values = [
        y
        for p in panels
        for s in p.servers
        for y in (*s.measured_ok, *s.measured_failed, s.mean_s, p.mean_s)
        if y is not None and math.isfinite(y)
    ]
    return max(values, default=1.0) * 1.12 or 1.0


def latency_figure(
    figure_class: type[Figure],
    panels: Sequence[ArmPanel],
    effects: Sequence[Effect] = (),
    phone: bool = False,
) -> tuple[Figure, MarkIds, bool]:
    """The latency figure (not yet saved): the shared axes first, then the warmup panel.

    Every arm's measured requests, server means and arm means share one axes whose
    y-axis starts at zero, so the change between arms is seen at its true size; the
    warmups, slower and never samples, sit on a small axes of their own to the right
    (only when there are any) so they cannot set the main scale. ``phone``: drawn
    :data:`~replay.report.html.charts.svg.PHONE_WIDTH_IN` wide, the warmups under the
    main axes and the legend one entry a line below them.
    """
    individual = _total(panels) <= INDIVIDUAL_MARKS_LIMIT
    ids = MarkIds()
    n_servers = sum(len(p.servers) for p in panels)
    has_warmups = any(s.warmups for p in panels for s in p.servers)
    if phone:
        width, height = PHONE_WIDTH_IN, 7.4 if has_warmups else 5.6
        fig = figure_class(figsize=(width, height), layout="constrained")
    else:
        width = min(max(9.0, 2.0 + 1.1 * n_servers + 0.8 * len(panels)), 14.0)
        height = 4.4
        fig = figure_class(figsize=(width, height))
    if has_warmups and phone:
        main, warm = fig.subplots(2, 1, gridspec_kw={"height_ratios": [2.4, 1]}, squeeze=True)
    elif has_warmups:
        main, warm = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 1]}, squeeze=True)
    else:
        main, warm = fig.subplots(1, 1), None
    xs = _server_positions(panels)
    _measured(main, panels, xs, ids, individual)
    _effects(main, panels, xs, effects)
    _x_labels(main, panels, xs, phone)
    main.set_ylim(0, _y_top(panels))
    main.set_ylabel("end-to-end latency (s)")
    main.set_gid("shared-axes")
    if warm is not None:
        # Warmups are few (a handful per server): vectors with their own ids unless even
        # they alone pass the limit.
        n_warm = sum(len(s.warmups) for p in panels for s in p.servers)
        _warmups(warm, panels, ids, n_warm <= INDIVIDUAL_MARKS_LIMIT, phone)
        warm.set_gid("warmup-axes")
    _legend(fig, panels, has_warmups, phone)
    if phone:
        return fig, ids, individual
    fig.subplots_adjust(
        left=0.8 / width,
        right=1 - 0.15 / width,
        top=1 - 0.45 / height,
        bottom=1.05 / height,
        wspace=0.18,
    )
    return fig, ids, individual


def latency_chart(
    panels: Sequence[ArmPanel],
    chart_id: str = "latency",
    effects: Sequence[Effect] = (),
    phone: bool = False,
) -> TrialChart:
    """Every measured request of every arm on one shared axis from zero; warmups apart.

    Args:
        panels: one per arm, servers in run order.
        chart_id: prefix of every id in the SVG (unique within the page).
        effects: the change between arms, as the replay derived it, drawn as an arrow
            from the baseline arm mean to the candidate arm mean with its label.
        phone: the layout for a phone's screen (narrow, larger text, stacked).

    Returns:
        The SVG (inline-ready) and the count of marks per kind.

    Raises:
        CouldNotRunError: matplotlib is not installed.
    """
    with matplotlib_figures(phone) as figure_class:
        fig, ids, individual = latency_figure(figure_class, panels, effects, phone)
        svg = save_svg(fig)
    title = (
        "Repeated trials: every measured request of the accepted attempt, per server, all "
        "arms on one axis starting at zero, with server means, arm means and the change "
        "between arms; warmups on a small axis of their own"
    )
    return TrialChart(clean_svg(svg, chart_id, title), dict(ids.counts), individual)
