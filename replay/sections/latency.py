"""Latency: server means, arm means, the two standard deviations, and the arm comparison.

Definitions (``bundler/format/vocabulary.py``): the samples are the accepted
attempt's receipts with phase ``measured`` and status ``ok``; a server's mean
is the mean of its samples; an arm's mean is the mean of its server means (not
of pooled requests); the arm's sample SD (n - 1) is across server means. The
SD across individual requests is computed too, labelled separately, because
requests on one server are not independent trials.

Sums are exact (integers over a power of ten, :mod:`replay.engine.exact`), so the
results do not depend on row order and round correctly at any precision.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from bundler.campaign.detectable import DetectableDifference, ServerSpread, detectable_difference
from replay.engine.arrow import group_reduce
from replay.engine.exact import GroupSums, Root, group_sums
from replay.inputs import ReplayInputs

__all__ = [
    "ArmLatency",
    "LatencyResult",
    "PairLatency",
    "ServerLatency",
    "TInterval",
    "compute_latency",
    "sample_mask",
    "server_spread",
    "welch_interval",
]

LIMITS = (
    "Latencies are author-reported receipts (e2e_s as written at the plan's timing "
    "boundary); replay re-derives every statistic from them exactly but re-measures nothing: "
    "hardware not re-run.",
    "Requests on one server share its warm state; they are not independent trials, so the "
    "arm's spread is the SD across server means.",
)

CONFIDENCE = 0.95


@dataclass(frozen=True)
class ServerLatency:
    """One server's measured requests."""

    arm: str
    server: str
    n: int
    mean_s: Fraction
    sd_s: Root | None  # across this server's requests; None when n < 2
    min_s: float
    max_s: float


@dataclass(frozen=True)
class ArmLatency:
    """One arm: its servers and the arm-level statistics."""

    arm: str
    role: str
    servers: tuple[ServerLatency, ...]
    n_requests: int
    mean_s: Fraction | None  # mean of server means
    sd_server_means_s: Root | None  # n - 1, across server means
    sd_requests_s: Root | None  # n - 1, across individual requests (labelled apart)
    pooled_mean_s: Fraction | None  # mean of pooled requests, for contrast only
    cv_server_means: Root | None  # sd_server_means_s / mean_s, as a ratio

    @property
    def server_means(self) -> tuple[Fraction, ...]:
        """The server means the arm statistics are taken over."""
        return tuple(s.mean_s for s in self.servers)


@dataclass(frozen=True)
class TInterval:
    """A two-sided Welch t-interval on the difference of arm means (baseline - candidate)."""

    level: float
    df: float
    t: float
    low_s: float
    high_s: float
    statement: str


@dataclass(frozen=True)
class PairLatency:
    """A baseline arm compared with a candidate arm."""

    baseline: str
    candidate: str
    difference_s: Fraction  # baseline mean - candidate mean
    percent_lower: Fraction | None
    speedup: Fraction | None
    interval: TInterval | None
    interval_note: str
    detectable: DetectableDifference  # from the baseline arm's own spread


@dataclass(frozen=True)
class LatencyResult:
    """Every latency statistic of one attempt."""

    attempt: str
    arms: tuple[ArmLatency, ...]
    pairs: tuple[PairLatency, ...]
    samples_used: int
    excluded: dict[str, int]  # attempt rows left out, by reason
    limits: tuple[str, ...] = LIMITS

    def arm(self, arm_id: str) -> ArmLatency | None:
        """The arm named ``arm_id``, if it has any sample."""
        return next((a for a in self.arms if a.arm == arm_id), None)

    def pair(self, baseline: str, candidate: str) -> PairLatency | None:
        """The comparison of ``baseline`` with ``candidate``."""
        return next(
            (p for p in self.pairs if p.baseline == baseline and p.candidate == candidate), None
        )

    def servers(self) -> Iterator[ServerLatency]:
        """Every server of every arm."""
        for a in self.arms:
            yield from a.servers


def sample_mask(inputs: ReplayInputs, attempt: str) -> npt.NDArray[np.bool_]:
    """Receipts that are latency samples of ``attempt``: measured, status ok."""
    r = inputs.receipts
    return r.attempt.mask(attempt) & r.phase.mask("measured") & r.ok


def _sample_variance(values: tuple[Fraction, ...]) -> Fraction | None:
    return GroupSums(
        len(values), sum(values, Fraction(0)), sum((v * v for v in values), Fraction(0))
    ).variance


@dataclass(frozen=True)
class _Group:
    """Exact sums of one server's samples."""

    arm: str
    server: str
    sums: GroupSums
    min_s: float
    max_s: float

    def server_latency(self) -> ServerLatency:
        var = self.sums.variance
        return ServerLatency(
            arm=self.arm,
            server=self.server,
            n=self.sums.n,
            mean_s=self.sums.mean,
            sd_s=None if var is None else Root(var),
            min_s=self.min_s,
            max_s=self.max_s,
        )


def _groups(inputs: ReplayInputs, mask: npt.NDArray[np.bool_]) -> dict[str, list[_Group]]:
    """Exact sums per (arm, server), by arm, vectorized (:func:`replay.engine.exact.group_sums`).

    Only the (arm, server) pairs that occur get a group: ``np.unique`` over the
    combined codes, never an arms x servers grid (a hostile bundle with 50,000
    arms on 50,000 servers made that grid 18.6 GiB).
    """
    r = inputs.receipts
    nserv = max(len(r.server.values), 1)
    pairs, key = np.unique(r.arm.codes[mask] * nserv + r.server.codes[mask], return_inverse=True)
    key = key.reshape(-1).astype(np.int64)
    e2e = r.e2e_s[mask]
    sums = group_sums(key, e2e)
    lows = group_reduce(np.minimum, key, e2e, len(pairs), np.inf)
    highs = group_reduce(np.maximum, key, e2e, len(pairs), -np.inf)
    out: dict[str, list[_Group]] = {}
    for k, g in sums.items():
        arm_code, server_code = divmod(int(pairs[k]), nserv)
        arm = r.arm.values[arm_code]
        out.setdefault(arm, []).append(
            _Group(
                arm=arm,
                server=r.server.values[server_code],
                sums=g,
                min_s=float(lows[k]),
                max_s=float(highs[k]),
            )
        )
    return out


def _arm(arm: str, role: str, groups: list[_Group]) -> ArmLatency:
    mine = sorted(groups, key=lambda g: g.server)
    servers = tuple(g.server_latency() for g in mine)
    means = tuple(s.mean_s for s in servers)
    mean = sum(means, Fraction(0)) / len(means) if means else None
    var_sm = _sample_variance(means)
    pooled = GroupSums(
        sum(g.sums.n for g in mine),
        sum((g.sums.total for g in mine), Fraction(0)),
        sum((g.sums.squares for g in mine), Fraction(0)),
    )
    var_req = pooled.variance
    return ArmLatency(
        arm=arm,
        role=role,
        servers=servers,
        n_requests=pooled.n,
        mean_s=mean,
        sd_server_means_s=None if var_sm is None else Root(var_sm),
        sd_requests_s=None if var_req is None else Root(var_req),
        pooled_mean_s=pooled.mean if pooled.n else None,
        cv_server_means=Root(var_sm / (mean * mean)) if var_sm is not None and mean else None,
    )


def welch_interval(
    baseline: ArmLatency, candidate: ArmLatency, level: float = CONFIDENCE
) -> tuple[TInterval | None, str]:
    """Welch t-interval on baseline mean - candidate mean, from server means.

    Returns the interval (None when an arm has fewer than two servers) and a
    plain statement of how much it can support.
    """
    from scipy.special import stdtrit  # the t quantile scipy.stats.t.ppf uses

    n1, n2 = len(baseline.servers), len(candidate.servers)
    if baseline.mean_s is None or candidate.mean_s is None or min(n1, n2) < 2:
        return None, (
            f"no interval: {n1} baseline and {n2} candidate server(s); at least two per arm "
            "are needed to estimate server-to-server variation"
        )
    try:
        v1 = float(baseline.sd_server_means_s.square if baseline.sd_server_means_s else 0) / n1
        v2 = float(candidate.sd_server_means_s.square if candidate.sd_server_means_s else 0) / n2
        diff = float(baseline.mean_s - candidate.mean_s)
        se = math.sqrt(v1 + v2)
        if se == 0:
            return None, "no interval: the server means of both arms are identical within each arm"
        df = (v1 + v2) ** 2 / (v1**2 / (n1 - 1) + v2**2 / (n2 - 1))
    except (OverflowError, ZeroDivisionError):
        # Latencies near the largest double (valid, absurd) square past it: no t-interval.
        return None, "no interval: the server means' variances exceed the range of a double"
    if not math.isfinite(df) or not math.isfinite(se):
        return None, "no interval: the server means' variances exceed the range of a double"
    t = float(stdtrit(df, 0.5 + level / 2))
    low, high = diff - t * se, diff + t * se
    pct = f"{level * 100:g} %"
    words = [
        f"{pct} Welch t-interval on the difference of arm means from {n1} + {n2} server means: "
        f"df = {df:.2f}, t = {t:.2f}, so the half-width is {t:.2f} standard errors."
    ]
    if min(n1, n2) <= 3:
        words.append(
            f"With n = {min(n1, n2)} servers per arm this is very weak: it rests on "
            f"{df:.1f} degrees of freedom and on an untestable normality assumption; "
            "requests within a server are not independent trials."
        )
    words.append(
        "It excludes 0."
        if low > 0 or high < 0
        else "It includes 0: at this level the data cannot rule out no difference."
    )
    stmt = " ".join(words)
    return TInterval(level, df, t, low, high, stmt), stmt


def server_spread(arms: Sequence[ArmLatency], source: str) -> ServerSpread:
    """The server-to-server SD of ``arms``: pooled over the arms with two servers or more.

    Each arm's server means deviate from that arm's own mean; the variances are
    pooled with weights n - 1 (one arm: its SD across server means, exactly).
    ``source`` names the arms in words for the statement.
    """
    usable = [a for a in arms if a.sd_server_means_s is not None and len(a.servers) >= 2]
    if not usable:
        counts = ", ".join(f"{a.arm} {len(a.servers)}" for a in arms) or "no arm"
        return ServerSpread(
            None,
            sum(len(a.servers) for a in arms),
            source,
            f"{source} has fewer than two servers with samples ({counts}): its "
            "server-to-server spread cannot be estimated",
        )
    dof = sum(len(a.servers) - 1 for a in usable)
    var = (
        sum(
            (
                a.sd_server_means_s.square * (len(a.servers) - 1)
                for a in usable
                if a.sd_server_means_s
            ),
            Fraction(0),
        )
        / dof
    )
    try:
        sd = math.sqrt(float(var))
    except OverflowError:
        sd = math.inf
    if not math.isfinite(sd):
        return ServerSpread(
            None, dof + len(usable), source, f"{source}: the spread exceeds the range of a double"
        )
    return ServerSpread(sd, dof + len(usable), source)


def _pair(baseline: ArmLatency, candidate: ArmLatency) -> PairLatency | None:
    b, c = baseline.mean_s, candidate.mean_s
    if b is None or c is None:
        return None
    interval, note = welch_interval(baseline, candidate)
    spread = server_spread([baseline], f"the baseline arm {baseline.arm}")
    return PairLatency(
        baseline=baseline.arm,
        candidate=candidate.arm,
        difference_s=b - c,
        percent_lower=(1 - c / b) * 100 if b else None,
        speedup=b / c if c else None,
        interval=interval,
        interval_note=note,
        detectable=detectable_difference(
            spread,
            len(baseline.servers),
            len(candidate.servers),
            baseline=baseline.arm,
            candidate=candidate.arm,
            level=CONFIDENCE,
        ),
    )


def compute_latency(
    inputs: ReplayInputs, attempt: str, mask: npt.NDArray[np.bool_] | None = None
) -> LatencyResult:
    """Every latency statistic of ``attempt`` (see the module docstring for definitions).

    Args:
        inputs: the bundle's tables.
        attempt: the attempt whose samples are used.
        mask: other rows to use instead of the attempt's samples: only to show what a
            contradicted claim was computed from (warmups included, attempts mixed).
    """
    r = inputs.receipts
    if mask is None:
        mask = sample_mask(inputs, attempt)
    groups = _groups(inputs, mask)
    arms = tuple(_arm(a.id, a.role, groups.get(a.id, [])) for a in inputs.arms)
    by_id = {a.arm: a for a in arms}
    pairs = []
    for b in inputs.arms_with_role("baseline"):
        for c in inputs.arms_with_role("candidate"):
            p = _pair(by_id[b], by_id[c])
            if p is not None:
                pairs.append(p)
    att = r.attempt.mask(attempt)
    measured = att & r.phase.mask("measured")
    excluded = {
        "warmup": int(np.count_nonzero(att & r.phase.mask("warmup"))),
        "quality": int(np.count_nonzero(att & r.phase.mask("quality"))),
        "measured, status not ok": int(np.count_nonzero(measured & ~r.ok)),
        "other attempts": int(np.count_nonzero(~att)),
    }
    return LatencyResult(
        attempt=attempt,
        arms=arms,
        pairs=tuple(pairs),
        samples_used=int(np.count_nonzero(mask)),
        excluded=excluded,
    )
