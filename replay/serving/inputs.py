"""The serving sources a bundle carries, parsed from the bytes the benchmark tool wrote.

A serving campaign (``bundle import``) lists its sources in ``serving.json``
(bundle member ``files/serving.json``): for each, the arm, the format and the
campaign path of the tool's file, carried verbatim as ``files/<path>``. Replay
parses each with the importer's parser for its format (a source naming a
``benchmark`` picks that run of a file holding several, parsed once); a source
that does not parse stays listed with the reason, and every claim that needs it
is unverifiable.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundler._internal.parallel_parse import Job, prefetch, standby
from bundler.errors import BundleError, BundleFormatError, Problem
from bundler.format.serving_run import ServingRun, shown
from bundler.importers import aiperf, guidellm, inference_perf, sglang, vllm, vllm_omni
from replay.serving.stats import RunStats

__all__ = [
    "INDEX",
    "PARSERS",
    "SWEEPS",
    "Cache",
    "ServingData",
    "load_serving",
    "parse_standby",
    "pick_run",
]

INDEX = "serving.json"
"""The campaign file listing the serving sources (bundle member ``files/serving.json``)."""

PARSERS: dict[str, Callable[[bytes, str, str], ServingRun]] = {
    vllm.FORMAT: vllm.parse,
    guidellm.FORMAT: guidellm.parse,
    sglang.FORMAT: sglang.parse,
    vllm_omni.FORMAT: vllm_omni.parse,
}
"""Formats whose run is one file; AIPerf's (records + aggregate) is handled in ``_parse``."""
SWEEPS: dict[str, Callable[[bytes, str, str], list[ServingRun]]] = {
    guidellm.FORMAT: guidellm.parse_all,
    sglang.FORMAT: sglang.parse_all,
}
"""Formats whose one file may hold several runs, each source naming its ``benchmark``."""

Cache = dict[tuple[str, str], list[ServingRun] | BundleError]
"""(format, path) -> the runs of a carried file holding several, or why none: a file
is parsed once, however many sources (of whichever arms) name it."""


def pick_run(
    src: dict[str, Any],
    data: bytes,
    entry: str,
    cache: Cache,
) -> ServingRun:
    """The run ``src["benchmark"]`` of the carried file (``data``) of the multi-run
    source ``src``, entry ``entry`` (``sources[i]``) of ``serving.json``.

    Raises:
        BundleFormatError: the index or count is not an integer, the file holds another
            number of runs than ``benchmarks`` says, or the index is out of range.
        BundleError: the carried file does not parse.
    """
    fmt, path, arm = str(src.get("format")), str(src.get("path")), str(src.get("arm"))
    idx, count = src.get("benchmark"), src.get("benchmarks")

    def bad(field: str, message: str) -> BundleFormatError:
        return BundleFormatError(
            f"files/{INDEX} {entry}: {field} {message}",
            [Problem(f"files/{INDEX}", entry, field, message)],
        )

    if isinstance(idx, bool) or not isinstance(idx, int) or idx < 0:
        raise bad("benchmark", f"expected an integer >= 0, found {shown(idx)}")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise bad("benchmarks", f"expected an integer >= 0, found {shown(count)}")
    sweep = SWEEPS.get(fmt)
    if sweep is None:
        raise bad("benchmark", f"format {fmt!r} holds one run per file: no index applies")
    key = (fmt, path)
    if key not in cache:
        try:
            cache[key] = sweep(data, path, arm)
        except BundleError as exc:
            cache[key] = exc
    got = cache[key]
    if isinstance(got, BundleError):
        raise got
    if len(got) != count:
        raise bad(
            "benchmarks",
            f"says {count} runs, but the carried {path} holds {len(got)}: the index does "
            "not name the run it was imported from",
        )
    if not idx < count:
        raise bad("benchmark", f"{idx} is out of range: {path} holds {count} runs")
    run = got[idx]
    # The arm only labels the run (the parsers read nothing else from it).
    return run if run.arm == arm else dataclasses.replace(run, arm=arm)


def _job(src: Any, member: Callable[[str], bytes | None]) -> Job | None:
    """The parse of a one-file source (``PARSERS``) as a job for :func:`prefetch`
    (:func:`run_stats`), or None for any other source (``_parse`` handles it in
    process)."""
    if not isinstance(src, dict) or "benchmark" in src or "benchmarks" in src:
        return None
    arm, fmt, path = src.get("arm"), src.get("format"), src.get("path")
    parser = PARSERS.get(str(fmt))
    if parser is None or not isinstance(arm, str) or not isinstance(path, str):
        return None
    name = f"files/{path}"
    data = member(name)
    if data is None:
        return None
    size = len(data)
    del data  # read again when the job starts: a spilled member stays on disk till then

    def args() -> tuple[Any, ...]:
        again = member(name)
        if again is None:  # pragma: no cover - members do not vanish from an open bundle
            raise BundleFormatError(f"{name}: no longer in the bundle")
        return (parser, again, path, arm)

    return run_stats, args, size


def run_stats(
    parser: Callable[[bytes, str, str], ServingRun], data: bytes, path: str, arm: str
) -> RunStats:
    """A one-file source parsed, with its latencies' exact sums (a parse worker's job)."""
    return RunStats(parser(data, path, arm)).with_sums()


def _parse(
    src: dict[str, Any], member: Callable[[str], bytes | None], where: str, cache: Cache
) -> ServingRun | str:
    arm, fmt, path = src.get("arm"), src.get("format"), src.get("path")
    data = member(f"files/{path}") if isinstance(path, str) else None
    if not isinstance(arm, str) or data is None:
        return f"{where}: needs an arm and a carried file"
    if "benchmark" in src or "benchmarks" in src:
        return pick_run(src, data, where.removeprefix(f"files/{INDEX} "), cache)
    if fmt == aiperf.FORMAT:
        agg = src.get("aggregate_path")
        adata = member(f"files/{agg}") if isinstance(agg, str) else None
        if adata is None:
            return f"{where}: an aiperf source needs its carried aggregate_path"
        return aiperf.parse(data, str(path), adata, str(agg), arm)
    if fmt == inference_perf.FORMAT:
        return _inference_perf(src, member, where, (data, str(path)), arm)
    parser = PARSERS.get(str(fmt))
    return f"{where}: unknown format {fmt!r}" if parser is None else parser(data, str(path), arm)


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


SOURCES_PER_BUNDLE_BYTE = 4
"""A bound on how many bytes of carried sources one byte of a bundle file holds: the JSON
of a serving sweep compresses 2.8x in the container frame (``bench/zstd_options.py``)."""


def parse_standby(bundle: Path | str) -> contextlib.AbstractContextManager[int]:
    """Start the source parse's worker processes (:func:`bundler._internal.parallel_parse.standby`)
    while the bundle at ``bundle`` is verified, when it is large enough to carry sources
    worth them; :func:`load_serving` in the block takes them. Its size is only a guess at
    what it holds: an unused worker is stopped when the block ends."""
    try:
        size = Path(bundle).stat().st_size
    except OSError:
        size = 0
    return standby(size * SOURCES_PER_BUNDLE_BYTE, preload=(__name__,))


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
    sources = index["sources"]
    # One-file sources are parsed in worker processes when large (Python's json holds
    # the GIL); each result is taken in source order below, as the serial parse was.
    jobs: list[Job] = []
    job_of: dict[int, int] = {}
    for i, src in enumerate(sources):
        job = _job(src, member)
        if job is not None:
            job_of[i] = len(jobs)
            jobs.append(job)
    with prefetch(jobs) as pre:
        return _collect(index, sources, member, {i: pre.thunks[j] for i, j in job_of.items()})


def _collect(
    index: dict[str, Any],
    sources: list[Any],
    member: Callable[[str], bytes | None],
    ready: dict[int, Callable[[], RunStats]],
) -> ServingData:
    runs: dict[tuple[str, str], RunStats] = {}
    problems: list[str] = []
    cache: Cache = {}
    for i, src in enumerate(sources):
        where = f"files/{INDEX} sources[{i}]"
        if not isinstance(src, dict):
            problems.append(f"{where}: expected an object")
            continue
        try:
            # The parse :func:`_job` made of this source, if any; else parsed here.
            thunk = ready.get(i)
            parsed = thunk() if thunk is not None else _parse(src, member, where, cache)
        except BundleError as exc:
            problems.append(str(exc).replace("\n", " "))
            continue
        if isinstance(parsed, str):
            problems.append(parsed)
            continue
        stats = parsed if isinstance(parsed, RunStats) else RunStats(parsed)
        run = stats.run
        path, arm = src.get("path"), run.arm
        key = (arm, run.load_point)
        if key in runs:
            problems.append(f"{path}: a second source for arm {arm} at {run.load_point}")
            continue
        runs[key] = stats
    nr = index.get("not_recorded", [])
    lps = index.get("load_points", {})
    return ServingData(
        runs,
        tuple(problems),
        tuple(str(x) for x in nr) if isinstance(nr, list) else (),
        lps if isinstance(lps, dict) else {},
    )
