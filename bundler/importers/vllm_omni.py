"""vLLM-Omni ``vllm-omni bench serve --omni --backend /v1/videos --save-result --save-detailed``.

Followed writer: ``vllm-omni`` 0.30.0 from PyPI, read in its wheel
(``vllm_omni/benchmarks/patch/patch.py``: ``async_request_openai_videos_omni`` and the
``benchmark`` that replaces vLLM's; ``vllm_omni/benchmarks/metrics/metrics.py``:
``calculate_metrics``), checked against files it wrote
(``tests/fixtures/real_writers/vllm-omni-bench-0.30.0/``). The file is vLLM's
``vllm bench serve`` result (``result_json``, vLLM 0.30.0's ``main_async``) with the
omni ``benchmark`` dict merged in:

- Per request (with ``--save-detailed``): ``input_lens``, ``start_times``
  (``time.perf_counter()``: an arbitrary origin), ``output_lens`` (0: a video job
  streams no tokens), ``ttfts`` (0.0), ``itls`` (``[]``), ``generated_texts`` and
  ``errors`` (``""`` on success). **No per-request latency**: the omni ``benchmark``
  drops vLLM's ``latencies`` array, so its E2EL aggregates (``mean_e2el_ms``,
  ``p99_e2el_ms``, ... with ``--percentile-metrics e2el``; numpy over the successful
  requests) cannot be re-derived and are claimed as the tool wrote them, unverifiable
  with the reason.
- Aggregates re-derivable from the per-request arrays: ``completed``, ``failed``,
  ``total_input_tokens``, ``request_throughput`` (completed / ``duration``), and the
  token figures (0 output tokens).
- Video figures (``total_video_duration_s``, ``video_throughput``, RTF,
  ``*_video_generation_ms`` from the server's ``stage_durations`` or
  ``inference_time_s``), peak memory, stage durations, audio and image figures: no
  per-request record and no statistic of the claims vocabulary: not claimed.

The timing boundary (``BOUNDARY``) is the reason its E2EL is not a rerun's ``e2e_s``:
the clock starts before the POST and stops after the status poll that reads
``completed`` (or ``failed``); it polls every ``poll_interval_s`` of ``--extra-body``
(2 s unless set; the file does not record it); it never downloads the video and never
DELETEs the job. A failed job (the real server answers its poll with the error's HTTP
status) is an ``errors`` entry ``Polling failed HTTP <status>: <body>``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from bundler.errors import Problem
from bundler.format.serving_run import ServingRun, SourceError, shown
from bundler.importers import vllm

__all__ = ["BOUNDARY", "FORMAT", "NOT_RECORDED", "TOOL", "parse"]

FORMAT = "vllm-omni"
TOOL = "vllm bench serve --omni"
BACKEND = "/v1/videos"
BOUNDARY = (
    "timing boundary of vllm bench serve --omni (/v1/videos, vLLM-Omni 0.30.0): each "
    "request's clock stops at the status poll that reads 'completed', polled every "
    "poll_interval_s of --extra-body (2 s unless set; the file does not record it), so "
    "every E2EL is quantised up to that interval; the video is never downloaded and the "
    "job never DELETEd. A rerun's e2e_s (POST to download and DELETE) is another quantity "
    "and is never compared with it"
)
NO_LATENCY = (
    "vllm bench serve --omni writes no per-request latency (its benchmark drops vLLM's "
    "'latencies' array): {} cannot be re-derived; " + BOUNDARY
)
_NO_TOKENS = (
    "a /v1/videos job streams no tokens: vllm bench serve --omni writes 0 and empty "
    "arrays for {}, which are not measurements"
)
NOT_RECORDED = (
    BOUNDARY,
    "per-request end-to-end latencies (vllm bench serve --omni drops vLLM's 'latencies' "
    "array): its E2EL claims are unverifiable",
    "warmup requests (the tool does not keep them)",
    "per-request video figures (duration, frames, RTF, generation time, peak memory, "
    "stage durations): only their aggregates are written, and they are not claimed",
)
_NOT_CLAIMED = (
    "total_video_duration_s",
    "total_video_frames",
    "video_throughput",
    "mean_video_rtf",
    "median_video_rtf",
    "percentiles_video_rtf",
    "mean_video_generation_ms",
    "median_video_generation_ms",
    "percentiles_video_generation_ms",
    "mean_peak_memory_mb",
    "median_peak_memory_mb",
    "percentiles_peak_memory_mb",
    "stage_durations_mean",
    "stage_durations_p50",
    "stage_durations_p99",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "rtfx",
)
_DETAILS = ("input_lens", "output_lens", "ttfts", "itls", "errors")


def _fail(where: str, field: str | None, message: str) -> SourceError:
    return SourceError(
        f"{where}: not a usable {TOOL} ({BACKEND}) result", [Problem(where, None, field, message)]
    )


def _not_claimed(doc: dict[str, Any]) -> list[str]:
    out = []
    for k in _NOT_CLAIMED:
        v = doc.get(k)
        if v is None or v in ({}, []):
            continue
        out.append(f"{k} = {shown(v)}")
    return out


def parse(data: bytes, where: str, arm: str) -> ServingRun:
    """Parse one ``vllm bench serve --omni`` ``/v1/videos`` result file of ``arm``.

    Raises:
        SourceError: not JSON, not the ``/v1/videos`` backend, no ``--save-detailed``
            arrays, arrays of different lengths, a bad count or time (each problem
            names the file and field).
    """
    doc = vllm.load_json(data, where)
    backend = doc.get("backend", doc.get("endpoint_type"))
    if backend != BACKEND:
        raise _fail(
            where,
            "backend",
            f"expected {BACKEND!r} (vllm bench serve --omni's video backend), found "
            f"{shown(backend)}: import other vllm bench serve files as 'vllm'",
        )
    missing = [k for k in _DETAILS if k not in doc]
    if missing:
        raise _fail(
            where,
            missing[0],
            "missing: run with --save-detailed (without it the file holds only aggregates "
            "and no per-request record to re-derive them from)",
        )
    if "latencies" in doc:
        raise _fail(
            where,
            "latencies",
            "vllm bench serve --omni 0.30.0 writes no per-request 'latencies': this file "
            "was not written by the writer this importer follows",
        )
    try:
        run = vllm.parse(data, where, arm)
    except SourceError as exc:
        raise SourceError(
            f"{where}: not a usable {TOOL} ({BACKEND}) result", exc.problems
        ) from None
    meta: dict[str, Any] = {
        **run.meta,
        "tool": FORMAT,
        "timing_boundary": BOUNDARY,
        "not_claimed_aggregates": _not_claimed(doc),
    }
    kinds = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL"}
    unrecorded = {k: _NO_TOKENS.format(v) for k, v in kinds.items()}
    unrecorded["e2el"] = NO_LATENCY.format("E2EL")
    aggregates = {k: v for k, v in run.aggregates.items() if math.isfinite(v)}
    return dataclasses.replace(
        run, latencies=None, aggregates=aggregates, meta=meta, unrecorded=unrecorded
    )
