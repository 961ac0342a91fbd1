"""Generate a synthetic vLLM ``bench serve --save-result --save-detailed`` pair (deterministic).

Three load points per arm (``--request-rate inf`` at ``--max-concurrency`` 1, 8
and 32), 200 prompts each. The per-request numbers are drawn from a seeded
generator (they are synthetic: no model, no server, no GPU ran); the
aggregates are computed from them exactly as ``vllm/benchmarks/serve.py``
(``calculate_metrics``) computes them: numpy mean/median/std/percentile × 1000
over the successful requests, throughput over the duration. The file layout
(keys, ``request_rate`` as the string ``"inf"``, ``date`` without time zone,
``errors`` with ``""`` for a success) follows that writer.

Run: ``python samples/vllm-serve-sweep/make_sweep.py`` (rewrites ``results/``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)
CONCURRENCY = (1, 8, 32)
ARMS = {"baseline": 1.0, "candidate": 0.8}  # candidate: 20 % faster decode (synthetic)


def _stats(result: dict[str, Any], name: str, values: list[float]) -> None:
    result[f"mean_{name}_ms"] = float(np.mean(values or 0) * 1000)
    result[f"median_{name}_ms"] = float(np.median(values or 0) * 1000)
    result[f"std_{name}_ms"] = float(np.std(values or 0) * 1000)
    for p in PERCENTILES:
        word = str(int(p)) if int(p) == p else str(p)
        result[f"p{word}_{name}_ms"] = float(np.percentile(values or 0, p) * 1000)


def make_result(
    seed: int, concurrency: int, speed: float, n: int = 200, failures: int = 0
) -> dict[str, Any]:
    """One result file's content, as the writer would produce it."""
    rng = np.random.default_rng(seed)
    input_lens = rng.integers(64, 512, size=n).tolist()
    output_lens = rng.integers(1, 64, size=n).tolist()
    ttfts, itls, latencies, errors, texts, start = [], [], [], [], [], []
    t = 0.0
    for i in range(n):
        ok = i >= failures
        queue = 0.002 * concurrency
        ttft = float(queue + 0.02 + 0.0001 * input_lens[i] + rng.exponential(0.005))
        gaps = (
            [
                float(speed * (0.01 + 0.0002 * concurrency) + rng.exponential(0.002))
                for _ in range(output_lens[i] - 1)
            ]
            if ok
            else []
        )
        lat = float(ttft + sum(gaps) + rng.uniform(0, 0.001)) if ok else 0.0
        ttfts.append(ttft if ok else 0.0)
        itls.append(gaps)
        latencies.append(lat)
        errors.append("" if ok else "Bad Request")
        texts.append("x" * output_lens[i] if ok else "")
        start.append(round(t, 6))
        t += 0.001
        if not ok:
            output_lens[i] = 0
    okm = [e == "" for e in errors]
    duration = float(sum(latencies) / concurrency + 0.05)
    s_ttft = [v for v, k in zip(ttfts, okm, strict=False) if k]
    s_lat = [v for v, k in zip(latencies, okm, strict=False) if k]
    tpots = [
        (latencies[i] - ttfts[i]) / (output_lens[i] - 1)
        for i in range(n)
        if okm[i] and output_lens[i] > 1
    ]
    s_itl = [g for i in range(n) if okm[i] for g in itls[i]]
    completed = sum(okm)
    total_input = sum(x for x, k in zip(input_lens, okm, strict=False) if k)
    total_output = sum(output_lens)
    result: dict[str, Any] = {
        "date": "20251201-101500",
        "endpoint_type": "openai-chat",
        "backend": "openai-chat",
        "label": None,
        "model_id": "synthetic/model",
        "tokenizer_id": "synthetic/model",
        "num_prompts": n,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": concurrency,
        "duration": duration,
        "completed": completed,
        "failed": n - completed,
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
        "request_throughput": completed / duration,
        "request_goodput": None,
        "output_throughput": total_output / duration,
        "total_token_throughput": (total_input + total_output) / duration,
        "input_lens": input_lens,
        "output_lens": output_lens,
        "ttfts": ttfts,
        "itls": itls,
        "latencies": latencies,
        "start_times": start,
        "generated_texts": texts,
        "errors": errors,
        "max_output_tokens_per_s": 0.0,
        "max_concurrent_requests": concurrency,
    }
    for name, values in (("ttft", s_ttft), ("tpot", tpots), ("itl", s_itl), ("e2el", s_lat)):
        _stats(result, name, values)
    return result


def main(out: Path = HERE / "results") -> list[Path]:
    """Write the six result files; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for a, (arm, speed) in enumerate(ARMS.items()):
        for c in CONCURRENCY:
            doc = make_result(
                seed=1000 * a + c, concurrency=c, speed=speed, failures=1 if c == 32 else 0
            )
            p = out / f"openai-chat-infqps-concurrency{c}-synthetic-{arm}.json"
            p.write_text(json.dumps(doc), encoding="utf-8")
            paths.append(p)
    return paths


if __name__ == "__main__":
    for p in main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results"):
        print(p)
