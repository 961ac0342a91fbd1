"""What a chart is drawn from (arms, their servers' requests, the effect between arms), what
it returns, and the helpers every chart draws its marks with: labels, colours, x spread, ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "ArmPanel",
    "Effect",
    "MarkIds",
    "ServerPoints",
    "TrialChart",
    "arm_color",
    "draw_points",
    "short_label",
    "spread",
]

_LABEL_LIMIT = 32
_COLORS = {"baseline": "#4c6a92", "candidate": "#c0602b"}
_OTHER_COLORS = ("#5b8c5a", "#8c5a8c", "#8c7a5a", "#5a8c8c")


@dataclass(frozen=True)
class ServerPoints:
    """One server's requests of the accepted attempt, in ``seq`` order."""

    server: str
    warmups: tuple[float, ...]
    measured_ok: tuple[float, ...]
    measured_failed: tuple[float, ...]  # measured requests whose status is not ok (with a time)
    mean_s: float | None  # the server mean replay derived (measured, status ok)


@dataclass(frozen=True)
class ArmPanel:
    """One arm: its servers in run order and its arm mean."""

    arm: str
    role: str
    mean_s: float | None
    servers: tuple[ServerPoints, ...]


@dataclass(frozen=True)
class Effect:
    """The change from one arm to another, as the replay derived it (label already worded)."""

    baseline: str
    candidate: str
    label: str  # e.g. "−73.45 %  ·  3.77×"


@dataclass(frozen=True)
class TrialChart:
    """The SVG text and how many marks of each kind it holds."""

    svg: str
    marks: dict[str, int]
    individual: bool


def short_label(text: str) -> str:
    """``text`` on one line, cut to ``_LABEL_LIMIT`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= _LABEL_LIMIT else text[: _LABEL_LIMIT - 1] + "…"


def arm_color(panel: ArmPanel, index: int) -> str:
    """The colour of ``panel`` (by role; other arms take a palette colour by ``index``)."""
    return _COLORS.get(panel.role, _OTHER_COLORS[index % len(_OTHER_COLORS)])


def spread(center: float, width: float, n: int) -> list[float]:
    """``n`` x positions spread evenly over ``width`` around ``center`` (deterministic)."""
    if n <= 1:
        return [center] * n
    return [center - width / 2 + width * i / (n - 1) for i in range(n)]


class MarkIds:
    """Sequential mark ids per kind."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def next(self, kind: str) -> str:
        n = self.counts.get(kind, 0) + 1
        self.counts[kind] = n
        return f"{kind}-{n:04d}"


def draw_points(
    ax: Axes,
    xs: Sequence[float],
    ys: Sequence[float],
    *,
    kind: str,
    style: dict[str, Any],
    ids: MarkIds,
    individual: bool,
    group: str,
) -> None:
    """``xs``/``ys`` as marks: one with its own id each, or one rasterized group of them all."""
    if not xs:
        return
    if individual:
        for x, y in zip(xs, ys, strict=True):
            ax.plot([x], [y], linestyle="none", gid=ids.next(kind), **style)
        return
    ax.plot(xs, ys, linestyle="none", gid=f"{kind}-{group}", rasterized=True, **style)
    ids.counts[kind] = ids.counts.get(kind, 0) + len(xs)
