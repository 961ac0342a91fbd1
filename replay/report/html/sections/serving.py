"""The serving section: a latency-throughput curve per arm, side by side on one axis.

Drawn from ``ReplayResult.serving`` (one point per arm and load point): output
tokens/s on x, p99 TTFT (ms) on y, one line per arm. The table beside it holds the
same numbers, so the Markdown form (no charts) says the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replay.report.html.charts.svg import clean_svg, matplotlib_figures, save_svg, undrawable
from replay.report.html.view import Block, Chart, Para, Section, Table, cell, rich
from replay.report.serving_fmt import count_text, figure_text
from replay.result import ReplayResult
from replay.serving.summary import ServingPoint

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["CHART_ID", "serving_figure", "serving_section"]

CHART_ID = "serving-curve"
# Drawn at about a phone's width, with text at least 9.5 pt: shown at its natural size on a
# desktop and scaled by no more than ~0.8 on a 390 px screen, every label stays >= 10 px.
_SIZE = (4.6, 3.3)
_TEXT_PT = 10.0
_LABEL_PT = 9.5


def serving_figure(figure_class: type[Figure], points: tuple[ServingPoint, ...]) -> Figure:
    """p99 TTFT against output tokens/s, one line per arm, both axes from zero (not saved)."""
    fig = figure_class(figsize=_SIZE)
    ax = fig.subplots()
    x_max = y_max = 0.0
    for i, arm in enumerate(sorted({p.arm for p in points})):
        xy = [
            (p.output_tokens_per_s, p.ttft_p99_ms, p.load_point)
            for p in points
            if p.arm == arm and p.output_tokens_per_s is not None and p.ttft_p99_ms is not None
        ]
        ax.plot([x for x, _, _ in xy], [y for _, y, _ in xy], marker="o", label=arm)
        for x, y, lp in xy:
            x_max, y_max = max(x_max, x), max(y_max, y)
            # Arms alternate above and below their points: close curves keep their labels apart.
            off = (5, 5) if i % 2 == 0 else (5, -5 - _LABEL_PT)
            ax.annotate(lp, (x, y), xytext=off, textcoords="offset points", fontsize=_LABEL_PT)
    # From zero on both axes: a change between arms is seen at its true size.
    ax.set_xlim(0, (x_max or 1.0) * 1.18)
    ax.set_ylim(0, (y_max or 1.0) * 1.18)
    ax.grid(True, axis="both")
    ax.set_xlabel("output tokens/s", fontsize=_TEXT_PT)
    ax.set_ylabel("p99 TTFT (ms)", fontsize=_TEXT_PT)
    ax.tick_params(labelsize=_TEXT_PT)
    ax.legend(fontsize=_TEXT_PT, loc="lower right")
    fig.tight_layout()
    return fig


def _svg(points: tuple[ServingPoint, ...]) -> str:
    with matplotlib_figures() as figure_class:
        svg = save_svg(serving_figure(figure_class, points))
    return clean_svg(
        svg, CHART_ID, "p99 time to first token against output-token throughput, per arm"
    )


def serving_section(r: ReplayResult, charts: bool) -> Section | None:
    """The section, or None when the bundle is not a serving campaign."""
    points = r.serving
    if not r.serving_campaign:
        return None
    blocks: list[Block] = []
    drawable = any(p.output_tokens_per_s is not None and p.ttft_p99_ms is not None for p in points)
    huge = undrawable(v for p in points for v in (p.output_tokens_per_s, p.ttft_p99_ms))
    if huge is not None:
        blocks.append(
            Para(
                rich(
                    f"No curve: a value of {huge!r} is beyond what a chart axis can draw "
                    "(over 1e300); the table below lists every value."
                ),
                "warn",
            )
        )
    elif drawable:
        blocks.append(
            Chart(
                CHART_ID,
                _svg(points) if charts else None,
                rich(
                    "p99 TTFT against output-token throughput, one line per arm, one point "
                    "per load point; both axes start at zero."
                ),
                "latency-throughput curve per arm",
            )
        )
    else:
        blocks.append(Para(rich("No curve: the sources hold only aggregates.")))
    blocks.append(
        Table(
            (
                "arm",
                "load point",
                "requests",
                "completed",
                "requests/s",
                "output tokens/s",
                "p99 TTFT ms",
                "p99 TPOT ms",
                "p99 E2EL ms",
            ),
            tuple(
                (
                    cell(p.arm),
                    cell(p.load_point),
                    cell(count_text(p.requests), num=True),
                    cell(count_text(p.completed), num=True),
                    cell(figure_text(p.requests_per_s), num=True),
                    cell(figure_text(p.output_tokens_per_s), num=True),
                    cell(figure_text(p.ttft_p99_ms), num=True),
                    cell(figure_text(p.tpot_p99_ms), num=True),
                    cell(figure_text(p.e2el_p99_ms), num=True),
                )
                for p in points
            ),
            caption="Per arm and load point (re-derived from the carried sources)",
            table_id="serving-table",
        )
    )
    return Section(
        "serving",
        "Serving: latency against throughput",
        tuple(blocks),
        r.limits("serving"),
    )
