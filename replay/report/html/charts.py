"""Charts as inline SVG text, drawn with matplotlib, byte-identical for the same data.

matplotlib is an optional dependency (the ``report`` extra), imported inside
the functions: replay and the Markdown report never need it. No pyplot: a bare
:class:`matplotlib.figure.Figure` saved as SVG touches no GUI backend and no
global figure registry (rasterized marks, for very large campaigns, go through
Agg). Determinism comes from fixed rcParams (font, sizes, ``svg.hashsalt``),
glyphs drawn as paths (no font needed where the report is opened), no date in
the metadata, and the XML prolog, metadata block and comments stripped (the
comments would repeat bundle text outside our escaping). Every ``id`` in the
SVG is prefixed with the chart id so several charts can share one HTML page.

Two charts. The effect chart (:func:`latency_chart`) puts every arm's
measured requests, server means and arm means on ONE axes whose y-axis starts
at zero, with an arrow from the baseline arm mean to the candidate's labelled
with the change the replay derived: a 3.77× speed-up looks like one. Warmups
(slower, never samples) sit on a small axes of their own, so they cannot set
the scale. The distribution chart (:func:`distribution_chart`) draws each
arm's ECDF on one latency axis from zero: a step line per arm, which stays
readable from ten requests to a hundred thousand (dots per request only up to
:data:`ECDF_MARKERS_LIMIT` per arm).

Marks carry stable ids: ``<chart>-measured-NNNN`` for each measured request
with status ok, ``<chart>-failed-NNNN`` for measured requests that did not
succeed, ``<chart>-warmup-NNNN`` for warmups, ``<chart>-servermean-NN`` and
``<chart>-armmean-NN`` for the means. Above :data:`INDIVIDUAL_MARKS_LIMIT`
requests the request marks are drawn into one embedded PNG (a ``data:`` URI,
still one dot per request; the means stay vectors): a hundred thousand SVG
groups would make a page no browser opens comfortably.
"""

from __future__ import annotations

import io
import math
import re
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from bundler.errors import CouldNotRunError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "ECDF_MARKERS_LIMIT",
    "INDIVIDUAL_MARKS_LIMIT",
    "PIP_INSTALL",
    "ArmPanel",
    "Effect",
    "ServerPoints",
    "TrialChart",
    "distribution_chart",
    "distribution_figure",
    "ecdf_points",
    "latency_chart",
    "latency_figure",
]

PIP_INSTALL = "pip install 'reprobundle[report]'  (or: pip install 'matplotlib>=3.8')"
INDIVIDUAL_MARKS_LIMIT = 2000
"""Up to this many requests every mark is its own SVG group with its own id."""
ECDF_MARKERS_LIMIT = 200
"""Up to this many requests per arm the ECDF also draws each request as a dot."""
_ARM_GAP = 1.0

_SALT = "reprobundle-report-v1"
_LABEL_LIMIT = 32
_COLORS = {"baseline": "#4c6a92", "candidate": "#c0602b"}
_OTHER_COLORS = ("#5b8c5a", "#8c5a8c", "#8c7a5a", "#5a8c8c")
_WARMUP_COLOR = "#8a8a8a"
_FAIL_COLOR = "#c62828"
_RC: dict[str, Any] = {
    "svg.hashsalt": _SALT,
    "svg.fonttype": "path",
    "svg.image_inline": True,
    "font.family": "DejaVu Sans",
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.labelsize": 9.0,
    "xtick.labelsize": 8.5,
    "ytick.labelsize": 8.5,
    "legend.fontsize": 8.0,
    "axes.linewidth": 0.8,
    "axes.edgecolor": "#555555",
    "axes.grid": True,
    "axes.grid.axis": "y",
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
    "figure.dpi": 100.0,
    "savefig.dpi": 150.0,  # only the rasterized marks of very large campaigns use it
    "path.simplify": False,
    "lines.antialiased": True,
    # Every label is literal text, much of it the author's (server and arm names): "$"
    # must not start mathtext, where a server named "b$\foo{$x" would raise (no report).
    "text.parse_math": False,
}


@dataclass(frozen=True)
class ServerPoints:
    """One server's requests of the accepted attempt, in ``seq`` order."""

    server: str
    warmups: tuple[float, ...]
    measured_ok: tuple[float, ...]
    measured_failed: tuple[float, ...]  # measured requests whose status is not ok (with a time)
    mean_s: float | None  # the server mean replay derived (measured, status ok)


@dataclass(frozen=True)
class ArmPanel:
    """One arm: its servers in run order and its arm mean."""

    arm: str
    role: str
    mean_s: float | None
    servers: tuple[ServerPoints, ...]


@dataclass(frozen=True)
class Effect:
    """The change from one arm to another, as the replay derived it (label already worded)."""

    baseline: str
    candidate: str
    label: str  # e.g. "−73.45 %  ·  3.77×"


@dataclass(frozen=True)
class TrialChart:
    """The SVG text and how many marks of each kind it holds."""

    svg: str
    marks: dict[str, int]
    individual: bool


@contextmanager
def _matplotlib() -> Iterator[type[Figure]]:
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - exercised where matplotlib is absent
        raise CouldNotRunError(
            "the HTML report draws its charts with matplotlib, which is not installed: "
            f"{PIP_INSTALL} (or use --format md, which needs no charts)"
        ) from exc
    with matplotlib.rc_context(cast(Any, _RC)), warnings.catch_warnings():
        # A glyph DejaVu lacks (a bundle's server name in another script) is drawn as a
        # box; the warning would only reach the user's terminal.
        warnings.simplefilter("ignore")
        yield Figure


def _label(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _LABEL_LIMIT else text[: _LABEL_LIMIT - 1] + "…"


def _color(panel: ArmPanel, index: int) -> str:
    return _COLORS.get(panel.role, _OTHER_COLORS[index % len(_OTHER_COLORS)])


def _spread(center: float, width: float, n: int) -> list[float]:
    """``n`` x positions spread evenly over ``width`` around ``center`` (deterministic)."""
    if n <= 1:
        return [center] * n
    return [center - width / 2 + width * i / (n - 1) for i in range(n)]


class _Ids:
    """Sequential mark ids per kind."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def next(self, kind: str) -> str:
        n = self.counts.get(kind, 0) + 1
        self.counts[kind] = n
        return f"{kind}-{n:04d}"


def _points(
    ax: Axes,
    xs: Sequence[float],
    ys: Sequence[float],
    *,
    kind: str,
    style: dict[str, Any],
    ids: _Ids,
    individual: bool,
    group: str,
) -> None:
    if not xs:
        return
    if individual:
        for x, y in zip(xs, ys, strict=True):
            ax.plot([x], [y], linestyle="none", gid=ids.next(kind), **style)
        return
    ax.plot(xs, ys, linestyle="none", gid=f"{kind}-{group}", rasterized=True, **style)
    ids.counts[kind] = ids.counts.get(kind, 0) + len(xs)


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
    ax: Axes, panels: Sequence[ArmPanel], xs: list[list[float]], ids: _Ids, individual: bool
) -> None:
    """Every measured request, server means and arm means of every arm, on one axes."""
    for i, panel in enumerate(panels):
        color = _color(panel, i)
        measured_style, fail_style = _styles(individual, color)
        for k, s in enumerate(panel.servers):
            x0 = xs[i][k]
            common: dict[str, Any] = {
                "ids": ids,
                "individual": individual,
                "group": f"s{i:02d}{k:02d}",
            }
            mx = _spread(x0, 0.5, len(s.measured_ok) + len(s.measured_failed))
            ok_x, fail_x = mx[: len(s.measured_ok)], mx[len(s.measured_ok) :]
            _points(ax, ok_x, s.measured_ok, kind="measured", style=measured_style, **common)
            _points(ax, fail_x, s.measured_failed, kind="failed", style=fail_style, **common)
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


def _x_labels(ax: Axes, panels: Sequence[ArmPanel], xs: list[list[float]]) -> None:
    ticks = [x for row in xs for x in row]
    names = [_label(s.server) for p in panels for s in p.servers]
    crowded = len(ticks) > 8
    ax.set_xticks(ticks)
    ax.set_xticklabels(
        names,
        rotation=40 if crowded else 0,
        ha="right" if crowded else "center",
        fontsize=7 if crowded else None,
    )
    last = max(ticks, default=0.0)
    ax.set_xlim(-0.7, last + 0.7)
    for i, p in enumerate(panels):
        if xs[i]:
            mean = "" if p.mean_s is None else f" · mean {p.mean_s:.2f} s"
            ax.text(
                (xs[i][0] + xs[i][-1]) / 2,
                1.01,
                _label(p.arm) + mean,
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="bottom",
                fontsize=9.5,
                fontweight="bold",
                color=_color(p, i),
            )


def _warmups(ax: Axes, panels: Sequence[ArmPanel], ids: _Ids, individual: bool) -> None:
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
            wx = _spread(xs[i][k], 0.4, len(s.warmups))
            _points(
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
        [_label(p.arm)[:12] for p, row in zip(panels, xs, strict=True) if row], fontsize=7
    )
    ax.set_xlim(-0.7, max(ticks, default=0.0) + 0.7)
    ax.set_ylim(bottom=0)
    ax.set_title("warmups (not samples)", loc="center", fontsize=8.5, color="#555555")
    ax.tick_params(labelsize=7.5)


def _legend(fig: Figure, panels: Sequence[ArmPanel], warmups: bool) -> None:
    from matplotlib.lines import Line2D

    # Proxy handles: legend entries must not copy the marks' ids or add marks.
    handles: list[Any] = [
        Line2D([], [], linestyle="none", marker="o", color=_color(p, i), markeredgecolor="white")
        for i, p in enumerate(panels)
    ]
    labels = [f"{_label(p.arm)}: measured request (status ok)" for p in panels]
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
    fig.legend(handles, labels, loc="lower center", ncol=3, frameon=False)


_PROLOG = re.compile(r"\A.*?(?=<svg\b)", re.DOTALL)
_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.DOTALL)
_COMMENT = re.compile(r"\s*<!--.*?-->", re.DOTALL)
# matplotlib's <style> says "*{...}": inside an HTML page that selector would reach the
# whole document. The page's own stylesheet sets the same on "svg *" instead.
_STYLE = re.compile(r"\s*<style[^>]*>.*?</style>", re.DOTALL)
_ID = re.compile(r'\bid="([^"]+)"')
_HREF = re.compile(r'\b((?:xlink:)?href)="#([^"]+)"')
_URL = re.compile(r"url\(#([^)]+)\)")


def _clean_svg(svg: str, prefix: str, title: str) -> str:
    """Inline-ready SVG: no prolog, metadata, comments or style; ids prefixed; a title."""
    svg = _PROLOG.sub("", svg)
    svg = _METADATA.sub("", svg)
    # matplotlib escapes "--" inside its comments, so the first "-->" ends each one.
    svg = _COMMENT.sub("", svg)
    svg = _STYLE.sub("", svg)
    svg = _ID.sub(lambda m: f'id="{prefix}-{m.group(1)}"', svg)
    svg = _HREF.sub(lambda m: f'{m.group(1)}="#{prefix}-{m.group(2)}"', svg)
    svg = _URL.sub(lambda m: f"url(#{prefix}-{m.group(1)})", svg)
    from html import escape

    return svg.replace(
        "<svg ",
        f'<svg role="img" aria-labelledby="{prefix}-title" ',
        1,
    ).replace(">", f'>\n <title id="{prefix}-title">{escape(title)}</title>', 1)


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
) -> tuple[Figure, _Ids, bool]:
    """The latency figure (not yet saved): the shared axes first, then the warmup panel.

    Every arm's measured requests, server means and arm means share one axes whose
    y-axis starts at zero, so the change between arms is seen at its true size; the
    warmups, slower and never samples, sit on a small axes of their own to the right
    (only when there are any) so they cannot set the main scale.
    """
    individual = _total(panels) <= INDIVIDUAL_MARKS_LIMIT
    ids = _Ids()
    n_servers = sum(len(p.servers) for p in panels)
    has_warmups = any(s.warmups for p in panels for s in p.servers)
    width = min(max(9.0, 2.0 + 1.1 * n_servers + 0.8 * len(panels)), 14.0)
    height = 4.4
    fig = figure_class(figsize=(width, height))
    if has_warmups:
        main, warm = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 1]}, squeeze=True)
    else:
        main, warm = fig.subplots(1, 1), None
    xs = _server_positions(panels)
    _measured(main, panels, xs, ids, individual)
    _effects(main, panels, xs, effects)
    _x_labels(main, panels, xs)
    main.set_ylim(0, _y_top(panels))
    main.set_ylabel("end-to-end latency (s)")
    main.set_gid("shared-axes")
    if warm is not None:
        # Warmups are few (a handful per server): vectors with their own ids unless even
        # they alone pass the limit.
        n_warm = sum(len(s.warmups) for p in panels for s in p.servers)
        _warmups(warm, panels, ids, n_warm <= INDIVIDUAL_MARKS_LIMIT)
        warm.set_gid("warmup-axes")
    _legend(fig, panels, has_warmups)
    fig.subplots_adjust(
        left=0.8 / width,
        right=1 - 0.15 / width,
        top=1 - 0.45 / height,
        bottom=1.05 / height,
        wspace=0.18,
    )
    return fig, ids, individual


def _save(fig: Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    return buf.getvalue()


def latency_chart(
    panels: Sequence[ArmPanel],
    chart_id: str = "latency",
    effects: Sequence[Effect] = (),
) -> TrialChart:
    """Every measured request of every arm on one shared axis from zero; warmups apart.

    Args:
        panels: one per arm, servers in run order.
        chart_id: prefix of every id in the SVG (unique within the page).
        effects: the change between arms, as the replay derived it, drawn as an arrow
            from the baseline arm mean to the candidate arm mean with its label.

    Returns:
        The SVG (inline-ready) and the count of marks per kind.

    Raises:
        CouldNotRunError: matplotlib is not installed.
    """
    with _matplotlib() as figure_class:
        fig, ids, individual = latency_figure(figure_class, panels, effects)
        svg = _save(fig)
    title = (
        "Repeated trials: every measured request of the accepted attempt, per server, all "
        "arms on one axis starting at zero, with server means, arm means and the change "
        "between arms; warmups on a small axis of their own"
    )
    return TrialChart(_clean_svg(svg, chart_id, title), dict(ids.counts), individual)


def ecdf_points(values: Sequence[float]) -> tuple[list[float], list[float]]:
    """The empirical CDF of ``values``: sorted values and the fraction at or below each."""
    xs = sorted(v for v in values if math.isfinite(v))
    n = len(xs)
    return xs, [(i + 1) / n for i in range(n)]


def distribution_figure(
    figure_class: type[Figure], panels: Sequence[ArmPanel]
) -> tuple[Figure, _Ids]:
    """One ECDF per arm (its measured requests with status ok) on one x-axis from zero.

    Up to :data:`ECDF_MARKERS_LIMIT` requests per arm each request is also a dot on
    the step; beyond it the step line alone (a hundred thousand dots would merge into
    a smear, the line stays readable at any count).
    """
    ids = _Ids()
    fig = figure_class(figsize=(9.0, 3.4))
    ax = fig.subplots(1, 1)
    top = 0.0
    for i, p in enumerate(panels):
        values = [v for s in p.servers for v in s.measured_ok]
        if not values:
            continue
        xs, ys = ecdf_points(values)
        top = max(top, xs[-1])
        color = _color(p, i)
        # Start the step at 0 so the curve rises from the axis, not from nowhere.
        ax.step(
            [xs[0], *xs],
            [0.0, *ys],
            where="post",
            color=color,
            linewidth=1.5,
            label=f"{_label(p.arm)} (n = {len(xs)})",
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
        loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=max(1, len(panels)), frameon=False
    )
    ax.set_gid("ecdf-axes")
    fig.subplots_adjust(left=0.08, right=0.98, top=0.88, bottom=0.15)
    return fig, ids


def distribution_chart(panels: Sequence[ArmPanel], chart_id: str = "distribution") -> TrialChart:
    """The per-request distribution: each arm's ECDF on one shared x-axis from zero.

    Raises:
        CouldNotRunError: matplotlib is not installed.
    """
    with _matplotlib() as figure_class:
        fig, ids = distribution_figure(figure_class, panels)
        svg = _save(fig)
    title = (
        "Per-request distribution: the empirical cumulative distribution of each arm's "
        "measured requests with status ok, on one latency axis starting at zero"
    )
    individual = all(
        sum(len(s.measured_ok) for s in p.servers) <= ECDF_MARKERS_LIMIT for p in panels
    )
    return TrialChart(_clean_svg(svg, chart_id, title), dict(ids.counts), individual)
