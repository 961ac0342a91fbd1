"""Render a :class:`~replay.media.result.MediaReplayResult` as text (the library never prints)."""

from __future__ import annotations

from collections.abc import Sequence

from replay.engine.verdicts import Agreement, MediaVerdict, Outcome, decide
from replay.media.coverage import PASS as COVERAGE_PASS
from replay.media.result import ComparisonReplay, MediaReplayResult, fmt

__all__ = ["format_report"]


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _head(result: MediaReplayResult, verdict: MediaVerdict) -> list[str]:
    lines = [
        f"media replay: {verdict} ({len(result.comparisons)} comparisons, "
        f"{result.seconds:.1f} s, jobs {result.jobs}, device {result.device})"
    ]
    ex = result.execution
    if ex is not None:
        t = ex.threads
        lines.append(
            f"executor {ex.executor}: {t.parallel} comparison(s) at once on {t.cores} core(s) "
            f"({t.cores_source}), torch threads {t.torch_threads}, decoder threads "
            f"{t.decoder_threads} per file"
            + (f", LPIPS batch {ex.lpips_batch}" if ex.lpips_batch else "")
        )
        lines += [
            f"  retried: {r.comparison_id} ({r.attempts} attempts, {r.outcome}) {r.detail}".rstrip()
            for r in ex.retries
        ]
    lines += [f"  integrity: {x}" for x in result.integrity_failures()]
    lines += [f"  failed: {x}" for x in result.failures()]
    lines += [f"  incomplete: {x}" for x in result.gaps()]
    if result.scorer is not None:
        s = result.scorer
        lines.append(f"LPIPS scorer: {s.status} — {s.reason}")
        for w in s.weights:
            lines.append(
                f"  {w.role}: {w.status} sha256 {w.sha256[:16]}… "
                f"({w.found_at or w.recorded_file}) {w.detail}".rstrip()
            )
    p = result.coverage_params
    lines.append(
        "coverage: frames == "
        f"{p.num_frames}, audio samples in [expected, expected + "
        f"{p.padding_tolerance_samples}] (expected from {p.expected_seconds_from}), "
        f"A/V start/end within {p.av_tolerance_s} s"
    )
    return lines


def _gates(result: MediaReplayResult) -> list[str]:
    if not result.gates:
        return []
    rows = [["gate", "metric", "definition", "rule", "recorded", "replayed", "per comparison"]]
    for g in result.gates:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(g.counts.items()))
        rows.append(
            [
                g.gate_id,
                g.metric,
                g.definition,
                f"{g.op} {fmt(g.threshold)}",
                g.recorded_verdict,
                g.recomputed_verdict,
                counts,
            ]
        )
    return ["", *_table(rows)]


def _disagreements(result: MediaReplayResult) -> list[str]:
    if not result.disagreements:
        return []
    rows = [["comparison", "kind", "what", "recorded", "replayed", "detail"]]
    rows.extend(
        [d.comparison_id, d.kind, d.name, d.recorded, d.recomputed, d.detail]
        for d in result.disagreements
    )
    return ["", "disagreements (recorded | replayed):", *_table(rows)]


def _comparison(c: ComparisonReplay) -> list[str]:
    lines = [
        "",
        f"{c.comparison_id}: {c.verdict}, {c.frames_compared} frames compared, {c.seconds:.2f} s",
    ]
    rows = [["metric", "definition", "recorded", "replayed", "Δ", "status"]]
    for m in c.metrics:
        rows.append(
            [
                m.metric,
                m.definition,
                fmt(m.recorded),
                fmt(m.recomputed),
                fmt(m.delta),
                m.status + (f" ({m.detail})" if m.detail and m.status != Agreement.AGREE else ""),
            ]
        )
    lines.extend("  " + ln for ln in _table(rows))
    for arm in c.arms:
        if arm.decode_error:
            lines.append(f"  {arm.label}: {arm.decode}: {arm.decode_error}")
    for cv in c.coverage:
        if cv.status != COVERAGE_PASS:
            lines.append(
                f"  coverage {cv.check} [{cv.arm}]: {cv.status} "
                f"observed {cv.observed}, expected {cv.expected}"
            )
    lines.extend(f"  problem: {prob}" for prob in c.problems)
    return lines


def format_report(result: MediaReplayResult, outcome: Outcome | None = None) -> str:
    """Render ``result`` as text: the verdict and its reasons, gates, disagreements side by
    side, per-comparison detail, and what the re-score proves and cannot.

    ``outcome`` is the section's verdict as the replay's one result decided it
    (:meth:`replay.result.ReplayResult.media_outcome`); without it (a re-score on its
    own), the same precedence over the same reasons (:func:`replay.engine.verdicts.decide`).
    """
    if outcome is None:
        outcome = decide(result.integrity_failures(), result.failures(), result.gaps())
    lines = _head(result, MediaVerdict.of(outcome)) + _gates(result) + _disagreements(result)
    for c in result.comparisons:
        lines += _comparison(c)
    lines += ["", *(f"limit: {x}" for x in result.limits)]
    return "\n".join(lines)
