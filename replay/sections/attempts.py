"""Attempts: which one is accepted, what each holds, and proof that none leaked into another.

Only the accepted attempt's rows enter the accepted statistics. The proof is
computed from the data, not assumed: the request ids of every other attempt
are intersected with the accepted set, comparisons of the accepted attempt
must cite receipts of the accepted attempt only, and accepted receipts timed
inside another attempt's window (and outside their own) are counted: that is
how rows copied in from a rejected run and re-labelled show up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from bundler.errors import CouldNotRunError
from replay.engine.arrow import (
    BoolArray,
    IntArray,
    equals,
    filter_column,
    filter_table,
    index_in,
    is_in,
    rows,
    timestamps_ns,
    value_counts,
)
from replay.inputs import ReplayInputs

__all__ = [
    "AttemptRow",
    "AttemptsResult",
    "Window",
    "accepted_attempt",
    "check_attempts",
    "windows",
]

LIMITS = (
    "Isolation is proved by attempt_id, request_id and time window. Rows re-labelled with "
    "the accepted attempt_id and re-timed inside its window cannot be told apart from "
    "genuine ones at this level.",
)


@dataclass(frozen=True)
class Window:
    """An attempt's recorded [start, end], either bound possibly absent (ns since epoch)."""

    start_ns: int | None
    end_ns: int | None

    def outside(self, start: IntArray, end: IntArray) -> BoolArray:
        """Requests that start before the window or end after it."""
        out = np.zeros(start.shape, dtype=bool)
        if self.start_ns is not None:
            out |= start < self.start_ns
        if self.end_ns is not None:
            out |= end > self.end_ns
        return out

    @property
    def bounded(self) -> bool:
        """True when both ends are recorded."""
        return self.start_ns is not None and self.end_ns is not None


@dataclass(frozen=True)
class AttemptRow:
    """One attempt: its status and reason, and how many rows of each table it holds."""

    attempt_id: str
    status: str
    reason: str | None
    plan: str | None
    window: Window
    receipts_by_phase: dict[str, int]
    worker_exits: int
    telemetry: int
    comparisons: int
    outside_window: int
    entered_accepted: int

    @property
    def receipts(self) -> int:
        """Receipts of this attempt, all phases."""
        return sum(self.receipts_by_phase.values())


@dataclass(frozen=True)
class AttemptsResult:
    """The attempts ledger and the isolation proof for the accepted attempt."""

    accepted: str
    attempts: tuple[AttemptRow, ...]
    accepted_request_ids: int
    cross_attempt_comparisons: tuple[str, ...]
    timed_in_other_window: dict[str, int]
    limits: tuple[str, ...] = LIMITS

    @property
    def isolated(self) -> bool:
        """No other attempt's row entered, and nothing points across attempts."""
        leaked = any(a.entered_accepted for a in self.attempts if a.attempt_id != self.accepted)
        return not (
            leaked or self.cross_attempt_comparisons or any(self.timed_in_other_window.values())
        )


def accepted_attempt(inputs: ReplayInputs) -> str:
    """The id of the one attempt whose status is ``accepted``.

    Raises:
        CouldNotRunError: the bundle has no accepted attempt, or more than one.
    """
    t = inputs.table("attempts")
    ids = filter_table(t, equals(t, "status", "accepted")).column("attempt_id").to_pylist()
    if len(ids) != 1:
        raise CouldNotRunError(f"the bundle has {len(ids)} accepted attempts; replay needs one")
    return str(ids[0])


def windows(inputs: ReplayInputs) -> dict[str, Window]:
    """Each attempt's recorded window."""
    t = inputs.table("attempts")
    start, s_ok = timestamps_ns(t.column("start"))
    end, e_ok = timestamps_ns(t.column("end"))
    out = {}
    for i, aid in enumerate(t.column("attempt_id").to_pylist()):
        out[str(aid)] = Window(int(start[i]) if s_ok[i] else None, int(end[i]) if e_ok[i] else None)
    return out


def _cross_attempt_comparisons(inputs: ReplayInputs, accepted: str) -> tuple[str, ...]:
    """Comparisons of ``accepted`` citing a receipt that is not the accepted attempt's."""
    comps = inputs.table("comparisons")
    comps = filter_table(comps, equals(comps, "attempt_id", accepted))
    refs = rows(comps, ["comparison_id", "baseline_request_id", "candidate_request_id"])
    r = inputs.receipts
    cited = pa.array(
        [x["baseline_request_id"] for x in refs] + [x["candidate_request_id"] for x in refs],
        type=pa.string(),
    )
    # Probe every receipt against the few cited ids, never the other way round.
    hit = is_in(r.table.column("request_id"), cited)
    own_hit = hit & r.attempt.mask(accepted)
    own = set(filter_column(r.table, "request_id", own_hit).to_pylist())
    return tuple(
        str(x["comparison_id"])
        for x in refs
        if x["baseline_request_id"] not in own or x["candidate_request_id"] not in own
    )


def _entered(inputs: ReplayInputs, acc_mask: BoolArray) -> IntArray:
    """Per attempt code: how many of its request ids are also accepted request ids."""
    r = inputs.receipts
    others = ~acc_mask
    other_ids = filter_column(r.table, "request_id", others)
    # The hash table is over the other attempts' ids (few); the accepted ids probe it.
    idx = index_in(filter_column(r.table, "request_id", acc_mask), other_ids)
    hits = idx[idx >= 0]
    return np.bincount(r.attempt.codes[others][hits], minlength=len(r.attempt.values))


def check_attempts(inputs: ReplayInputs, accepted: str) -> AttemptsResult:
    """Ledger of every attempt and the proof that only ``accepted`` rows are used."""
    r = inputs.receipts
    wins = windows(inputs)
    acc_mask = r.attempt.mask(accepted)
    entered = _entered(inputs, acc_mask)
    per_table = {
        name: value_counts(inputs.table(name), "attempt_id")
        for name in ("worker_exits", "telemetry", "comparisons")
    }
    acc_win = wins.get(accepted, Window(None, None))
    own_out = acc_win.outside(r.start_ns, r.end_ns)
    out_rows = []
    in_other: dict[str, int] = {}
    for a in inputs.rows("attempts", ["attempt_id", "status", "reason", "plan"]):
        aid = str(a["attempt_id"])
        mask = r.attempt.mask(aid)
        counts = np.bincount(r.phase.codes[mask], minlength=len(r.phase.values))
        code = r.attempt.code(aid)
        win = wins[aid]
        out_rows.append(
            AttemptRow(
                attempt_id=aid,
                status=str(a["status"]),
                reason=a["reason"],
                plan=a["plan"],
                window=win,
                receipts_by_phase={
                    p: int(c) for p, c in zip(r.phase.values, counts, strict=True) if c
                },
                worker_exits=per_table["worker_exits"].get(aid, 0),
                telemetry=per_table["telemetry"].get(aid, 0),
                comparisons=per_table["comparisons"].get(aid, 0),
                outside_window=int(np.count_nonzero(mask & win.outside(r.start_ns, r.end_ns))),
                entered_accepted=int(np.count_nonzero(mask))
                if aid == accepted
                else int(entered[code])
                if code >= 0
                else 0,
            )
        )
        if aid != accepted and win.bounded:
            inside = ~win.outside(r.start_ns, r.start_ns)
            in_other[aid] = int(np.count_nonzero(acc_mask & inside & own_out))
    return AttemptsResult(
        accepted=accepted,
        attempts=tuple(out_rows),
        accepted_request_ids=int(np.count_nonzero(acc_mask)),
        cross_attempt_comparisons=_cross_attempt_comparisons(inputs, accepted),
        timed_in_other_window=in_other,
    )
