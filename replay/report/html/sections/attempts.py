"""The attempts section: every attempt, accepted or not, and the proof they were not mixed.

Only the accepted attempt's rows enter the statistics; the others are listed
with their receipts, and :mod:`replay.sections.attempts`' isolation checks (request ids,
comparisons, time windows) are printed as the proof.
"""

from __future__ import annotations

from collections import Counter

from replay.report.html.facts import BundleFacts
from replay.report.html.sections.common import _join_code
from replay.report.html.view import Block, Para, Section, Span, Table, cell, rich
from replay.result import ReplayResult
from replay.sections.attempts import AttemptsResult

__all__ = ["attempts_section"]


def _attempts_table(a: AttemptsResult, facts: BundleFacts) -> Table:
    rows = []
    styles = []
    for x in a.attempts:
        statuses = facts.status_by_attempt.get(x.attempt_id, {})
        by_status = ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())) or "0"
        rows.append(
            (
                cell(Span(x.attempt_id, "code")),
                cell(
                    x.status,
                    {"accepted": "good", "interrupted": "warn", "rejected": "bad"}.get(
                        x.status, ""
                    ),
                ),
                cell(x.reason or "-"),
                cell(", ".join(f"{k} {v}" for k, v in sorted(x.receipts_by_phase.items())) or "0"),
                cell(by_status),
                cell(str(facts.samples_by_attempt.get(x.attempt_id, 0)), num=True),
                cell(str(x.worker_exits), num=True),
                cell(str(x.comparisons), num=True),
                cell(
                    "(accepted)" if x.attempt_id == a.accepted else str(x.entered_accepted),
                    "" if x.attempt_id == a.accepted or not x.entered_accepted else "bad",
                    num=True,
                ),
            )
        )
        styles.append("" if x.attempt_id == a.accepted else "muted")
    return Table(
        (
            "attempt",
            "status",
            "reason",
            "receipts by phase",
            "receipts by status",
            "latency samples",
            "worker exits",
            "comparisons",
            "rows in accepted",
        ),
        tuple(rows),
        caption="Every attempt, accepted or not",
        row_styles=tuple(styles),
        table_id="attempts-table",
    )


def attempts_section(r: ReplayResult, facts: BundleFacts) -> Section:
    """The attempts section."""
    a = r.attempts
    others = [x for x in a.attempts if x.attempt_id != a.accepted]
    proof = (
        f"{sum(x.entered_accepted for x in others)} request id(s) of the {len(others)} other "
        f"attempt(s) among the {a.accepted_request_ids} accepted ones; "
        f"{len(a.cross_attempt_comparisons)} accepted comparison(s) citing another attempt's "
        f"receipts; {sum(a.timed_in_other_window.values())} accepted receipt(s) timed inside "
        "another attempt's window and outside their own."
    )
    counts = Counter(x.status for x in a.attempts)
    blocks: list[Block] = [
        Para(
            rich(
                f"{len(a.attempts)} attempt(s): "
                + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
                + f". Only {a.accepted}'s rows enter the statistics; the others are retained "
                "and listed, never mixed."
            )
        ),
        _attempts_table(a, facts),
        Para(
            rich(("Isolated: " if a.isolated else "NOT isolated: ") + proof),
            "good" if a.isolated else "bad",
        ),
    ]
    if a.cross_attempt_comparisons:
        blocks.append(
            Para(
                rich(
                    "Comparisons citing other attempts: ", *_join_code(a.cross_attempt_comparisons)
                ),
                "bad",
            )
        )
    return Section(
        "attempts",
        "Attempts",
        tuple(blocks),
        r.limits("attempts"),
        "isolated" if a.isolated else "MIXED",
        "good" if a.isolated else "bad",
    )
