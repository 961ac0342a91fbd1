"""The rerun section: the sealed run and a rerun side by side, effect by effect.

From the rerun comparison's JSON form (:mod:`replay.report.html.jsonform`): whether
each effect (speedup) was reproduced within the tolerance, the arm means and
worker exits of both runs, and the outputs that match the sealed SHA-256. A
comparison against another sealed campaign says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from replay.report.html.jsonform import _json_text, _list, _map
from replay.report.html.view import Block, Cell, Para, Section, Span, Table, cell, rich

__all__ = ["RERUN_LIMITS", "rerun_section"]

RERUN_LIMITS = (
    "A rerun on other hardware on another day reproduces an effect, not the sealed latencies "
    "themselves.",
)


def _side_means(side: Mapping[str, Any]) -> dict[str, Any]:
    return {_json_text(a.get("arm")): a.get("mean_s") for a in _list(side.get("arms"))}


def _num(x: Any, spec: str) -> str:
    ok = isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
    return format(x, spec) if ok else "-"


def _reproduced_style(flag: Any) -> str:
    return "good" if flag is True else "bad" if flag is False else "warn"


def _effect_row(e: Mapping[str, Any]) -> tuple[Cell, ...]:
    sealed = (
        f"{_num(e.get('sealed_baseline_s'), '.2f')} → {_num(e.get('sealed_candidate_s'), '.2f')}"
    )
    rerun = f"{_num(e.get('rerun_baseline_s'), '.2f')} → {_num(e.get('rerun_candidate_s'), '.2f')}"
    speedups = f"{_num(e.get('sealed_speedup'), '.2f')}× / {_num(e.get('rerun_speedup'), '.2f')}×"
    return (
        cell(f"{_json_text(e.get('baseline'))} → {_json_text(e.get('candidate'))}"),
        cell(f"{sealed} s", num=True),
        cell(f"{rerun} s", num=True),
        cell(speedups, num=True),
        cell(_num(e.get("speedup_ratio"), ".3f"), num=True),
        cell(_json_text(e.get("verdict")), _reproduced_style(e.get("reproduced"))),
    )


def _sides_table(sealed: Mapping[str, Any], again: Mapping[str, Any], outputs: Any) -> Table:
    sm, rm = _side_means(sealed), _side_means(again)
    rows = [
        (
            cell(f"arm mean {a} s"),
            cell(_num(sm.get(a), ".2f"), num=True),
            cell(_num(rm.get(a), ".2f"), num=True),
        )
        for a in sorted(set(sm) | set(rm))
    ]
    lc_s, lc_r = _map(sealed.get("lifecycle")), _map(again.get("lifecycle"))
    rows.append(
        (
            cell("worker exits clean"),
            cell(f"{_json_text(lc_s.get('clean'))}/{_json_text(lc_s.get('total'))}", num=True),
            cell(f"{_json_text(lc_r.get('clean'))}/{_json_text(lc_r.get('total'))}", num=True),
        )
    )
    out = _map(outputs)
    rows.append(
        (
            cell("outputs with the sealed SHA-256"),
            cell("-"),
            cell(
                f"{_json_text(out.get('matching'))} of {_json_text(out.get('compared'))}",
                num=True,
            ),
        )
    )
    return Table(
        ("", "sealed", "rerun"),
        tuple(rows),
        caption="Sealed and rerun",
        table_id="rerun-sides-table",
    )


def rerun_section(rerun: Mapping[str, Any], campaign_id: str) -> Section:
    """The rerun comparison section (sealed vs rerun, side by side)."""
    rep = rerun.get("reproduced")
    word = "reproduced" if rep is True else "NOT reproduced" if rep is False else "not judged"
    style = _reproduced_style(rep)
    sealed, again = _map(rerun.get("sealed")), _map(rerun.get("rerun"))
    tol = rerun.get("tolerance")
    tol_text = _num(tol * 100, "g") if isinstance(tol, int | float) else "-"
    plan = "identical" if rerun.get("plan_matches") else "DIFFERENT"
    blocks: list[Block] = [
        Para(
            rich(
                "Effect ",
                Span(word, style),
                f" within a relative tolerance of {tol_text} % on the speedup; plan {plan}; "
                f"rerun campaign {_json_text(again.get('campaign_id'))}, "
                f"attempt {_json_text(again.get('attempt'))}.",
            ),
            style,
        )
    ]
    if _json_text(sealed.get("campaign_id")) != campaign_id:
        blocks.append(
            Para(
                rich(
                    "This comparison is against sealed campaign "
                    f"{_json_text(sealed.get('campaign_id'))}, "
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
            tuple(_effect_row(e) for e in _list(rerun.get("effects"))),
            caption="Effects, sealed and rerun side by side",
            table_id="rerun-effects-table",
        )
    )
    blocks.append(_sides_table(sealed, again, rerun.get("outputs")))
    raw = rerun.get("limits")
    limits = tuple(_json_text(x) for x in raw) if isinstance(raw, list) and raw else RERUN_LIMITS
    return Section("rerun", "Rerun comparison", tuple(blocks), limits, word, style)
