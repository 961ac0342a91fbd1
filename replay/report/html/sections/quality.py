"""The quality-gates section: each frozen gate, its closest check, and every margin.

The verdicts and margins are :mod:`replay.sections.quality`'s (from the recorded
values); this section only lays them out: one row per gate, the margins that
sit within a gate's warning band, and the comparison × gate matrix (only the
rows that matter when it is longer than :data:`MAX_ROWS`).
"""

from __future__ import annotations

from replay.report.fmt import float_text
from replay.report.html.sections.common import (
    MAX_ROWS,
    NOT_EVIDENCED,
    _join_code,
    _margin,
    not_applicable,
)
from replay.report.html.view import Block, Cell, Para, Section, Span, Steps, Table, cell, rich
from replay.result import ReplayResult
from replay.sections.quality import FAIL, PASS, UNATTESTED, GateCheck, GateSummary, QualityResult

__all__ = ["quality_section"]


def _check_cell(c: GateCheck, closest: bool, equality: bool) -> Cell:
    if equality:
        off = "exact" if c.margin == 0 else "off by " + _margin(-c.margin)[1:]
        text = f"{float_text(c.value)} ({off})"
    else:
        text = f"{float_text(c.value)} ({_margin(c.margin)})"
    if c.verdict == FAIL:
        style = "bad"
    elif c.verdict == UNATTESTED:
        style = "warn"
    elif closest:
        style = "closest"
    elif c.close:
        style = "close"
    else:
        style = ""
    return cell(text, style, num=True)


def _gate_rule(g: GateSummary) -> str:
    return f"{g.gate.metric} {g.gate.op} {float_text(g.gate.threshold)}"


def _quality_matrix(r: ReplayResult) -> Table:
    q = r.quality
    gates = [g for g in q.gates if g.checks]
    # An equality gate has no side to be close to: its "closest" is any exact match.
    closest = {
        (g.gate.gate_id, g.closest.comparison_id)
        for g in gates
        if g.closest is not None and g.gate.op != "=="
    }
    by: dict[str, dict[str, GateCheck]] = {}
    for c in q.checks:
        by.setdefault(c.comparison_id, {})[c.gate_id] = c
    ids = list(by)

    def interesting(cid: str) -> bool:
        return any(
            c.verdict != PASS or c.close or (c.gate_id, cid) in closest for c in by[cid].values()
        )

    shown = ids if len(ids) <= MAX_ROWS else [i for i in ids if interesting(i)][:MAX_ROWS]
    rows = []
    styles = []
    for cid in shown:
        cells = [cell(Span(cid, "code"))]
        for g in gates:
            check = by[cid].get(g.gate.gate_id)
            if check is None:
                cells.append(cell("-", "muted"))
            else:
                eq = g.gate.op == "=="
                cells.append(_check_cell(check, (g.gate.gate_id, cid) in closest, eq))
        rows.append(tuple(cells))
        verdicts = {x.verdict for x in by[cid].values()}
        styles.append("bad" if FAIL in verdicts else "warn" if UNATTESTED in verdicts else "")
    omitted = ""
    if len(shown) < len(ids):
        omitted = (
            f"{len(ids) - len(shown)} of {len(ids)} comparisons not shown: every check of each "
            "passes, none is within its gate's warning band, and none is a gate's closest."
        )
    return Table(
        ("comparison", *(f"{g.gate.gate_id}: {_gate_rule(g)}" for g in gates)),
        tuple(rows),
        caption="Each comparison's recorded value and its margin to each gate "
        "(value (margin); highlighted: each gate's closest; amber: within the warning band)",
        row_styles=tuple(styles),
        omitted=omitted,
        table_id="quality-matrix",
    )


def _gates_table(q: QualityResult) -> Table:
    """One row per frozen gate, with its closest check and a flag."""
    gate_rows = []
    gate_styles = []
    for g in q.gates:
        c = g.closest
        eq = g.gate.op == "=="
        flag = ""
        if g.failed:
            flag = "FAIL"
        elif g.unattested:
            flag = "unattested"
        elif c is not None and c.close:
            flag = "CLOSE"
        gate_rows.append(
            (
                cell(Span(g.gate.gate_id, "code")),
                cell(_gate_rule(g)),
                cell(g.gate.definition),
                cell(
                    f"{g.passed}/{g.checks}"
                    + (f", {g.failed} fail" if g.failed else "")
                    + (f", {g.unattested} unattested" if g.unattested else ""),
                    num=True,
                ),
                cell("-" if c is None else f"{float_text(c.value)} ({c.comparison_id})", num=True),
                cell(
                    "-"
                    if c is None
                    else ("exact" if c.margin == 0 else "off")
                    if eq
                    else _margin(c.margin),
                    num=True,
                ),
                cell(float_text(g.gate.warn_within), num=True),
                cell(flag, "bad" if g.failed else "warn" if flag else ""),
            )
        )
        gate_styles.append(
            "bad" if g.failed else "warn" if g.unattested else "close" if flag else ""
        )
    return Table(
        (
            "gate",
            "rule",
            "definition",
            "pass",
            "closest value (comparison)",
            "margin",
            "warn within",
            "flag",
        ),
        tuple(gate_rows),
        caption="Frozen gates, each with its closest check",
        row_styles=tuple(gate_styles),
        table_id="gates-table",
    )


def _closest_margins(q: QualityResult) -> list[Block]:
    """The passing gates whose closest check sits within the warning band, closest first."""
    close = sorted(
        (g for g in q.gates if g.closest is not None and g.closest.close and not g.failed),
        key=lambda g: (
            float(g.closest.margin) / (g.gate.warn_within or 1) if g.closest else 0,
            g.gate.gate_id,
        ),
    )
    if not close:
        return []
    items = tuple(
        rich(
            Span(g.gate.metric, "strong"),
            f" {float_text(g.closest.value)} against the gate {g.gate.op} "
            f"{float_text(g.gate.threshold)}: "
            f"margin {_margin(g.closest.margin)}, within the warning band of "
            f"{float_text(g.gate.warn_within)} (comparison {g.closest.comparison_id})",
        )
        for g in close
        if g.closest is not None
    )
    return [Para(rich(Span("Closest margins", "strong"), ":")), Steps(items, ordered=False)]


def quality_section(r: ReplayResult) -> Section:
    """The quality-gates section."""
    q = r.quality
    if (why := r.not_applicable("quality")) is not None:
        return not_applicable("quality", "Quality gates", why)
    blocks: list[Block] = [
        Para(
            rich(
                f"{q.comparisons_passed} of {q.comparisons_total} comparisons pass every gate "
                f"whose metric they record; {q.comparisons_failed} fail; "
                f"{q.comparisons_unattested} unattested. Scorer identity "
                + (
                    "recorded."
                    if q.scorer_attested
                    else "ABSENT: every LPIPS verdict is unattested."
                )
            ),
            "good" if q.comparisons_passed == q.comparisons_total else "bad",
        ),
        *_closest_margins(q),
        _gates_table(q),
        _quality_matrix(r),
    ]
    if q.ungated_comparisons:
        blocks.append(
            Para(rich(f"{q.ungated_comparisons} comparison(s) record no gated metric."), "warn")
        )
    if q.never_evaluated:
        blocks.append(Para(rich("Gates never evaluated: ", *_join_code(q.never_evaluated)), "warn"))
    ok = not q.comparisons_failed and not q.comparisons_unattested
    if not r.evidenced("quality"):
        return Section(
            "quality",
            "Quality gates",
            tuple(blocks),
            r.limits("quality"),
            NOT_EVIDENCED,
            "",
            summary=True,
        )
    return Section(
        "quality",
        "Quality gates",
        tuple(blocks),
        r.limits("quality"),
        f"{q.comparisons_passed}/{q.comparisons_total} pass",
        "good" if ok else "bad" if q.comparisons_failed else "warn",
        summary=True,  # the gates summary is part of a PR body
    )
