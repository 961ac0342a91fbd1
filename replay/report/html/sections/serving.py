"""The serving section: a latency-throughput curve per arm, side by side on one axis.

Drawn from ``ReplayResult.serving`` (one point per arm and load point): output
tokens/s on x, p99 TTFT (ms) on y, one line per arm. The table beside it holds the
same numbers, so the Markdown form (no charts) says the same.
"""

from __future__ import annotations

import io
import re

from replay.report.html.view import Block, Chart, Para, Section, Table, cell, rich
from replay.result import ReplayResult
from replay.serving.summary import ServingPoint

__all__ = ["serving_section"]

_PROLOG = re.compile(r"^.*?(?=<svg )", re.DOTALL)
_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.DOTALL)
_STYLE = re.compile(r"\s*<style[^>]*>.*?</style>", re.DOTALL)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_ID = re.compile(r'\bid="([^"]+)"')
_HREF = re.compile(r'\b((?:xlink:)?href)="#([^"]+)"')
_URL = re.compile(r"url\(#([^)]+)\)")
_PREFIX = "serving-curve"


def _clean(svg: str) -> str:
    """Inline-ready: no prolog, metadata, comments or style (the page's CSP); ids prefixed."""
    svg = _METADATA.sub("", _PROLOG.sub("", svg, count=1))
    svg = _STYLE.sub("", _COMMENT.sub("", svg))
    svg = _ID.sub(lambda m: f'id="{_PREFIX}-{m.group(1)}"', svg)
    svg = _HREF.sub(lambda m: f'{m.group(1)}="#{_PREFIX}-{m.group(2)}"', svg)
    return _URL.sub(lambda m: f"url(#{_PREFIX}-{m.group(1)})", svg)


def _num(v: float | None, fmt: str = ".2f") -> str:
    return "not re-derivable" if v is None else format(v, fmt)


def _count(v: int | None) -> str:
    return "not re-derivable" if v is None else str(v)


def _svg(points: tuple[ServingPoint, ...]) -> str:
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"svg.hashsalt": "reprobundle-serving", "svg.fonttype": "none"}):
        fig = Figure(figsize=(6.4, 3.8))
        ax = fig.subplots()
        for arm in sorted({p.arm for p in points}):
            xy = [
                (p.output_tokens_per_s, p.ttft_p99_ms, p.load_point)
                for p in points
                if p.arm == arm and p.output_tokens_per_s is not None and p.ttft_p99_ms is not None
            ]
            ax.plot([x for x, _, _ in xy], [y for _, y, _ in xy], marker="o", label=arm)
            for x, y, lp in xy:
                ax.annotate(lp, (x, y), fontsize=7)
        ax.set_xlabel("output tokens/s")
        ax.set_ylabel("p99 TTFT (ms)")
        ax.legend()
        fig.tight_layout()
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return _clean(buf.getvalue())


def serving_section(r: ReplayResult, charts: bool) -> Section | None:
    """The section, or None when the bundle is not a serving campaign."""
    points = r.serving
    if not points:
        return None
    blocks: list[Block] = []
    drawable = any(p.output_tokens_per_s is not None and p.ttft_p99_ms is not None for p in points)
    if drawable:
        blocks.append(
            Chart(
                "serving-curve",
                _svg(points) if charts else None,
                rich("p99 TTFT against output-token throughput, one line per arm."),
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
                "output tokens/s",
                "p99 TTFT ms",
                "p99 E2EL ms",
            ),
            tuple(
                (
                    cell(p.arm),
                    cell(p.load_point),
                    cell(_count(p.requests), num=True),
                    cell(_count(p.completed), num=True),
                    cell(_num(p.output_tokens_per_s), num=True),
                    cell(_num(p.ttft_p99_ms), num=True),
                    cell(_num(p.e2el_p99_ms), num=True),
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
        (
            "Re-derived from the benchmark tool's per-request arrays; the load is what the "
            "tool recorded it was asked for.",
        ),
    )
