"""One bounded JSON loader for every JSON file a user names.

Python's ``json`` turns hostile numbers and nesting into tracebacks far from the
file: an integer of more than 4300 digits raises ValueError inside the parser, one
of 400 digits parses but overflows ``float()`` later, ``1e400`` silently becomes
``inf``, and nesting some thousand levels deep raises RecursionError. :func:`loads`
refuses all of them up front and says where (a JSON path such as
``ttfts[3]`` or ``metrics.request_latency.value``), so callers can report file,
record and field.

Honest files pay little: the number hooks only run when a vectorized scan of the
text finds a run of more than :data:`MAX_INT_DIGITS` digits or a three-digit
exponent, and the depth walk only when the text (for JSON Lines: a line) has more
brackets than the limit; it stops at the level where it has seen as many arrays and
objects as the text has opening brackets (a vLLM result's 50,000 gap arrays are not
looked into). The parse itself runs with the cyclic collector paused.
"""

from __future__ import annotations

import functools
import gc
import json
import math
import re
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

__all__ = [
    "MAX_INT_DIGITS",
    "MAX_JSON_DEPTH",
    "JsonLoadError",
    "depth_exceeds",
    "line_loader",
    "loads",
]

MAX_JSON_DEPTH = 100
"""How deep arrays and objects may nest (the same bound as campaign files): every later
stage walks values recursively, and no file we read needs more than a handful of levels."""

MAX_INT_DIGITS = 20
"""The longest integer accepted. Every count, size and nanosecond time a writer records
fits in 20 digits (2**64 has 20); a longer one is no measurement, and Python refuses
to convert integers of more than 4300 digits at all."""

# Without a run of 21 digits or a 3-digit exponent, every integer has <= 20 digits and
# every number is below 1e20 * 1e99: no hook is needed (sound; digits inside strings
# only make it cautious). Scanned with numpy in blocks: a regex such as \d{21}, or a
# substring search, takes longer than the parse itself on a large file of numbers.
_EXPONENT = re.compile(rb"[eE][-+]?[0-9]{3,}+(?![A-Za-z_.\"-])")
"""A JSON number's exponent of three or more digits (the number ends there)."""
_BLOCK = 1 << 18  # 256 KiB: each step's temporaries stay in cache (4 MiB blocks took 2.8x as long)
_OVERLAP = 32


def _may_hold_huge_numbers(data: bytes) -> bool:
    whole = np.frombuffer(data, dtype=np.uint8)
    for start in range(0, whole.size, _BLOCK):
        a = whole[start : start + _BLOCK + _OVERLAP]
        digit = (a - 48) < 10  # uint8 arithmetic wraps: True exactly for 0-9
        run = digit
        for k in (1, 2, 4, 8):  # run[i]: digits at i .. i + 2k - 1
            run = run[:-k] & run[k:]
        if run.size > 5 and bool((run[:-5] & run[5:]).any()):  # 21 digits
            return True
        e = np.flatnonzero((a | 0x20) == ord("e"))  # "e" or "E"
        if e.size:
            three = digit[:-2] & digit[1:-1] & digit[2:]
            e = e[(e >= 1) & (e + 2 < three.size)]
            # A digit, e, an optional sign, three digits: in hex ids too ("4e001"), so
            # each such place is read exactly (one per record in an AIPerf export).
            for i in e[digit[e - 1] & (three[e + 1] | three[e + 2])].tolist():
                if _EXPONENT.match(data, start + int(i)):
                    return True
    return False


_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}:,]')
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTAINERS = frozenset((dict, list))
_SHOWN_PATH = 8  # path components shown in a message; deeper ones become "..."
_SHOWN_KEY = 40


class JsonLoadError(ValueError):
    """Valid (or nearly valid) JSON that is refused; ``field`` is the JSON path, if known."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class _Refused:
    """Stands in, during parsing, for a value that is refused once its place is known."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


def _path_text(path: list[str | int]) -> str | None:
    parts: list[str] = []
    for c in path[:_SHOWN_PATH]:
        if isinstance(c, int):
            parts.append(f"[{c}]")
        else:
            key = c if len(c) <= _SHOWN_KEY else c[:_SHOWN_KEY] + "..."
            parts.append(f".{key}" if parts else key)
    if len(path) > _SHOWN_PATH:
        parts.append("...")
    return "".join(parts) or None


def _too_deep_at(text: str, limit: int) -> str | None:
    """The path of the first container that opens below ``limit`` levels, read off the
    text token by token (no recursion: the text may be too deep for the parser)."""
    path: list[str | int] = []
    in_obj: list[bool] = []
    last = ""
    for m in _TOKEN.finditer(text):
        t = m.group()
        c = t[0]
        if c == '"':
            last = t
        elif c == ":" and path:
            try:
                path[-1] = json.loads(last)
            except ValueError:
                path[-1] = last[1:-1]
        elif c == "," and in_obj and not in_obj[-1]:
            path[-1] = int(path[-1]) + 1
        elif c in "[{":
            if len(in_obj) >= limit:
                return _path_text(path)
            in_obj.append(c == "{")
            path.append("" if c == "{" else 0)
        elif c in "]}" and in_obj:
            in_obj.pop()
            path.pop()
    return None


def depth_exceeds(value: Any, limit: int = MAX_JSON_DEPTH, *, at_most: int | None = None) -> bool:
    """True when arrays/objects in ``value`` nest more than ``limit`` levels.

    Level by level, without recursion, looking inside containers only (fast on wide
    tables of flat rows). ``at_most``: a bound on how many arrays and objects ``value``
    holds, if known (the opening brackets of the text it was parsed from): once that
    many were seen, the last level holds none, and its values need no look.
    """
    level = [value] if type(value) in _CONTAINERS else []
    seen = len(level)
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        if at_most is not None and seen >= at_most:
            # A serving result's 50,000 per-request gap arrays: not looked into one by one.
            return False
        below: list[Any] = []
        for c in level:
            vals = c.values() if type(c) is dict else c
            if not _CONTAINERS.isdisjoint(map(type, vals)):
                below += [x for x in vals if type(x) in _CONTAINERS]
        level = below
        seen += len(below)
    return False


def _first_refused(value: Any) -> tuple[str | None, str]:
    """Path and reason of the first refused value, in document order."""
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        v, path = stack.pop()
        if isinstance(v, _Refused):
            return _path_text(path), v.why
        if type(v) is dict:
            stack += [(x, [*path, k]) for k, x in reversed(v.items())]
        elif type(v) is list:
            stack += [(x, [*path, i]) for i, x in reversed(list(enumerate(v)))]
    raise AssertionError("a refused value was counted but not found")


def _lone_surrogate(value: Any) -> tuple[str | None, str] | None:
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        v, path = stack.pop()
        if type(v) is str:
            if _SURROGATE.search(v):
                return _path_text(path), v
        elif type(v) is dict:
            for k, x in v.items():
                if _SURROGATE.search(k):
                    return _path_text(path), k
                stack.append((x, [*path, k]))
        elif type(v) is list:
            stack += [(x, [*path, i]) for i, x in enumerate(v)]
    return None


def _abbrev(number: str) -> str:
    return number if len(number) <= 24 else f"{number[:12]}...{number[-6:]}"


class _Parser:
    """A JSON decoder, built once (per line it would cost more than the parse), whose hooks
    put a :class:`_Refused` where a refused number or constant stands, so that its path
    can be named afterwards; the number hooks only when the text may hold such a number."""

    def __init__(self, constants: str, numbers: bool) -> None:
        self.keep_constants = constants == "keep"
        self.refused = False
        hooks: dict[str, Any] = {"parse_constant": self._constant}
        if numbers:
            hooks |= {"parse_int": self._integer, "parse_float": self._real}
        self.decoder = json.JSONDecoder(**hooks)

    def parse(self, text: str) -> Any:
        self.refused = False
        # The cyclic collector, run while a large document is built, walks every array
        # made so far again and again (a 9 MB serving result: ~1/3 of the parse); a parsed
        # JSON value holds no cycle, so the collector has nothing to find in it.
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self.decoder.decode(text)
        finally:
            if enabled:
                gc.enable()

    def _refuse(self, why: str) -> _Refused:
        self.refused = True
        return _Refused(why)

    def _constant(self, name: str) -> Any:
        if self.keep_constants:
            return float(name)
        return self._refuse(f"{name} is not a JSON number")

    def _integer(self, s: str) -> Any:
        digits = len(s) - s.startswith("-")
        if digits <= MAX_INT_DIGITS:
            return int(s)
        return self._refuse(
            f"an integer of {digits} digits ({_abbrev(s)}): more than {MAX_INT_DIGITS} "
            "digits is no count, size or time"
        )

    def _real(self, s: str) -> Any:
        x = float(s)
        if math.isfinite(x):
            return x
        return self._refuse(f"the number {_abbrev(s)} is too large for a double")


def _brackets(text: str) -> int:
    return text.count("[") + text.count("{")


_BRACKET_STEP = 1 << 18


def _bracket_bytes(data: bytes) -> int:
    """``_brackets`` of the text ``data`` encodes (UTF-8: ASCII bytes stand only for
    themselves), in one numpy pass instead of two string scans.

    256 KiB at a time into one buffer: a whole-text temporary (9 MB for a serving
    result) is fresh memory each time, whose first touch cost more than the count.
    """
    # "[" is 0x5B and "{" 0x7B: the only bytes that | 0x20 makes 0x7B.
    arr = np.frombuffer(data, dtype=np.uint8)
    buf = np.empty(min(len(arr), _BRACKET_STEP), np.uint8)
    n = 0
    for i in range(0, len(arr), _BRACKET_STEP):
        part = arr[i : i + _BRACKET_STEP]
        low = buf[: len(part)]
        np.bitwise_or(part, 0x20, out=low)
        n += int(np.count_nonzero(low == 0x7B))
    return n


def _load(
    text: str, *, parser: _Parser, limit: int, surrogates: bool, brackets: int | None = None
) -> Any:
    try:
        value = parser.parse(text)
        if brackets is None:
            brackets = _brackets(text)
        deep = brackets > limit and depth_exceeds(value, limit, at_most=brackets)
    except RecursionError:  # the C scanner gives up near the interpreter's recursion limit
        deep = True
    if deep:
        raise JsonLoadError(f"nested deeper than {limit} levels", _too_deep_at(text, limit))
    if parser.refused:
        field, why = _first_refused(value)
        raise JsonLoadError(why, field)
    if not surrogates and _SURROGATE_ESCAPE.search(text):
        bad = _lone_surrogate(value)
        if bad is not None:
            raise JsonLoadError(
                f"{bad[1][:40]!r} holds a lone UTF-16 surrogate escape: not Unicode text", bad[0]
            )
    return value


Constants = Literal["reject", "keep"]


def loads(
    text: str,
    *,
    constants: Constants = "reject",
    limit: int = MAX_JSON_DEPTH,
    surrogates: bool = False,
    source: bytes | None = None,
) -> Any:
    """Parse JSON ``text``, refusing what later stages cannot carry safely.

    Refused, with the JSON path of the value in :attr:`JsonLoadError.field`:
    integers of more than :data:`MAX_INT_DIGITS` digits, numbers that overflow a
    double (``1e400``), arrays/objects nested more than ``limit`` levels, and
    unless asked otherwise the constants ``NaN``/``Infinity``/``-Infinity`` (not
    JSON; ``constants="keep"`` keeps them as floats for callers that name the
    field themselves) and strings holding a lone UTF-16 surrogate escape
    (``surrogates=True`` keeps them). ``source``: the UTF-8 bytes ``text`` was
    decoded from, if at hand (saves encoding it again for the number scan).

    Raises:
        JsonLoadError: one of the above.
        json.JSONDecodeError: the text is not JSON (callers word the position).
    """
    data = source or text.encode("utf-8", "surrogatepass")
    return _load(
        text,
        parser=_Parser(constants, _may_hold_huge_numbers(data)),
        limit=limit,
        surrogates=surrogates,
        brackets=_bracket_bytes(data),
    )


def line_loader(
    text: str,
    *,
    constants: Constants = "reject",
    limit: int = MAX_JSON_DEPTH,
    surrogates: bool = False,
    source: bytes | None = None,
) -> Callable[[str], Any]:
    """:func:`loads` for the lines of the JSON Lines ``text``, one line per call.

    The scan for hostile numbers is done once here, for the whole text, and one
    decoder serves every line: per line either would cost more than the parse.
    ``source`` as for :func:`loads`.
    """
    numbers = _may_hold_huge_numbers(source or text.encode("utf-8", "surrogatepass"))
    return functools.partial(
        _load, parser=_Parser(constants, numbers), limit=limit, surrogates=surrogates
    )
