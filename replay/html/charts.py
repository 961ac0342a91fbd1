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
    "INDIVIDUAL_MARKS_LIMIT",
    "PIP_INSTALL",
    "ArmPanel",
    "ServerPoints",
    "TrialChart",
    "latency_chart",
]

PIP_INSTALL = "pip install 'reprobundle[report]'  (or: pip install 'matplotlib>=3.8')"
INDIVIDUAL_MARKS_LIMIT = 2000
"""Up to this many requests every mark is its own SVG group with its own id."""

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


def _panel(ax: Axes, panel: ArmPanel, index: int, ids: _Ids, individual: bool) -> None:
    color = _color(panel, index)
    measured_style = {
        "marker": "o",
        "markersize": 6.5,
        "color": color,
        "markeredgecolor": "white",
        "zorder": 4,
    }
    warm_style = {
        "marker": "^",
        "markersize": 6.5,
        "markerfacecolor": "none",
        "markeredgecolor": _WARMUP_COLOR,
        "markeredgewidth": 1.2,
        "zorder": 4,
    }
    fail_style = {"marker": "X", "markersize": 7.5, "color": _FAIL_COLOR, "zorder": 4}
    if not individual:
        # Thousands of dots per server: small, translucent, no white edge (edges would merge
        # into a white block), and the means drawn over them instead of under.
        measured_style.update(markersize=2.5, markeredgewidth=0, alpha=0.35)
        fail_style.update(markersize=3.5, alpha=0.6)
    for k, s in enumerate(panel.servers):
        common: dict[str, Any] = {
            "ids": ids,
            "individual": individual,
            "group": f"s{index:02d}{k:02d}",
        }
        wx = _spread(k - 0.28, 0.14, len(s.warmups))
        _points(ax, wx, s.warmups, kind="warmup", style=warm_style, **common)
        mx = _spread(k + 0.08, 0.3, len(s.measured_ok) + len(s.measured_failed))
        ok_x, fail_x = mx[: len(s.measured_ok)], mx[len(s.measured_ok) :]
        _points(ax, ok_x, s.measured_ok, kind="measured", style=measured_style, **common)
        _points(ax, fail_x, s.measured_failed, kind="failed", style=fail_style, **common)
        if s.mean_s is not None:
            # Wider than the dots; behind a few, over a crowd: both stay visible.
            ax.plot(
                [k - 0.14, k + 0.3],
                [s.mean_s, s.mean_s],
                color="#111111",
                linewidth=1.6,
                solid_capstyle="butt",
                zorder=3 if individual else 5,
                gid=ids.next("servermean"),
            )
    if panel.mean_s is not None:
        ax.axhline(
            panel.mean_s,
            color=color,
            linestyle=(0, (5, 3)),
            linewidth=1.1,
            gid=ids.next("armmean"),
        )
    ax.set_xticks(range(len(panel.servers)))
    crowded = len(panel.servers) > 6
    ax.set_xticklabels(
        [_label(s.server) for s in panel.servers],
        rotation=40 if crowded else 0,
        ha="right" if crowded else "center",
        fontsize=7 if crowded else None,
    )
    ax.set_xlim(-0.6, max(len(panel.servers) - 0.4, 0.6))
    mean = "" if panel.mean_s is None else f" (arm mean {panel.mean_s:.2f} s)"
    ax.set_title(_label(panel.arm) + mean, loc="left")
    ax.margins(y=0.12)


def _legend(fig: Figure, panels: Sequence[ArmPanel]) -> None:
    from matplotlib.lines import Line2D

    # Proxy handles: legend entries must not copy the marks' ids or add marks.
    color = _color(panels[0], 0) if panels else "#333333"
    handles = [
        Line2D([], [], linestyle="none", marker="o", color=color, markeredgecolor="white"),
        Line2D(
            [],
            [],
            linestyle="none",
            marker="^",
            markerfacecolor="none",
            markeredgecolor=_WARMUP_COLOR,
        ),
        Line2D([], [], linestyle="none", marker="X", color=_FAIL_COLOR),
        Line2D([], [], color="#111111", linewidth=1.6),
        Line2D([], [], color=color, linestyle=(0, (5, 3))),
    ]
    labels = [
        "measured request (status ok)",
        "warmup (not a sample)",
        "measured, failed (not a sample)",
        "server mean",
        "arm mean (mean of server means)",
    ]
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


def latency_chart(panels: Sequence[ArmPanel], chart_id: str = "latency") -> TrialChart:
    """Every warmup and measured request per server per arm, with server and arm means.

    Args:
        panels: one per arm, servers in run order.
        chart_id: prefix of every id in the SVG (unique within the page).

    Returns:
        The SVG (inline-ready) and the count of marks per kind.

    Raises:
        CouldNotRunError: matplotlib is not installed.
    """
    total = sum(
        len(s.warmups) + len(s.measured_ok) + len(s.measured_failed)
        for p in panels
        for s in p.servers
    )
    individual = total <= INDIVIDUAL_MARKS_LIMIT
    ids = _Ids()
    with _matplotlib() as figure_class:
        ncols = max(1, min(len(panels), 3))
        nrows = max(1, -(-len(panels) // ncols))
        fig = figure_class(figsize=(4.8 * ncols, 3.6 * nrows + 0.7))
        axes = fig.subplots(nrows, ncols, squeeze=False)
        for i, panel in enumerate(panels):
            ax = axes[i // ncols][i % ncols]
            _panel(ax, panel, i, ids, individual)
            if i % ncols == 0:
                ax.set_ylabel("end-to-end latency (s)")
        for j in range(len(panels), nrows * ncols):
            axes[j // ncols][j % ncols].set_visible(False)
        _legend(fig, panels)
        height = 3.6 * nrows + 0.7
        fig.subplots_adjust(
            left=0.09, right=0.98, top=1 - 0.35 / height, bottom=0.95 / height, wspace=0.22
        )
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    title = (
        "Repeated trials: every warmup and measured request of the accepted attempt, "
        "per server and arm, with server means and arm means"
    )
    return TrialChart(_clean_svg(buf.getvalue(), chart_id, title), dict(ids.counts), individual)
