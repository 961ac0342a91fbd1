"""How the report views print a figure: one spelling of each number for text, Markdown and HTML.

Exact values are rounded half to even for display only; floats are printed in
their shortest form (``inf`` and ``nan`` as Python spells them); a missing value
is ``-``.
"""

from __future__ import annotations

from replay.engine.exact import Exact, round_half_even

__all__ = ["exact_text", "fixed_text", "float_text"]


def exact_text(value: Exact | int | None, decimals: int = 2) -> str:
    """An exact value rounded half to even to ``decimals`` places, or ``-``."""
    return "-" if value is None else str(round_half_even(value, decimals))


def float_text(value: float | None) -> str:
    """A float in its shortest form (``g``: ``inf``, ``-inf``, ``nan`` as they are), or ``-``."""
    return "-" if value is None else f"{value:g}"


def fixed_text(value: float | None, decimals: int = 2) -> str:
    """A float at the precision of the means beside it (Python rounds its exact value), or ``-``."""
    return "-" if value is None else f"{value:.{decimals}f}"
