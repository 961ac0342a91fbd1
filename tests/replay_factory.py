"""Write campaign directories for replay tests, and derive their honest claims independently.

A :class:`Spec` describes a campaign by its decimal values: per server the
warmup, measured and quality e2e seconds, the worker exit times, the HBM
samples per device; the quality comparisons' metrics; the gates. :func:`build`
turns it into campaign files (JSONL tables, plan, campaign.json), laid out in
time as the plan says (servers one after another, requests back to back).

:func:`honest_claims` states every statistic of the vocabulary for a spec,
derived with Python's ``statistics`` and ``fractions`` straight from the
spec's numbers: it shares no code with ``replay/``. The recomputed value of a
claim is the double nearest to the exact statistic of the recorded doubles
(``specs/claims-vocabulary.md``), which is what ``statistics.mean`` and
``statistics.stdev`` return.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import statistics
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bundler.seal import seal_campaign

BASELINE_COMMIT = "c7f56f0155953c7d4a77276a2f4fcbd844ab0da2"
CANDIDATE_COMMIT = "098b51f6b96dd160a0959e74e8822422527ff06d"
ACCEPTED = "final-2"
T0_NS = 1_772_352_000 * 10**9  # 2026-03-01T08:00:00Z
GAP_NS = 2 * 10**9
SERVER_GAP_NS = 120 * 10**9


@dataclass
class Server:
    """One server slot: its arm and every request it ran, as e2e seconds."""

    name: str
    arm: str
    measured: list[float]
    warmups: list[float] = field(default_factory=lambda: [520.0, 450.0])
    quality: list[float] = field(default_factory=list)
    exit_s: list[float] = field(default_factory=lambda: [10.0, 12.0])
    hbm: list[list[float]] = field(default_factory=lambda: [[1000.0, 1200.0], [1100.0, 1150.0]])


@dataclass
class Spec:
    """An honest campaign: servers in run order, comparisons and gates."""

    servers: list[Server]
    comparisons: list[dict[str, float]]
    gates: list[dict[str, Any]]
    budgets: dict[str, tuple[float, float]] = field(
        default_factory=lambda: {"baseline": (60.0, 90.0), "candidate": (30.0, 60.0)}
    )
    scorer: bool = True
    rejected: list[Server] = field(default_factory=list)

    @property
    def arm_order(self) -> list[str]:
        return [s.arm for s in self.servers]

    def arm_servers(self, arm: str) -> list[Server]:
        return [s for s in self.servers if s.arm == arm]


DEFAULT_GATES: list[dict[str, Any]] = [
    {
        "gate_id": "lpips-max",
        "metric": "lpips",
        "op": "<=",
        "threshold": 0.2,
        "definition": "lpips/alex-v0.1-frame-mean",
        "warn_within": 0.05,
    },
    {
        "gate_id": "ssim-min",
        "metric": "ssim",
        "op": ">=",
        "threshold": 0.97,
        "definition": "ssim/ffmpeg-y-frame-mean",
        "warn_within": 0.01,
    },
    {
        "gate_id": "audio-cosine-min",
        "metric": "audio_spectral_cosine",
        "op": ">=",
        "threshold": 0.8,
        "definition": "audio/stft-cosine-512-1024-2048",
        "warn_within": 0.02,
    },
]


def seed_like() -> Spec:
    """The seed's shape: A/B/B/A, 2 warmups + 3 measured per server, 14 comparisons.

    Server means by construction (middle value, symmetric neighbours): 396.30, 106.66,
    109.58, 418.24 s, the seed's published ones; 8 workers per server.
    """
    eight = [10.0 + i for i in range(8)]
    base_hbm = [[40000.0, 50000.0 + 100 * d] for d in range(8)]
    cand_hbm = [[41000.0, 51550.0 + 103 * d] for d in range(8)]
    servers = [
        Server(
            "baseline-1",
            "baseline",
            [396.10, 396.30, 396.50],
            quality=[500.0, 505.0],
            exit_s=[e * 2 for e in eight],
            hbm=base_hbm,
        ),
        Server(
            "candidate-1",
            "candidate",
            [106.50, 106.66, 106.82],
            quality=[130.0, 131.0],
            exit_s=eight,
            hbm=cand_hbm,
        ),
        Server(
            "candidate-2",
            "candidate",
            [109.40, 109.58, 109.76],
            quality=[132.0, 133.0],
            exit_s=eight,
            hbm=cand_hbm,
        ),
        Server(
            "baseline-2",
            "baseline",
            [418.00, 418.24, 418.48],
            exit_s=[e * 2 for e in eight],
            hbm=base_hbm,
        ),
    ]
    comparisons = []
    for i in range(14):
        comparisons.append(
            {
                "lpips": 0.010 + 0.001 * i,  # largest 0.023
                "ssim": 0.990 - 0.001 * i,  # smallest 0.977
                "audio_spectral_cosine": 0.813411 if i == 5 else 0.85 + 0.001 * i,
            }
        )
    return Spec(servers, comparisons, copy.deepcopy(DEFAULT_GATES))


# --- writing a campaign -----------------------------------------------------------------


def ts(ns: int) -> str:
    """RFC 3339 UTC text with nanoseconds."""
    secs, frac = divmod(ns, 10**9)
    base = dt.datetime.fromtimestamp(secs, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{frac:09d}Z"


def _e2e_ns(e2e: float) -> int:
    return int(Decimal(repr(e2e)) * 10**9)


def _server_rows(s: Server, attempt: str, t: int) -> tuple[list[dict[str, Any]], int]:
    rows = []
    phases = (
        [("warmup", v) for v in s.warmups]
        + [("measured", v) for v in s.measured]
        + [("quality", v) for v in s.quality]
    )
    for seq, (phase, e2e) in enumerate(phases):
        end = t + _e2e_ns(e2e)
        rows.append(
            {
                "request_id": f"{attempt}-{s.name}-{seq:02d}",
                "attempt_id": attempt,
                "arm": s.arm,
                "server": s.name,
                "phase": phase,
                "seq": seq,
                "start": ts(t),
                "end": ts(end),
                "e2e_s": e2e,
                "status": "ok",
            }
        )
        t = end + GAP_NS
    return rows, t


@dataclass
class Files:
    """A campaign's files before they are written: documents and table rows."""

    campaign: dict[str, Any]
    plan: dict[str, Any]
    tables: dict[str, list[dict[str, Any]]]
    scorer: dict[str, Any] | None

    def write(self, root: Path) -> Path:
        """Write the campaign directory ``root``."""
        (root / "plans").mkdir(parents=True, exist_ok=True)
        (root / "campaign.json").write_text(json.dumps(self.campaign, indent=1), "utf-8")
        (root / "plans" / "final.json").write_text(json.dumps(self.plan, indent=1), "utf-8")
        if self.scorer is not None:
            (root / "scorer.json").write_text(json.dumps(self.scorer), "utf-8")
        for name, rows in self.tables.items():
            text = "".join(json.dumps(r) + "\n" for r in rows)
            (root / f"{name}.jsonl").write_text(text, "utf-8")
        return root

    def seal(self, workdir: Path, key: Ed25519PrivateKey | None, name: str = "c") -> Path:
        """Write under ``workdir`` and seal (signed by ``key``, unsigned when None)."""
        root = self.write(workdir / f"{name}-campaign")
        out = workdir / f"{name}.bundle"
        seal_campaign(root, out, keys=[key] if key else [], force=True)
        return out

    def receipts(self, attempt: str = ACCEPTED) -> list[dict[str, Any]]:
        """Receipt rows of ``attempt``."""
        return [r for r in self.tables["receipts"] if r["attempt_id"] == attempt]

    def claim(self, claim_id: str) -> dict[str, Any]:
        """The claim row ``claim_id``."""
        return next(c for c in self.tables["claims"] if c["claim_id"] == claim_id)


def build(spec: Spec, claims: list[dict[str, Any]] | None = None) -> Files:
    """Campaign files for ``spec``; its claims are :func:`honest_claims` unless given."""
    receipts: list[dict[str, Any]] = []
    exits: list[dict[str, Any]] = []
    telemetry: list[dict[str, Any]] = []
    t = T0_NS
    for s in spec.servers:
        rows, t_end = _server_rows(s, ACCEPTED, t)
        receipts += rows
        for w, e in enumerate(s.exit_s):
            exits.append(
                {
                    "attempt_id": ACCEPTED,
                    "arm": s.arm,
                    "server": s.name,
                    "worker": f"npu{w}",
                    "exit_code": 0,
                    "signal": None,
                    "exit_s": e,
                    "killed": False,
                }
            )
        for d, samples in enumerate(s.hbm):
            for i, v in enumerate(samples):
                telemetry.append(
                    {
                        "attempt_id": ACCEPTED,
                        "arm": s.arm,
                        "server": s.name,
                        "device": f"npu:{d}",
                        "time": ts(t + i * 10**9),
                        "hbm_used_mb": v,
                    }
                )
        t = t_end + SERVER_GAP_NS
    window = (T0_NS - 60 * 10**9, t)
    rej_t0 = T0_NS - 86_400 * 10**9
    rej_t = rej_t0
    for s in spec.rejected:
        rows, rej_t = _server_rows(s, "rejected-1", rej_t)
        receipts += rows
    attempts = [
        {
            "attempt_id": "final-1",
            "status": "interrupted",
            "reason": "reservation soft TERM fired during the first server",
            "start": ts(T0_NS - 2 * 86_400 * 10**9),
            "end": ts(T0_NS - 2 * 86_400 * 10**9 + 3_600 * 10**9),
        },
        {
            "attempt_id": ACCEPTED,
            "status": "accepted",
            "plan": "plans/final.json",
            "start": ts(window[0]),
            "end": ts(window[1]),
        },
    ]
    if spec.rejected:
        attempts.insert(
            1,
            {
                "attempt_id": "rejected-1",
                "status": "rejected",
                "reason": "failed RPC attempt",
                "start": ts(rej_t0 - 60 * 10**9),
                "end": ts(rej_t + 60 * 10**9),
            },
        )
    files = Files(
        campaign={
            "layout_version": "1",
            "id": "replay-test",
            "title": "replay test campaign",
            "kind": "campaign",
            "hardware": {"accelerator": "test", "count": 8},
            "arms": [
                {"id": "baseline", "role": "baseline", "runtime_commit": BASELINE_COMMIT},
                {"id": "candidate", "role": "candidate", "runtime_commit": CANDIDATE_COMMIT},
            ],
            "plan": "plans/final.json",
        },
        plan={
            "plan_version": "1",
            "id": "final",
            "arm_order": spec.arm_order,
            "warmups_per_server": len(spec.servers[0].warmups),
            "measured_per_server": len(spec.servers[0].measured),
            "request": {"api": "videos-async", "timing_boundary": "post_to_delete"},
            "timeouts": {"request_s": 3600},
            "teardown": {
                arm: {"term_wait_s": term, "kill_wait_s": kill}
                for arm, (term, kill) in spec.budgets.items()
            },
            "telemetry": {"interval_s": 5, "source": "npu-smi"},
        },
        tables={
            "attempts": attempts,
            "receipts": receipts,
            "worker_exits": exits,
            "telemetry": telemetry,
            "gates": copy.deepcopy(spec.gates),
            "comparisons": _comparisons(spec, receipts),
            "claims": [],
            "not_claimed": [
                {"what": "p95/p99 latency", "note": "three measured requests per server"},
                {"what": "throughput"},
            ],
        },
        scorer=_SCORER if spec.scorer else None,
    )
    files.tables["claims"] = claims if claims is not None else honest_claims(spec)
    return files


_SCORER = {
    "name": "lpips",
    "version": "0.1.4",
    "net": "alex",
    "weights": [
        {
            "role": "linear",
            "file": "lpips/weights/v0.1/alex.pth",
            "sha256": "df73285e35b22355a2df87cdb6b70b343713b667eddbda73e1977e0c860835c0",
        }
    ],
}


def _comparisons(spec: Spec, receipts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    acc = [r for r in receipts if r["attempt_id"] == ACCEPTED and r["phase"] != "warmup"]
    base = [r["request_id"] for r in acc if r["arm"] == "baseline"]
    cand = [r["request_id"] for r in acc if r["arm"] == "candidate"]
    return [
        {
            "comparison_id": f"cmp-{i:02d}",
            "attempt_id": ACCEPTED,
            "baseline_request_id": base[i % len(base)],
            "candidate_request_id": cand[i % len(cand)],
            "metrics": m,
        }
        for i, m in enumerate(spec.comparisons)
    ]


# --- honest claims, derived independently ----------------------------------------------


def published(value: float | Fraction | int, decimals: int) -> str:
    """How an honest author publishes ``value``: the nearest double, exactly, half-even."""
    if isinstance(value, int):
        return str(value)
    exact = Decimal(float(value))  # float(Fraction) is correctly rounded
    q = exact.quantize(
        Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_EVEN, context=Context(prec=999)
    )
    return str(q)


def _sqrt_frac(f: Fraction) -> float:
    ctx = Context(prec=100)
    return float(ctx.sqrt(ctx.divide(Decimal(f.numerator), Decimal(f.denominator))))


def _claim(cid: str, stat: str, params: dict[str, Any], value: str, unit: str) -> dict[str, Any]:
    return {"claim_id": cid, "statistic": stat, "params": params, "value": value, "unit": unit}


def _margin(gate: dict[str, Any], v: float) -> Fraction:
    fv, ft = Fraction(v), Fraction(gate["threshold"])
    if gate["op"] in (">=", ">"):
        return fv - ft
    if gate["op"] in ("<=", "<"):
        return ft - fv
    return -abs(fv - ft)


def latency_claims(spec: Spec) -> list[dict[str, Any]]:
    """Server and arm means, both SDs, CV, percent lower and speedup, by ``statistics``."""
    out = []
    means: dict[str, list[Fraction]] = {}
    pooled: dict[str, list[float]] = {}
    for s in spec.servers:
        m = sum(map(Fraction, s.measured), Fraction(0)) / len(s.measured)
        # statistics.mean is the correctly rounded mean of the doubles: a second check.
        assert float(m) == statistics.mean(s.measured)
        means.setdefault(s.arm, []).append(m)
        pooled.setdefault(s.arm, []).extend(s.measured)
        p = {"arm": s.arm, "server": s.name}
        out.append(_claim(f"mean-{s.name}", "server_mean_s", p, published(m, 2), "s"))
    arm_mean = {a: sum(ms, Fraction(0)) / len(ms) for a, ms in means.items()}
    for arm, ms in means.items():
        p = {"arm": arm}
        out.append(_claim(f"mean-{arm}", "arm_mean_s", p, published(arm_mean[arm], 2), "s"))
        if len(ms) >= 2:
            var = sum(((x - arm_mean[arm]) ** 2 for x in ms), Fraction(0)) / (len(ms) - 1)
            sd = _sqrt_frac(var)
            out.append(_claim(f"sd-{arm}", "arm_sd_server_means_s", p, published(sd, 2), "s"))
            if arm_mean[arm]:
                cv = _sqrt_frac(var * 10_000 / arm_mean[arm] ** 2)
                out.append(_claim(f"cv-{arm}", "arm_cv_server_means", p, published(cv, 3), "%"))
        if len(pooled[arm]) >= 2:
            sd_req = statistics.stdev(pooled[arm])  # correctly rounded since Python 3.11
            out.append(_claim(f"sdreq-{arm}", "arm_sd_requests_s", p, published(sd_req, 3), "s"))
    b, c = arm_mean["baseline"], arm_mean["candidate"]
    pair = {"baseline": "baseline", "candidate": "candidate"}
    out.append(_claim("lower", "percent_lower", pair, published((1 - c / b) * 100, 2), "%"))
    out.append(_claim("speedup", "speedup", pair, published(b / c, 2), "x"))
    return out


def honest_claims(spec: Spec) -> list[dict[str, Any]]:
    """Every vocabulary statistic of ``spec``, stated as an honest author would publish it."""
    out = latency_claims(spec)
    n_req = sum(len(s.warmups) + len(s.measured) + len(s.quality) for s in spec.servers)
    out.append(_claim("requests", "requests_total", {}, str(n_req), "count"))
    out.append(_claim("requests-ok", "requests_passed", {}, str(n_req), "count"))
    out.append(_claim("cmp", "comparisons_total", {}, str(len(spec.comparisons)), "count"))
    checks = [
        (i, g, m[g["metric"]])
        for i, m in enumerate(spec.comparisons)
        for g in spec.gates
        if g["metric"] in m
    ]
    ops = {
        ">=": lambda v, t: v >= t,
        ">": lambda v, t: v > t,
        "<=": lambda v, t: v <= t,
        "<": lambda v, t: v < t,
        "==": lambda v, t: v == t,
    }
    passing = [(i, g) for i, g, v in checks if ops[g["op"]](v, g["threshold"])]
    if spec.scorer:
        failed = {i for i, g, v in checks if not ops[g["op"]](v, g["threshold"])}
        # A comparison recording no gated metric is neither passing nor failing.
        gated = {i for i, _, _ in checks}
        n_pass = len(gated - failed)
        out.append(_claim("cmp-ok", "comparisons_passed", {}, str(n_pass), "count"))
        out.append(_claim("checks-ok", "gate_checks_passed", {}, str(len(passing)), "count"))
    exits = [(s, e) for s in spec.servers for e in s.exit_s]
    out.append(_claim("exits", "worker_exits_total", {}, str(len(exits)), "count"))
    clean = sum(e <= spec.budgets[s.arm][0] for s, e in exits)
    out.append(_claim("exits-clean", "worker_exits_clean", {}, str(clean), "count"))
    peaks: dict[str, list[Fraction]] = {}
    for s in spec.servers:
        peaks.setdefault(s.arm, []).extend(Fraction(max(d)) for d in s.hbm if d)
    hbm = {a: sum(p, Fraction(0)) / len(p) for a, p in peaks.items() if p}
    for arm, peak in hbm.items():
        out.append(_claim(f"hbm-{arm}", "hbm_peak_mean_mb", {"arm": arm}, published(peak, 1), "MB"))
    if "baseline" in hbm and "candidate" in hbm and hbm["baseline"]:
        change = (hbm["candidate"] / hbm["baseline"] - 1) * 100
        pair = {"baseline": "baseline", "candidate": "candidate"}
        out.append(
            _claim("hbm-change", "hbm_peak_mean_change_pct", pair, published(change, 2), "%")
        )
    metrics = sorted({k for m in spec.comparisons for k in m})
    for name in metrics:
        vals = [m[name] for m in spec.comparisons if name in m]
        p = {"metric": name}
        out.append(_claim(f"min-{name}", "metric_min", p, published(min(vals), 6), "1"))
        out.append(_claim(f"max-{name}", "metric_max", p, published(max(vals), 6), "1"))
        on_metric = [(i, g, v) for i, g, v in checks if g["metric"] == name]
        if on_metric:
            _, gate, value = min(on_metric, key=lambda c: (_margin(c[1], c[2]), c[0]))
            out.append(_claim(f"closest-{name}", "closest_to_gate", p, published(value, 6), "1"))
            margin = published(_margin(gate, value), 6)
            out.append(_claim(f"margin-{name}", "smallest_margin", p, margin, "1"))
    return out
