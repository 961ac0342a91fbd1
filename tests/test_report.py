"""``bundle report``: the HTML and Markdown report of a sealed bundle.

Expected figures are the published literals of ``/work/shared/docs/product.md``
("Published figures of the seed campaign") or counts derived from the plan it
describes (four servers, two warmups plus three measured requests each: 8
warmups and 12 measured requests); none is copied from the code under test.
The HTML is read back with the standard library's :mod:`html.parser`.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bundler.errors import CouldNotRunError, IntegrityError, UsageError
from bundler.format.trust import Trust
from bundler.lint_text import find_closing_references
from bundler.seal import seal_campaign
from replay.report.html.render import render_bundle
from reprobundle.cli.report_cmd import report_command
from tests.campaign_builder import mark_rerun_of
from tests.conftest import Keys, make_keys

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "samples" / "h3-ref2va-5s"
MINI = ROOT / "samples" / "media-mini"

pytestmark = pytest.mark.skipif(
    not (SEED / "campaign.json").exists(), reason="sample campaign not present"
)
pytest.importorskip("matplotlib", reason="the HTML report needs matplotlib (the report extra)")

SECTIONS = {
    "headline",
    "claims",
    "trials",
    "quality",
    "sources",
    "attempts",
    "conformance",
    "lifecycle",
    "telemetry",
    "scorer",
    "signatures",
    "artifacts",
    "not-claimed",
}

_VOID = {"meta", "br", "img", "input", "link", "hr", "source", "wbr", "col", "area", "base"}


@dataclass
class CellText:
    """One table cell."""

    table: str
    row: int
    cls: str
    text: str


@dataclass
class Page:
    """What the parser found."""

    title: str = ""
    section_ids: list[str] = field(default_factory=list)
    section_text: dict[str, str] = field(default_factory=dict)
    elements: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    cells: list[CellText] = field(default_factory=list)
    group_uses: dict[str, list[str]] = field(default_factory=dict)
    svg_ids: list[str] = field(default_factory=list)
    limits: dict[str, list[str]] = field(default_factory=dict)

    def text(self, section: str) -> str:
        """The visible text of a section, whitespace collapsed."""
        return " ".join(self.section_text.get(section, "").split())

    def table(self, table_id: str) -> list[list[CellText]]:
        """The rows of a table (body cells only)."""
        rows: dict[int, list[CellText]] = {}
        for c in self.cells:
            if c.table == table_id:
                rows.setdefault(c.row, []).append(c)
        return [rows[k] for k in sorted(rows)]


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self.stack: list[tuple[str, dict[str, str]]] = []
        self.section: str | None = None
        self.table: str = ""
        self.row = -1
        self.cell: CellText | None = None
        self.in_title = False
        self.in_limit_li = False

    def _inside(self, tag: str) -> bool:
        return any(t == tag for t, _ in self.stack)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.page.elements.append((tag, a))
        if self._inside("svg") and "id" in a:
            self.page.svg_ids.append(a["id"])
        if tag == "use":
            href = a.get("xlink:href") or a.get("href") or ""
            for t, pa in reversed(self.stack):
                if t == "g" and "id" in pa:
                    self.page.group_uses.setdefault(pa["id"], []).append(href)
                    break
        if tag in _VOID:
            return
        self.stack.append((tag, a))
        if tag == "section":
            self.section = a.get("id", "")
            self.page.section_ids.append(self.section)
            self.page.section_text[self.section] = ""
        elif tag == "table":
            self.table = a.get("id", "")
            self.row = -1
        elif tag == "tr" and self._inside("tbody"):
            self.row += 1
        elif tag == "td":
            self.cell = CellText(self.table, self.row, a.get("class", ""), "")
        elif tag == "title" and not self._inside("svg"):
            self.in_title = True
        elif tag == "li" and any(
            t == "div" and pa.get("class") == "limits" for t, pa in self.stack[:-1]
        ):
            self.in_limit_li = True
            if self.section is not None:
                self.page.limits.setdefault(self.section, []).append("")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.page.elements.append((tag, a))
        if self._inside("svg") and "id" in a:
            self.page.svg_ids.append(a["id"])
        if tag == "use":
            href = a.get("xlink:href") or a.get("href") or ""
            for t, pa in reversed(self.stack):
                if t == "g" and "id" in pa:
                    self.page.group_uses.setdefault(pa["id"], []).append(href)
                    break

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID:
            return
        while self.stack:
            t, _ = self.stack.pop()
            if t == tag:
                break
        if tag == "td" and self.cell is not None:
            self.cell.text = " ".join(self.cell.text.split())
            self.page.cells.append(self.cell)
            self.cell = None
        elif tag == "section":
            self.section = None
        elif tag == "table":
            self.table = ""
        elif tag == "title":
            self.in_title = False
        elif tag == "li":
            self.in_limit_li = False

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.page.title += data
        if self._inside("svg") or self._inside("style"):
            return
        if self.section is not None:
            self.page.section_text[self.section] += data
        if self.cell is not None:
            self.cell.text += data
        if self.in_limit_li and self.section is not None:
            self.page.limits[self.section][-1] += data


def parse_page(html: str) -> Page:
    """Parse a report page."""
    p = _Parser()
    p.feed(html)
    p.close()
    return p.page


# ----------------------------------------------------------------------------- fixtures


@dataclass(frozen=True)
class Sealed:
    """A sealed bundle and the key pair that signed it."""

    path: Path
    keys: Keys


def seal(campaign: Path, out_dir: Path, name: str = "author") -> Sealed:
    """Seal ``campaign`` into ``out_dir`` with a fresh key pair."""
    out_dir.mkdir(parents=True, exist_ok=True)
    keys = make_keys(out_dir, name)
    out = out_dir / f"{campaign.name}.bundle"
    seal_campaign(campaign, out, keys=[keys.private])
    return Sealed(out, keys)


def edited_seed(tmp: Path, edit: Any) -> Path:
    """A copy of the seed campaign, changed by ``edit(dir)``."""
    d = tmp / "h3-ref2va-5s"
    shutil.copytree(SEED, d)
    edit(d)
    return d


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Sealed:
    return seal(SEED, tmp_path_factory.mktemp("seed"))


@pytest.fixture(scope="module")
def seed_html(seed: Sealed) -> str:
    return render_bundle(seed.path, "html", trust=Trust.keys([seed.keys.public])).text


@pytest.fixture(scope="module")
def seed_page(seed_html: str) -> Page:
    return parse_page(seed_html)


@pytest.fixture(scope="module")
def seed_md(seed: Sealed) -> str:
    return render_bundle(seed.path, "md", trust=Trust.keys([seed.keys.public])).text


def _hostile_sources(d: Path) -> None:
    rows = [json.loads(x) for x in (d / "sources.jsonl").read_text().splitlines()]
    rows[3]["evidence"] = "This fixes #9241 for the multi-video path; see @octocat's note"
    rows[3]["optimization"] = "<script>alert(1)</script> | **bold** [x](https://example.invalid)"
    rows[3]["evidence_limit"] = "Closes vllm-project/vllm-omni#9698, resolved #3"
    (d / "sources.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Sealed:
    tmp = tmp_path_factory.mktemp("hostile")
    return seal(edited_seed(tmp, _hostile_sources), tmp / "out")


# ----------------------------------------------------------------------------- the seed report


def test_headline_shows_the_published_figures_and_their_derivation(seed_page: Page) -> None:
    text = seed_page.text("headline")
    # product.md: arm means 407.27 and 108.12 s; 73.45 % lower; 3.77x speedup.
    assert "407.27 → 108.12 s" in text
    assert "73.45 %" in text
    assert "3.77×" in text
    # 26 requests, 14 comparisons, 32 worker exits, all passing; HBM +3.10 %.
    assert "26 / 26" in text
    assert "14 / 14" in text
    assert "32 / 32" in text
    assert "+3.10 %" in text
    assert "CONFIRMED (exit 0)" in text
    # The derivation: server means -> arm means -> percent lower and speedup.
    for server, mean in (
        ("baseline-1", "396.30"),
        ("baseline-2", "418.24"),
        ("candidate-1", "106.66"),
        ("candidate-2", "109.58"),
    ):
        assert f"Server mean of {server}" in text
        assert f"= {mean} s" in text
    assert "(396.30 + 418.24) / 2 = 407.27 s" in text
    assert "(106.66 + 109.58) / 2 = 108.12 s" in text
    assert "(1 − 108.12 / 407.27) × 100 = 73.45 %" in text
    assert "407.27 / 108.12 = 3.77×" in text
    # Each step names its claim and that claim's status.
    assert text.count("confirmed") >= 8


def test_every_section_is_present_with_its_evidence_limit(seed_page: Page) -> None:
    assert set(seed_page.section_ids) == SECTIONS
    assert len(seed_page.section_ids) == len(SECTIONS)  # each once
    for s in SECTIONS:
        assert seed_page.limits.get(s), f"section {s} states no evidence limit"
        assert all(x.strip() for x in seed_page.limits[s])
    assert "media" not in seed_page.section_ids
    assert "rerun" not in seed_page.section_ids
    assert "MiniMax-H3 Ref2VA" in seed_page.title


def test_claims_table_lists_every_claim_with_its_status(seed_page: Page) -> None:
    rows = seed_page.table("claims-table")
    assert len(rows) == 17  # claims.json of the seed sample: 17 claims
    assert all(r[0].text == "confirmed" for r in rows)
    by_id = {r[1].text: r for r in rows}
    assert by_id["closest-audio-cosine"][3].text == "0.813411"
    assert by_id["closest-audio-cosine"][4].text == "0.813411"
    assert by_id["percent-lower"][3].text == "73.45 %"
    assert by_id["hbm-peak-change"][4].text == "3.10"


def test_chart_has_one_mark_per_measured_request_and_distinct_warmups(seed_html: str) -> None:
    page = parse_page(seed_html)
    ids = page.svg_ids
    measured = [i for i in ids if re.fullmatch(r"latency-measured-\d{4}", i)]
    warmups = [i for i in ids if re.fullmatch(r"latency-warmup-\d{4}", i)]
    # 4 servers x 3 measured requests, 4 x 2 warmups (product.md's plan).
    assert len(measured) == 12
    assert len(warmups) == 8
    assert not [i for i in ids if i.startswith("latency-failed-")]
    assert len([i for i in ids if re.fullmatch(r"latency-servermean-\d{4}", i)]) == 4
    assert len([i for i in ids if re.fullmatch(r"latency-armmean-\d{4}", i)]) == 2
    # Each mark draws exactly one marker, and warmups use another marker than measured ones.
    measured_refs = {r for i in measured for r in page.group_uses[i]}
    warmup_refs = {r for i in warmups for r in page.group_uses[i]}
    assert all(len(page.group_uses[i]) == 1 for i in measured + warmups)
    assert measured_refs and warmup_refs and not measured_refs & warmup_refs
    assert len(ids) == len(set(ids)), "ids must be unique in the page"


def test_chart_marks_sit_at_the_recorded_latencies(seed: Sealed, seed_html: str) -> None:
    """The 12 measured marks' heights order exactly as the 12 receipts' latencies do."""
    receipts = [json.loads(x) for x in (SEED / "receipts.jsonl").read_text().splitlines()]
    measured = [r for r in receipts if r["attempt_id"] == "final-2" and r["phase"] == "measured"]
    # The baseline panel comes first; its servers in run order (baseline-1 then baseline-2),
    # each server's requests in seq order.
    base = sorted(
        (r for r in measured if r["arm"] == "baseline"),
        key=lambda r: (r["server"] != "baseline-1", r["seq"]),
    )
    ys = []
    for n in range(1, 7):
        g = re.search(rf'<g id="latency-measured-{n:04d}">(.*?)</g>', seed_html, re.DOTALL)
        assert g is not None
        y = re.search(r'<use [^>]*y="([0-9.]+)"', g.group(1))
        assert y is not None
        ys.append(float(y.group(1)))
    # SVG y grows downwards: a longer request is drawn higher (smaller y).
    by_height = sorted(range(6), key=lambda i: -ys[i])
    by_latency = sorted(range(6), key=lambda i: base[i]["e2e_s"])
    assert by_height == by_latency


def test_quality_table_shows_each_margin_and_highlights_the_closest(seed_page: Page) -> None:
    text = seed_page.text("quality")
    # product.md: closest margins audio spectral cosine 0.813411 (gate 0.80) and SSIM 0.976
    # (gate 0.97); largest LPIPS 0.026 (gate 0.20).
    assert "0.813411 against the gate >= 0.8: margin +0.013411" in text
    assert "0.976 against the gate >= 0.97: margin +0.006" in text
    gates = {r[0].text: r for r in seed_page.table("gates-table")}
    assert gates["lpips-max"][4].text.startswith("0.026 ")
    assert gates["lpips-max"][5].text == "+0.174"  # 0.20 - 0.026
    assert gates["ssim-min"][7].text == "CLOSE"
    assert gates["audio-cosine-min"][7].text == "CLOSE"
    assert gates["lpips-max"][7].text == ""
    matrix = seed_page.table("quality-matrix")
    assert len(matrix) == 14  # 14 comparisons
    closest = sorted(c.text for row in matrix for c in row if c.cls.startswith("closest"))
    # One closest cell per inequality gate (5 of the 7 gates); equality gates have none.
    assert len(closest) == 5
    assert "0.813411 (+0.013411)" in closest
    assert "0.976 (+0.006)" in closest
    assert "0.026 (+0.174)" in closest


def test_sources_table_shows_origin_adoption_evidence_and_limit(seed_page: Page) -> None:
    rows = {r[0].text: r for r in seed_page.table("sources-table")}
    assert set(rows) == {
        "cache-dit-profile",
        "consolidated-engine-changes",
        "device-kv-pilot",
        "multi-video-correction",
    }
    kv = rows["device-kv-pilot"]
    assert kv[3].text == "not adopted"
    assert "44.86 % lower" in kv[4].text  # product.md: one pair, 44.86 % lower, not enabled
    assert "one pair" in kv[5].text
    assert rows["cache-dit-profile"][3].text == "adopted"
    assert rows["multi-video-correction"][2].text == "vLLM-Omni PR 9241"


def test_attempts_lifecycle_telemetry_scorer_signatures_artifacts(
    seed: Sealed, seed_page: Page
) -> None:
    attempts = {r[0].text: r for r in seed_page.table("attempts-table")}
    assert {a: r[1].text for a, r in attempts.items()} == {
        "audio-own-1": "rejected",
        "rpc-1": "rejected",
        "final-1": "interrupted",
        "final-2": "accepted",
    }
    assert "deadline exceeded" in attempts["rpc-1"][2].text
    assert attempts["final-2"][5].text == "12"  # latency samples of the accepted attempt
    assert "Isolated:" in seed_page.text("attempts")
    lifecycle = {r[0].text: r for r in seed_page.table("lifecycle-table")}
    assert lifecycle["baseline"][7].text == "60 / 90"  # product.md: matched 60/90 s budgets
    assert int(lifecycle["baseline"][2].text) + int(lifecycle["candidate"][2].text) == 32
    assert "+3.10 %" in seed_page.text("telemetry")
    scorer = seed_page.table("scorer-table")
    assert {r[2].text for r in scorer} == {
        "7be5be791159472b1fbf3c69796f7cb30dca7ad8466c2df70058c37116cdee02",
        "df73285e35b22355a2df87cdb6b70b343713b667eddbda73e1977e0c860835c0",
    }
    sig = seed_page.table("signatures-table")
    assert [(r[1].text, r[2].text, r[3].text) for r in sig] == [
        (seed.keys.key_id, "valid", seed.keys.key_id)
    ]
    artifacts = seed_page.table("artifacts-table")
    assert len(artifacts) == 32  # 26 media + 2 weights + 4 host logs
    assert all(r[5].text == "external: not looked for" for r in artifacts)
    assert "never inside the bundle" in seed_page.text("artifacts")
    not_claimed = {r[0].text for r in seed_page.table("not-claimed-table")}
    assert {"p95/p99 latency", "throughput", "CUDA result", "15-second result"} <= not_claimed


def test_html_is_self_contained(seed_html: str, seed_page: Page) -> None:
    tags = {t for t, _ in seed_page.elements}
    assert not tags & {"script", "link", "img", "iframe", "object", "embed", "base", "form"}
    for _tag, attrs in seed_page.elements:
        for name in ("src", "href", "xlink:href", "action", "srcset", "poster"):
            if name in attrs:
                assert attrs[name].startswith(("#", "data:")), (name, attrs[name])
    assert "@import" not in seed_html
    assert re.findall(r"url\((?!#)", seed_html) == []
    csp = [
        a["content"]
        for t, a in seed_page.elements
        if a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert csp == ["default-src 'none'; style-src 'unsafe-inline'; img-src data:"]


def test_report_text_never_carries_closing_syntax(seed_html: str, seed_md: str) -> None:
    assert find_closing_references(seed_html) == []
    assert find_closing_references(seed_md) == []


def test_markdown_passes_the_lint_text_command(seed_md: str, tmp_path: Path) -> None:
    from reprobundle.cli import main

    f = tmp_path / "body.md"
    f.write_text(seed_md, encoding="utf-8")
    res = CliRunner().invoke(main, ["lint-text", str(f)])
    assert res.exit_code == 0, res.output


def test_markdown_has_the_same_sections_and_figures(seed_md: str) -> None:
    # A PR body: the headline and the gates open, first; every other section folded.
    assert seed_md.index("## Headline") < seed_md.index("## Quality gates")
    assert seed_md.index("## Quality gates") < seed_md.index("<details><summary><b>")
    first = seed_md.split("## Headline", 1)[1].split("\n\n")[1]
    assert first == (
        "**CONFIRMED (exit 0) — re-derived from the author's receipts; "
        "media not re-scored; hardware not re-run**"
    )
    for title in ("## Headline", "## Quality gates"):
        assert title in seed_md
    for title in (
        "Claims",
        "Repeated trials and latency",
        "Sources and benefit",
        "Attempts",
        "Plan conformance",
        "Lifecycle: worker exits",
        "Telemetry: peak HBM",
        "Scorer identity",
        "Signatures and integrity",
        "External artifacts",
        "What is not claimed",
    ):
        assert f"<details><summary><b>{title}</b>" in seed_md
    assert seed_md.count("<details>") == seed_md.count("</details>")
    for figure in ("407.27 → 108.12 s", "73.45 %", "3.77×", "0.813411", "3.10 %"):
        assert figure in seed_md
    assert "| baseline | baseline-1 | 612.84, 431.57 | 394.62, 398.05, 396.23 |" in seed_md
    assert seed_md.count("Evidence limit:") == len(SECTIONS)
    assert "<svg" not in seed_md


def test_output_is_byte_identical_across_runs_and_paths(
    seed: Sealed, seed_html: str, seed_md: str, tmp_path: Path
) -> None:
    copy = tmp_path / "elsewhere" / seed.path.name
    copy.parent.mkdir()
    shutil.copyfile(seed.path, copy)
    assert render_bundle(copy, "html", trust=Trust.keys([seed.keys.public])).text == seed_html
    assert render_bundle(copy, "md", trust=Trust.keys([seed.keys.public])).text == seed_md


# ----------------------------------------------------------------------------- hostile text


def test_closing_syntax_in_a_source_row_is_neutralized_and_flagged(hostile: Sealed) -> None:
    html = render_bundle(hostile.path, "html", trust=Trust.keys([hostile.keys.public])).text
    md = render_bundle(hostile.path, "md", trust=Trust.keys([hostile.keys.public])).text
    assert find_closing_references(html) == []
    assert find_closing_references(md) == []
    page = parse_page(html)
    row = next(r for r in page.table("sources-table") if r[0].text == "multi-video-correction")
    # The author's words are all there, the reference shown as code and marked.
    assert row[4].text == (
        "This fixes #9241 [closing syntax: reference shown as code] for the multi-video path; "
        "see @octocat's note"
    )
    assert '<code class="neutralized">#9241</code>' in html
    assert 'Closes <code class="neutralized">vllm-project/vllm-omni#9698</code>' in html
    assert "3 closing reference(s) in the bundle's text are shown as code" in html
    # Markdown: the reference and the mention are code spans (GitHub links neither).
    assert "This fixes `#9241` \\[closing syntax: reference shown as code\\]" in md
    assert "`@octocat`" in md
    assert "resolved `#3`" in md


def test_markup_in_bundle_text_is_escaped(hostile: Sealed) -> None:
    html = render_bundle(hostile.path, "html", trust=Trust.keys([hostile.keys.public])).text
    page = parse_page(html)
    assert "script" not in {t for t, _ in page.elements}
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    row = next(r for r in page.table("sources-table") if r[0].text == "multi-video-correction")
    assert row[1].text == "<script>alert(1)</script> | **bold** [x](https://example.invalid)"
    assert not [a for t, a in page.elements if t == "a" and "example.invalid" in a.get("href", "")]
    md = render_bundle(hostile.path, "md", trust=Trust.keys([hostile.keys.public])).text
    line = next(x for x in md.splitlines() if "multi-video-correction" in x)
    # The bare URL is a code span too: GitHub would otherwise make it a live link.
    assert "\\<script\\>alert(1)\\</script\\> \\| \\*\\*bold\\*\\* \\[x\\](`https://" in line


# ----------------------------------------------------------------------------- other outcomes


def test_contradicted_claim_shows_claimed_and_recomputed(tmp_path: Path) -> None:
    def edit(d: Path) -> None:
        claims = json.loads((d / "claims.json").read_text())
        next(c for c in claims if c["claim_id"] == "arm-mean-baseline")["value"] = "407.28"
        (d / "claims.json").write_text(json.dumps(claims))

    s = seal(edited_seed(tmp_path, edit), tmp_path / "out")
    rendered = render_bundle(s.path, "html", trust=Trust.keys([s.keys.public]))
    assert rendered.result.exit_code == 4
    page = parse_page(rendered.text)
    row = next(r for r in page.table("claims-table") if r[1].text == "arm-mean-baseline")
    assert (row[0].text, row[3].text, row[4].text) == ("contradicted", "407.28 s", "407.27")
    head = page.text("headline")
    assert "CONTRADICTED (exit 4)" in head
    assert "claim arm-mean-baseline contradicted: claimed 407.28 s, recomputed 407.27" in head


def test_without_a_scorer_identity_lpips_is_unattested(tmp_path: Path) -> None:
    s = seal(edited_seed(tmp_path, lambda d: (d / "scorer.json").unlink()), tmp_path / "out")
    rendered = render_bundle(s.path, "md", trust=Trust.keys([s.keys.public]))
    assert rendered.result.exit_code == 5
    assert "## Scorer identity (absent)" in rendered.text
    assert "unverifiable" in rendered.text
    assert find_closing_references(rendered.text) == []


def test_untrusted_bundles_are_refused_or_marked(seed: Sealed, tmp_path: Path) -> None:
    with pytest.raises(IntegrityError, match="no trusted key verified it"):
        render_bundle(seed.path, "md")
    other = make_keys(tmp_path, "stranger")
    with pytest.raises(IntegrityError, match="untrusted"):
        render_bundle(seed.path, "md", trust=Trust.keys([other.public]))
    md = render_bundle(seed.path, "md", trust=Trust.allow_unsigned()).text
    assert "UNSIGNED/UNTRUSTED" in md
    # Every replayed section's evidence limit leads with the trust note.
    assert md.count("- UNSIGNED/UNTRUSTED: no trusted key verified") >= 8


def test_a_tampered_bundle_gets_no_report(seed: Sealed, tmp_path: Path) -> None:
    bad = tmp_path / "bad.bundle"
    data = bytearray(seed.path.read_bytes())
    data[len(data) // 2] ^= 0x01
    bad.write_bytes(bytes(data))
    out = tmp_path / "r.html"
    res = CliRunner().invoke(
        report_command, [str(bad), "-o", str(out), "--key", str(seed.keys.public_path)]
    )
    assert res.exit_code == 1, res.output
    assert not out.exists()


def test_unknown_format_is_a_usage_error(seed: Sealed) -> None:
    with pytest.raises(UsageError, match="unknown report format"):
        render_bundle(seed.path, "pdf", trust=Trust.keys([seed.keys.public]))


def test_markdown_needs_no_matplotlib(
    seed: Sealed, seed_md: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A None entry makes "import matplotlib" raise ImportError, as if it were not installed.
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert render_bundle(seed.path, "md", trust=Trust.keys([seed.keys.public])).text == seed_md
    with pytest.raises(CouldNotRunError, match=r"pip install 'matplotlib>=3.8'"):
        render_bundle(seed.path, "html", trust=Trust.keys([seed.keys.public]))


# ----------------------------------------------------------------------------- the command


def test_cli_writes_html_and_markdown(
    seed: Sealed, seed_html: str, seed_md: str, tmp_path: Path
) -> None:
    out = tmp_path / "report.html"
    key = str(seed.keys.public_path)
    res = CliRunner().invoke(report_command, [str(seed.path), "-o", str(out), "--key", key])
    assert res.exit_code == 0, res.output
    assert out.read_text(encoding="utf-8") == seed_html
    assert "CONFIRMED (exit 0)" in res.output
    trusted = tmp_path / "trusted.txt"
    trusted.write_text(
        "# the author\n" + seed.keys.public_path.read_text().strip() + "\n"
        if seed.keys.public_path.read_text().startswith("ssh-ed25519")
        else f"# the author\n{seed.keys.public_path}\n"
    )
    md = tmp_path / "body.md"
    res = CliRunner().invoke(
        report_command,
        [str(seed.path), "-o", str(md), "--format", "md", "--trusted-keys", str(trusted)],
    )
    assert res.exit_code == 0, res.output
    assert md.read_text(encoding="utf-8") == seed_md
    assert not list(tmp_path.glob(".*.partial")), "atomic write leaves no temp file"


def test_cli_errors(seed: Sealed, tmp_path: Path) -> None:
    key = str(seed.keys.public_path)
    run = CliRunner().invoke
    res = run(report_command, [str(seed.path), "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 2
    assert "--allow-unsigned" in res.output
    res = run(
        report_command,
        [str(seed.path), "-o", str(tmp_path / "r.html"), "--key", key, "--scorer-weights", "."],
    )
    assert res.exit_code == 2
    assert "--scorer-weights needs --media" in res.output
    res = run(
        report_command,
        [str(seed.path), "-o", str(tmp_path / "r.html"), "--key", key, "--tolerance", "0.2"],
    )
    assert res.exit_code == 2
    assert "--tolerance needs --against" in res.output
    res = run(report_command, [str(seed.path), "-o", str(tmp_path / "no" / "r.html"), "--key", key])
    assert res.exit_code == 3
    assert "r.html" in res.output
    assert not (tmp_path / "r.html").exists()


# ----------------------------------------------------------------------------- optional sections


def test_media_section_and_verdict_come_from_the_one_replay(tmp_path: Path) -> None:
    pytest.importorskip("av", reason="media replay needs PyAV")
    mini = seal(MINI, tmp_path / "mini")
    out = tmp_path / "r.html"
    args = [str(mini.path), "-o", str(out), "--key", str(mini.keys.public_path)]
    res = CliRunner().invoke(report_command, [*args, "--media", str(MINI / "media"), "--json"])
    doc = json.loads(res.output)
    # samples/media-mini's design: cmp-02's candidate audio is truncated, so its coverage
    # fails: the re-scored media contradict the bundle, and the one verdict says so.
    assert doc["outcome"] == "CONTRADICTED"
    assert res.exit_code == 4 == doc["exit_code"]
    assert any(f.startswith("media: ") and "cmp-02" in f for f in doc["failures"])
    assert "media re-scored from the raw files" in doc["checks_done"]
    page = parse_page(out.read_text(encoding="utf-8"))
    assert page.section_ids[-1] == "media"
    assert page.limits["media"]
    text = page.text("media")
    assert "Media replay verdict FAIL" in text
    comps = {r[0].text: r for r in page.table("media-comparisons-table")}
    assert comps["cmp-01"][3].text == "ok"
    assert comps["cmp-02"][3].text.startswith("FAIL: audio/samples-cover-duration [candidate]")
    assert "may be the replay of another bundle" not in text
    assert "CONTRADICTED (exit 4)" in page.text("headline")
    # Markdown: the same verdict, media section included.
    md = tmp_path / "r.md"
    res = CliRunner().invoke(
        report_command,
        [
            str(mini.path),
            "-o",
            str(md),
            "--format",
            "md",
            "--key",
            str(mini.keys.public_path),
            "--media",
            str(MINI / "media"),
        ],
    )
    assert res.exit_code == 4
    body = md.read_text(encoding="utf-8")
    assert "CONTRADICTED (exit 4)" in body
    assert "Media replay verdict **FAIL**" in body
    assert find_closing_references(body) == []


def test_rerun_section_from_against(seed: Sealed, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    # A rerun with the seed's own receipts (kind rerun, naming the seed bundle's
    # SHA-256): the same speedup, so the effect is reproduced.
    camp = Path(shutil.copytree(SEED, tmp_path / "rerun"))
    doc = mark_rerun_of(json.loads((camp / "campaign.json").read_text("utf-8")), seed.path)
    (camp / "campaign.json").write_text(json.dumps(doc), "utf-8")
    rerun = tmp_path / "rerun.bundle"
    seal_campaign(camp, rerun, keys=[seed.keys.private])
    res = CliRunner().invoke(
        report_command,
        [
            str(rerun),
            "-o",
            str(out),
            "--key",
            str(seed.keys.public_path),
            "--against",
            str(seed.path),
        ],
    )
    assert res.exit_code == 0, res.output
    page = parse_page(out.read_text(encoding="utf-8"))
    assert page.section_ids[-1] == "rerun"
    effects = page.table("rerun-effects-table")
    assert [c.text for c in effects[0][:2]] == ["baseline → candidate", "407.27 → 108.12 s"]
