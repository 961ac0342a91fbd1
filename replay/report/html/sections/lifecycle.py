"""The lifecycle section: how the workers exited at teardown, against the plan's budgets.

A clean exit is exit code 0, no signal, within the plan's TERM wait for the
arm (:mod:`replay.sections.lifecycle`); the unclean ones are listed with why.
"""

from __future__ import annotations

from replay.report.fmt import float_text
from replay.report.html.sections.common import NOT_EVIDENCED, not_applicable
from replay.report.html.view import Block, Para, Section, Table, cell, rich
from replay.result import ReplayResult
from replay.sections.lifecycle import LifecycleResult

__all__ = ["lifecycle_section"]


def _exits_table(lc: LifecycleResult) -> Table:
    rows = tuple(
        (
            cell(a.arm),
            cell(str(a.total), num=True),
            cell(str(a.clean), "good" if a.clean == a.total else "bad", num=True),
            cell(str(a.nonzero_code), num=True),
            cell(str(a.signalled), num=True),
            cell(str(a.killed), num=True),
            cell(float_text(a.max_exit_s), num=True),
            cell(f"{float_text(a.term_wait_s)} / {float_text(a.kill_wait_s)}", num=True),
            cell(str(a.over_term_wait), "bad" if a.over_term_wait else "", num=True),
        )
        for a in lc.arms
    )
    return Table(
        (
            "arm",
            "exits",
            "clean",
            "exit code ≠ 0",
            "signalled",
            "killed",
            "slowest exit s",
            "budget TERM / KILL s",
            "over TERM wait",
        ),
        rows,
        caption="Worker exits at teardown, per arm, against the plan's budgets",
        table_id="lifecycle-table",
    )


def _unclean_table(lc: LifecycleResult) -> Table:
    return Table(
        ("arm", "server", "worker", "exit code", "signal", "exit s", "why"),
        tuple(
            (
                cell(u.arm),
                cell(u.server),
                cell(u.worker),
                cell("-" if u.exit_code is None else str(u.exit_code), num=True),
                cell(u.signal or "-"),
                cell(float_text(u.exit_s), num=True),
                cell("; ".join(u.reasons)),
            )
            for u in lc.unclean
        ),
        caption="Unclean exits",
        row_styles=tuple("bad" for _ in lc.unclean),
        omitted=f"{lc.unclean_total - len(lc.unclean)} more unclean exits not listed."
        if lc.unclean_total > len(lc.unclean)
        else "",
    )


def lifecycle_section(r: ReplayResult) -> Section:
    """The lifecycle section ("not evidenced" when the bundle records no worker exit)."""
    lc = r.lifecycle
    if (why := r.not_applicable("lifecycle")) is not None:
        return not_applicable("lifecycle", "Lifecycle: worker exits", why)
    if not r.evidenced("lifecycle"):
        return Section(
            "lifecycle",
            "Lifecycle: worker exits",
            (Para(rich("Not evidenced: the bundle records no worker exit.")),),
            r.limits("lifecycle"),
            NOT_EVIDENCED,
            "",
        )
    blocks: list[Block] = [
        Para(
            rich(
                f"{lc.total} worker exits, {lc.clean} clean (exit code 0, no signal, within the "
                "plan's TERM wait for the arm). Per server: "
                + ", ".join(f"{k} {v}" for k, v in lc.per_server.items())
                + "."
            ),
            "good" if lc.clean == lc.total else "bad",
        ),
        _exits_table(lc),
    ]
    if lc.unclean:
        blocks.append(_unclean_table(lc))
    if lc.missing_budgets:
        blocks.append(
            Para(
                rich("No teardown budget in the plan for arm(s): " + ", ".join(lc.missing_budgets)),
                "warn",
            )
        )
    return Section(
        "lifecycle",
        "Lifecycle: worker exits",
        tuple(blocks),
        r.limits("lifecycle"),
        f"{lc.clean}/{lc.total} clean",
        "good" if lc.clean == lc.total else "bad",
    )
