"""Attested LPIPS: weights verified before loading, strict keys, no downloads, unattested otherwise.

The real AlexNet backbone (``alexnet-owt-7be5be79.pth``) cannot be had here:
these tests use the backbone that ``samples/media-mini/make_test_weights.py``
generates with the real file's layout, and the real LPIPS linear layers that
ship inside the lpips package. LPIPS values are checked against a bare
``lpips.LPIPS`` forward pass set up independently in this file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch", reason="the [lpips] extra (torch) is not installed")
pytest.importorskip("torchvision", reason="the [lpips] extra (torchvision) is not installed")
pytest.importorskip("lpips", reason="the [lpips] extra (lpips) is not installed")
pytest.importorskip("av")

import lpips
import torch

from bundler.content import read_scorer
from bundler.format.plan_model import ScorerDoc
from bundler.format.trust import Trust
from bundler.seal import seal_campaign
from bundler.verified import VerifiedBundle, open_verified
from replay.engine.verdicts import GateVerdict
from replay.media import DeviceError, rescore_bundle
from replay.media.colour import yuv420p_to_rgb
from replay.media.lpips_attested import load_attested_lpips
from replay.media.lpips_net import _no_downloads
from replay.media.probe import MediaReader
from tests.conftest import make_keys

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "media-mini"
SCORER = json.loads((SAMPLE / "scorer.json").read_text())


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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
def bundle(tmp_path_factory: pytest.TempPathFactory) -> VerifiedBundle:
    d = tmp_path_factory.mktemp("sealed")
    keys = make_keys(d)
    seal_campaign(SAMPLE, d / "mini.bundle", keys=[keys.private])
    return open_verified(d / "mini.bundle", trust=Trust.keys([keys.public]))


def test_generated_weights_are_the_ones_the_sample_scorer_names(weights: Path) -> None:
    digests = {sha(p.read_bytes()) for p in weights.iterdir()}
    assert digests == {w["sha256"] for w in SCORER["weights"]}
    # The linear layers are the real ones, with their published digest.
    assert "df73285e35b22355a2df87cdb6b70b343713b667eddbda73e1977e0c860835c0" in digests


def bare_lpips(weights: Path) -> Any:
    """lpips.LPIPS set up by hand from the same files (the second method)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = lpips.LPIPS(net="alex", pretrained=False, pnet_rand=True, verbose=False)
    files = {sha(p.read_bytes()): p for p in weights.iterdir()}
    role = {w["role"]: files[w["sha256"]] for w in SCORER["weights"]}
    bb = torch.load(role["backbone"], weights_only=True)
    lin = torch.load(role["linear"], weights_only=True, map_location="cpu")
    slices = [
        model.net.slice1,
        model.net.slice2,
        model.net.slice3,
        model.net.slice4,
        model.net.slice5,
    ]
    for sl, idx in zip(slices, (0, 3, 6, 8, 10), strict=True):
        conv = getattr(sl, str(idx))
        conv.weight.data.copy_(bb[f"features.{idx}.weight"])
        conv.bias.data.copy_(bb[f"features.{idx}.bias"])
    for k in range(5):
        model.lins[k].model[1].weight.data.copy_(lin[f"lin{k}.model.1.weight"])
    return model.eval()


def rgb_by_hand(y: Any, u: Any, v: Any) -> Any:
    """BT.601 limited range in float64, chroma by Kronecker product, rounded, to [−1, 1]."""
    h, w = y.shape
    cu = np.kron(u.astype(np.float64) - 128, np.ones((2, 2)))[:h, :w]
    cv = np.kron(v.astype(np.float64) - 128, np.ones((2, 2)))[:h, :w]
    m = np.array(
        [
            [1.0, 0.0, 1.402],
            [1.0, -0.114 * 1.772 / 0.587, -0.299 * 1.402 / 0.587],
            [1.0, 1.772, 0.0],
        ]
    )
    ycc = np.stack([(y.astype(np.float64) - 16) * 255 / 219, cu * 255 / 224, cv * 255 / 224])
    rgb = np.clip(np.rint(np.einsum("ij,jhw->ihw", m, ycc)), 0, 255)
    return torch.from_numpy((rgb / 127.5 - 1).astype(np.float32))


def test_attested_lpips_matches_a_bare_forward_pass(bundle: VerifiedBundle, weights: Path) -> None:
    r = rescore_bundle(bundle, [SAMPLE / "media"], weights_dir=weights, comparison_ids=["cmp-01"])
    assert r.scorer is not None and r.scorer.status == "attested", r.scorer
    assert [c.comparison_id for c in r.comparisons] == ["cmp-01"]
    assert {w.role: w.status for w in r.scorer.weights} == {"backbone": "ok", "linear": "ok"}
    assert r.scorer.package_version == "0.1.4"
    assert r.scorer.torch_version == str(torch.__version__)
    c = r.comparisons[0]
    assert c.comparison_id == "cmp-01"
    ours = c.per_frame["lpips/alex-v0.1-frame-mean"]
    assert len(ours) == 48
    model = bare_lpips(weights)
    fa = list(MediaReader((SAMPLE / "media/baseline-00.mp4").read_bytes(), chroma=True).frames())
    fb = list(MediaReader((SAMPLE / "media/candidate-00.mp4").read_bytes(), chroma=True).frames())
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny frames: OpenMP fork/join would dominate
    try:
        with torch.no_grad():
            theirs = [
                float(model(rgb_by_hand(a.y, a.u, a.v)[None], rgb_by_hand(b.y, b.u, b.v)[None]))
                for a, b in zip(fa[:8], fb[:8], strict=True)
            ]
    finally:
        torch.set_num_threads(threads)
    np.testing.assert_allclose(ours[:8], theirs, rtol=1e-4, atol=1e-7)
    lp = next(g for g in c.gates if g.gate_id == "lpips-max")
    assert lp.recomputed_verdict is GateVerdict.PASS
    m = next(x for x in c.metrics if x.metric == "lpips")
    assert m.status == "agree"  # the generator's recorded value, 4 decimals


def test_identical_frames_have_zero_lpips(bundle: VerifiedBundle, weights: Path) -> None:
    scorer, ident = load_attested_lpips(read_scorer(bundle), weights)
    assert scorer is not None and ident.attested
    f = next(
        iter(MediaReader((SAMPLE / "media/baseline-00.mp4").read_bytes(), chroma=True).frames())
    )
    assert f.u is not None and f.v is not None
    x = yuv420p_to_rgb(f.y, f.u, f.v)
    assert scorer.distances([x, x], [x, x]) == [0.0, 0.0]


def test_one_changed_byte_makes_lpips_unattested_never_pass(
    bundle: VerifiedBundle, weights: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "w"
    shutil.copytree(weights, bad)
    target = next(p for p in bad.iterdir() if p.stat().st_size > 100_000)
    data = bytearray(target.read_bytes())
    data[-100] ^= 0x01
    target.write_bytes(bytes(data))
    r = rescore_bundle(bundle, [SAMPLE / "media"], weights_dir=bad)
    assert r.scorer is not None and r.scorer.status == "unattested"
    assert {w.role: w.status for w in r.scorer.weights}["backbone"] == "mismatch"
    for c in r.comparisons:
        lp = next(g for g in c.gates if g.gate_id == "lpips-max")
        assert lp.recomputed_verdict is GateVerdict.UNATTESTED
        ssim = next(g for g in c.gates if g.gate_id == "ssim-min")
        assert ssim.recomputed_verdict is GateVerdict.PASS
    assert next(g for g in r.gates if g.gate_id == "lpips-max").recomputed_verdict == "unattested"


def scorer_for(files: dict[str, bytes], tmp: Path) -> dict[str, Any]:
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    return {
        "name": "lpips",
        "version": "0.1.4",
        "net": "alex",
        "weights": [
            {"role": role, "file": role, "sha256": sha(data)} for role, data in files.items()
        ],
    }


def saved(obj: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def test_strict_keys_and_weights_only(weights: Path, tmp_path: Path) -> None:
    files = {sha(p.read_bytes()): p.read_bytes() for p in weights.iterdir()}
    role = {w["role"]: files[w["sha256"]] for w in SCORER["weights"]}
    bb = torch.load(io.BytesIO(role["backbone"]), weights_only=True)
    lin = torch.load(io.BytesIO(role["linear"]), weights_only=True, map_location="cpu")

    renamed = {k.replace("features.", "feats."): v for k, v in bb.items()}
    _, ident = load_attested_lpips(
        ScorerDoc.from_dict(
            scorer_for({"backbone": saved(renamed), "linear": role["linear"]}, tmp_path)
        ),
        tmp_path,
    )
    assert ident.status == "unattested"
    assert {w.role: w.status for w in ident.weights}["backbone"] == "bad-layout"

    short = dict(lin)
    del short["lin4.model.1.weight"]
    d2 = tmp_path / "b"
    d2.mkdir()
    _, ident = load_attested_lpips(
        ScorerDoc.from_dict(scorer_for({"backbone": role["backbone"], "linear": saved(short)}, d2)),
        d2,
    )
    assert ident.status == "unattested"
    assert "lin4.model.1.weight" in ident.reason

    wrong_shape = dict(lin)
    wrong_shape["lin0.model.1.weight"] = torch.zeros(1, 65, 1, 1)
    d3 = tmp_path / "c"
    d3.mkdir()
    _, ident = load_attested_lpips(
        ScorerDoc.from_dict(
            scorer_for({"backbone": role["backbone"], "linear": saved(wrong_shape)}, d3)
        ),
        d3,
    )
    assert ident.status == "unattested"
    assert "strict load failed" in ident.reason

    # An arbitrary pickled object is refused by weights_only=True, never executed.
    d4 = tmp_path / "d"
    d4.mkdir()
    _, ident = load_attested_lpips(
        ScorerDoc.from_dict(
            scorer_for({"backbone": saved({"f": Path("x")}), "linear": role["linear"]}, d4)
        ),
        d4,
    )
    assert ident.status == "unattested"
    assert "weights_only" in ident.reason


def test_scorer_identity_refusals(weights: Path) -> None:
    assert load_attested_lpips(None, weights)[1].reason == "the bundle has no scorer.json"
    _, ident = load_attested_lpips(ScorerDoc.from_dict(SCORER), None)
    assert ident.status == "unattested"
    assert ident.reason == "no directory of scorer weight files was given"
    _, ident = load_attested_lpips(ScorerDoc.from_dict({**SCORER, "version": "0.1.3"}), weights)
    assert ident.status == "unattested"
    assert "0.1.3" in ident.reason
    _, ident = load_attested_lpips(ScorerDoc.from_dict({**SCORER, "net": "vgg"}), weights)
    assert ident.status == "unattested"


def test_downloads_are_impossible_inside_the_scorer() -> None:
    import torchvision

    orig = torch.hub.load_state_dict_from_url
    with _no_downloads():
        with pytest.raises(RuntimeError, match="download refused"):
            torch.hub.load_state_dict_from_url("https://invalid.invalid/x.pth")
        with pytest.raises(RuntimeError, match="download refused"):
            torchvision.models.alexnet(weights="IMAGENET1K_V1")
    assert torch.hub.load_state_dict_from_url is orig


def test_an_unavailable_device_is_a_usage_error(weights: Path) -> None:
    with pytest.raises(DeviceError, match="expected cpu"):
        load_attested_lpips(ScorerDoc.from_dict(SCORER), weights, device="tpu")
    if not torch.cuda.is_available():
        with pytest.raises(DeviceError, match="CUDA"):
            load_attested_lpips(ScorerDoc.from_dict(SCORER), weights, device="cuda")
