"""The smallest difference between arm means that a campaign's Welch interval can resolve.

Replay compares arms with a two-sided Welch t-interval on the difference of arm
means, taken over server means (``replay/sections/latency.py``). Before a campaign
runs, its plan fixes how many servers each arm gets (n1, n2); a pilot or baseline
bundle gives the server-to-server spread ``s``, the SD across server means. If both
arms show that spread, the interval's half-width is

    h = t(q, df) * s * sqrt(1/n1 + 1/n2),          q = (1 + level) / 2

with df the Welch–Satterthwaite degrees of freedom for variances s²/n1 and s²/n2
(``s`` cancels):

    df = (1/n1 + 1/n2)² / ( (1/n1)² / (n1 - 1) + (1/n2)² / (n2 - 1) )

which is 2 (n - 1) when n1 = n2 = n. An observed difference of arm means smaller
than ``h`` gives an interval that includes 0: it cannot be told apart from
server-to-server variation. That is the floor of what the campaign can show, not a
power calculation: a true difference of exactly ``h`` yields an interval excluding
0 only about half the time. The assumption of equal spread in both arms is
explicit; a candidate arm that spreads more widens the interval further.

This module is the one place the figure is computed: ``bundle plan check
--pilot`` (servers per arm from the plan) and replay's latency section (servers
per arm as measured, spread from the bundle's own baseline arm) both call
:func:`detectable_difference`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["DetectableDifference", "ServerSpread", "detectable_difference", "welch_df_equal_spread"]


@dataclass(frozen=True)
class ServerSpread:
    """Server-to-server spread: the SD across server means, and what it was estimated from.

    ``sd_s`` is None when it cannot be estimated (fewer than two servers in the arm
    it is taken from); ``note`` then says why. ``source`` names the bundle and arm
    in words ("the pilot's baseline arm kv2").
    """

    sd_s: float | None
    servers: int
    source: str
    note: str = ""


@dataclass(frozen=True)
class DetectableDifference:
    """The half-width of the Welch interval for one pair of arms, and how it was derived.

    ``half_width_s`` is None (with the reason in ``statement``) when it cannot be
    stated: an arm with fewer than two servers, or no estimate of the spread.
    """

    baseline: str
    candidate: str
    n_baseline: int
    n_candidate: int
    level: float
    sd_s: float | None
    spread_source: str
    df: float | None
    t: float | None
    half_width_s: float | None
    statement: str


def welch_df_equal_spread(n1: int, n2: int) -> float:
    """Welch–Satterthwaite degrees of freedom when both arms have the same spread.

    Raises:
        ValueError: an arm has fewer than two servers (no degrees of freedom).
    """
    if min(n1, n2) < 2:
        raise ValueError("Welch degrees of freedom need at least two servers per arm")
    a, b = 1 / n1, 1 / n2
    return (a + b) ** 2 / (a * a / (n1 - 1) + b * b / (n2 - 1))


def _servers_text(n1: int, n2: int, baseline: str, candidate: str) -> str:
    if n1 == n2:
        return f"{n1} server{'s' if n1 != 1 else ''} per arm"
    return f"{n1} {baseline} and {n2} {candidate} server(s)"


def detectable_difference(
    spread: ServerSpread,
    n_baseline: int,
    n_candidate: int,
    *,
    baseline: str = "baseline",
    candidate: str = "candidate",
    level: float = 0.95,
) -> DetectableDifference:
    """The smallest difference of arm means a Welch interval at ``level`` tells apart from 0.

    Args:
        spread: the server-to-server SD (assumed the same in both arms).
        n_baseline: servers in the baseline arm.
        n_candidate: servers in the candidate arm.
        baseline: the baseline arm's name, for the statement.
        candidate: the candidate arm's name.
        level: the two-sided interval's confidence level.

    Returns:
        The half-width and the plain statement of it (module docstring: the formula).
    """
    from scipy.special import stdtrit  # the t quantile scipy.stats.t.ppf uses

    servers = _servers_text(n_baseline, n_candidate, baseline, candidate)

    def cannot(why: str) -> DetectableDifference:
        return DetectableDifference(
            baseline,
            candidate,
            n_baseline,
            n_candidate,
            level,
            spread.sd_s,
            spread.source,
            None,
            None,
            None,
            f"no detectable difference stated: {why}",
        )

    if min(n_baseline, n_candidate) < 2:
        return cannot(
            f"with {servers} the Welch interval has no degrees of freedom "
            "(at least two servers per arm are needed)"
        )
    if spread.sd_s is None:
        return cannot(spread.note or f"{spread.source}: no server-to-server spread")
    df = welch_df_equal_spread(n_baseline, n_candidate)
    t = float(stdtrit(df, 0.5 + level / 2))
    root = math.sqrt(1 / n_baseline + 1 / n_candidate)
    half = t * spread.sd_s * root
    if not math.isfinite(half):
        return cannot(f"the spread of {spread.source} exceeds the range of a double")
    pct = f"{level * 100:g} %"
    statement = (
        f"with {servers} and the spread of {spread.source} (SD {spread.sd_s:.4g} s across "
        f"{spread.servers} server means), a difference under {half:.2f} s cannot be "
        "distinguished from server-to-server variation: half-width of the "
        f"{pct} Welch interval = t({0.5 + level / 2:g}; df {df:.2f}) {t:.3f} × "
        f"SD {spread.sd_s:.4g} s × √(1/{n_baseline} + 1/{n_candidate}), assuming the same "
        "spread in both arms; a true difference of that size is resolved only about half "
        "the time"
    )
    return DetectableDifference(
        baseline,
        candidate,
        n_baseline,
        n_candidate,
        level,
        spread.sd_s,
        spread.source,
        df,
        t,
        half,
        statement,
    )
