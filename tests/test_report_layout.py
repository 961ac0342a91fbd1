"""Layout rules of both report forms: empty tables, folded listings, the Markdown PR body."""

from __future__ import annotations

from replay.report.html.html import render_html
from replay.report.html.view import FOLD_ROWS, Para, Report, Section, Table, cell, rich
from replay.report.markdown import MD_LISTING_ROWS, render_markdown


def _report(*sections: Section) -> Report:
    return Report("t", "s", "CONFIRMED", 0, sections, "test")


def _rows(n: int, style: str = "") -> tuple[tuple[object, ...], ...]:
    return tuple((cell(f"r{i}", style if i == n - 1 else ""),) for i in range(n))


def test_an_empty_table_is_a_full_width_sentence_not_a_header_row() -> None:
    t = Table(("a", "b"), (), caption="Deviations", empty="not evidenced", table_id="dev")
    page = render_html(_report(Section("x", "X", (t,))))
    assert "<table" not in page
    assert '<p class="empty" id="dev"><strong>Deviations</strong>: not evidenced</p>' in page
    md = render_markdown(_report(Section("x", "X", (t,), summary=True)))
    assert "| a | b |" not in md
    assert "*Deviations*: not evidenced" in md


def test_long_tables_fold_unless_a_row_is_alarming() -> None:
    quiet = Table(("a",), _rows(FOLD_ROWS + 1), caption="Long")  # type: ignore[arg-type]
    loud = Table(("a",), _rows(FOLD_ROWS + 1, "bad"), caption="Loud")  # type: ignore[arg-type]
    short = Table(("a",), _rows(FOLD_ROWS), caption="Short")  # type: ignore[arg-type]
    page = render_html(_report(Section("x", "X", (quiet, loud, short))))
    assert page.count("<details>") == 1
    assert f"<summary>Long ({FOLD_ROWS + 1} rows)</summary>" in page


def test_markdown_opens_summary_and_failing_sections_and_folds_the_rest() -> None:
    listing = Table(("a",), _rows(30), caption="Every thing", detail=True)  # type: ignore[arg-type]
    report = _report(
        Section("head", "Headline", (Para(rich("verdict")),), summary=True),
        Section("ok", "Quiet", (listing,), status="fine", status_style="good"),
        Section("bad", "Broken", (Para(rich("x")),), status="FAIL", status_style="bad"),
    )
    md = render_markdown(report)
    assert "## Headline" in md
    assert "## Broken (FAIL)" in md  # a failure is never folded
    assert "<details><summary><b>Quiet</b> (fine)</summary>" in md
    assert md.index("## Broken") < md.index("<b>Quiet</b>")
    # A long listing shows its first rows and says where the rest are.
    assert md.count("| r") == MD_LISTING_ROWS
    assert f"… and {30 - MD_LISTING_ROWS} more rows" in md
