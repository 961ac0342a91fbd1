"""Lifecycle: worker exits at teardown, each against its arm's budget from the plan.

A clean exit has exit code 0, no signal, and ``exit_s`` (seconds from the
first TERM to the exit) within the plan's ``teardown[arm].term_wait_s``. The
budgets come from the frozen plan, per arm: the seed's baseline used matched
60/90 s diagnostic budgets, its candidate the native ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bundler.format.plan_model import Plan, TeardownBudget
from replay.engine.arrow import column_numpy, equals, filter_table, is_valid, rows
from replay.inputs import Codes, ReplayInputs

__all__ = ["ArmExits", "LifecycleResult", "UncleanExit", "check_lifecycle"]

LIMITS = (
    "Exit codes, signals and exit times are author-reported; the budgets are the frozen "
    "plan's. Hardware not re-run.",
)
_MAX_LISTED = 50


@dataclass(frozen=True)
class ArmExits:
    """Worker exits of one arm."""

    arm: str
    total: int
    clean: int
    nonzero_code: int
    signalled: int
    over_term_wait: int
    over_kill_budget: int
    killed: int
    max_exit_s: float | None
    term_wait_s: float | None
    kill_wait_s: float | None


@dataclass(frozen=True)
class UncleanExit:
    """A worker exit that was not clean, and why."""

    arm: str
    server: str
    worker: str
    exit_code: int | None
    signal: str | None
    exit_s: float
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class LifecycleResult:
    """Every worker exit of one attempt, summarized per arm and per server."""

    attempt: str
    total: int
    clean: int
    arms: tuple[ArmExits, ...]
    per_server: dict[str, int]
    unclean: tuple[UncleanExit, ...]  # at most the first 50
    missing_budgets: tuple[str, ...]
    limits: tuple[str, ...] = LIMITS

    @property
    def unclean_total(self) -> int:
        """Exits that were not clean."""
        return self.total - self.clean


def _budget(plan: Plan | None, arm: str) -> TeardownBudget | None:
    """The plan's teardown budget of ``arm`` (None: no plan, or none for the arm)."""
    if plan is None or plan.teardown is None:
        return None
    return plan.teardown.get(arm)


def check_lifecycle(inputs: ReplayInputs, attempt: str) -> LifecycleResult:
    """Count clean and unclean worker exits of ``attempt`` against the plan's budgets."""
    t = inputs.table("worker_exits")
    t = filter_table(t, equals(t, "attempt_id", attempt))
    arm = Codes.of(t.column("arm"))
    code = column_numpy(t, "exit_code", np.int64, fill=0)
    has_code = is_valid(t, "exit_code")
    signalled = is_valid(t, "signal")
    killed = column_numpy(t, "killed", bool, fill=False)
    exit_s = column_numpy(t, "exit_s", np.float64)
    arm_ids = [a.id for a in inputs.arms]
    # Budgets per arm code, then per row by indexing: no per-row Python.
    budgets = [_budget(inputs.plan, a) for a in arm.values]
    term = np.array([np.nan if b is None else b.term_wait_s for b in budgets], dtype=np.float64)
    term = term[arm.codes]
    kill = np.array([0.0 if b is None else b.kill_wait_s for b in budgets], dtype=np.float64)
    kill = kill[arm.codes]
    no_budget = np.isnan(term)
    nonzero = ~has_code | (code != 0)
    over_term = ~no_budget & (exit_s > np.nan_to_num(term))
    over_kill = ~no_budget & (exit_s > np.nan_to_num(term) + kill)
    clean = ~nonzero & ~signalled & ~no_budget & ~over_term
    arms = []
    for a in arm_ids:
        m = arm.mask(a)
        budget = _budget(inputs.plan, a)
        arms.append(
            ArmExits(
                arm=a,
                total=int(m.sum()),
                clean=int((m & clean).sum()),
                nonzero_code=int((m & nonzero).sum()),
                signalled=int((m & signalled).sum()),
                over_term_wait=int((m & over_term).sum()),
                over_kill_budget=int((m & over_kill).sum()),
                killed=int((m & killed).sum()),
                max_exit_s=float(exit_s[m].max()) if m.any() else None,
                term_wait_s=None if budget is None else float(budget.term_wait_s),
                kill_wait_s=None if budget is None else float(budget.kill_wait_s),
            )
        )
    bad = np.flatnonzero(~clean)
    listed = rows(
        t.take(bad[:_MAX_LISTED]), ["arm", "server", "worker", "exit_code", "signal", "exit_s"]
    )
    unclean = []
    for i, row in zip(bad[:_MAX_LISTED].tolist(), listed, strict=True):
        reasons = [
            why
            for flag, why in (
                (nonzero[i], "exit code not 0"),
                (signalled[i], "ended by a signal"),
                (no_budget[i], "no teardown budget in the plan"),
                (over_term[i], f"{exit_s[i]:g} s > TERM wait {term[i]:g} s"),
            )
            if flag
        ]
        unclean.append(UncleanExit(**row, reasons=tuple(reasons)))
    server = Codes.of(t.column("server"))
    per_server = np.bincount(server.codes, minlength=len(server.values))
    return LifecycleResult(
        attempt=attempt,
        total=int(t.num_rows),
        clean=int(clean.sum()),
        arms=tuple(arms),
        per_server={s: int(c) for s, c in zip(server.values, per_server, strict=True)},
        unclean=tuple(unclean),
        missing_budgets=tuple(v for v, b in zip(arm.values, budgets, strict=True) if b is None),
    )
