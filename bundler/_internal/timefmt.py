"""RFC 3339 timestamps to integer nanoseconds since the Unix epoch, exactly.

``datetime`` stops at microseconds; receipts may carry nanoseconds, and the
product promise is that raw values are kept exactly, so we parse the fraction
ourselves.
"""

from __future__ import annotations

import datetime as dt
import re

RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):([0-5]\d)(?:\.(\d{1,9}))?"
    r"(Z|z|[+-]\d{2}:\d{2})$"
)


def parse_rfc3339_ns(text: str) -> int:
    """Parse an RFC 3339 date-time with an explicit offset into epoch nanoseconds.

    Raises:
        ValueError: if ``text`` is not such a timestamp (a naive time is refused:
            its instant would depend on the reader's zone).
    """
    m = RFC3339.match(text)
    if not m:
        raise ValueError(f"not an RFC 3339 date-time with offset: {text!r}")
    y, mo, d, h, mi, s, frac, off = m.groups()
    base = dt.datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=dt.UTC)
    if off not in ("Z", "z"):
        sign = 1 if off[0] == "+" else -1
        base -= sign * dt.timedelta(hours=int(off[1:3]), minutes=int(off[4:6]))
    secs = int(base.timestamp())
    nanos = int((frac or "").ljust(9, "0"))
    return secs * 1_000_000_000 + nanos


def format_ns(ns: int) -> str:
    """Format epoch nanoseconds as RFC 3339 UTC, trimming trailing zeros of the fraction."""
    secs, nanos = divmod(ns, 1_000_000_000)
    base = dt.datetime.fromtimestamp(secs, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if nanos:
        base += "." + f"{nanos:09d}".rstrip("0")
    return base + "Z"
