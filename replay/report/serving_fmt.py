"""How every view spells the serving result: a figure, its change, one load point's line.

The figures and changes are the replay's (:mod:`replay.serving.summary`); this
module only prints them, once, for the terminal, Markdown and HTML views.
"""

from __future__ import annotations

from collections.abc import Iterable

from replay.result import ReplayResult
from replay.serving.summary import ServingChange, ServingDelta, ServingPoint

__all__ = [
    "NOT_REDERIVABLE",
    "change_line",
    "change_text",
    "count_text",
    "delta_text",
    "figure_text",
    "request_totals",
    "serving_headline",
]

NOT_REDERIVABLE = "not re-derivable"


def figure_text(value: float | None) -> str:
    """A serving figure at two decimals, or why there is none."""
    return NOT_REDERIVABLE if value is None else f"{value:.2f}"


def count_text(value: int | None) -> str:
    """A request count, or why there is none (a file without per-request success records)."""
    return NOT_REDERIVABLE if value is None else str(value)


def request_totals(points: Iterable[ServingPoint]) -> tuple[int, int, int]:
    """(requests, completed, runs left out): sums over the runs whose counts re-derive.

    A run read from a file without per-request success records (vLLM without
    ``--save-detailed``) has no count of its own; it is left out and counted apart.
    """
    known = [p for p in points if p.requests is not None and p.completed is not None]
    left_out = sum(1 for p in points if p.requests is None or p.completed is None)
    return (
        sum(p.requests or 0 for p in known),
        sum(p.completed or 0 for p in known),
        left_out,
    )


def change_text(value: float | None) -> str:
    """A signed percent change (``+3.10 %``, ``-41.65 %``), or ``-``."""
    return "-" if value is None else f"{value:+.2f} %"


def delta_text(d: ServingDelta) -> str:
    """``p99 TTFT 57.58 → 33.60 ms (-41.65 %)``."""
    if d.baseline is None and d.candidate is None:
        return f"{d.label} {NOT_REDERIVABLE}"
    if d.baseline is None or d.candidate is None:
        # The unit goes with the one figure there is: "12.78 ms → not re-derivable".
        b, c = (
            NOT_REDERIVABLE if v is None else f"{figure_text(v)} {d.unit}"
            for v in (d.baseline, d.candidate)
        )
        return f"{d.label} {b} → {c}"
    head = f"{d.label} {figure_text(d.baseline)} → {figure_text(d.candidate)} {d.unit}"
    return head if d.change_pct is None else f"{head} ({change_text(d.change_pct)})"


def change_line(c: ServingChange) -> str:
    """One load point's figures, baseline → candidate, on one line."""
    return f"{c.load_point}: " + "; ".join(delta_text(d) for d in c.deltas)


def serving_headline(r: ReplayResult) -> tuple[str, ...]:
    """The serving result for the headline: one line per pair of arms and load point."""
    if not r.serving_campaign:
        return ()
    if not r.serving_changes:
        arms = sorted({p.arm for p in r.serving})
        return (
            f"serving: {len(r.serving)} run(s) in {len(arms)} arm(s); no load point that a "
            "baseline and a candidate arm both ran: no change to show",
        )
    out: list[str] = []
    pair: tuple[str, str] | None = None
    for c in r.serving_changes:
        if (c.baseline, c.candidate) != pair:
            pair = (c.baseline, c.candidate)
            out.append(f"serving result, {c.baseline} → {c.candidate}, per load point:")
        out.append(f"  {change_line(c)}")
    return tuple(out)
