"""The ``extra`` column's doubles: the column-wise text equals RFC 8785 per value (issue 22).

``bundler/campaign/extra.py`` writes most doubles with Arrow's cast (plain decimal
notation, shortest round-trip digits) and the rest with the canonical code. The
expected text here comes from the ``rfc8785`` library value by value.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from bundler.campaign.extra import UnknownColumn, extra_column


def _expected(values: list[float | None]) -> list[str]:
    return [rfc8785.dumps({"x": v}).decode("utf-8") for v in values]


def _column(values: list[float | None]) -> list[str]:
    arr = pa.array(values, pa.float64())
    present = pa.array([True] * len(values), pa.bool_())
    out = extra_column([UnknownColumn("x", arr, present)], len(values)).to_pylist()
    return [str(t) for t in out]


def test_doubles_across_magnitudes_match_rfc8785() -> None:
    rng = np.random.default_rng(22)
    mags = 10.0 ** rng.integers(-30, 30, 20_000)
    values = (rng.random(20_000) * mags * rng.choice([-1.0, 1.0], 20_000)).tolist()
    # The edges of ECMAScript's plain notation, Arrow's switch to exponents, subnormals.
    values += [1e-6, 9.99e-7, 1.5e-6, 1e21, 9.99e20, 1e10 + 0.5, 1e15 + 0.25, 5e-324]
    values += [0.1, 0.2, 0.30000000000000004, -0.0, 2.0**53, 2.0**53 + 2, None, 123.456]
    assert _column(values) == _expected(values)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=50))
def test_any_finite_double_matches_rfc8785(values: list[float]) -> None:
    assert _column(list(values)) == _expected(list(values))
    # And the text is JSON that reads back to the same double.
    assert [float(json.loads(t)["x"]) for t in _column(list(values))] == values
