"""The text lines of a rerun comparison (``bundle replay RERUN --against X``, ``-v``)."""

from __future__ import annotations

from replay.engine.verdicts import Reproduction
from replay.sections.against_result import Effect, RerunComparison, Side

__all__ = ["format_comparison"]

_MAX_UNCLEAN_LISTED = 10


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def _effect_lines(e: Effect) -> list[str]:
    return [
        f"  {e.baseline} -> {e.candidate}",
        f"    arm mean {e.baseline:<12} sealed {_fmt(e.sealed_baseline_s, '.3f')} s  "
        f"rerun {_fmt(e.rerun_baseline_s, '.3f')} s  ratio {_fmt(e.baseline_ratio, '.3f')}",
        f"    arm mean {e.candidate:<12} sealed {_fmt(e.sealed_candidate_s, '.3f')} s  "
        f"rerun {_fmt(e.rerun_candidate_s, '.3f')} s  ratio {_fmt(e.candidate_ratio, '.3f')}",
        f"    speedup               sealed {_fmt(e.sealed_speedup, '.3f')}×  "
        f"rerun {_fmt(e.rerun_speedup, '.3f')}×  ratio {_fmt(e.speedup_ratio, '.3f')}",
        f"    percent lower         sealed {_fmt(e.sealed_percent_lower, '.2f')} %  "
        f"rerun {_fmt(e.rerun_percent_lower, '.2f')} %",
        f"    {e.verdict}",
    ]


def _side_lines(s: Side) -> list[str]:
    lc = s.lifecycle
    if lc is None:
        return [f"  {s.label:<6} {s.problem}"]
    exits = (
        f"worker exits {lc.total} ({lc.clean} clean, {s.killed} killed)"
        if lc.total
        else "no worker exit recorded"
    )
    lines = [
        f"  {s.label:<6} requests {dict(s.statuses)}; timeout levels {dict(s.timeout_levels)}; "
        + exits
    ]
    unclean = s.unclean()
    lines += [f"           unclean: {u}" for u in unclean[:_MAX_UNCLEAN_LISTED]]
    if lc.unclean_total > _MAX_UNCLEAN_LISTED:
        lines.append(f"           ... {lc.unclean_total - _MAX_UNCLEAN_LISTED} more unclean")
    hbm = ", ".join(
        f"{a} {_fmt(v, ',.0f')} MB" if v is not None else f"{a} not sampled"
        for a, v in s.hbm_peak_mean_mb.items()
    )
    lines.append(f"           mean sampled peak HBM: {hbm or 'no arm'}")
    if s.other_attempts:
        others = ", ".join(f"{k} {v}" for k, v in s.other_attempts.items())
        lines.append(f"           other attempts (not mixed in): {others}")
    return lines


def format_comparison(c: RerunComparison) -> list[str]:
    """The comparison as text lines (the replay views print them under the section).

    The evidence limits are not among them: every view prints ``c.limits`` (via
    ``ReplayResult.limits("against")``) with the section, as for every section.
    """
    word = Reproduction.of(c.reproduced)
    lines = [
        f"rerun {c.rerun.campaign_id} ({c.rerun.attempt}) against sealed "
        f"{c.sealed.campaign_id} ({c.sealed.attempt}): effect {word}",
        f"  frozen plan identical: {'yes' if c.plan_matches else 'NO'}",
    ]
    for e in c.effects:
        lines += _effect_lines(e)
    for s in (c.sealed, c.rerun):
        lines += _side_lines(s)
    lines.append(
        f"  outputs with the sealed SHA-256: {c.outputs_matching} of {c.outputs_compared} compared"
    )
    lines += [f"  not comparable: {x}" for x in c.not_comparable()]
    return lines
