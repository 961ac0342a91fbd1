"""The HTML report at a phone's width (390 px) and its headline cards (issue 24 item 10).

At 390 px the page's column is 366 px wide (12 px padding each side, the stylesheet's
``max-width: 640px`` rule). A chart used to keep a 560 px minimum width and scroll:
the per-request distribution then showed one arm, and its text was drawn at 6-7 px.
Now each trial chart also has a phone layout, drawn narrow, that the page shows on a
phone instead; every chart fits the column (nothing scrolls out of view) and its
smallest text is at least 10 px there. Glyphs are drawn as paths: matplotlib writes
each text run as ``scale(s -s)`` with ``s`` = font size in pt / 100.
"""

from __future__ import annotations

import re

import pytest

from bundler.format.trust import Trust
from replay.report.html.render import render_bundle
from tests.test_report import SEED, seal

pytest.importorskip("matplotlib", reason="the HTML report needs matplotlib (the report extra)")

PHONE_COLUMN_PX = 390 - 2 * 12
PX_PER_PT = 4 / 3


@pytest.fixture(scope="module")
def seed_html(tmp_path_factory: pytest.TempPathFactory) -> str:
    seed = seal(SEED, tmp_path_factory.mktemp("phone"))
    return render_bundle(seed.path, "html", trust=Trust.keys([seed.keys.public])).text


def _svgs(html: str) -> dict[str, str]:
    """Every inline SVG by the id of its title (``<chart>-title``)."""
    out = {}
    for m in re.finditer(r"<svg\b.*?</svg>", html, re.DOTALL):
        title = re.search(r'<title id="([^"]+)-title">', m.group(0))
        assert title is not None
        out[title.group(1)] = m.group(0)
    return out


def _width_pt(svg: str) -> float:
    m = re.search(r'<svg[^>]*\bwidth="([\d.]+)pt"', svg)
    assert m is not None
    return float(m.group(1))


def _smallest_text_px(svg: str, column_px: float) -> float:
    """The smallest glyph run, in CSS px, once the SVG is fitted to ``column_px``."""
    width_pt = _width_pt(svg)
    scales = [float(s) for s in re.findall(r"scale\(([\d.]+) -\1\)", svg)]
    assert scales, "no text in the chart"
    shrink = min(1.0, column_px / (width_pt * PX_PER_PT))
    return min(scales) * 100 * PX_PER_PT * shrink


def test_every_chart_has_a_phone_layout_with_text_of_10_px(seed_html: str) -> None:
    svgs = _svgs(seed_html)
    assert {"latency", "latency-phone", "distribution", "distribution-phone"} <= set(svgs)
    for chart in ("latency-phone", "distribution-phone"):
        assert _smallest_text_px(svgs[chart], PHONE_COLUMN_PX) >= 10, chart
    # The desktop layout, fitted to a phone, would have been unreadable: hence the second.
    assert _smallest_text_px(svgs["distribution"], PHONE_COLUMN_PX) < 10


def test_on_a_phone_charts_fit_the_column_and_show_every_arm(seed_html: str) -> None:
    css = seed_html[seed_html.index("<style") : seed_html.index("</style>")]
    phone_rules = css[css.index("@media (max-width: 640px)") :]
    assert "min-width: 560px" not in css  # the old rule that made charts scroll
    assert "figure .wide { display: none; }" in phone_rules
    assert "figure .phone { display: block; }" in phone_rules
    assert "figure svg { max-width: 100%; height: auto; }" in css
    svgs = _svgs(seed_html)
    # Both arms' ECDF steps are in the phone chart, and it is drawn at the column's scale.
    assert len(re.findall(r'id="distribution-phone-ecdf-\d{4}"', svgs["distribution-phone"])) == 2
    for chart in ("latency-phone", "distribution-phone"):
        width_pt = _width_pt(svgs[chart])
        assert width_pt * PX_PER_PT <= PHONE_COLUMN_PX / 0.8, chart


def test_no_headline_card_wraps_alone(seed_html: str) -> None:
    head = seed_html[seed_html.index('<section id="headline">') :]
    head = head[: head.index("</section>")]
    rows = [r.count('<div class="card') for r in head.split('<div class="cards">')[1:]]
    # The effect (3 cards) on one row and the evidence (4) under it: at 1280 px seven cards
    # in one row left to wrap put "+3.10 %" on a row of its own.
    assert rows == [3, 4], rows
    hbm = next(r for r in head.split('<div class="cards">')[1:] if "+3.10 %" in r)
    assert hbm.count('<div class="card') >= 2


def test_trials_caption_says_what_the_axis_groups_by(seed_html: str) -> None:
    fig = seed_html[seed_html.index('<figure id="latency-figure">') :]
    caption = fig[fig.index("<figcaption>") : fig.index("</figcaption>")]
    assert "Servers grouped by arm, in run order within each arm." in caption
    assert "Servers in run order." not in caption
