"""The serving sources a bundle carries, parsed from the bytes the benchmark tool wrote.

A serving campaign (``bundle import``) lists its sources in ``serving.json``
(bundle member ``files/serving.json``): for each, the arm, the format and the
campaign path of the tool's file, carried verbatim as ``files/<path>``. Replay
parses each with the importer's parser for its format; a source that does not
parse stays listed with the reason, and every claim that needs it is
unverifiable.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bundler.errors import BundleError
from bundler.format.serving_run import ServingRun
from bundler.importers import aiperf, guidellm, inference_perf, sglang, vllm, vllm_omni
from replay.serving.stats import RunStats

__all__ = ["INDEX", "PARSERS", "ServingData", "load_serving"]

INDEX = "serving.json"
"""The campaign file listing the serving sources (bundle member ``files/serving.json``)."""

PARSERS: dict[str, Callable[[bytes, str, str], ServingRun]] = {
    vllm.FORMAT: vllm.parse,
    guidellm.FORMAT: guidellm.parse,
    sglang.FORMAT: sglang.parse,
    vllm_omni.FORMAT: vllm_omni.parse,
}
"""Formats whose run is one file; AIPerf's (records + aggregate) is handled in ``_parse``."""


def _parse(
    src: dict[str, Any], member: Callable[[str], bytes | None], where: str
) -> ServingRun | str:
    arm, fmt, path = src.get("arm"), src.get("format"), src.get("path")
    data = member(f"files/{path}") if isinstance(path, str) else None
    if not isinstance(arm, str) or data is None:
        return f"{where}: needs an arm and a carried file"
    if fmt == aiperf.FORMAT:
        agg = src.get("aggregate_path")
        adata = member(f"files/{agg}") if isinstance(agg, str) else None
        if adata is None:
            return f"{where}: an aiperf source needs its carried aggregate_path"
        return aiperf.parse(data, str(path), adata, str(agg), arm)
    if fmt == inference_perf.FORMAT:
        return _inference_perf(src, member, where, (data, str(path)), arm)
    parser = PARSERS.get(str(fmt))
    if parser is None:
        return f"{where}: unknown format {fmt!r}"
    return parser(data, str(path), arm)


def _inference_perf(
    src: dict[str, Any],
    member: Callable[[str], bytes | None],
    where: str,
    records: tuple[bytes, str],
    arm: str,
) -> ServingRun | str:
    agg, cfg = src.get("aggregate_path"), src.get("config_path")
    adata = member(f"files/{agg}") if isinstance(agg, str) else None
    cdata = member(f"files/{cfg}") if isinstance(cfg, str) else None
    if adata is None or cdata is None:
        return f"{where}: an inference-perf source needs its carried aggregate_path and config_path"
    return inference_perf.parse(records, (adata, str(agg)), (cdata, str(cfg)), arm)


@dataclass(frozen=True)
class ServingData:
    """Every parsed run by (arm, load point), and what could not be used."""

    runs: dict[tuple[str, str], RunStats]
    problems: tuple[str, ...] = ()
    not_recorded: tuple[str, ...] = ()
    load_points: dict[str, dict[str, Any]] = field(default_factory=dict)

    def get(self, arm: str, load_point: str) -> RunStats | str:
        """The run of ``arm`` at ``load_point``, or why there is none."""
        rs = self.runs.get((arm, load_point))
        if rs is not None:
            return rs
        known = sorted({lp for a, lp in self.runs if a == arm})
        extra = f"; {'; '.join(self.problems)}" if self.problems else ""
        return (
            f"no serving source of arm {arm!r} at load point {load_point!r} "
            f"(recorded: {', '.join(known) or 'none'}){extra}"
        )


def load_serving(member: Callable[[str], bytes | None]) -> ServingData | None:
    """Parse the serving sources of a bundle (``member(name)`` returns a member's bytes).

    None when the bundle is not a serving campaign (no ``files/serving.json``).
    """
    raw = member(f"files/{INDEX}")
    if raw is None:
        return None
    try:
        index = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return ServingData({}, (f"files/{INDEX} is not JSON: {exc}",))
    if not isinstance(index, dict) or not isinstance(index.get("sources"), list):
        return ServingData({}, (f"files/{INDEX}: expected an object with a 'sources' array",))
    runs: dict[tuple[str, str], RunStats] = {}
    problems: list[str] = []
    for i, src in enumerate(index["sources"]):
        where = f"files/{INDEX} sources[{i}]"
        if not isinstance(src, dict):
            problems.append(f"{where}: expected an object")
            continue
        try:
            parsed = _parse(src, member, where)
        except BundleError as exc:
            problems.append(str(exc).replace("\n", " "))
            continue
        if isinstance(parsed, str):
            problems.append(parsed)
            continue
        run = parsed
        path, arm = src.get("path"), run.arm
        key = (arm, run.load_point)
        if key in runs:
            problems.append(f"{path}: a second source for arm {arm} at {run.load_point}")
            continue
        runs[key] = RunStats(run)
    nr = index.get("not_recorded", [])
    lps = index.get("load_points", {})
    return ServingData(
        runs,
        tuple(problems),
        tuple(str(x) for x in nr) if isinstance(nr, list) else (),
        lps if isinstance(lps, dict) else {},
    )
