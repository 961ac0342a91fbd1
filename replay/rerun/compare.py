"""A rerun bundle side by side with the sealed bundle it reran.

Statistics follow the claims vocabulary (``bundler/vocabulary.py``): a
server mean is the mean ``e2e_s`` of that server's measured requests with
status ``ok`` in the accepted attempt; an arm mean is the mean of its server
means; speedup = baseline / candidate; percent lower = (1 - candidate /
baseline) x 100. Each is computed for both bundles, with the ratio rerun /
sealed.

**Reproduced** (default tolerance 10 %): the rerun's speedup is on the same
side of 1 as the sealed one and within ``tolerance`` of it, relatively:
``|speedup_rerun / speedup_sealed - 1| <= tolerance``. Arm means themselves
are not required to match (another machine, another day); the effect is.

Also side by side: requests by status and timeout level, worker exits (clean
= exit code 0, no signal, within the plan's TERM wait), mean sampled peak HBM
per arm, and how many rerun outputs have the sealed output's SHA-256 (same
server and ``seq``; meaningful where the plan fixes the seed and the runtime
is deterministic).

``bundle replay RERUN.bundle --against X.bundle`` is the command meant to
print this (wired by ``reprobundle/cli/replay_cmd.py``); :func:`format_comparison` gives the
text lines.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bundler.verify import OpenedBundle

__all__ = [
    "DEFAULT_TOLERANCE",
    "ArmMean",
    "Effect",
    "Lifecycle",
    "RerunComparison",
    "ServerMean",
    "Side",
    "compare_bundles",
    "format_comparison",
]

DEFAULT_TOLERANCE = 0.10
_RECEIPT_COLUMNS = (
    "attempt_id",
    "arm",
    "server",
    "phase",
    "seq",
    "status",
    "e2e_s",
    "timeout_level",
    "output_sha256",
)


@dataclass(frozen=True)
class ServerMean:
    """One server's mean over its measured ok requests."""

    server: str
    arm: str
    mean_s: float
    n: int


@dataclass(frozen=True)
class ArmMean:
    """One arm: the mean of its server means."""

    arm: str
    role: str
    mean_s: float | None
    servers: tuple[ServerMean, ...]


@dataclass(frozen=True)
class Lifecycle:
    """Worker exits of one attempt."""

    total: int
    clean: int
    killed: int
    unclean: tuple[str, ...]


@dataclass(frozen=True)
class Side:
    """What one bundle's accepted attempt shows."""

    label: str
    campaign_id: str
    attempt: str | None
    arms: tuple[ArmMean, ...]
    statuses: Mapping[str, int]
    timeout_levels: Mapping[str, int]
    lifecycle: Lifecycle
    hbm_peak_mean_mb: Mapping[str, float | None]
    other_attempts: Mapping[str, str] = field(default_factory=dict)

    def arm(self, arm_id: str) -> ArmMean | None:
        """The arm called ``arm_id``."""
        return next((a for a in self.arms if a.arm == arm_id), None)


@dataclass(frozen=True)
class Effect:
    """One baseline/candidate pair in both bundles."""

    baseline: str
    candidate: str
    sealed_baseline_s: float | None
    sealed_candidate_s: float | None
    rerun_baseline_s: float | None
    rerun_candidate_s: float | None
    sealed_speedup: float | None
    rerun_speedup: float | None
    sealed_percent_lower: float | None
    rerun_percent_lower: float | None
    baseline_ratio: float | None
    candidate_ratio: float | None
    speedup_ratio: float | None
    reproduced: bool | None
    verdict: str


@dataclass(frozen=True)
class RerunComparison:
    """The whole side-by-side."""

    sealed: Side
    rerun: Side
    effects: tuple[Effect, ...]
    tolerance: float
    plan_matches: bool
    outputs_compared: int
    outputs_matching: int
    limits: tuple[str, ...]

    @property
    def reproduced(self) -> bool | None:
        """True if every effect reproduced, False if one did not, None if none could be judged."""
        judged = [e.reproduced for e in self.effects if e.reproduced is not None]
        if not judged:
            return None
        return all(judged)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""

        def side(s: Side) -> dict[str, Any]:
            return {
                "campaign_id": s.campaign_id,
                "attempt": s.attempt,
                "arms": [
                    {
                        "arm": a.arm,
                        "role": a.role,
                        "mean_s": a.mean_s,
                        "servers": [x.__dict__ for x in a.servers],
                    }
                    for a in s.arms
                ],
                "statuses": dict(s.statuses),
                "timeout_levels": dict(s.timeout_levels),
                "lifecycle": s.lifecycle.__dict__,
                "hbm_peak_mean_mb": dict(s.hbm_peak_mean_mb),
                "other_attempts": dict(s.other_attempts),
            }

        return {
            "reproduced": self.reproduced,
            "tolerance": self.tolerance,
            "plan_matches": self.plan_matches,
            "sealed": side(self.sealed),
            "rerun": side(self.rerun),
            "effects": [e.__dict__ for e in self.effects],
            "outputs": {"compared": self.outputs_compared, "matching": self.outputs_matching},
            "limits": list(self.limits),
        }


def _rows(opened: OpenedBundle, table: str, columns: Sequence[str]) -> list[dict[str, Any]]:
    t = opened.table(table)
    # Timestamps are left out: their to_pylist needs pandas at nanosecond precision.
    rows: list[dict[str, Any]] = t.select([c for c in columns if c in t.column_names]).to_pylist()
    return rows


def _plan(opened: OpenedBundle) -> tuple[str, bytes, dict[str, Any]]:
    campaign = opened.document("campaign.json") or {}
    name = str(campaign.get("plan", ""))
    member = opened.members.get(name)
    data = member.data if member is not None else b"{}"
    doc = json.loads(data)
    return name, data, doc if isinstance(doc, dict) else {}


def _accepted(opened: OpenedBundle) -> tuple[str | None, dict[str, str]]:
    rows = _rows(opened, "attempts", ("attempt_id", "status"))
    accepted = [r["attempt_id"] for r in rows if r["status"] == "accepted"]
    others = {r["attempt_id"]: r["status"] for r in rows if r["status"] != "accepted"}
    return (accepted[0] if len(accepted) == 1 else None), others


def _arm_means(
    receipts: Sequence[Mapping[str, Any]], roles: Mapping[str, str], attempt: str | None
) -> tuple[ArmMean, ...]:
    by_server: dict[tuple[str, str], list[float]] = {}
    for r in receipts:
        if r["attempt_id"] == attempt and r["phase"] == "measured" and r["status"] == "ok":
            by_server.setdefault((r["arm"], r["server"]), []).append(float(r["e2e_s"]))
    out = []
    for arm, role in roles.items():
        servers = tuple(
            ServerMean(server, arm, float(np.mean(v)), len(v))
            for (a, server), v in sorted(by_server.items())
            if a == arm
        )
        mean = float(np.mean([s.mean_s for s in servers])) if servers else None
        out.append(ArmMean(arm, role, mean, servers))
    return tuple(out)


def _lifecycle(opened: OpenedBundle, attempt: str | None, plan: Mapping[str, Any]) -> Lifecycle:
    rows = _rows(
        opened,
        "worker_exits",
        ("attempt_id", "arm", "server", "worker", "exit_code", "signal", "exit_s", "killed"),
    )
    rows = [r for r in rows if r["attempt_id"] == attempt]
    raw = plan.get("teardown")
    teardown: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    clean = 0
    unclean = []
    for r in rows:
        entry = teardown.get(r["arm"])
        budget = entry.get("term_wait_s") if isinstance(entry, Mapping) else None
        ok = (
            r["exit_code"] == 0
            and r["signal"] is None
            and (budget is None or float(r["exit_s"]) <= float(budget))
        )
        if ok:
            clean += 1
        else:
            why = r["signal"] or f"exit {r['exit_code']}"
            unclean.append(f"{r['server']}/{r['worker']} ({why}, {float(r['exit_s']):.2f} s)")
    killed = sum(1 for r in rows if r["killed"])
    return Lifecycle(len(rows), clean, killed, tuple(unclean))


def _hbm(opened: OpenedBundle, attempt: str | None, arms: Sequence[str]) -> dict[str, float | None]:
    rows = _rows(opened, "telemetry", ("attempt_id", "arm", "server", "device", "hbm_used_mb"))
    peaks: dict[tuple[str, str, str], float] = {}
    for r in rows:
        if r["attempt_id"] != attempt:
            continue
        key = (r["arm"], r["server"], r["device"])
        peaks[key] = max(peaks.get(key, 0.0), float(r["hbm_used_mb"]))
    out: dict[str, float | None] = {}
    for arm in arms:
        values = [v for (a, _, _), v in peaks.items() if a == arm]
        out[arm] = float(np.mean(values)) if values else None
    return out


def _side(label: str, opened: OpenedBundle) -> tuple[Side, list[dict[str, Any]]]:
    campaign = opened.document("campaign.json") or {}
    roles = {str(a["id"]): str(a["role"]) for a in campaign.get("arms", [])}
    attempt, others = _accepted(opened)
    receipts = _rows(opened, "receipts", _RECEIPT_COLUMNS)
    mine = [r for r in receipts if r["attempt_id"] == attempt]
    _, _, plan = _plan(opened)
    side = Side(
        label,
        str(campaign.get("id", "?")),
        attempt,
        _arm_means(receipts, roles, attempt),
        dict(Counter(r["status"] for r in mine)),
        dict(Counter(r["timeout_level"] for r in mine if r["timeout_level"])),
        _lifecycle(opened, attempt, plan),
        _hbm(opened, attempt, list(roles)),
        others,
    )
    return side, mine


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _effect(base: str, cand: str, sealed: Side, rerun: Side, tol: float) -> Effect:
    def means(s: Side) -> tuple[float | None, float | None]:
        b, c = s.arm(base), s.arm(cand)
        return (b.mean_s if b else None), (c.mean_s if c else None)

    sb, sc = means(sealed)
    rb, rc = means(rerun)
    s_speed, r_speed = _ratio(sb, sc), _ratio(rb, rc)
    s_lower = None if s_speed is None else (1 - 1 / s_speed) * 100
    r_lower = None if r_speed is None else (1 - 1 / r_speed) * 100
    speed_ratio = _ratio(r_speed, s_speed)
    if s_speed is None or r_speed is None or speed_ratio is None:
        reproduced, verdict = None, "not judged: an arm has no measured ok request in one bundle"
    else:
        same_side = (s_speed > 1) == (r_speed > 1)
        within = abs(speed_ratio - 1) <= tol
        reproduced = same_side and within
        verdict = (
            f"reproduced: rerun speedup {r_speed:.3f}x vs sealed {s_speed:.3f}x "
            f"({(speed_ratio - 1) * 100:+.1f} %, tolerance {tol * 100:g} %)"
            if reproduced
            else f"not reproduced: rerun speedup {r_speed:.3f}x vs sealed {s_speed:.3f}x "
            f"({(speed_ratio - 1) * 100:+.1f} %, tolerance {tol * 100:g} %"
            + ("" if same_side else "; the effect vanished or changed direction")
            + ")"
        )
    return Effect(
        base,
        cand,
        sb,
        sc,
        rb,
        rc,
        s_speed,
        r_speed,
        s_lower,
        r_lower,
        _ratio(rb, sb),
        _ratio(rc, sc),
        speed_ratio,
        reproduced,
        verdict,
    )


def compare_bundles(
    rerun: OpenedBundle, sealed: OpenedBundle, *, tolerance: float = DEFAULT_TOLERANCE
) -> RerunComparison:
    """Compare a rerun bundle with the sealed bundle it reran.

    Args:
        rerun: the sealed rerun (campaign kind ``rerun``).
        sealed: the original sealed campaign.
        tolerance: relative tolerance on the speedup (0.10 = 10 %).

    Raises:
        ValueError: ``tolerance`` is negative.
    """
    if tolerance < 0:
        raise ValueError("tolerance must be >= 0")
    s_side, s_receipts = _side("sealed", sealed)
    r_side, r_receipts = _side("rerun", rerun)
    roles = {a.arm: a.role for a in s_side.arms}
    effects = tuple(
        _effect(b, c, s_side, r_side, tolerance)
        for b in roles
        if roles[b] == "baseline"
        for c in roles
        if roles[c] == "candidate"
    )
    s_name, s_plan, _ = _plan(sealed)
    r_name, r_plan, _ = _plan(rerun)
    sealed_hash = {
        (r["server"], r["seq"]): r["output_sha256"] for r in s_receipts if r["output_sha256"]
    }
    compared = matching = 0
    for r in r_receipts:
        want = sealed_hash.get((r["server"], r["seq"]))
        if want and r["output_sha256"]:
            compared += 1
            matching += int(want == r["output_sha256"])
    limits = (
        "The rerun's numbers are measured by bundle rerun on the rerun host; the sealed ones are "
        "author-reported. Agreement within the tolerance supports the effect, not the absolute "
        "latencies, which depend on the machine.",
        "Media quality of the rerun outputs is judged by media replay "
        "(bundle replay RERUN.bundle --media DIR), not here.",
    )
    return RerunComparison(
        s_side,
        r_side,
        effects,
        tolerance,
        s_name == r_name and s_plan == r_plan,
        compared,
        matching,
        limits,
    )


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def format_comparison(c: RerunComparison) -> list[str]:
    """The comparison as text lines (the CLI prints them)."""
    lines = [
        f"rerun {c.rerun.campaign_id} ({c.rerun.attempt}) against sealed "
        f"{c.sealed.campaign_id} ({c.sealed.attempt})",
        f"  frozen plan identical: {'yes' if c.plan_matches else 'NO'}",
    ]
    for e in c.effects:
        lines += [
            f"  {e.baseline} -> {e.candidate}",
            f"    arm mean {e.baseline:<12} sealed {_fmt(e.sealed_baseline_s, '.3f')} s  "
            f"rerun {_fmt(e.rerun_baseline_s, '.3f')} s  ratio {_fmt(e.baseline_ratio, '.3f')}",
            f"    arm mean {e.candidate:<12} sealed {_fmt(e.sealed_candidate_s, '.3f')} s  "
            f"rerun {_fmt(e.rerun_candidate_s, '.3f')} s  ratio {_fmt(e.candidate_ratio, '.3f')}",
            f"    speedup               sealed {_fmt(e.sealed_speedup, '.3f')}x  "
            f"rerun {_fmt(e.rerun_speedup, '.3f')}x  ratio {_fmt(e.speedup_ratio, '.3f')}",
            f"    percent lower         sealed {_fmt(e.sealed_percent_lower, '.2f')} %  "
            f"rerun {_fmt(e.rerun_percent_lower, '.2f')} %",
            f"    {e.verdict}",
        ]
    for s in (c.sealed, c.rerun):
        lc = s.lifecycle
        lines.append(
            f"  {s.label:<6} requests {dict(s.statuses)}; timeout levels {dict(s.timeout_levels)}; "
            f"worker exits {lc.total} ({lc.clean} clean, {lc.killed} killed)"
        )
        for u in lc.unclean[:10]:
            lines.append(f"           unclean: {u}")
        hbm = ", ".join(f"{a} {_fmt(v, ',.0f')} MB" for a, v in s.hbm_peak_mean_mb.items())
        lines.append(f"           mean sampled peak HBM: {hbm}")
        if s.other_attempts:
            others = ", ".join(f"{k} {v}" for k, v in s.other_attempts.items())
            lines.append(f"           other attempts (not mixed in): {others}")
    lines.append(
        f"  outputs with the sealed SHA-256: {c.outputs_matching} of {c.outputs_compared} compared"
    )
    lines += [f"  limit: {x}" for x in c.limits]
    return lines
