"""The batched LPIPS path (what --device cuda runs), tested on CPU: same verdicts, same values.

Bitwise equality is not expected between batch sizes (a convolution over a
batch may take another kernel path); the values must agree far inside the
LPIPS definition's tolerance (2e-3, ``specs/metrics.md``), and the verdicts
must be the same. A GPU is not available to CI: ``--device cuda`` without
CUDA must be a usage error (exit 2).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("av")
pytest.importorskip("torch", reason="the [lpips] extra is not installed")
pytest.importorskip("lpips", reason="the [lpips] extra is not installed")

import torch

from bundler.format.trust import Trust
from bundler.seal import seal_campaign
from bundler.verified import VerifiedBundle, open_verified
from replay.engine.verdicts import decide
from replay.media import rescore_bundle
from replay.media.lpips_batch import GPU_BATCH_MAX, cpu_batch, gpu_batch
from tests.conftest import make_keys

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "media-mini"
LPIPS = "lpips/alex-v0.1-frame-mean"
CLI = [sys.executable, "-m", "reprobundle.cli"]
MEDIA = ["--media", str(SAMPLE / "media")]


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = importlib.util.spec_from_file_location("mtw", SAMPLE / "make_test_weights.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    d = tmp_path_factory.mktemp("weights")
    mod.write_weights(d)
    return d


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, VerifiedBundle]:
    d = tmp_path_factory.mktemp("sealed")
    keys = make_keys(d)
    seal_campaign(SAMPLE, d / "mini.bundle", keys=[keys.private])
    return d / "mini.bundle", open_verified(d / "mini.bundle", trust=Trust.keys([keys.public]))


def test_batch_rules_by_hand() -> None:
    # 80 GiB free, half of it, 1024 bytes per pixel per 720p frame pair: 45.5 -> 45.
    assert gpu_batch(80 * 2**30, 1280 * 720) == 45
    assert gpu_batch(139 * 2**30, 1280 * 720) == GPU_BATCH_MAX  # 79 capped at 64
    assert gpu_batch(100 * 2**20, 1280 * 720) == 1  # never 0
    assert gpu_batch(8 * 2**30, 160 * 90) == GPU_BATCH_MAX
    assert cpu_batch(1280 * 720) == 1  # 1,000,000 // 921,600
    assert cpu_batch(320 * 192) == 8  # 16 capped at 8


def test_batched_path_gives_the_unbatched_values_and_verdicts(
    sealed: tuple[Path, VerifiedBundle], weights: Path
) -> None:
    _, bundle = sealed
    one = rescore_bundle(bundle, [SAMPLE / "media"], weights_dir=weights, lpips_batch=1)
    many = rescore_bundle(bundle, [SAMPLE / "media"], weights_dir=weights, lpips_batch=16)
    assert one.execution is not None and many.execution is not None
    assert one.execution.lpips_batch == {"160x90": 1}
    assert many.execution.lpips_batch == {"160x90": 16}
    assert many.execution.lpips_batch_rule == "given (--lpips-batch)"
    assert many.execution.device == "cpu"
    assert many.execution.lpips_tolerance == 2e-3
    for a, b in zip(one.comparisons, many.comparisons, strict=True):
        va, vb = a.per_frame[LPIPS], b.per_frame[LPIPS]
        assert len(va) == len(vb) == 48
        assert max(va) > 1e-4  # the candidates differ (±2 levels of noise): nonzero
        np.testing.assert_allclose(vb, va, rtol=1e-5, atol=1e-6)
        assert [(g.gate_id, g.recomputed_verdict) for g in a.gates] == [
            (g.gate_id, g.recomputed_verdict) for g in b.gates
        ]
        assert [(m.metric, m.status) for m in a.metrics] == [
            (m.metric, m.status) for m in b.metrics
        ]
    assert decide(one.integrity_failures(), one.failures(), one.gaps()) == decide(
        many.integrity_failures(), many.failures(), many.gaps()
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_device_cuda_without_cuda_is_exit_2(sealed: tuple[Path, VerifiedBundle]) -> None:
    path, _ = sealed
    p = subprocess.run(
        [*CLI, "replay", str(path), "--allow-unsigned", *MEDIA, "--device", "cuda", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2, p.stderr
    doc = json.loads(p.stdout) if p.stdout.strip() else {}
    text = p.stderr + json.dumps(doc)
    assert "CUDA is not available" in text
    assert "Traceback" not in p.stderr


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA here")
def test_cuda_agrees_with_cpu_within_tolerance(
    sealed: tuple[Path, VerifiedBundle], weights: Path
) -> None:
    _, bundle = sealed
    cpu = rescore_bundle(bundle, [SAMPLE / "media"], weights_dir=weights)
    gpu = rescore_bundle(bundle, [SAMPLE / "media"], weights_dir=weights, device="cuda")
    assert gpu.execution is not None and gpu.execution.device == "cuda"
    assert gpu.execution.lpips_batch["160x90"] >= 1
    for a, b in zip(cpu.comparisons, gpu.comparisons, strict=True):
        np.testing.assert_allclose(b.per_frame[LPIPS], a.per_frame[LPIPS], atol=1e-4)
        assert [g.recomputed_verdict for g in a.gates] == [g.recomputed_verdict for g in b.gates]
