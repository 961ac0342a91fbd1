"""Write serving runs as a campaign directory that ``bundle seal`` accepts.

What the source files record becomes the campaign; what they do not record is
left absent and listed under ``not_recorded`` in ``serving.json`` (replay shows
it as not evidenced). The source files are carried byte for byte under
``sources/``; every aggregate the tool printed becomes a claim that replay
re-derives from the per-request arrays. The directory is written beside the
target under a temporary name and renamed into place at the end, so a failure
leaves nothing behind.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Context, Decimal
from pathlib import Path
from stat import S_ISREG
from typing import Any

from bundler._internal.parallel_parse import prefetch
from bundler._internal.userfile import IMPORT_SOURCE_MAX_BYTES, read_user_file
from bundler.errors import Problem, UsageError
from bundler.format.serving_run import POISSON, ServingRun, SourceError
from bundler.importers import aiperf, guidellm, inference_perf, sglang, vllm, vllm_omni
from bundler.importers.staged_tree import StagedFile, StagedTree, stage_bytes

__all__ = ["FORMATS", "ImportResult", "import_campaign"]

FORMATS = (
    vllm.FORMAT,
    aiperf.FORMAT,
    guidellm.FORMAT,
    sglang.FORMAT,
    inference_perf.FORMAT,
    vllm_omni.FORMAT,
)
_ARM_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_SHA_RE = re.compile(r"^[0-9a-f]{7,64}$")
_TOOL = {
    vllm.FORMAT: "vllm bench serve",
    aiperf.FORMAT: "aiperf profile",
    guidellm.FORMAT: "guidellm run",
    sglang.FORMAT: "sglang.bench_serving",
    inference_perf.FORMAT: "inference-perf",
    vllm_omni.FORMAT: vllm_omni.TOOL,
}
_API = {
    "openai-chat": "openai-chat-completions",  # vLLM --backend
    "chat": "openai-chat-completions",  # AIPerf --endpoint-type
    "completions": "openai-completions",
}
_NOT_RECORDED = (
    "worker teardown and exit status (no teardown budgets were invented)",
    "device telemetry",
    "the hardware, unless given with --hardware",
)
_NOT_RECORDED_BY = {
    vllm.FORMAT: ("warmup requests (the tool does not keep them)",),
    aiperf.FORMAT: (
        "pooled inter-token gaps: " + aiperf.ITL_NOT_RECORDED + "; ITL claims are unverifiable",
        "server identity: metadata.worker_id names AIPerf's client worker, not the server",
    ),
    guidellm.FORMAT: (
        "individual inter-token gaps (GuideLLM records each request's first and last token "
        "times only; its ITL is their per-request average, token-weighted)",
    ),
    sglang.FORMAT: (
        "warmup requests (the tool does not keep them)",
        "per-request end-to-end latencies: "
        + sglang.NO_LATENCY.format("E2EL and TPOT")
        + "; their claims are unverifiable",
        "the failed count (SGLang writes none; each request's errors entry is kept)",
    ),
    inference_perf.FORMAT: inference_perf.NOT_RECORDED,
    vllm_omni.FORMAT: vllm_omni.NOT_RECORDED,
}
_THROUGHPUT = {
    "request_throughput": ("request_throughput", "requests/s"),
    "output_throughput": ("output_token_throughput", "tokens/s"),
    "total_token_throughput": ("total_token_throughput", "tokens/s"),
}
_COUNTS = {
    "completed": "requests_completed",
    "failed": "requests_failed",
    "total_input_tokens": "input_tokens_total",
    "total_output_tokens": "output_tokens_total",
}
_GOODPUT_KEYS = ("request_goodput", "request_goodput:")
_NO_COMMIT_ANY = "The source records no commit of the server runtime."
_NO_COMMIT = {
    vllm.FORMAT: "vllm bench serve records no commit of the server it measured: a "
    "'vllm_commit' in its file is not written by vLLM itself (0.33.0 copies such keys "
    "from --metadata KEY=VALUE) and names at most the vLLM the benchmark client ran, "
    "not necessarily the server runtime's",
    aiperf.FORMAT: "AIPerf records its own version (aiperf_version), the client's, "
    "not the server runtime's commit",
}


@dataclass(frozen=True)
class ImportResult:
    """What was written: the directory, its runs, claims and not-claimed rows
    (``claim_rows``: the claims as written, for a preview of what replay can check)."""

    directory: Path
    runs: tuple[ServingRun, ...]
    claims: int
    not_claimed: int
    claim_rows: tuple[dict[str, Any], ...] = ()


def _decimal_text(x: float, decimals: int) -> str:
    exact = Decimal(x)
    # The default context's 28 digits cannot hold a large double at ``decimals`` places
    # (a source's 1e300 raised InvalidOperation); every finite double fits in this one.
    ctx = Context(prec=max(28, exact.adjusted() + decimals + 2))
    q = exact.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_EVEN, context=ctx)
    return str(q) if decimals else str(int(q))


def _stable_decimals(x: float, decimals: int, rel: Any) -> int | None:
    """The most decimals (at most ``decimals``) at which ``x`` reads the same anywhere
    within ``x * (1 +- rel)``: a throughput whose duration is recorded only to a
    relative ``rel`` (AIPerf 0.13's microsecond window) is claimed at a precision the
    recorded duration decides. None when not even a whole number is decided."""
    if not isinstance(rel, float) or rel <= 0:
        return decimals
    lo, hi = x * (1 - 2 * rel), x * (1 + 2 * rel)  # 2x: margin for the double arithmetic
    for d in range(decimals, -1, -1):
        if _decimal_text(lo, d) == _decimal_text(hi, d) == _decimal_text(x, d):
            return d
    return None


def _claims_of(
    run: ServingRun, decimals: int, goodput: Mapping[str, float] | None, tool: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    claims: list[dict[str, Any]] = []
    not_claimed: list[dict[str, Any]] = []
    base = {"arm": run.arm, "load_point": run.load_point}
    names: Mapping[str, str] = run.meta.get("aggregate_names", {})
    written_in = str(run.meta.get("aggregate_source", run.source))
    left = run.meta.get("not_claimed_aggregates", [])
    if left:
        not_claimed.append(
            {
                "what": f"{tool} aggregates at {run.arm} {run.load_point}: {', '.join(left)} "
                f"(in {written_in})",
                "note": "no statistic of the claims vocabulary has their definition "
                "(min/max, peaks per whole second, chunk gaps, per-user rates, goodput "
                "without its SLOs)",
            }
        )
    for key, x in sorted(run.aggregates.items()):
        row: dict[str, Any] = {"claim_id": f"{run.arm}.{run.load_point}.{key.rstrip(':')}"}
        text = f"{tool} wrote {names.get(key, key)} = {x!r} in {written_in}"
        m = vllm.AGGREGATE_RE.match(key)
        if m:
            kind, pct, latency = m.group(1), m.group(2), m.group(3)
            stat = {"mean": "latency_mean", "median": "latency_median", "std": "latency_sd"}
            params: dict[str, Any] = {**base, "latency": latency}
            if pct is not None:
                params["percentile"] = pct
            row |= {
                "statistic": stat.get(kind, "latency_percentile"),
                "params": params,
                "value": _decimal_text(x, decimals),
                "unit": "ms",
            }
        elif key in _THROUGHPUT:
            statistic, unit = _THROUGHPUT[key]
            row |= {"statistic": statistic, "params": dict(base), "unit": unit}
            d = _stable_decimals(x, decimals, run.meta.get("duration_rel_uncertainty"))
            if d is None:
                not_claimed.append(
                    {
                        "what": f"{names.get(key, key)} = {x!r} at {run.arm} {run.load_point} "
                        f"(in {written_in})",
                        "note": "the duration it divides by is recorded only to "
                        f"{run.meta.get('duration_rel_uncertainty')!r} (relative), and the "
                        "figure lies so close to a rounding tie that even a whole-number "
                        "claim could not be checked",
                    }
                )
                continue
            row["value"] = _decimal_text(x, d)
        elif key in _COUNTS:
            if x != int(x):
                continue
            row |= {"statistic": _COUNTS[key], "params": dict(base), "unit": "count"}
            row["value"] = str(int(x))
        elif key in _GOODPUT_KEYS:
            got = _goodput_fields(
                run,
                key,
                x=x,
                decimals=decimals,
                goodput=goodput,
                name=names.get(key, key),
                written_in=written_in,
            )
            if isinstance(got, dict):
                not_claimed.append(got)
                continue
            row |= got[0]
        else:
            continue
        row["text"] = text + ("" if run.detailed else " (in a file of aggregates only)")
        claims.append(row)
    return claims, not_claimed


def _goodput_fields(
    run: ServingRun,
    key: str,
    *,
    x: float,
    decimals: int,
    goodput: Mapping[str, float] | None,
    name: str,
    written_in: str,
) -> tuple[dict[str, Any]] | dict[str, Any]:
    """The claim fields of a recorded goodput, or the not-claimed row saying why not.

    AIPerf records its SLOs: the claim takes them and AIPerf's definition. vLLM does
    not: the claim needs ``--goodput`` and takes vLLM's definition.
    """
    base: dict[str, Any] = {"arm": run.arm, "load_point": run.load_point}
    slos = run.meta.get("goodput_slos")
    if isinstance(slos, dict):
        d = _stable_decimals(x, decimals, run.meta.get("duration_rel_uncertainty"))
        if d is None:
            return {
                "what": f"{name} = {x!r} at {run.arm} {run.load_point} (in {written_in})",
                "note": "the duration it divides by is recorded too coarsely to check even "
                "a whole-number claim of it",
            }
        params = base | slos | {"definition": "aiperf"}
        return (
            {"statistic": "request_goodput", "params": params, "unit": "requests/s"}
            | {"value": _decimal_text(x, d)},
        )
    if not goodput:
        return {
            "what": f"request goodput at {run.arm} {run.load_point} ({key} = {x!r})",
            "note": "the tool does not record its --goodput SLOs; import with "
            "--goodput to state them and have the figure checked",
        }
    params = base | {f"{k}_ms": v for k, v in goodput.items()}
    return (
        {
            "statistic": "request_goodput",
            "params": params,
            "unit": "requests/s",
            "value": _decimal_text(x, decimals),
        },
    )


def _check_args(
    sources: Sequence[tuple[str, Path]], commits: Mapping[str, str], fmt: str
) -> list[str]:
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}; known: {', '.join(sorted(FORMATS))}")
    arms = list(dict.fromkeys(a for a, _ in sources))
    problems = [
        Problem("--arm", None, None, f"arm id {a!r} must match {_ARM_RE.pattern}")
        for a in arms
        if not _ARM_RE.match(a)
    ]
    if len(arms) < 2:
        problems.append(Problem("--arm", None, None, "a campaign needs at least two arms"))
    for a in arms:
        sha = commits.get(a)
        if sha is None:
            problems.append(
                Problem(
                    "--commit",
                    None,
                    a,
                    "no runtime commit for this arm: give --commit ARM=SHA. "
                    + _NO_COMMIT.get(fmt, _NO_COMMIT_ANY),
                )
            )
        elif not _SHA_RE.match(sha):
            problems.append(Problem("--commit", None, a, f"{sha!r} is not 7-64 lowercase hex"))
    for a in set(commits) - set(arms):
        problems.append(Problem("--commit", None, a, "not an arm of this import"))
    if problems:
        raise UsageError("cannot import", problems)
    return arms


Carried = list[tuple[str, bytes]]
"""The source's files as (name under ``sources/<arm>/``, bytes): one for vLLM, two for AIPerf,
three for inference-perf (per-request, summary, config)."""


def _read_source(path: Path) -> bytes:
    """A source file's bytes; a FIFO, device, folder or oversized file is a located problem."""
    try:
        return read_user_file(path, what="import source", max_bytes=IMPORT_SOURCE_MAX_BYTES)
    except UsageError as exc:
        why = exc.message.removeprefix(f"{path}: ")
        raise SourceError(exc.message, [Problem(str(path), None, None, why)]) from exc


_SWEEPS = {guidellm.FORMAT: guidellm.parse_all, sglang.FORMAT: sglang.parse_all}
"""Formats whose one file may hold several runs (GuideLLM benchmarks, SGLang lines)."""

Parsed = tuple[ServingRun, Carried, dict[str, Any]]
"""A run, the files carried for it, and what its ``serving.json`` entry adds (a run of
a file holding several: ``benchmark``, its index, and ``benchmarks``, their count)."""

Staged = tuple[ServingRun, list[tuple[str, StagedFile]], dict[str, Any]]
""":data:`Parsed` once its carried files are written into the staging folder."""


def _read(fmt: str, path: Path, arm: str) -> list[Parsed]:
    if fmt == aiperf.FORMAT:
        records, aggregate = aiperf.locate(path)
        rdata, adata = _read_source(records), _read_source(aggregate)
        run = aiperf.parse(rdata, str(records), adata, str(aggregate), arm)
        carried = [
            (f"{run.load_point}/{aiperf.RECORDS_NAME}", rdata),
            (f"{run.load_point}/{aiperf.AGGREGATE_NAME}", adata),
        ]
        return [(run, carried, {})]
    if fmt == inference_perf.FORMAT:
        paths = inference_perf.locate(path)
        blobs = [_read_source(p) for p in paths]
        r, a, c = ((b, str(p)) for p, b in zip(paths, blobs, strict=True))
        run = inference_perf.parse(r, a, c, arm)
        pairs = zip(paths, blobs, strict=True)
        return [(run, [(f"{run.load_point}/{p.name}", b) for p, b in pairs], {})]
    data = _read_source(path)
    ext = "jsonl" if fmt == sglang.FORMAT else "json"
    sweep = _SWEEPS.get(fmt)
    if sweep is None:
        run = (vllm_omni.parse if fmt == vllm_omni.FORMAT else vllm.parse)(data, str(path), arm)
        return [(run, [(f"{run.load_point}.{ext}", data)], {})]
    runs = sweep(data, str(path), arm)
    if len(runs) == 1:
        # Named by its load point, as before several runs per file were read: the
        # import of a one-run file keeps its bytes.
        return [(runs[0], [(f"{runs[0].load_point}.{ext}", data)], {})]
    # Carried once, named by its content (load point ids start with "r": no clash).
    name = f"runs-{hashlib.sha256(data).hexdigest()[:16]}.{ext}"
    return [
        (r, [(name, data)], {"benchmark": i, "benchmarks": len(runs)}) for i, r in enumerate(runs)
    ]


def _read_staged(fmt: str, path: Path, arm: str, parts: str) -> list[Staged]:
    """:func:`_read`, each carried file written to the staging folder ``parts`` and
    replaced by its :class:`StagedFile` (a parse worker's job: the bytes stay out of
    the pipe back to the caller, the write and the digest run beside the other parses)."""
    staged: dict[int, StagedFile] = {}  # a file holding several runs is written once
    out: list[Staged] = []
    for run, carried, extra in _read(fmt, path, arm):
        for _, data in carried:
            if id(data) not in staged:
                staged[id(data)] = stage_bytes(data, parts)
        out.append((run, [(name, staged[id(data)]) for name, data in carried], extra))
    return out


def _size(path: Path) -> int:
    """A source's size for :func:`prefetch`'s choice (0 when it is no regular file)."""
    try:
        st = path.stat()
    except OSError:
        return 0
    return st.st_size if S_ISREG(st.st_mode) else 0


def _parse_all(fmt: str, sources: Sequence[tuple[str, Path]], tree: StagedTree) -> list[Staged]:
    # Large sources are parsed in worker processes (Python's json holds the GIL); each
    # result is taken in source order below, a failed one parsed again here to raise.
    parts = str(tree.parts)
    jobs = [(_read_staged, (fmt, path, arm, parts), _size(path)) for arm, path in sources]
    with prefetch(jobs) as pre:
        return _collect(sources, pre.thunks, tree)


def carried_rel(run: ServingRun, name: str) -> str:
    """Where a carried file of ``run`` lies in the campaign."""
    return f"sources/{run.arm}/{name}"


def _collect(
    sources: Sequence[tuple[str, Path]],
    results: Sequence[Callable[[], list[Staged]]],
    tree: StagedTree,
) -> list[Staged]:
    out: list[Staged] = []
    seen: dict[tuple[str, str], str] = {}
    problems: list[Problem] = []
    for (arm, path), result in zip(sources, results, strict=True):
        try:
            parsed = result()
        except OSError as exc:
            problems.append(Problem(str(path), None, None, exc.strerror or str(exc)))
            continue
        except SourceError as exc:
            problems += exc.problems
            continue
        for run, data, extra in parsed:
            key = (arm, run.load_point)
            at = str(path) if "benchmark" not in extra else f"{path} (run {extra['benchmark']})"
            if key in seen:
                problems.append(
                    Problem(
                        str(path),
                        None if "benchmark" not in extra else f"run {extra['benchmark']}",
                        None,
                        f"arm {arm} at load point {run.load_point} "
                        f"already comes from {seen[key]}: one run per arm and load point",
                    )
                )
                continue
            seen[key] = at
            out.append((run, data, extra))
            for name, staged in data:
                tree.adopt(carried_rel(run, name), staged)
    if problems:
        raise SourceError(f"{len(problems)} problem(s) in the sources; nothing written", problems)
    return out


def _jsonl(rows: Sequence[Mapping[str, Any]]) -> bytes:
    return b"".join(json.dumps(r, sort_keys=True).encode() + b"\n" for r in rows)


def _load_point_doc(run: ServingRun) -> dict[str, Any]:
    rate: Any = "inf" if math.isinf(run.request_rate) else run.request_rate
    doc: dict[str, Any] = {"request_rate": rate, "max_concurrency": run.max_concurrency}
    if not math.isinf(run.request_rate) and run.arrival != POISSON:
        # Only when not Poisson, so that the plans of Poisson runs keep their bytes.
        doc["arrival"] = run.arrival
    if run.num_prompts is not None:
        doc["num_prompts"] = run.num_prompts
    return doc


def import_campaign(
    fmt: str,
    sources: Sequence[tuple[str, Path]],
    out: Path,
    commits: Mapping[str, str],
    *,
    campaign_id: str | None = None,
    decimals: int = 2,
    goodput: Mapping[str, float] | None = None,
    hardware: tuple[str, int] | None = None,
) -> ImportResult:
    """Import ``sources`` ((arm, file) pairs; the first arm is the baseline) into ``out``.

    Raises:
        UsageError: bad arguments, or ``out`` exists.
        SourceError: a source is malformed; nothing is written.
    """
    arms = _check_args(sources, commits, fmt)
    if goodput and fmt == aiperf.FORMAT:
        raise UsageError(
            "--goodput is for vllm: AIPerf records its own SLOs (input_config.slos of "
            "profile_export_aiperf.json), and the import claims its goodput with them and "
            "AIPerf's definition"
        )
    if out.exists() or out.is_symlink():
        raise UsageError(f"{out}: already exists; give a new directory")
    # Each carried source is written by the job that parsed it, into the staging
    # folder; nothing reaches ``out`` unless every check passes.
    with StagedTree(out) as tree:
        parsed = _parse_all(fmt, sources, tree)
        runs = [r for r, _, _ in parsed]
        # vLLM records --backend; AIPerf its --endpoint-type (input_config.endpoint.type).
        backend = next(
            (
                str(r.meta.get("backend") or r.meta.get("endpoint_type"))
                for r in runs
                if r.meta.get("backend") or r.meta.get("endpoint_type")
            ),
            "",
        )
        slug = re.sub(r"[^a-z0-9._-]", "-", out.name.lower()).strip("-.")
        cid = campaign_id or slug or "imported"
        files: dict[str, bytes] = {}
        index_sources = []
        load_points: dict[str, dict[str, Any]] = {}
        claims: list[dict[str, Any]] = []
        not_claimed: list[dict[str, Any]] = []
        for run, carried, extra in parsed:
            rels = [carried_rel(run, name) for name, _ in carried]
            entry = {
                "arm": run.arm,
                "format": fmt,
                "path": rels[0],
                "load_point": run.load_point,
                "original_name": Path(run.source).name,
                "sha256": carried[0][1].sha256,
            }
            if len(rels) > 1:
                entry["aggregate_path"] = rels[1]
                entry["aggregate_sha256"] = carried[1][1].sha256
            if len(rels) > 2:
                entry["config_path"] = rels[2]
                entry["config_sha256"] = carried[2][1].sha256
            entry |= extra
            index_sources.append(entry)
            load_points.setdefault(run.load_point, _load_point_doc(run))
            cited = replace_source(run, rels[0])
            if len(rels) > 1:
                cited = dataclasses.replace(cited, meta={**run.meta, "aggregate_source": rels[1]})
            c, nc = _claims_of(cited, decimals, goodput, _TOOL[fmt])
            claims += c
            not_claimed += nc
        not_recorded = [*_NOT_RECORDED, *_NOT_RECORDED_BY[fmt]]
        if any(not r.detailed for r in runs):
            not_recorded.append(
                "per-request arrays of: "
                + ", ".join(f"{r.arm} {r.load_point}" for r in runs if not r.detailed)
                + " (run without --save-detailed: only E2EL claims can be re-derived, from "
                "'latencies' where the file records no failed request)"
            )
        if any(r.detailed and r.latencies is None and "e2el" not in r.unrecorded for r in runs):
            not_recorded.append(
                "per-request end-to-end latencies (older writer): E2EL and TPOT claims are "
                "unverifiable"
            )
        files["serving.json"] = json.dumps(
            {
                "serving_version": "1",
                "tool": _TOOL.get(fmt, fmt),
                "sources": index_sources,
                "load_points": load_points,
                "not_recorded": not_recorded,
            },
            indent=2,
            sort_keys=True,
        ).encode()
        files["plans/serving.json"] = json.dumps(
            {
                "plan_version": "1",
                "id": f"{cid}-serving",
                "request": {
                    "api": _API.get(backend, "openai-completions"),
                    "timing_boundary": vllm_omni.BOUNDARY
                    if fmt == vllm_omni.FORMAT
                    else f"client side, as {_TOOL.get(fmt, fmt)} records it",
                },
                "load_points": [load_points[k] for k in sorted(load_points)],
                "note": "reconstructed at import from the settings the tool recorded, not a "
                "plan frozen before the run"
                + (
                    f" (the tool's backend was {vllm_omni.BACKEND}: video jobs polled to "
                    "completion; request.api only marks a serving plan)"
                    if fmt == vllm_omni.FORMAT
                    else ""
                ),
            },
            indent=2,
            sort_keys=True,
        ).encode()
        accel, count = hardware if hardware else ("not recorded by the source", 0)
        files["campaign.json"] = json.dumps(
            {
                "layout_version": "1",
                "id": cid,
                "title": f"{_TOOL.get(fmt, fmt)} results imported by bundle import",
                "kind": "campaign",
                "hardware": {"accelerator": accel, "count": count},
                "arms": [
                    {
                        "id": a,
                        "role": "baseline" if i == 0 else "candidate",
                        "runtime_commit": commits[a],
                    }
                    for i, a in enumerate(arms)
                ],
                "plan": "plans/serving.json",
                "summary": "Imported serving benchmark; see serving.json for what the source does "
                "not record.",
            },
            indent=2,
            sort_keys=True,
        ).encode()
        files["attempts.jsonl"] = _jsonl(
            [
                {
                    "attempt_id": "imported",
                    "status": "accepted",
                    "note": (
                        "one benchmark run per source file; the tool records no attempt boundaries"
                        if all(not extra for _, _, extra in parsed)
                        else "one benchmark run per source file, or per benchmark (GuideLLM) or "
                        "line (SGLang) of a file holding several; the tool records no attempt "
                        "boundaries"
                    ),
                }
            ]
        )
        files["receipts.jsonl"] = b""
        files["claims.jsonl"] = _jsonl(claims)
        files["not_claimed.jsonl"] = _jsonl(not_claimed)
        tree.finish(files)
    return ImportResult(out, tuple(runs), len(claims), len(not_claimed), tuple(claims))


def replace_source(run: ServingRun, rel: str) -> ServingRun:
    """``run`` naming its carried path (claims cite the file as it is in the campaign)."""
    return dataclasses.replace(run, source=rel)
