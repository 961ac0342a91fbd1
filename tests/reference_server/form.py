"""The ``POST /v1/videos`` form as vLLM-Omni 0.30.0 parses it, for the reference server.

Every rule here is taken from the real source (the ``vllm-omni==0.30.0``
wheel, paths under ``vllm_omni/entrypoints/openai/``):

- the form's parameters and their types: ``video/generation/helpers.py:852-900``
  (``_parse_video_form``: ``prompt`` required; ``seconds`` and ``size`` are
  ``SecondStr``/``SizeStr``; ``width``, ``height``, ``num_frames``, ``seed``,
  ``num_inference_steps`` ints; ``fps``, ``guidance_scale``, ... floats;
  ``generate_sound`` bool; ``input_reference`` one ``UploadFile``,
  ``input_references`` a list of ``UploadFile`` parts);
- the patterns: ``protocol/videos.py:35-36`` (``^\\d+x\\d+$``, ``^[1-9]\\d*$``);
- ``input_references`` alone, never beside ``input_reference``:
  ``video/generation/helpers.py:926-931``; at most 12 references for H3
  (``MINIMAX_H3_MAX_REFERENCE_COUNT``, ``helpers.py:85, 802-806``);
- the model-name check: ``video/generation/helpers.py:990-997`` (HTTP 400
  "Model mismatch: request specifies '...' but server is running '...'.");
- ``extra_params`` is a JSON object (``_parse_form_json(..., expected_type=dict)``,
  ``helpers.py:974``).

A form that breaks a type or pattern is a FastAPI ``RequestValidationError``,
which vLLM answers with HTTP 400 (not FastAPI's 422) and its ``ErrorResponse``
body; see :func:`error_body`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl

__all__ = [
    "FILE_FIELDS",
    "FormError",
    "ParsedForm",
    "Upload",
    "error_body",
    "parse_video_form",
    "resolve_task",
]

SIZE = re.compile(r"^\d+x\d+$")
SECONDS = re.compile(r"^[1-9]\d*$")
MAX_REFERENCES = 12
FILE_FIELDS = frozenset(
    {
        "input_reference",
        "input_references",
        "control_reference",
        "source_video",
        "source_audio",
        "video_noise_mask",
        "audio_noise_mask",
    }
)
LIST_FILE_FIELDS = frozenset({"input_references"})
"""File fields the real form types as a list of uploads (repeated parts)."""
_INT_FIELDS = frozenset(
    {
        "width",
        "height",
        "num_frames",
        "short_edge",
        "num_outputs_per_prompt",
        "num_inference_steps",
        "seed",
        "frame_interpolation_exp",
    }
)
_FLOAT_FIELDS = frozenset(
    {
        "fps",
        "start_time_seconds",
        "guidance_scale",
        "guidance_scale_2",
        "boundary_ratio",
        "flow_shift",
        "true_cfg_scale",
        "sound_duration",
        "frame_interpolation_scale",
    }
)
_BOOL_FIELDS = frozenset({"generate_sound", "enable_frame_interpolation", "return_stage_metrics"})
# pydantic's lax bool parsing of form text.
_BOOL_TEXT = {
    "true": True,
    "1": True,
    "yes": True,
    "on": True,
    "t": True,
    "y": True,
    "false": False,
    "0": False,
    "no": False,
    "off": False,
    "f": False,
    "n": False,
}
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".heic", ".heif")
_AUDIO_SUFFIXES = (".wav", ".mp3", ".m4a", ".aac", ".flac", ".ogg")


class FormError(Exception):
    """A request the real server refuses: HTTP ``status`` with ``message`` (and ``param``)."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """vLLM's ``ErrorResponse``: ``{"error": {"message", "type", "param", "code"}}``.

    From the ``vllm==0.30.0`` wheel, ``vllm/entrypoints/serve/``:
    ``engine/protocol.py:79-87`` (``ErrorInfo``: message, type, param, code);
    ``exception_handling/handlers/http.py:16-30`` (an ``HTTPException``: ``type``
    is the status's phrase, ``param`` null); ``handlers/validation.py:149-195``
    (a ``RequestValidationError``: HTTP 400, ``type`` "Bad Request", ``param``
    the field's location such as ``body.seconds``, ``message`` "1 validation
    error:" and the error).
    """
    return {
        "error": {
            "message": message,
            "type": HTTPStatus(status).phrase,
            "param": param,
            "code": status,
        }
    }


@dataclass(frozen=True)
class Upload:
    """One file part."""

    filename: str
    content_type: str
    data: bytes

    @property
    def kind(self) -> str:
        """image, audio or video, as ``_uploaded_media_kind`` (``helpers.py:704-715``) decides."""
        ctype = self.content_type.lower()
        name = self.filename.lower()
        if ctype.startswith("image/") or name.endswith(_IMAGE_SUFFIXES):
            return "image"
        if ctype.startswith("audio/") or name.endswith(_AUDIO_SUFFIXES):
            return "audio"
        return "video"


@dataclass
class ParsedForm:
    """The validated text fields (as sent) and the file parts by field name."""

    fields: dict[str, str]
    files: dict[str, list[Upload]] = field(default_factory=dict)

    @property
    def references(self) -> list[Upload]:
        """``input_reference`` or the ``input_references`` parts, in the order sent."""
        return self.files.get("input_reference", []) + self.files.get("input_references", [])

    def extra_params(self) -> dict[str, Any]:
        """The parsed ``extra_params`` object (validated by :func:`parse_video_form`)."""
        raw = self.fields.get("extra_params")
        return {} if raw is None else dict(json.loads(raw))


def _invalid(name: str, message: str) -> FormError:
    # The shape of vLLM's validation handler (validation.py:175-195), pydantic's words.
    where = f"body.{name}"
    return FormError(400, f"1 validation error:\n  {{'loc': '{where}', 'msg': {message!r}}}", where)


def _urlencoded(body: bytes) -> ParsedForm:
    form = ParsedForm({})
    for name, value in parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True):
        if name in FILE_FIELDS:
            raise _invalid(name, "Value error, Expected UploadFile, received: <class 'str'>")
        form.fields[name] = value
    return form


def _multipart(content_type: str, body: bytes) -> ParsedForm:
    if content_type.startswith("application/x-www-form-urlencoded"):
        # FastAPI reads Form(...) fields with Starlette's Request.form(), which parses an
        # urlencoded body too: what aiohttp's FormData sends when no part is a file
        # (vLLM-Omni's own `bench serve --omni` client, for a text-only job).
        return _urlencoded(body)
    if not content_type.startswith("multipart/form-data"):
        # FastAPI reads Form(...) fields from a form body only: prompt is then "missing".
        raise _invalid("prompt", "Field required")
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    msg = BytesParser(policy=HTTP).parsebytes(head + body)
    form = ParsedForm({})
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        data = part.get_payload(decode=True)
        if not isinstance(name, str) or not isinstance(data, bytes):
            continue
        filename = part.get_filename()
        if filename is not None:
            upload = Upload(filename, part.get_content_type(), data)
            form.files.setdefault(name, []).append(upload)
        elif name in FILE_FIELDS:
            # A list field (input_references) is located at the item, as pydantic does
            # (recorded: 'body.input_references.0').
            at = f"{name}.{len(form.files.get(name, []))}" if name in LIST_FILE_FIELDS else name
            raise _invalid(at, "Value error, Expected UploadFile, received: <class 'str'>")
        else:
            form.fields[name] = data.decode("utf-8")
    return form


def _check_types(fields: dict[str, str]) -> None:
    for name, text in fields.items():
        # pydantic's lax integer parsing takes "7.0" (a zero fraction) but not "7.5"
        # (recorded: seed "7.0" accepted).
        if name in _INT_FIELDS and not re.fullmatch(r"[+-]?\d+(?:\.0*)?", text.strip()):
            raise _invalid(name, "Input should be a valid integer, unable to parse string")
        if name in _FLOAT_FIELDS:
            try:
                value = float(text)
            except ValueError:
                raise _invalid(name, "Input should be a valid number") from None
            if not math.isfinite(value):
                raise _invalid(name, "Input should be a finite number")
        if name in _BOOL_FIELDS and text.strip().lower() not in _BOOL_TEXT:
            raise _invalid(name, "Input should be a valid boolean, unable to interpret input")
    if "fps" in fields and float(fields["fps"]) < 1:
        raise _invalid("fps", "Input should be greater than or equal to 1")
    if "seconds" in fields and not SECONDS.match(fields["seconds"]):
        raise _invalid("seconds", "String should match pattern '^[1-9]\\d*$'")
    if "size" in fields and not SIZE.match(fields["size"]):
        raise _invalid("size", "String should match pattern '^\\d+x\\d+$'")
    if "extra_params" in fields:
        try:
            doc = json.loads(fields["extra_params"])
        except ValueError:
            raise FormError(400, "extra_params must be valid JSON") from None
        if not isinstance(doc, dict):
            raise FormError(400, "extra_params must be a JSON object")


def parse_video_form(content_type: str, body: bytes, served_model: str) -> ParsedForm:
    """Parse and validate one ``POST /v1/videos`` body as the real server does.

    Raises:
        FormError: what the real server answers instead (always HTTP 400 here).
    """
    form = _multipart(content_type, body)
    if "prompt" not in form.fields:
        raise _invalid("prompt", "Field required")
    _check_types(form.fields)
    if form.files.get("input_references") and form.files.get("input_reference"):
        raise FormError(
            400,
            "Provide input_references alone, without input_reference, image_reference, "
            "or video_reference.",
        )
    if len(form.files.get("input_reference", [])) > 1:
        raise _invalid("input_reference", "Value error, Expected UploadFile, received: list")
    if len(form.references) > MAX_REFERENCES:
        raise FormError(400, f"MiniMax H3 accepts at most {MAX_REFERENCES} total references.")
    model = form.fields.get("model")
    if model is not None and model != served_model:
        raise FormError(
            400,
            f"Model mismatch: request specifies '{model}' but server is running '{served_model}'.",
        )
    return form


def resolve_task(form: ParsedForm, task_type: str) -> str:
    """The H3 task a request runs: ``_resolve_task`` (``pipeline_minimax_h3.py:1283-1306``).

    An explicit ``extra_params.task`` wins; a Ref2VA-only start-up runs Ref2VA; a
    video or audio reference means Ref2VA; an image alone means FL2VA (not Ref2VA);
    no reference means T2VA.
    """
    requested = form.extra_params().get("task")
    if requested is not None:
        return str(requested).lower()
    if task_type == "ref2va":
        return "ref2va"
    kinds = {u.kind for u in form.references}
    if kinds & {"video", "audio"}:
        return "ref2va"
    if "image" in kinds:
        return "fl2va"
    return "t2va"
