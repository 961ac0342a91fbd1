"""Plan-check findings about what a vLLM-Omni server would do with the plan's request.

Facts from vLLM-Omni 0.30.0 (the ``vllm-omni`` wheel, paths under
``vllm_omni/entrypoints/openai/`` unless named):

- the form's ``model`` must equal the served model name, else HTTP 400
  "Model mismatch" (``video/generation/helpers.py:990-997``); the served name
  is ``--served-model-name``, else the model given to ``vllm serve``;
- ``size`` must match ``^\\d+x\\d+$`` and ``seconds`` ``^[1-9]\\d*$``
  (``protocol/videos.py:35-36``), numeric fields must parse as numbers;
- MiniMax H3 renders at 24 fps and floors its canvas to a multiple of 32
  (1280x720 yields 1280x704);
- an image-only reference on a combined H3 checkpoint runs FL2VA, not Ref2VA,
  unless ``extra_params.task`` names the task
  (``diffusion/models/minimax_h3/pipeline_minimax_h3.py:1283-1306``);
- ``POST /v1/videos/sync`` gives up after ``VLLM_OMNI_VIDEO_SYNC_TIMEOUT``
  seconds (default 600) with HTTP 504 (``video/generation/helpers.py:100``).

Pure functions of the check's input (:class:`~bundler.campaign.plan_input.PlanCheckInput`:
the request's API, its payload and the launch section as JSON, the arms of the
plan's schedule, its request timeout). Every finding here is a warning: the
plan may target another server, and a sealed honest campaign keeps its
verdicts; ``specs/plan-check.md`` lists the codes.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from bundler.campaign.plan_input import PlanCheckInput
from bundler.campaign.plan_result import Finding

__all__ = ["SYNC_TIMEOUT_S", "omni_findings", "served_names"]

SYNC_TIMEOUT_S = 600.0
_SIZE = re.compile(r"^\d+x\d+$")
_SECONDS = re.compile(r"^[1-9]\d*$")
_H3 = re.compile(r"h3", re.IGNORECASE)
_INT_FIELDS = ("width", "height", "num_frames", "num_inference_steps", "seed")
_NUMBER_FIELDS = ("fps", "guidance_scale", "flow_shift", "sound_duration")
_REFERENCE_FIELDS = ("input_reference", "input_references")


def _tokens(command: Any) -> list[str] | None:
    if isinstance(command, str):
        try:
            return shlex.split(command)
        except ValueError:
            return None
    if isinstance(command, list):
        return [str(t) for t in command]
    return None


def served_names(argv: Sequence[str], model: str) -> set[str] | None:
    """The names a ``vllm serve`` command line serves, or None when it cannot be told.

    ``{model}`` in the template stands for the payload's model. Names come from
    ``--served-model-name`` (one or more), else ``--model``, else the first
    argument after ``serve``.
    """
    argv = [t.replace("{model}", model) for t in argv]
    names: list[str] = []
    for i, tok in enumerate(argv):
        if tok.startswith("--served-model-name="):
            names.append(tok.split("=", 1)[1])
        elif tok == "--served-model-name":
            names += _until_option(argv[i + 1 :])
    if names:
        return set(names)
    for i, tok in enumerate(argv):
        if tok.startswith("--model="):
            return {tok.split("=", 1)[1]}
        if tok == "--model" and i + 1 < len(argv):
            return {argv[i + 1]}
    if "serve" in argv:
        rest = argv[argv.index("serve") + 1 :]
        if rest and not rest[0].startswith("-") and "{" not in rest[0]:
            return {rest[0]}
    return None


def _until_option(tokens: Sequence[str]) -> list[str]:
    out = []
    for t in tokens:
        if t.startswith("-"):
            break
        out.append(t)
    return out


def _arms(plan: PlanCheckInput) -> list[str]:
    return sorted({s.arm for s in plan.slots})


def _model_findings(plan: PlanCheckInput, model: str) -> list[Finding]:
    launch = plan.launch
    out = []
    for arm in _arms(plan):
        per_arm = launch.get(arm)
        per_arm = per_arm if isinstance(per_arm, Mapping) else {}
        argv = _tokens(per_arm.get("command") or launch.get("command")) or []
        args = per_arm.get("args")
        argv += [str(a) for a in args] if isinstance(args, list) else []
        names = served_names(argv, model)
        if names is not None and model not in names:
            out.append(
                Finding(
                    "warning",
                    "model-not-served",
                    f"launch.{arm}",
                    f"the server would run as {', '.join(sorted(names))!s} but the payload's "
                    f"model is {model!r}: vLLM-Omni answers every request HTTP 400 "
                    "'Model mismatch' (add --served-model-name)",
                )
            )
    return out


def _refused(path: str, message: str) -> Finding:
    return Finding("warning", "payload-refused", path, message)


def _payload_findings(payload: Mapping[str, Any]) -> list[Finding]:
    out = []
    size = payload.get("size")
    if size is not None and not (isinstance(size, str) and _SIZE.match(size)):
        out.append(_refused("request.payload.size", f"{size!r} does not match ^\\d+x\\d+$"))
    seconds = payload.get("seconds")
    if seconds is not None:
        integral = isinstance(seconds, int | float) and not isinstance(seconds, bool)
        text = (
            str(int(seconds))
            if integral and math.isfinite(seconds) and float(seconds).is_integer()
            else str(seconds)
        )
        if not _SECONDS.match(text):
            out.append(
                _refused("request.payload.seconds", f"{seconds!r} is not a whole number >= 1")
            )
    for name in _INT_FIELDS:
        v = payload.get(name)
        if v is not None and (
            isinstance(v, bool) or not isinstance(v, int | float) or not float(v).is_integer()
        ):
            out.append(_refused(f"request.payload.{name}", f"{v!r} is not an integer"))
    for name in _NUMBER_FIELDS:
        v = payload.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
            out.append(_refused(f"request.payload.{name}", f"{v!r} is not a number"))
    return out


def _h3_findings(payload: Mapping[str, Any]) -> list[Finding]:
    out = []
    fps = payload.get("fps")
    if isinstance(fps, int | float) and not isinstance(fps, bool) and fps != 24:
        out.append(
            Finding(
                "warning",
                "h3-fps",
                "request.payload.fps",
                f"MiniMax H3 renders at 24 fps, not {fps}",
            )
        )
    size = payload.get("size")
    if isinstance(size, str) and _SIZE.match(size):
        w, h = (int(x) for x in size.split("x"))
        if w % 32 or h % 32:
            out.append(
                Finding(
                    "warning",
                    "h3-canvas",
                    "request.payload.size",
                    f"MiniMax H3 floors its canvas to a multiple of 32: {size} yields "
                    f"{w // 32 * 32}x{h // 32 * 32}",
                )
            )
    extra = payload.get("extra_params")
    task = extra.get("task") if isinstance(extra, Mapping) else None
    if task is None and any(payload.get(k) for k in _REFERENCE_FIELDS):
        out.append(
            Finding(
                "warning",
                "task-implicit",
                "request.payload.extra_params.task",
                "no explicit task: with an image-only reference a combined H3 server runs "
                'FL2VA, not Ref2VA (freeze extra_params {"task": "ref2va"} in the plan)',
            )
        )
    return out


def _sync_cap(plan: PlanCheckInput) -> float:
    """The smallest cap any arm's launch environment sets (the default where one sets none)."""
    launch = plan.launch
    caps = []
    for arm in _arms(plan):
        per_arm = launch.get(arm)
        env = per_arm.get("env") if isinstance(per_arm, Mapping) else None
        raw = env.get("VLLM_OMNI_VIDEO_SYNC_TIMEOUT") if isinstance(env, Mapping) else None
        try:
            caps.append(float(raw) if raw is not None else SYNC_TIMEOUT_S)
        except (TypeError, ValueError):
            caps.append(SYNC_TIMEOUT_S)
    return min(caps, default=SYNC_TIMEOUT_S)


def _sync_findings(plan: PlanCheckInput) -> list[Finding]:
    request_s = plan.request_s
    if plan.api != "videos-sync" or not isinstance(request_s, int | float):
        return []
    if request_s <= _sync_cap(plan):
        return []
    return [
        Finding(
            "warning",
            "sync-cap",
            "timeouts.request_s",
            f"{request_s:g} s is above vLLM-Omni's videos-sync cap of {_sync_cap(plan):g} s "
            f"(VLLM_OMNI_VIDEO_SYNC_TIMEOUT, default {SYNC_TIMEOUT_S:g} s, then HTTP 504): "
            "the server, not the plan, would end a slow request",
        )
    ]


def omni_findings(plan: PlanCheckInput) -> list[Finding]:
    """The warnings above for ``plan`` (none for a plan without a video request)."""
    if plan.api not in ("videos-async", "videos-sync"):
        return []
    payload = plan.payload
    out: list[Finding] = []
    model = payload.get("model")
    if isinstance(model, str) and model:
        out += _model_findings(plan, model)
    out += _payload_findings(payload)
    if isinstance(model, str) and _H3.search(model):
        out += _h3_findings(payload)
    out += _sync_findings(plan)
    return out
