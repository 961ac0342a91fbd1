"""Serving campaigns read as serving results, in every view (issue 24 item 3, issue 23 item 5).

Real vLLM 0.33.0 and AIPerf 0.13.0 outputs (``tests/fixtures/real_writers/``) are
imported, sealed and replayed; then every view (replay text, ``-v``, ``--json``, the
Markdown and HTML reports) is read:

- no ``None``, no empty list ``()``, no empty order and no server-level zero
  ("0 measured samples", "0 external artifact(s)") that is not true of the campaign,
  and no red ABSENT where nothing was expected: sections that do not apply collapse to
  one line saying why;
- the headline is the serving result: per load point, p99 TTFT, TPOT and E2E latency
  and output throughput, baseline → candidate with the change. The expected figures
  are computed here with numpy from the tool's own per-request files (vLLM's result
  JSON arrays, AIPerf's ``profile_export.jsonl`` records), never by our code.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.real_writers_support import REAL, import_runs, read_json, seal_unsigned
from tests.real_writers_support import cli as _cli
from tests.test_report import parse_page
from tests.test_report_phone import PHONE_COLUMN_PX, _smallest_text_px

pytest.importorskip("matplotlib", reason="the HTML report needs matplotlib (the report extra)")

RUNS = ("base-c2", "base-c4", "cand-c2", "cand-c4")
TOOLS = ("vllm", "aiperf")

# What a view must never say of a serving campaign: Python's None, an empty tuple or
# list, an empty planned order or observed order, a count of server-level things that
# do not exist for it, or a red alarm where nothing was expected.
LEAKS = {
    "None": re.compile(r"\bNone\b"),
    "empty ()": re.compile(r"\(\s*\)"),
    "empty []": re.compile(r"\[\s*\]"),
    "empty order": re.compile(r"order\s*,|observed\s*-"),
    "0 measured samples": re.compile(r"\b0 (measured|latency) samples"),
    "0 requests": re.compile(r"\b0 requests\b"),
    "0 external artifact(s)": re.compile(r"\b0 external artifact"),
    "0 servers": re.compile(r"\(0 servers\)"),
    "ABSENT": re.compile(r"\bABSENT\b"),
}


def _source(tool: str, run: str) -> Path:
    return REAL / "vllm-0.33.0" / f"{run}.json" if tool == "vllm" else REAL / "aiperf-0.13.0" / run


@pytest.fixture(scope="module")
def views(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """tool -> view name -> the view's text, for an imported, sealed two-arm campaign."""
    out: dict[str, dict[str, str]] = {}
    for tool in TOOLS:
        tmp = tmp_path_factory.mktemp(f"serving-{tool}")
        res = import_runs(tmp, tool, [(run[:4], _source(tool, run)) for run in RUNS])
        assert res.returncode == 0, res.stderr
        bundle = seal_unsigned(tmp)
        got: dict[str, str] = {}
        for name, extra in (("text", []), ("verbose", ["-v"]), ("json", ["--json"])):
            rep = _cli("replay", bundle, "--allow-unsigned", *extra)
            assert rep.returncode == 0, rep.stdout + rep.stderr
            got[name] = rep.stdout
        got["md"] = _report(bundle, "md")
        got["html"] = _report(bundle, "html")
        said = _cli("report", bundle, "--allow-unsigned", "-o", tmp / "again.html")
        got["report"] = said.stdout
        said = _cli("report", bundle, "--allow-unsigned", "-o", tmp / "again.html", "--json")
        got["report-json"] = said.stdout
        out[tool] = got
    return out


def _report(bundle: Path, fmt: str) -> str:
    out = bundle.with_suffix(f".{fmt}")
    rep = _cli("report", bundle, "--allow-unsigned", "--format", fmt, "-o", out)
    assert rep.returncode == 0, rep.stderr
    return out.read_text()


def _json_strings(doc: Any) -> list[str]:
    """Every string in a JSON document (keys and values); null is JSON's own word."""
    if isinstance(doc, dict):
        return [s for k, v in doc.items() for s in (str(k), *_json_strings(v))]
    if isinstance(doc, list):
        return [s for v in doc for s in _json_strings(v)]
    return [doc] if isinstance(doc, str) else []


def _readable(view: str, text: str) -> list[str]:
    """The text a person reads in ``view``: lines, JSON strings, or the page's visible text."""
    if view in ("json", "report-json"):
        doc = json.loads(text)
        return _json_strings(doc)
    if view == "html":
        page = parse_page(text)
        return [page.text(s) for s in page.section_ids] + [page.title]
    return text.splitlines()


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("view", ["text", "verbose", "json", "md", "html", "report", "report-json"])
def test_no_view_shows_none_empty_lists_or_untrue_zeros(
    views: dict[str, dict[str, str]], tool: str, view: str
) -> None:
    found = [
        (what, line)
        for line in _readable(view, views[tool][view])
        for what, rx in LEAKS.items()
        if rx.search(line)
    ]
    assert not found, found[:5]


@pytest.mark.parametrize("tool", TOOLS)
def test_sections_that_do_not_apply_collapse_to_one_line(
    views: dict[str, dict[str, str]], tool: str
) -> None:
    text = views[tool]["text"]
    assert "latency           not applicable: serving campaign" in text
    assert "quality           not applicable: serving campaign, no gates" in text
    verbose = views[tool]["verbose"].split("\n\n")
    for title in ("LATENCY", "LIFECYCLE", "TELEMETRY", "QUALITY"):
        block = next(b for b in verbose if b.startswith(title + "\n"))
        lines = block.splitlines()
        assert len(lines) == 2 and lines[1].startswith("  not applicable: serving campaign"), block
    page = parse_page(views[tool]["html"])
    for sid in ("trials", "quality", "lifecycle", "telemetry", "scorer", "artifacts", "sources"):
        body = _section_html(views[tool]["html"], sid)
        # One neutral badge and one line: no table, no limits box, no red.
        assert re.findall(r'<span class="(badge[^"]*)"', body) == ["badge "], body
        assert body.count("<p") == 1 and "<table" not in body and "limits" not in body, body
        assert " not applicable not applicable: " in page.text(sid), page.text(sid)
    doc = json.loads(views[tool]["json"])
    assert set(doc["not_applicable"]) == {"latency", "lifecycle", "telemetry", "quality", "scorer"}
    # Not applicable is not a pass: the headline still lists them as not evidenced.
    assert "quality (no gates, no comparisons)" in doc["not_evidenced"]


def _section_html(html: str, section: str) -> str:
    m = re.search(rf'<section id="{section}">(.*?)</section>', html, re.DOTALL)
    assert m is not None
    return m.group(1)


# ----------------------------------------------------------------------------- the headline


def _vllm_figures(run: str) -> dict[str, float]:
    """p99 TTFT/TPOT/E2E (ms) and output tokens/s, with numpy over vLLM's per-request arrays."""
    d = json.loads((REAL / "vllm-0.33.0" / f"{run}.json").read_text())
    ok = np.array([e == "" for e in d["errors"]])
    ttft, lat = np.array(d["ttfts"]), np.array(d["latencies"])
    out = np.array(d["output_lens"])
    many = ok & (out > 1)
    tpot = (lat[many] - ttft[many]) / (out[many] - 1)
    return {
        "ttft_p99_ms": float(np.percentile(ttft[ok], 99)) * 1000,
        "tpot_p99_ms": float(np.percentile(tpot, 99)) * 1000,
        "e2el_p99_ms": float(np.percentile(lat[ok], 99)) * 1000,
        "output_tokens_per_s": float(out.sum()) / d["duration"],
    }


def _aiperf_figures(run: str) -> dict[str, float]:
    """The same, with numpy over AIPerf's profile_export.jsonl records (profiling phase)."""
    d = REAL / "aiperf-0.13.0" / run
    recs = [json.loads(x) for x in (d / "profile_export.jsonl").read_text().splitlines()]
    ok = [
        r["metrics"]
        for r in recs
        if r["metadata"]["benchmark_phase"] == "profiling" and r.get("error") is None
    ]
    ttft = np.array([m["time_to_first_token"]["value"] for m in ok])
    lat = np.array([m["request_latency"]["value"] for m in ok])
    out = np.array([m["output_sequence_length"]["value"] for m in ok])
    many = out > 1
    tpot = (lat[many] - ttft[many]) / (out[many] - 1)
    agg = json.loads((d / "profile_export_aiperf.json").read_text())
    window = (
        datetime.fromisoformat(agg["end_time"]) - datetime.fromisoformat(agg["start_time"])
    ).total_seconds()
    return {
        "ttft_p99_ms": float(np.percentile(ttft, 99)),
        "tpot_p99_ms": float(np.percentile(tpot, 99)),
        "e2el_p99_ms": float(np.percentile(lat, 99)),
        "output_tokens_per_s": float(out.sum()) / window,
    }


FIGURES = {"vllm": _vllm_figures, "aiperf": _aiperf_figures}
LABELS = {
    "ttft_p99_ms": "p99 TTFT",
    "tpot_p99_ms": "p99 TPOT",
    "e2el_p99_ms": "p99 E2E latency",
    "output_tokens_per_s": "output throughput",
}


@pytest.mark.parametrize("tool", TOOLS)
def test_headline_is_the_serving_result_per_load_point(
    views: dict[str, dict[str, str]], tool: str
) -> None:
    doc = json.loads(views[tool]["json"])
    changes = {c["load_point"]: c for c in doc["serving_changes"]}
    assert set(changes) == {"rinf-c2", "rinf-c4"}
    text_head = views[tool]["text"].split("\n\nSECTIONS")[0]
    md_head = views[tool]["md"].split("\n## ")[1]
    page = parse_page(views[tool]["html"])
    assert page.section_ids[:2] == ["headline", "serving"]  # the curve right after
    html_table = page.table("serving-headline-1")
    for lp in ("c2", "c4"):
        base, cand = FIGURES[tool](f"base-{lp}"), FIGURES[tool](f"cand-{lp}")
        c = changes[f"rinf-{lp}"]
        assert (c["baseline"], c["candidate"]) == ("base", "cand")
        deltas = {d["metric"]: d for d in c["deltas"]}
        assert list(deltas) == list(LABELS)
        line = next(x for x in text_head.splitlines() if x.strip().startswith(f"rinf-{lp}:"))
        col = 1 if lp == "c2" else 2
        for k, (metric, label) in enumerate(LABELS.items()):
            b, n = base[metric], cand[metric]
            change = (n - b) / b * 100
            d = deltas[metric]
            # The AIPerf window is written to the microsecond: its throughput to ~1e-6.
            rel = 1e-5 if tool == "aiperf" and metric == "output_tokens_per_s" else 1e-9
            assert d["baseline"] == pytest.approx(b, rel=rel)
            assert d["candidate"] == pytest.approx(n, rel=rel)
            assert d["change_pct"] == pytest.approx(change, rel=rel * 100)
            assert d["better"] is ((change < 0) == metric.endswith("_ms"))
            shown = f"{b:.2f} → {n:.2f}"
            assert f"{label} {shown}" in line and f"({change:+.2f} %)" in line, line
            assert f"{shown} ({change:+.2f} %)" in md_head
            assert html_table[k][col].text == f"{shown} ({change:+.2f} %)"


@pytest.mark.parametrize("tool", TOOLS)
def test_latency_throughput_chart_is_near_the_top_from_zero(
    views: dict[str, dict[str, str]], tool: str
) -> None:
    from replay.report.html.charts.svg import matplotlib_figures
    from replay.report.html.sections.serving import serving_figure

    html = views[tool]["html"]
    head_end = html.index('<section id="serving">')
    assert html.index('<section id="headline">') < head_end < html.index('id="serving-curve-')
    assert head_end < html.index('<section id="trials">')
    doc = json.loads(views[tool]["json"])
    from replay.serving.summary import ServingPoint

    points = tuple(ServingPoint(**p) for p in doc["serving"])
    with matplotlib_figures() as figure_class:
        fig = serving_figure(figure_class, points)
        ax = fig.axes[0]
        assert ax.get_xlim()[0] == 0 and ax.get_ylim()[0] == 0
        top = max(p.ttft_p99_ms or 0 for p in points)
        assert ax.get_ylim()[1] >= top
    # One layout for both screens: fitted to a 390 px phone, its smallest text is >= 10 px.
    svg = re.search(r"<svg\b.*?</svg>", html[head_end:], re.DOTALL)
    assert svg is not None and 'id="serving-curve-title"' in svg.group(0)
    assert _smallest_text_px(svg.group(0), PHONE_COLUMN_PX) >= 10


def test_figures_beyond_a_double_are_not_re_derivable_never_infinity(tmp_path: Path) -> None:
    # Valid but absurd: end-to-end latencies near the largest double. In ms they leave
    # the range of a double; the JSON used to carry Infinity (not JSON at all).
    for run in ("base-c2", "cand-c2"):
        d = read_json(REAL / "vllm-0.33.0" / f"{run}.json")
        if run == "cand-c2":
            d["latencies"] = [1e307 for _ in d["latencies"]]
        (tmp_path / f"{run}.json").write_text(json.dumps(d))
    arms = [("base", tmp_path / "base-c2.json"), ("cand", tmp_path / "cand-c2.json")]
    assert import_runs(tmp_path, "vllm", arms).returncode == 0
    seal_unsigned(tmp_path, "b")
    rep = _cli("replay", tmp_path / "b", "--allow-unsigned", "--json")
    assert rep.returncode == 4 and "Traceback" not in rep.stderr  # the E2E claims contradicted

    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in --json")

    doc = json.loads(rep.stdout, parse_constant=refuse)
    cand = next(p for p in doc["serving"] if p["arm"] == "cand")
    assert cand["e2el_p99_ms"] is None and cand["ttft_p99_ms"] is not None
    e2e = next(d for d in doc["serving_changes"][0]["deltas"] if d["metric"] == "e2el_p99_ms")
    assert e2e["candidate"] is None and e2e["change_pct"] is None
    text = _cli("replay", tmp_path / "b", "--allow-unsigned").stdout
    assert "p99 E2E latency " in text and " ms → not re-derivable;" in text


def test_a_figure_too_large_for_a_chart_axis_gives_a_sentence_not_a_traceback(
    tmp_path: Path,
) -> None:
    # 1.5e305 s is 1.5e308 ms: a double, but the chart's headroom (x 1.18) overflows it.
    for run in ("base-c2", "cand-c2"):
        d = read_json(REAL / "vllm-0.33.0" / f"{run}.json")
        if run == "cand-c2":
            d["ttfts"] = [1.5e305 for _ in d["ttfts"]]
            d["latencies"] = [1.6e305 for _ in d["latencies"]]
        (tmp_path / f"{run}.json").write_text(json.dumps(d))
    arms = [("base", tmp_path / "base-c2.json"), ("cand", tmp_path / "cand-c2.json")]
    imp = import_runs(tmp_path, "vllm", arms)
    assert imp.returncode == 0, imp.stderr
    seal_unsigned(tmp_path, "b")
    page = tmp_path / "r.html"
    rep = _cli("report", tmp_path / "b", "--allow-unsigned", "-o", page)
    assert "Traceback" not in rep.stderr, rep.stderr
    assert rep.returncode in (4, 5), rep.stderr
    assert "beyond what a chart axis can draw" in page.read_text(encoding="utf-8")
