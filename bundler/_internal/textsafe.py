"""Make untrusted text safe to print on a terminal or in a report line.

Member names, file names and author text come from bundles and campaigns that
may be hostile: a newline or an ANSI escape sequence in a name could paint a
fake "VERIFIED" line, a right-to-left override could make ``gpj.exe`` read as
``exe.jpg``. :func:`safe` escapes every character that is invisible or moves
the cursor, so what is printed is what is there:

- C0 controls (``\\x00``-``\\x1f``; ``\\n``, ``\\r``, ``\\t`` keep their short
  form), DEL and the C1 controls (``\\x7f``-``\\x9f``, ESC among them);
- Unicode format characters (category Cf: the bidirectional overrides and
  isolates ``\\u202a``-``\\u202e``, ``\\u2066``-``\\u2069``, marks, zero-width
  characters, the BOM, tags), line and paragraph separators (``\\u2028``,
  ``\\u2029``);
- lone surrogates, which is how Python spells a byte of a file name that is not
  UTF-8: U+DC80-U+DCFF is shown as the byte itself (``\\xff``).

Backslashes are left as they are (paths and messages stay readable), so the
escaped form is for reading, not for round-tripping.
"""

from __future__ import annotations

import re

__all__ = ["drop_unsafe", "has_unsafe", "json_safe", "safe", "unsafe_chars"]

# Categories Cc, Cf, Zl, Zp and Cs as of Unicode 14 (Python 3.11), hard-coded so
# that importing this module stays cheap; tests/test_hostile_input.py checks the
# class against the running interpreter's unicodedata.
_CLASS = (
    "\x00-\x1f\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"
    "\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff"
    "\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
_UNSAFE = re.compile(f"[{_CLASS}]")
# json.dumps escapes C0 inside strings itself, and outside strings the only C0
# characters are the indentation's newlines, which must stay.
_JSON_UNSAFE = re.compile(f"[{_CLASS.removeprefix(chr(0) + '-' + chr(0x1F))}]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    c = m.group(0)
    if c in _SHORT:
        return _SHORT[c]
    code = ord(c)
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape: the undecodable byte itself
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def safe(text: str) -> str:
    """``text`` with control, format and bidi characters escaped (``\\x1b``, ``\\n``, ``\\u202e``).

    Anything that is not a ``str`` is converted with ``str()`` first, so callers can
    pass values read from hostile JSON without checking their type.
    """
    if not isinstance(text, str):
        text = str(text)
    return _UNSAFE.sub(_escape, text)


def has_unsafe(text: str) -> bool:
    """True when :func:`safe` would change ``text``."""
    return _UNSAFE.search(text) is not None


def drop_unsafe(text: str) -> str:
    """``text`` without the characters :func:`safe` would escape.

    For one-line report text (HTML, Markdown), where an escape sequence would read
    as noise: a bidi override or line separator there still reorders or breaks
    the line a reader sees, so it goes; what the author meant stays readable.
    """
    return _UNSAFE.sub("", text)


def unsafe_chars(text: str) -> list[str]:
    """The distinct characters of ``text`` that :func:`safe` escapes, escaped, in order."""
    seen: list[str] = []
    for m in _UNSAFE.finditer(text):
        esc = _escape(m)
        if esc not in seen:
            seen.append(esc)
    return seen


def _json_escape(m: re.Match[str]) -> str:
    code = ord(m.group(0))
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON spells astral characters as a surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_safe(dumped: str) -> str:
    """Escape, as JSON ``\\uXXXX``, every unsafe character left in serialized JSON.

    ``json.dumps(..., ensure_ascii=False)`` escapes C0 controls but prints DEL,
    C1, bidi overrides and lone surrogates raw; outside strings JSON text holds
    none of them, so the result is equivalent JSON that is safe to show.
    """
    return _JSON_UNSAFE.sub(_json_escape, dumped)
