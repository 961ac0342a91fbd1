"""Shared helpers for the tests on the real writers' recordings (``fixtures/real_writers/``).

One way to run the CLI, to read a recorded JSON file and to take a recording through
``import`` -> ``seal`` -> ``replay``, so that each test file states only what it checks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

HERE = Path(__file__).resolve().parent
REAL = HERE / "fixtures" / "real_writers"
COMMITS = ("--commit", "base=aaaaaaa", "--commit", "cand=bbbbbbb")
# GuideLLM's percentiles and latency metrics -> the claims vocabulary's latency names.
GUIDELLM_PCTS = {"p001": 0.1, "p01": 1, "p05": 5, "p10": 10, "p25": 25, "p50": 50}
GUIDELLM_PCTS |= {"p75": 75, "p90": 90, "p95": 95, "p99": 99, "p999": 99.9}
GUIDELLM_LATENCY = {
    "time_to_first_token_ms": "ttft",
    "request_latency": "e2el",
    "inter_token_latency_ms": "itl",
    "time_per_output_token_ms": "tpot",
}
Floats = npt.NDArray[np.float64]


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """Run ``python -m reprobundle.cli ARGS`` in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "reprobundle.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def read_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` (a recorded tool output or ``recording.json``)."""
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def import_runs(
    tmp: Path, tool: str, arms: Iterable[tuple[str, str | Path]], *extra: str, camp: str = "camp"
) -> subprocess.CompletedProcess[str]:
    """``bundle import TOOL -o TMP/CAMP --arm ARM=SRC ...`` with the two test commits."""
    args: list[str | Path] = ["import", tool, "-o", tmp / camp]
    for arm, src in arms:
        args += ["--arm", f"{arm}={src}"]
    return cli(*args, *COMMITS, *extra)


def seal_unsigned(tmp: Path, name: str = "x.bundle") -> Path:
    """Seal ``TMP/camp`` unsigned into ``TMP/NAME``; the bundle's path."""
    bundle = tmp / name
    seal = cli("seal", tmp / "camp", "-o", bundle, "--unsigned")
    assert seal.returncode == 0, seal.stderr
    return bundle


def replay_json(bundle: Path) -> dict[str, Any]:
    """``bundle replay --allow-unsigned --json``: its document plus ``_exit``."""
    rep = cli("replay", bundle, "--allow-unsigned", "--json")
    doc: dict[str, Any] = json.loads(rep.stdout)
    doc["_exit"] = rep.returncode
    return doc


def import_seal_replay(
    tmp: Path,
    tool: str,
    arms: Iterable[tuple[str, str | Path]],
    *extra: str,
    bundle: str = "x.bundle",
) -> dict[str, Any]:
    """Import, seal unsigned and replay ``--json``; the replay document plus ``_exit``,
    ``_camp`` (the imported campaign) and ``_import`` (the import's completed process)."""
    res = import_runs(tmp, tool, arms, *extra)
    assert res.returncode == 0, res.stderr
    doc = replay_json(seal_unsigned(tmp, bundle))
    doc["_camp"] = tmp / "camp"
    doc["_import"] = res
    return doc


# --- GuideLLM's definitions (read in its source), in plain numpy -----------------------


def guidellm_samples(benchmark: dict[str, Any]) -> dict[str, tuple[Floats, Floats]]:
    """GuideLLM's metric -> (values, weights) of a benchmark's successful requests (ms; s
    for latency): TTFT and latency from ``info.timings``, ITL weighted by output tokens - 1,
    TPOT including the first token, weighted by output tokens."""
    reqs = benchmark["requests"]["successful"]
    t = {
        k: np.array([r["info"]["timings"][k] for r in reqs])
        for k in ("request_start", "first_token_iteration", "last_token_iteration", "request_end")
    }
    out = np.array([r["output_metrics"]["total_tokens"] for r in reqs], dtype=np.float64)
    start, first, last = t["request_start"], t["first_token_iteration"], t["last_token_iteration"]
    ones = np.ones(len(reqs))
    return {
        "time_to_first_token_ms": (1000 * (first - start), ones),
        "request_latency": (t["request_end"] - start, ones),
        "inter_token_latency_ms": (1000 * (last - first) / (out - 1), out - 1),
        "time_per_output_token_ms": (1000 * (last - start) / out, out),
    }


def guidellm_summary(values: Floats, weights: Floats) -> dict[str, float]:
    """Weighted mean, population SD and inverse-CDF percentiles (cumulative shares summed
    in doubles, the first value reaching P/100), as GuideLLM computes them."""
    order = np.argsort(values)
    u, inv = np.unique(values[order], return_inverse=True)
    p = np.bincount(inv, weights=weights[order])
    p = p / p.sum()
    cdf = np.cumsum(p)
    mean = float(np.sum(u * p))
    out = {"mean": mean, "std_dev": float(np.sqrt(np.sum((u - mean) ** 2 * p)))}
    out |= {k: float(u[np.searchsorted(cdf, q / 100)]) for k, q in GUIDELLM_PCTS.items()}
    out["median"] = out["p50"]
    return out


def guidellm_expected(benchmark: dict[str, Any], lp: str) -> dict[str, float]:
    """Claim id (under the load point ``lp``, ``ARM.LOAD_POINT``) -> the value from numpy
    over the benchmark's records, with GuideLLM's definitions."""
    b = benchmark
    out: dict[str, float] = {}
    for tag, (v, w) in guidellm_samples(b).items():
        scale = 1000.0 if tag == "request_latency" else 1.0
        lat = GUIDELLM_LATENCY[tag]
        for stat, x in guidellm_summary(v, w).items():
            key = {"mean": "mean", "std_dev": "std", "median": "median"}.get(stat)
            key = key or f"p{GUIDELLM_PCTS[stat]:g}"
            out[f"{lp}.{key}_{lat}_ms"] = x * scale
    reqs = b["requests"]["successful"]
    n_in = sum(r["input_metrics"]["total_tokens"] for r in reqs)
    n_out = sum(r["output_metrics"]["total_tokens"] for r in reqs)
    window = b["end_time"] - b["start_time"]
    out[f"{lp}.request_throughput"] = len(reqs) / window
    out[f"{lp}.output_throughput"] = n_out / window
    out[f"{lp}.total_token_throughput"] = (n_in + n_out) / window
    out[f"{lp}.completed"] = len(reqs)
    out[f"{lp}.failed"] = len(b["requests"]["errored"])
    return out


def sglang_expected(doc: dict[str, Any]) -> dict[str, float]:
    """SGLang's definitions (vLLM's) in plain numpy over one run's arrays, by aggregate key."""
    ok = np.array([not e for e in doc["errors"]])
    itl = np.concatenate([np.array(x) for x, good in zip(doc["itls"], ok, strict=True) if good])
    out: dict[str, float] = {}
    for lat, v in (("ttft", np.array(doc["ttfts"])[ok]), ("itl", itl)):
        out[f"mean_{lat}_ms"] = float(np.mean(v)) * 1000
        out[f"median_{lat}_ms"] = float(np.median(v)) * 1000
        out[f"std_{lat}_ms"] = float(np.std(v)) * 1000
        for p in (90, 95, 99):
            out[f"p{p}_{lat}_ms"] = float(np.percentile(v, p)) * 1000
    n_in = int(np.array(doc["input_lens"])[ok].sum())
    n_out = int(np.sum(doc["output_lens"]))
    out["request_throughput"] = int(ok.sum()) / doc["duration"]
    out["output_throughput"] = n_out / doc["duration"]
    out["total_token_throughput"] = (n_in + n_out) / doc["duration"]
    out |= {"completed": int(ok.sum()), "total_input_tokens": n_in, "total_output_tokens": n_out}
    return out
