"""Plan conformance of a serving campaign: what the benchmark tool's files evidence.

The tool records its settings (request rate, max concurrency, prompts asked for)
and, with per-request arrays, how many requests it sent. Those are compared
with the plan's ``load_points``. What the tool does not record (request order,
per-request timestamps, which server instance answered) is listed as *not
evidenced*: it is never counted as passing. AIPerf records each request's
wall-clock start and end: those are checked (end >= start, no more requests
in flight at once than the planned max concurrency).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from bundler.format.serving_run import POISSON, ServingRun, load_point_id
from replay.serving.inputs import ServingData

__all__ = [
    "NOT_EVIDENCED",
    "NOT_EVIDENCED_AIPERF",
    "ServingConformance",
    "check_serving",
    "peak_in_flight",
]

NOT_EVIDENCED = (
    "request order (the benchmark tool records no per-request send order)",
    "per-request timestamps on a wall clock (the tool records at most offsets on a "
    "monotonic clock: vLLM's 'start_times', inference-perf's start and end times, or none "
    "at all for SGLang; none were invented)",
    "server identity (the tool does not name the server instance that answered)",
)

NOT_EVIDENCED_AIPERF = (
    "request order (AIPerf records session_num and request_start_ns, but a serving plan "
    "states no order to compare them with)",
    "server identity (AIPerf's worker_id names its client worker, not the server instance)",
)


def peak_in_flight(times_ns: npt.NDArray[np.int64]) -> int:
    """Most requests in flight at once, from (start, end) rows; a request ending at t
    is no longer in flight for one starting at t."""
    t = np.concatenate([times_ns[:, 0], times_ns[:, 1]])
    step = np.concatenate([np.ones(len(times_ns), np.int64), -np.ones(len(times_ns), np.int64)])
    order = np.lexsort((step, t))  # by time, ends (-1) before starts (+1)
    return int(np.cumsum(step[order]).max()) if t.size else 0


def _times(r: ServingRun, where: str, cap: Any) -> tuple[str, str, str] | str:
    """A deviation (kind, where, message), or what was checked."""
    assert r.times_ns is not None
    bad = np.flatnonzero(r.times_ns[:, 1] < r.times_ns[:, 0])
    if bad.size:
        msg = f"{bad.size} request(s) end before they start (first: profiling record {int(bad[0])})"
        return ("timestamps", where, msg)
    peak = peak_in_flight(r.times_ns)
    if isinstance(cap, int) and peak > cap:
        return (
            "concurrency",
            where,
            f"{peak} requests in flight at once (request_start_ns..request_end_ns), "
            f"max_concurrency {cap} planned",
        )
    limit = f" (max_concurrency {cap})" if isinstance(cap, int) else ""
    return (
        f"{where}: wall-clock start and end recorded for all {r.n} requests, "
        f"at most {peak} in flight at once{limit}"
    )


@dataclass(frozen=True)
class ServingConformance:
    """Deviations (kind, where, message), what was checked, and what is not evidenced."""

    deviations: tuple[tuple[str, str, str], ...]
    checked: tuple[str, ...]
    not_evidenced: tuple[str, ...]


def _planned(plan: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for lp in plan.get("load_points", []) or []:
        if not isinstance(lp, dict):
            continue
        rate = lp.get("request_rate", "inf")
        r = math.inf if rate == "inf" else float(rate)
        arrival = lp.get("arrival", POISSON)
        out[load_point_id(r, lp.get("max_concurrency"), str(arrival))] = lp
    return out


def _arrival_mismatches(data: ServingData) -> list[tuple[str, str, str]]:
    """Arms that ran the same rate and concurrency at different arrival processes.

    Those are different load conditions (burstier arrivals queue more): their runs
    are separate load points, and no comparison across arms holds at that rate.
    """
    by_setting: dict[tuple[float, int | None], dict[str, set[str]]] = {}
    for (arm, _), rs in data.runs.items():
        r = rs.run
        if math.isinf(r.request_rate):
            continue  # all requests at once: no arrival process applies
        by_setting.setdefault((r.request_rate, r.max_concurrency), {}).setdefault(arm, set()).add(
            r.arrival
        )
    out = []
    for (rate, conc), arms in sorted(by_setting.items(), key=lambda kv: str(kv[0])):
        if len(arms) < 2 or len({frozenset(v) for v in arms.values()}) == 1:
            continue
        ran = "; ".join(f"{a}: {', '.join(sorted(v))}" for a, v in sorted(arms.items()))
        out.append(
            (
                "arrival-process",
                f"request rate {rate:g}/s, max concurrency {conc}",
                f"the arms ran at different arrival processes ({ran}): different load "
                "conditions, so no comparison across arms holds at this rate",
            )
        )
    return out


def _times_into(
    r: ServingRun,
    where: str,
    want: Mapping[str, Any],
    *,
    checked: list[str],
    dev: list[tuple[str, str, str]],
    not_ev: list[str],
) -> None:
    if r.times_ns is None:
        if r.meta.get("tool") == "aiperf":
            not_ev.append(f"wall-clock request times at {where} (not in every record)")
        return
    t = _times(r, where, want.get("max_concurrency"))
    if isinstance(t, str):
        checked.append(t)
    else:
        dev.append(t)


def _format_limits(data: ServingData) -> list[str]:
    """The timing boundaries the sources' formats name (vllm-omni's): taken from the
    format, not from the author's serving.json, so a campaign that leaves one out of
    ``not_recorded`` still shows it."""
    out: list[str] = []
    for rs in data.runs.values():
        limit = rs.run.meta.get("timing_boundary")
        if isinstance(limit, str) and limit not in out:
            out.append(limit)
    return out


def check_serving(
    data: ServingData, plan: Mapping[str, Any], arms: tuple[str, ...]
) -> ServingConformance:
    """Compare every serving run with the plan's load points."""
    dev: list[tuple[str, str, str]] = [("source", "serving.json", p) for p in data.problems]
    checked: list[str] = []
    planned = _planned(plan)
    aiperf_only = bool(data.runs) and all(
        rs.run.meta.get("tool") == "aiperf" for rs in data.runs.values()
    )
    not_ev = list(NOT_EVIDENCED_AIPERF if aiperf_only else NOT_EVIDENCED)
    if data.runs and all(rs.run.times_ns is not None for rs in data.runs.values()):
        # Every request's start and end are recorded (GuideLLM) and checked below.
        not_ev = [x for x in not_ev if not x.startswith("per-request timestamps")]
    for (arm, lp), rs in sorted(data.runs.items()):
        r = rs.run
        where = f"{r.source} (arm {arm}, {lp})"
        want = planned.get(lp)
        if want is None:
            dev.append(("load-point", where, f"load point {lp} is not in the plan's load_points"))
            continue
        checked.append(f"{where}: request rate and max concurrency as planned (tool settings)")
        n_plan = want.get("num_prompts")
        if r.detailed:
            if isinstance(n_plan, int) and r.n != n_plan:
                dev.append(("prompt-count", where, f"{r.n} requests recorded, {n_plan} planned"))
            else:
                checked.append(f"{where}: {r.n} requests recorded")
            _times_into(r, where, want, checked=checked, dev=dev, not_ev=not_ev)
        else:
            not_ev.append(f"requests actually sent at {where} (aggregates only)")
            if isinstance(n_plan, int) and r.num_prompts is not None and r.num_prompts != n_plan:
                dev.append(
                    (
                        "prompt-count",
                        where,
                        f"num_prompts {r.num_prompts} recorded, {n_plan} planned",
                    )
                )
    dev += _arrival_mismatches(data)
    for arm in arms:
        for lp in planned:
            if (arm, lp) not in data.runs:
                dev.append(("load-point", f"arm {arm}", f"planned load point {lp} has no source"))
    not_ev += [x for x in _format_limits(data) if x not in not_ev]
    not_ev += [x for x in data.not_recorded if x not in not_ev]
    return ServingConformance(tuple(dev), tuple(checked), tuple(not_ev))
