"""matplotlib set up for byte-identical SVG, and that SVG made ready to inline in a page.

matplotlib is an optional dependency (the ``report`` extra), imported inside
:func:`matplotlib_figures`: replay and the Markdown report never need it. No pyplot: a
bare :class:`matplotlib.figure.Figure` saved as SVG touches no GUI backend and no global
figure registry (rasterized marks, for very large campaigns, go through Agg).
Determinism comes from fixed rcParams (font, sizes, ``svg.hashsalt``), glyphs drawn as
paths (no font needed where the report is opened), no date in the metadata, and the XML
prolog, metadata block and comments stripped (the comments would repeat bundle text
outside our escaping). Every ``id`` in the SVG is prefixed with the chart id so several
charts can share one HTML page.
"""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from bundler.errors import CouldNotRunError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "PHONE_MIN_PT",
    "PHONE_WIDTH_IN",
    "PIP_INSTALL",
    "clean_svg",
    "matplotlib_figures",
    "phone_pt",
    "save_svg",
]

PIP_INSTALL = "pip install 'reprobundle[report]'  (or: pip install 'matplotlib>=3.8')"

_SALT = "reprobundle-report-v1"
_RC: dict[str, Any] = {
    "svg.hashsalt": _SALT,
    "svg.fonttype": "path",
    "svg.image_inline": True,
    "font.family": "DejaVu Sans",
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.labelsize": 9.0,
    "xtick.labelsize": 8.5,
    "ytick.labelsize": 8.5,
    "legend.fontsize": 8.0,
    "axes.linewidth": 0.8,
    "axes.edgecolor": "#555555",
    "axes.grid": True,
    "axes.grid.axis": "y",
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
    "figure.dpi": 100.0,
    "savefig.dpi": 150.0,  # only the rasterized marks of very large campaigns use it
    "path.simplify": False,
    "lines.antialiased": True,
    # Every label is literal text, much of it the author's (server and arm names): "$"
    # must not start mathtext, where a server named "b$\foo{$x" would raise (no report).
    "text.parse_math": False,
}


PHONE_WIDTH_IN = 4.6
"""Width of a chart drawn for a phone: 441.6 CSS px, shown at most ~0.83× on a 390 px screen
(a 366 px column)."""
PHONE_MIN_PT = 9.5
"""Smallest text on a phone chart: 9.5 pt × 4/3 px/pt × 0.83 ≈ 10.5 px on a 390 px screen."""
_PHONE_RC = {
    "font.size": 10.0,
    "axes.titlesize": 10.0,
    "axes.labelsize": 10.0,
    "xtick.labelsize": 10.0,
    "ytick.labelsize": 10.0,
    "legend.fontsize": 10.0,
}


def phone_pt(size: float, phone: bool) -> float:
    """A text size as drawn: at least :data:`PHONE_MIN_PT` on a chart drawn for a phone."""
    return max(size, PHONE_MIN_PT) if phone else size


@contextmanager
def matplotlib_figures(phone: bool = False) -> Iterator[type[Figure]]:
    """matplotlib's ``Figure`` class, with the report's rcParams set and warnings silenced.

    ``phone``: every default text size at least 10 pt (charts drawn
    :data:`PHONE_WIDTH_IN` wide for a phone's screen).

    Raises:
        CouldNotRunError: matplotlib is not installed.
    """
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - exercised where matplotlib is absent
        raise CouldNotRunError(
            "the HTML report draws its charts with matplotlib, which is not installed: "
            f"{PIP_INSTALL} (or use --format md, which needs no charts)"
        ) from exc
    rc = {**_RC, **_PHONE_RC} if phone else _RC
    with matplotlib.rc_context(cast(Any, rc)), warnings.catch_warnings():
        # A glyph DejaVu lacks (a bundle's server name in another script) is drawn as a
        # box; the warning would only reach the user's terminal.
        warnings.simplefilter("ignore")
        yield Figure


DRAWABLE_MAX = 1e300
"""The largest magnitude a chart axis takes. The table contract allows any finite value,
up to the largest double; matplotlib's limits and tick arithmetic overflow near it, and
no reader could see such a value next to real latencies anyway: the report says so and
the tables list the value instead."""


def undrawable(values: Iterable[float | None]) -> float | None:
    """The first value whose magnitude is beyond :data:`DRAWABLE_MAX`, or None."""
    return next((v for v in values if v is not None and abs(v) > DRAWABLE_MAX), None)


def save_svg(fig: Figure) -> str:
    """``fig`` as SVG text, with no date or creator in its metadata."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    return buf.getvalue()


_PROLOG = re.compile(r"\A.*?(?=<svg\b)", re.DOTALL)
_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.DOTALL)
_COMMENT = re.compile(r"\s*<!--.*?-->", re.DOTALL)
# matplotlib's <style> says "*{...}": inside an HTML page that selector would reach the
# whole document. The page's own stylesheet sets the same on "svg *" instead.
_STYLE = re.compile(r"\s*<style[^>]*>.*?</style>", re.DOTALL)
_ID = re.compile(r'\bid="([^"]+)"')
_HREF = re.compile(r'\b((?:xlink:)?href)="#([^"]+)"')
_URL = re.compile(r"url\(#([^)]+)\)")


def clean_svg(svg: str, prefix: str, title: str) -> str:
    """Inline-ready SVG: no prolog, metadata, comments or style; ids prefixed; a title."""
    svg = _PROLOG.sub("", svg)
    svg = _METADATA.sub("", svg)
    # matplotlib escapes "--" inside its comments, so the first "-->" ends each one.
    svg = _COMMENT.sub("", svg)
    svg = _STYLE.sub("", svg)
    svg = _ID.sub(lambda m: f'id="{prefix}-{m.group(1)}"', svg)
    svg = _HREF.sub(lambda m: f'{m.group(1)}="#{prefix}-{m.group(2)}"', svg)
    svg = _URL.sub(lambda m: f"url(#{prefix}-{m.group(1)})", svg)
    from html import escape

    return svg.replace(
        "<svg ",
        f'<svg role="img" aria-labelledby="{prefix}-title" ',
        1,
    ).replace(">", f'>\n <title id="{prefix}-title">{escape(title)}</title>', 1)
