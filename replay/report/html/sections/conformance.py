"""The plan-conformance section: the receipts against the frozen plan, server by server.

What :mod:`replay.sections.conformance` found (the planned and observed order, each
server slot's counts, every deviation) laid out; "not checked" when the
bundle has no plan to check against.
"""

from __future__ import annotations

from replay.report.html.view import Block, Para, Section, Span, Table, cell, rich
from replay.result import ReplayResult

__all__ = ["conformance_section"]


def conformance_section(r: ReplayResult) -> Section:
    """The plan-conformance section."""
    c = r.conformance
    if not c.checked:
        return Section(
            "conformance",
            "Plan conformance",
            (Para(rich("Not checked: " + "; ".join(c.warnings)), "warn"),),
            r.limits("conformance"),
            "not checked",
            "warn",
        )
    if c.empty:
        return Section(
            "conformance",
            "Plan conformance",
            (
                Para(
                    rich(
                        f"Not evidenced: attempt {c.attempt} has no warmup or measured receipt "
                        f"to compare with plan {c.plan_id}."
                    ),
                    "warn",
                ),
            ),
            r.limits("conformance"),
            "not evidenced",
            "warn",
        )
    serving = r.serving_campaign and not c.servers
    blocks = _serving_blocks(r) if serving else _server_blocks(r)
    if c.deviations:
        blocks.append(
            Table(
                ("deviation", "where", "what"),
                tuple((cell(d.kind), cell(d.where), cell(d.message)) for d in c.deviations),
                caption="Deviations from the frozen plan",
                row_styles=tuple("bad" for _ in c.deviations),
            )
        )
    else:
        blocks.append(Para(rich("No deviation from the frozen plan."), "good"))
    blocks += [Para(rich("Warning: " + w), "warn") for w in c.warnings]
    return Section(
        "conformance",
        "Plan conformance",
        tuple(blocks),
        r.limits("conformance"),
        "conforms" if c.ok else f"{len(c.deviations)} deviation(s)",
        "good" if c.ok else "bad",
    )


def _serving_blocks(r: ReplayResult) -> list[Block]:
    """A serving plan: its load points against the tool's recorded settings; no servers."""
    c = r.conformance
    points = sorted({p.load_point for p in r.serving})
    blocks: list[Block] = [
        Para(
            rich(
                "Plan ",
                Span(str(c.plan_path), "code"),
                f" (id {c.plan_id}): {len(points)} load point(s) per arm, compared with the "
                "settings and request counts the benchmark tool recorded.",
            )
        )
    ]
    if c.checked_items:
        blocks.append(
            Table(
                ("checked",),
                tuple((cell(x),) for x in c.checked_items),
                caption="What the tool's files evidence, checked against the plan",
                table_id="conformance-table",
            )
        )
    return blocks


def _server_blocks(r: ReplayResult) -> list[Block]:
    """A campaign with receipts: each server slot's counts, the planned and observed order."""
    c = r.conformance
    rows = tuple(
        (
            cell(str(i), num=True),
            cell(s.server),
            cell(s.arm),
            cell(str(s.warmups), num=True),
            cell(f"{s.measured} ({s.measured_ok} ok)", num=True),
            cell(str(s.quality), num=True),
            cell(str(s.outside_window), "bad" if s.outside_window else "", num=True),
        )
        for i, s in enumerate(c.servers, 1)
    )
    blocks: list[Block] = [
        Para(
            rich(
                "Plan ",
                Span(str(c.plan_path), "code"),
                f" (id {c.plan_id}): {c.warmups_per_server} warmups and {c.measured_per_server} "
                f"measured requests per server; planned order {'/'.join(c.planned_order)}, "
                f"observed {'/'.join(c.observed_order) or '-'}.",
            )
        ),
        Table(
            ("slot", "server", "arm", "warmups", "measured", "quality", "outside window"),
            rows,
            caption="Servers in run order",
            table_id="conformance-table",
        ),
    ]
    return blocks
