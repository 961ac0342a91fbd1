"""Units of ``bundle report``: untrusted-text handling and the chart for large campaigns."""

from __future__ import annotations

import re

import pytest

from bundler.lint_text import find_closing_references
from replay.report.escape import (
    html_text,
    markdown_code,
    markdown_line_start,
    markdown_text,
    segments,
)


@pytest.mark.parametrize(
    ("text", "refs"),
    [
        ("This fixes #9241 in the runner", ["#9241"]),
        ("Closes #12 and resolved #3", ["#12", "#3"]),
        ("fixed vllm-project/vllm-omni#9698 too", ["vllm-project/vllm-omni#9698"]),
        ("resolves https://github.com/o/r/pull/77", ["https://github.com/o/r/pull/77"]),
        ("multi-video correction (vLLM-Omni PR 9241)", []),
        ("the fix in #9241 was reviewed", []),
    ],
)
def test_references_after_closing_keywords_are_isolated(text: str, refs: list[str]) -> None:
    parts = segments(text)
    assert "".join(p.text for p in parts) == text  # nothing added, nothing lost
    assert [p.text for p in parts if p.ref] == refs
    html, n = html_text(text)
    md, m = markdown_text(text)
    assert n == m == len(refs)
    assert find_closing_references(html) == []
    assert find_closing_references(md) == []


def test_html_text_escapes_everything() -> None:
    out, n = html_text("<img src=x onerror=\"alert(1)\"> & 'q'")
    assert n == 0
    assert out == "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; &#x27;q&#x27;"


def test_markdown_text_is_inert() -> None:
    out, _ = markdown_text("**b** _i_ `c` [l](u) <b> a|b ~s~ &amp; #h @bob x@y.z")
    assert out == (
        "\\*\\*b\\*\\* \\_i\\_ \\`c\\` \\[l\\](u) \\<b\\> a\\|b \\~s\\~ \\&amp; \\#h `@bob` x@y.z"
    )


def test_markdown_line_start_stops_block_markup() -> None:
    assert markdown_line_start("- item") == "\\- item"
    assert markdown_line_start("12. item") == "12\\. item"
    assert markdown_line_start("    code") == "code"
    assert markdown_line_start("plain - text") == "plain - text"


def test_markdown_code_spans_hold_backticks() -> None:
    assert markdown_code("a`b") == "``a`b``"
    assert markdown_code("`x`") == "`` `x` ``"


def test_newlines_and_control_characters_cannot_break_lines() -> None:
    out, _ = markdown_text("one\n# two\r\n\x1b[31mthree")
    assert "\n" not in out
    assert out == "one \\# two  \\[31mthree"


def test_large_campaigns_draw_every_request_into_one_embedded_image() -> None:
    pytest.importorskip("matplotlib")
    from replay.report.html.charts.latency import INDIVIDUAL_MARKS_LIMIT, latency_chart
    from replay.report.html.charts.marks import ArmPanel, ServerPoints

    n = INDIVIDUAL_MARKS_LIMIT  # per server: two servers exceed the limit together
    servers = tuple(
        ServerPoints(
            server=f"s{k}",
            warmups=(200.0, 150.0),
            measured_ok=tuple(100.0 + (i % 17) / 10 for i in range(n // 2)),
            measured_failed=(130.0,),
            mean_s=100.8,
        )
        for k in range(2)
    )
    chart = latency_chart([ArmPanel("candidate", "candidate", 100.8, servers)], "big")
    assert not chart.individual
    assert chart.marks["measured"] == n
    assert chart.marks["warmup"] == 4
    assert chart.marks["failed"] == 2
    # The request marks are one embedded PNG (nothing fetched); the means stay vectors.
    assert chart.svg.count('xlink:href="data:image/png;base64,') == 1
    assert not re.findall(r'id="big-measured-\d{4}"', chart.svg)
    assert len(re.findall(r'id="big-servermean-\d{4}"', chart.svg)) == 2
    assert not re.findall(r'href="(?!#|data:)', chart.svg)


def test_charts_are_deterministic_and_prefixed() -> None:
    pytest.importorskip("matplotlib")
    from replay.report.html.charts.latency import latency_chart
    from replay.report.html.charts.marks import ArmPanel, ServerPoints

    panel = ArmPanel(
        "baseline <b>",
        "baseline",
        10.0,
        (ServerPoints("--> fixes #1", (12.0,), (10.0,), (), 10.0),),
    )
    a, b = latency_chart([panel], "c1"), latency_chart([panel], "c1")
    assert a.svg == b.svg
    assert a.svg.startswith("<svg ")
    ids = re.findall(r'\bid="([^"]+)"', a.svg)
    assert ids and all(i.startswith("c1-") for i in ids)
    # Glyphs are paths and comments are gone: bundle text never reaches the SVG as text.
    assert "<!--" not in a.svg
    assert "fixes" not in a.svg
    assert "<b>" not in a.svg
    assert "<metadata>" not in a.svg
    assert "<style" not in a.svg
