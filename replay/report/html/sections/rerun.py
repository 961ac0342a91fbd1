"""The rerun section: the sealed run and a rerun side by side, effect by effect.

From the rerun comparison of the one result
(:class:`~replay.sections.against.RerunComparison`): whether each effect (speedup) was
reproduced within the tolerance, the arm means and worker exits of both runs, and
the outputs that match the sealed SHA-256. A comparison against another sealed
campaign says so.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from replay.engine.exact import to_double
from replay.engine.verdicts import Reproduction
from replay.report.html.sections.common import _plain
from replay.report.html.view import Block, Cell, Para, Section, Span, Table, cell, rich
from replay.report.words import reproduction_style

if TYPE_CHECKING:  # the comparison imports the replay front door; the report only reads it
    from replay.sections.against import Effect, RerunComparison, Side

__all__ = ["RERUN_LIMITS", "rerun_section"]

RERUN_LIMITS = (
    "A rerun on other hardware on another day reproduces an effect, not the sealed latencies "
    "themselves.",
)


def _side_means(side: Side) -> dict[str, float | None]:
    arms = [] if side.stats is None else side.stats.latency.arms
    return {a.arm: None if a.mean_s is None else to_double(a.mean_s) for a in arms}


def _num(x: float | None, spec: str) -> str:
    return format(x, spec) if x is not None and math.isfinite(x) else "-"


def _effect_row(e: Effect) -> tuple[Cell, ...]:
    sealed = f"{_num(e.sealed_baseline_s, '.2f')} → {_num(e.sealed_candidate_s, '.2f')}"
    rerun = f"{_num(e.rerun_baseline_s, '.2f')} → {_num(e.rerun_candidate_s, '.2f')}"
    speedups = f"{_num(e.sealed_speedup, '.2f')}× / {_num(e.rerun_speedup, '.2f')}×"
    return (
        cell(f"{e.baseline} → {e.candidate}"),
        cell(f"{sealed} s", num=True),
        cell(f"{rerun} s", num=True),
        cell(speedups, num=True),
        cell(_num(e.speedup_ratio, ".3f"), num=True),
        cell(e.verdict, reproduction_style(Reproduction.of(e.reproduced))),
    )


def _exits(side: Side) -> str:
    lc = side.lifecycle
    return f"{0 if lc is None else lc.clean}/{0 if lc is None else lc.total}"


def _sides_table(c: RerunComparison) -> Table:
    sm, rm = _side_means(c.sealed), _side_means(c.rerun)
    rows = [
        (
            cell(f"arm mean {a} s"),
            cell(_num(sm.get(a), ".2f"), num=True),
            cell(_num(rm.get(a), ".2f"), num=True),
        )
        for a in sorted(set(sm) | set(rm))
    ]
    rows.append(
        (
            cell("worker exits clean"),
            cell(_exits(c.sealed), num=True),
            cell(_exits(c.rerun), num=True),
        )
    )
    rows.append(
        (
            cell("outputs with the sealed SHA-256"),
            cell("-"),
            cell(f"{c.outputs_matching} of {c.outputs_compared}", num=True),
        )
    )
    return Table(
        ("", "sealed", "rerun"),
        tuple(rows),
        caption="Sealed and rerun",
        table_id="rerun-sides-table",
    )


def rerun_section(rerun: RerunComparison, campaign_id: str) -> Section:
    """The rerun comparison section (sealed vs rerun, side by side)."""
    word = Reproduction.of(rerun.reproduced)
    style = reproduction_style(word)
    sealed, again = rerun.sealed, rerun.rerun
    plan = "identical" if rerun.plan_matches else "DIFFERENT"
    blocks: list[Block] = [
        Para(
            rich(
                "Effect ",
                Span(str(word), style),
                f" within a relative tolerance of {_num(rerun.tolerance * 100, 'g')} % on the "
                f"speedup; plan {plan}; rerun campaign {again.campaign_id}, "
                f"attempt {_plain(again.attempt)}.",
            ),
            style,
        )
    ]
    if sealed.campaign_id != campaign_id:
        blocks.append(
            Para(
                rich(
                    f"This comparison is against sealed campaign {sealed.campaign_id}, "
                    f"not {campaign_id}: it may belong to another bundle."
                ),
                "bad",
            )
        )
    blocks.append(
        Table(
            (
                "pair",
                "sealed arm means",
                "rerun arm means",
                "speedup sealed / rerun",
                "ratio",
                "verdict",
            ),
            tuple(_effect_row(e) for e in rerun.effects),
            caption="Effects, sealed and rerun side by side",
            table_id="rerun-effects-table",
        )
    )
    blocks.append(_sides_table(rerun))
    limits = rerun.limits or RERUN_LIMITS
    return Section("rerun", "Rerun comparison", tuple(blocks), limits, str(word), style)
