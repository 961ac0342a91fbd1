"""Exact arithmetic for replayed statistics, and the one rounding rule for claims.

Every statistic a claim may name is a rational function of recorded values, or
the square root of one (standard deviations, coefficients of variation).
Replay computes it exactly over the recorded IEEE doubles (each double is an
exact binary fraction), so the result does not depend on row order or on how
a sum was associated. The *recomputed value* of ``specs/claims-vocabulary.md``
is then the double nearest to that exact value; it is converted to a decimal
exactly (``Decimal(x)``) and rounded half to even at the claim's precision.
The double 2.675 is 2.67499999999999982236…, so it rounds to 2.67.
"""

from __future__ import annotations

import decimal
import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

import numpy as np
import numpy.typing as npt

__all__ = [
    "Exact",
    "GroupSums",
    "Root",
    "display",
    "fraction_of",
    "group_sums",
    "is_negative",
    "round_half_even",
    "to_double",
]

_SQRT_DIGITS = 80
_ROUNDING = decimal.Context(prec=2000, rounding=decimal.ROUND_HALF_EVEN)


@dataclass(frozen=True)
class Root:
    """The non-negative square root of a non-negative rational ``square``."""

    square: Fraction

    def __post_init__(self) -> None:
        if self.square < 0:
            raise ValueError("Root of a negative number")

    def __float__(self) -> float:
        return to_double(self)


Exact = Fraction | Root
"""An exactly known statistic: a rational, or the square root of one."""


def fraction_of(x: float) -> Fraction:
    """The exact value of a recorded double (its binary fraction, not its repr)."""
    if not math.isfinite(x):
        raise ValueError(f"not a finite number: {x!r}")
    return Fraction(float(x))


def to_double(value: Exact) -> float:
    """The double nearest to ``value`` (the statistic's *recomputed value*).

    Raises OverflowError when ``value`` is beyond the largest double.

    ``int / int`` is correctly rounded in Python, so is ``float(Fraction)``. A
    root goes through an 80-digit decimal square root (exact whenever the root
    terminates within 80 digits), then the correctly rounded ``float(Decimal)``.
    """
    if isinstance(value, Fraction):
        return float(value)
    sq = value.square
    if sq == 0:
        return 0.0
    ctx = decimal.Context(prec=_SQRT_DIGITS)
    x = float(ctx.sqrt(ctx.divide(Decimal(sq.numerator), Decimal(sq.denominator))))
    if math.isinf(x):  # float(Decimal) saturates where float(Fraction) raises: say so alike
        raise OverflowError("the root is beyond the largest double")
    return x


def is_negative(value: Exact) -> bool:
    """Whether ``value`` is below zero (exactly: no double needed, whatever its size)."""
    return isinstance(value, Fraction) and value < 0


def round_half_even(value: Exact | int, decimals: int) -> Decimal:
    """Round the recomputed value to ``decimals`` places as the claims rule says.

    Integers (counts) are exact. Anything else becomes its nearest double, whose
    exact decimal expansion is rounded half to even.
    """
    if decimals < 0:
        raise ValueError("decimals must be >= 0")
    try:
        exact = Decimal(value) if isinstance(value, int) else Decimal(to_double(value))
    except OverflowError:
        # Beyond the largest double no nearest double exists: round the value itself.
        exact = _decimal(value, _ROUNDING.prec)
    return exact.quantize(Decimal(1).scaleb(-decimals), context=_ROUNDING)


def _decimal(value: Exact | int, digits: int) -> Decimal:
    """``value`` to ``digits`` significant decimal digits (for values no double holds)."""
    ctx = decimal.Context(prec=digits, rounding=decimal.ROUND_HALF_EVEN, Emax=decimal.MAX_EMAX)
    if isinstance(value, int):
        return ctx.plus(Decimal(value))
    sq = value.square if isinstance(value, Root) else value
    q = ctx.divide(Decimal(sq.numerator), Decimal(sq.denominator))
    return ctx.sqrt(q) if isinstance(value, Root) else q


def display(value: Exact) -> str:
    """The recomputed value as text: an integer as such, else its double to 12 significant digits.

    Twelve digits hide the last-bit noise of a difference of doubles (0.2 − 0.026
    is 0.17400000000000002 as doubles) while keeping far more precision than any
    claim states; ``--json`` carries the exact values.
    """
    if isinstance(value, Fraction) and value.denominator == 1:
        return str(value.numerator)
    try:
        return format(to_double(value), ".12g")
    except OverflowError:
        return format(_decimal(value, 12), ".12g")


def shortest(value: Exact) -> str:
    """The recomputed value as the shortest text that round-trips to its nearest double.

    ``repr(float)``: what the ``exact`` field of a claim check carries, so that a
    reader can see on which side of a half-to-even tie the value lies (12 digits
    can print a value just below a tie as the tie itself).
    """
    if isinstance(value, Fraction) and value.denominator == 1:
        return str(value.numerator)
    try:
        return repr(to_double(value))
    except OverflowError:
        return format(_decimal(value, 17), ".17g")  # no double: 17 digits, as repr would give


@dataclass(frozen=True)
class GroupSums:
    """Exact count, sum and sum of squares of one group of doubles."""

    n: int
    total: Fraction
    squares: Fraction

    @property
    def mean(self) -> Fraction:
        """The exact mean (the group must not be empty)."""
        return self.total / self.n

    @property
    def variance(self) -> Fraction | None:
        """The exact sample variance (n - 1), or None below two values."""
        if self.n < 2:
            return None
        return (self.n * self.squares - self.total * self.total) / (self.n * (self.n - 1))


def group_sums(
    codes: npt.NDArray[np.int64], values: npt.NDArray[np.float64]
) -> dict[int, GroupSums]:
    """Exact sums per group code, vectorized: no per-row Python, whatever the size.

    Each double is ``M * 2**(e - 53)`` with an integer ``M < 2**53`` (``frexp``).
    Rows are sorted once by (group, exponent); each run of one exponent is
    summed as Python integers (``sum`` over ``tolist()``, in C), and the runs
    are combined exactly with their power of two. Recorded values span few
    exponents, so the runs are few.
    """
    x = np.ascontiguousarray(values, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError("recorded values must be finite")
    mant, exp = np.frexp(x)
    ints = (mant * 2.0**53).astype(np.int64)  # exact: |mant| < 1 has 53 significant bits
    order = np.lexsort((exp, codes))
    codes, exp, ints = codes[order], exp[order], ints[order]
    if codes.size == 0:
        return {}
    change = (np.diff(codes) != 0) | (np.diff(exp) != 0)
    starts = np.r_[0, np.flatnonzero(change) + 1]
    ends = np.r_[starts[1:], codes.size]
    out: dict[int, GroupSums] = {}
    for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
        total, squares = _int_sums(ints[lo:hi])
        scale = Fraction(2) ** (int(exp[lo]) - 53)
        g = int(codes[lo])
        prev = out.get(g, GroupSums(0, Fraction(0), Fraction(0)))
        out[g] = GroupSums(
            prev.n + (hi - lo), prev.total + total * scale, prev.squares + squares * scale * scale
        )
    return out


_HALF = 27
_CHUNK = 256  # rows per partial sum: 256 * 2**54 < 2**63


def _int_sums(m: npt.NDArray[np.int64]) -> tuple[int, int]:
    """Exact ``sum(m)`` and ``sum(m * m)`` of integers below 2**53 in magnitude.

    Each value is split into 27-bit halves, ``|m| = hi * 2**27 + lo``; every
    partial product is below 2**54, so int64 partial sums over 256 rows cannot
    overflow, and the few partial sums are added as Python integers. Much
    faster than Python integers per row, and exact all the same.
    """
    a = np.abs(m)
    hi, lo = a >> _HALF, a & ((1 << _HALF) - 1)
    sign = np.where(m < 0, -1, 1)
    # First-order sums stay below 2**27 * 2**36 rows: one int64 sum each is exact.
    total = (int(np.sum(sign * hi)) << _HALF) + int(np.sum(sign * lo))
    idx = np.arange(0, m.size, _CHUNK)

    def chunked(x: npt.NDArray[np.int64]) -> int:
        return sum(np.add.reduceat(x, idx).tolist()) if m.size else 0

    squares = (
        (chunked(hi * hi) << (2 * _HALF)) + (chunked(hi * lo) << (_HALF + 1)) + chunked(lo * lo)
    )
    return total, squares
