"""Optional sections: a media replay and a rerun comparison, from their JSON forms.

Both arrive as plain mappings (``MediaReplayResult.to_dict()`` and
``RerunComparison.to_dict()``, in memory or read back from a JSON file), so
this module never imports the media or rerun packages (torch, PyAV, the
launcher). A JSON file is untrusted like the bundle: every field is read
defensively and printed as text, and a result that names comparisons this
bundle lacks, or another campaign, says so in its section.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from bundler.errors import UsageError
from replay.html.view import Block, Cell, Para, Section, Span, Table, cell, rich

__all__ = ["media_section", "normalize_media", "normalize_rerun", "rerun_section"]

_MAX_ROWS = 200

MEDIA_LIMITS = (
    "Media replay re-decodes and re-scores the raw media files the reader supplied, found "
    "by SHA-256; a file not at hand leaves its comparison INCOMPLETE, never passed.",
    "LPIPS is attested only when the scorer's weight files were supplied and match the "
    "recorded SHA-256; otherwise its verdicts stay unattested.",
)


def _as_dict(obj: Any, what: str) -> Mapping[str, Any]:
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        obj = to_dict()
    if not isinstance(obj, Mapping):
        raise UsageError(f"{what}: expected a JSON object, got {type(obj).__name__}")
    return obj


def normalize_media(obj: Any, what: str = "media result") -> Mapping[str, Any]:
    """A media replay result (object or JSON form, possibly under a ``media`` key), checked.

    Raises:
        UsageError: it does not look like a media replay result.
    """
    d = _as_dict(obj, what)
    if "comparisons" not in d and isinstance(d.get("media"), Mapping):
        d = d["media"]
    if not isinstance(d.get("comparisons"), list) or not isinstance(d.get("gates"), list):
        raise UsageError(
            f"{what}: not a media replay result (needs 'comparisons' and 'gates' lists, "
            "as MediaReplayResult.to_dict() writes)"
        )
    return d


def normalize_rerun(obj: Any, what: str = "rerun result") -> Mapping[str, Any]:
    """A rerun comparison (object or JSON form, possibly under a ``rerun`` key), checked.

    Raises:
        UsageError: it does not look like a rerun comparison.
    """
    d = _as_dict(obj, what)
    for key in ("rerun", "comparison"):
        if "effects" not in d and isinstance(d.get(key), Mapping):
            d = d[key]
    if not isinstance(d.get("effects"), list) or not isinstance(d.get("sealed"), Mapping):
        raise UsageError(
            f"{what}: not a rerun comparison (needs 'effects' and 'sealed', as "
            "RerunComparison.to_dict() writes)"
        )
    return d


def _t(x: Any) -> str:
    """Any JSON value as short text."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.6g}" if math.isfinite(x) else str(x)
    return str(x)


def _list(x: Any) -> list[Mapping[str, Any]]:
    return [e for e in x if isinstance(e, Mapping)] if isinstance(x, list) else []


def _verdict_style(v: str) -> str:
    v = v.upper()
    if v in ("PASS", "AGREE", "REPRODUCED", "OK", "ATTESTED"):
        return "good"
    if v in ("FAIL", "MISMATCH", "DISAGREE", "NOT REPRODUCED"):
        return "bad"
    return "warn"


def media_section(media: Mapping[str, Any], comparison_ids: set[str]) -> Section:
    """The media replay section (recorded vs recomputed, per gate and per comparison)."""
    verdict = _t(media.get("verdict"))
    blocks: list[Block] = [
        Para(
            rich(
                "Media replay verdict ",
                Span(verdict, _verdict_style(verdict)),
                f" (exit {_t(media.get('exit_code'))}), on device {_t(media.get('device'))}.",
            ),
            _verdict_style(verdict),
        )
    ]
    comps = _list(media.get("comparisons"))
    foreign = sorted({_t(c.get("comparison_id")) for c in comps} - comparison_ids)
    if foreign:
        blocks.append(
            Para(
                rich(
                    f"{len(foreign)} comparison(s) of this media result are not comparisons of "
                    "this bundle's accepted attempt (e.g. "
                    + ", ".join(foreign[:3])
                    + "): it may be the replay of another bundle."
                ),
                "bad",
            )
        )
    gates = _list(media.get("gates"))
    if gates:
        rows = []
        for g in gates:
            counts = g.get("counts")
            counts_text = (
                ", ".join(f"{k} {_t(v)}" for k, v in sorted(counts.items()))
                if isinstance(counts, Mapping)
                else "-"
            )
            rv = _t(g.get("recomputed_verdict"))
            rows.append(
                (
                    cell(Span(_t(g.get("gate_id")), "code")),
                    cell(f"{_t(g.get('metric'))} {_t(g.get('op'))} {_t(g.get('threshold'))}"),
                    cell(_t(g.get("recorded_verdict"))),
                    cell(rv, _verdict_style(rv)),
                    cell(counts_text),
                )
            )
        blocks.append(
            Table(
                ("gate", "rule", "recorded", "recomputed", "per comparison"),
                tuple(rows),
                caption="Gates: verdict from the recorded values and from the recomputed ones",
                table_id="media-gates-table",
            )
        )
    dis = _list(media.get("disagreements"))
    if dis:
        blocks.append(
            Table(
                ("comparison", "kind", "what", "recorded", "recomputed", "detail"),
                tuple(
                    (
                        cell(Span(_t(d.get("comparison_id")), "code")),
                        cell(_t(d.get("kind"))),
                        cell(_t(d.get("name"))),
                        cell(_t(d.get("recorded"))),
                        cell(_t(d.get("recomputed")), "bad"),
                        cell(_t(d.get("detail"))),
                    )
                    for d in dis[:_MAX_ROWS]
                ),
                caption="Where the record and the replay differ",
                row_styles=tuple("bad" for _ in dis[:_MAX_ROWS]),
                omitted=f"{len(dis) - _MAX_ROWS} more." if len(dis) > _MAX_ROWS else "",
                table_id="media-disagreements-table",
            )
        )
    else:
        blocks.append(Para(rich("No disagreement between the record and the replay.")))
    if comps:
        rows = []
        for c in comps[:_MAX_ROWS]:
            cov = _list(c.get("coverage"))
            failed = [x for x in cov if _t(x.get("status")).upper() == "FAIL"]
            v = _t(c.get("verdict"))
            rows.append(
                (
                    cell(Span(_t(c.get("comparison_id")), "code")),
                    cell(v, _verdict_style(v)),
                    cell(_t(c.get("frames_compared")), num=True),
                    cell(
                        "ok"
                        if cov and not failed
                        else "-"
                        if not cov
                        else "FAIL: "
                        + ", ".join(f"{_t(x.get('check'))} [{_t(x.get('arm'))}]" for x in failed),
                        "bad" if failed else "",
                    ),
                    cell("; ".join(_t(p) for p in (c.get("problems") or [])[:5]) or "-"),
                )
            )
        blocks.append(
            Table(
                ("comparison", "verdict", "frames", "A/V coverage", "problems"),
                tuple(rows),
                caption="Every re-scored comparison",
                omitted=f"{len(comps) - _MAX_ROWS} more." if len(comps) > _MAX_ROWS else "",
                detail=True,
                table_id="media-comparisons-table",
            )
        )
    problems = media.get("problems")
    if isinstance(problems, list) and problems:
        blocks.append(
            Table(
                ("problem",),
                tuple((cell(_t(p)),) for p in problems[:_MAX_ROWS]),
                caption="What could not be re-scored",
                row_styles=tuple("warn" for _ in problems[:_MAX_ROWS]),
            )
        )
    return Section(
        "media", "Media replay", tuple(blocks), MEDIA_LIMITS, verdict, _verdict_style(verdict)
    )


def _map(x: Any) -> Mapping[str, Any]:
    return x if isinstance(x, Mapping) else {}


def _side_means(side: Mapping[str, Any]) -> dict[str, Any]:
    return {_t(a.get("arm")): a.get("mean_s") for a in _list(side.get("arms"))}


def _num(x: Any, spec: str) -> str:
    ok = isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
    return format(x, spec) if ok else "-"


def _reproduced_style(flag: Any) -> str:
    return "good" if flag is True else "bad" if flag is False else "warn"


def _effect_row(e: Mapping[str, Any]) -> tuple[Cell, ...]:
    sealed = (
        f"{_num(e.get('sealed_baseline_s'), '.2f')} → {_num(e.get('sealed_candidate_s'), '.2f')}"
    )
    rerun = f"{_num(e.get('rerun_baseline_s'), '.2f')} → {_num(e.get('rerun_candidate_s'), '.2f')}"
    speedups = f"{_num(e.get('sealed_speedup'), '.2f')}× / {_num(e.get('rerun_speedup'), '.2f')}×"
    return (
        cell(f"{_t(e.get('baseline'))} → {_t(e.get('candidate'))}"),
        cell(f"{sealed} s", num=True),
        cell(f"{rerun} s", num=True),
        cell(speedups, num=True),
        cell(_num(e.get("speedup_ratio"), ".3f"), num=True),
        cell(_t(e.get("verdict")), _reproduced_style(e.get("reproduced"))),
    )


def _sides_table(sealed: Mapping[str, Any], again: Mapping[str, Any], outputs: Any) -> Table:
    sm, rm = _side_means(sealed), _side_means(again)
    rows = [
        (
            cell(f"arm mean {a} s"),
            cell(_num(sm.get(a), ".2f"), num=True),
            cell(_num(rm.get(a), ".2f"), num=True),
        )
        for a in sorted(set(sm) | set(rm))
    ]
    lc_s, lc_r = _map(sealed.get("lifecycle")), _map(again.get("lifecycle"))
    rows.append(
        (
            cell("worker exits clean"),
            cell(f"{_t(lc_s.get('clean'))}/{_t(lc_s.get('total'))}", num=True),
            cell(f"{_t(lc_r.get('clean'))}/{_t(lc_r.get('total'))}", num=True),
        )
    )
    out = _map(outputs)
    rows.append(
        (
            cell("outputs with the sealed SHA-256"),
            cell("-"),
            cell(f"{_t(out.get('matching'))} of {_t(out.get('compared'))}", num=True),
        )
    )
    return Table(
        ("", "sealed", "rerun"),
        tuple(rows),
        caption="Sealed and rerun",
        table_id="rerun-sides-table",
    )


RERUN_LIMITS = (
    "A rerun on other hardware on another day reproduces an effect, not the sealed latencies "
    "themselves.",
)


def rerun_section(rerun: Mapping[str, Any], campaign_id: str) -> Section:
    """The rerun comparison section (sealed vs rerun, side by side)."""
    rep = rerun.get("reproduced")
    word = "reproduced" if rep is True else "NOT reproduced" if rep is False else "not judged"
    style = _reproduced_style(rep)
    sealed, again = _map(rerun.get("sealed")), _map(rerun.get("rerun"))
    tol = rerun.get("tolerance")
    tol_text = _num(tol * 100, "g") if isinstance(tol, int | float) else "-"
    plan = "identical" if rerun.get("plan_matches") else "DIFFERENT"
    blocks: list[Block] = [
        Para(
            rich(
                "Effect ",
                Span(word, style),
                f" within a relative tolerance of {tol_text} % on the speedup; plan {plan}; "
                f"rerun campaign {_t(again.get('campaign_id'))}, "
                f"attempt {_t(again.get('attempt'))}.",
            ),
            style,
        )
    ]
    if _t(sealed.get("campaign_id")) != campaign_id:
        blocks.append(
            Para(
                rich(
                    f"This comparison is against sealed campaign {_t(sealed.get('campaign_id'))}, "
                    f"not {campaign_id}: it may belong to another bundle."
                ),
                "bad",
            )
        )
    blocks.append(
        Table(
            (
                "pair",
                "sealed arm means",
                "rerun arm means",
                "speedup sealed / rerun",
                "ratio",
                "verdict",
            ),
            tuple(_effect_row(e) for e in _list(rerun.get("effects"))),
            caption="Effects, sealed and rerun side by side",
            table_id="rerun-effects-table",
        )
    )
    blocks.append(_sides_table(sealed, again, rerun.get("outputs")))
    raw = rerun.get("limits")
    limits = tuple(_t(x) for x in raw) if isinstance(raw, list) and raw else RERUN_LIMITS
    return Section("rerun", "Rerun comparison", tuple(blocks), limits, word, style)
