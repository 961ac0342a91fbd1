"""The date-time column check's 24-character fast path agrees with the RFC 3339 pattern.

``bundler/format/columns.py`` checks a column whose strings all have 24 characters
position by position instead of by regular expression (issue 22). The expected verdict
here is Python's ``re`` over the same pattern, string by string.
"""

from __future__ import annotations

import random

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from bundler._internal.timefmt import RFC3339
from bundler.format.columns import strings_ok

PROP = {"type": "string", "format": "date-time"}
GOOD = "2026-03-01T08:00:00.000Z"
# Characters that matter somewhere in the layout, and some that never do.
ALPHABET = "0123456789-:.TtZz +x\u0660é"


def _by_regex(values: list[str]) -> bool:
    return all(RFC3339.match(v) and v.isascii() for v in values)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet=ALPHABET, min_size=24, max_size=24),
            # One position of an honest value changed.
            st.tuples(st.integers(0, 23), st.sampled_from(ALPHABET)).map(
                lambda p: GOOD[: p[0]] + p[1] + GOOD[p[0] + 1 :]
            ),
            st.just(GOOD),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_fixed_width_column_agrees_with_the_pattern(values: list[str]) -> None:
    assert strings_ok(pa.array(values, pa.string()), PROP) == _by_regex(values)


def test_every_single_character_change_of_an_honest_value() -> None:
    """Exhaustive over positions and a wide alphabet: 24 x 256 columns."""
    for i in range(24):
        for code in range(256):
            v = GOOD[:i] + chr(code) + GOOD[i + 1 :]
            assert strings_ok(pa.array([GOOD, v], pa.string()), PROP) == _by_regex([GOOD, v]), v


def test_mixed_lengths_and_slices_take_the_pattern() -> None:
    rng = random.Random(3)
    values = [GOOD, "2026-03-01T08:00:00Z", "2026-03-01T08:00:00.123456+02:00"]
    assert strings_ok(pa.array(values, pa.string()), PROP) is True
    bad = [GOOD, "2026-03-01T08:00:60.000Z"]
    assert strings_ok(pa.array(bad, pa.string()), PROP) is False
    # A slice of a longer array (non-zero offset) is read at its own offsets.
    many = [GOOD] * 50 + ["2026-03-01T08:00:00.00xZ"] + [GOOD] * 50
    arr = pa.array(many, pa.string())
    assert strings_ok(arr.slice(0, 50), PROP) is True
    assert strings_ok(arr.slice(40, 20), PROP) is False
    assert strings_ok(arr.slice(51, 50), PROP) is True
    shuffled = many[:]
    rng.shuffle(shuffled)
    assert strings_ok(pa.array(shuffled, pa.string()), PROP) is False
