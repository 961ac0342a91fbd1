"""LPIPS (AlexNet, v0.1) from attested local weights only (``lpips/alex-v0.1-frame-mean``).

``lpips.LPIPS(net="alex")`` normally asks torchvision for ImageNet AlexNet
weights, which are downloaded into the torch hub cache and hash-checked only
when downloaded (a cached file is loaded unchecked), and loads its linear
layers with ``strict=False`` (a key mismatch silently leaves random layers).
Here instead:

1. both weight files are found in the weights directory by the SHA-256
   that the bundle's ``scorer.json`` records (names may differ), and read
   into memory, re-hashed, and only then given to
   ``torch.load(weights_only=True)``;
2. the network is built with ``pnet_rand=True, pretrained=False`` inside a
   guard that makes every torch hub / torchvision download raise;
3. the backbone (torchvision's AlexNet layout, ``features.{0,3,6,8,10}``) and
   the five linear layers (``lin{0..4}.model.1.weight``) are loaded with
   strict key and shape checks;
4. the identity actually used (digests, files, package, torch versions,
   device) is returned for the replay result.

Anything missing or mismatching makes the scorer ``unattested``: its gates
never PASS, and the rest of the replay runs. torch, torchvision and lpips (the
``[lpips]`` extra) are imported lazily, only by this module and the parts it
puts together: :mod:`replay.media.lpips_weights` (step 1),
:mod:`replay.media.lpips_net` (steps 2 and 3, and the forward pass),
:mod:`replay.media.device` and :mod:`replay.media.lpips_identity` (step 4).
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

from bundler.format.plan_model import ScorerDoc
from replay.media.device import resolve_device
from replay.media.lpips_identity import ATTESTED, UNATTESTED, ScorerIdentity, WeightUse
from replay.media.lpips_net import AttestedLpips, build_network
from replay.media.lpips_weights import Refused, locate_weights, read_state_dicts

__all__ = ["load_attested_lpips"]


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _unattested(
    scorer: ScorerDoc | None, reason: str, weights: list[WeightUse], **kw: Any
) -> tuple[None, ScorerIdentity]:
    return None, ScorerIdentity(
        UNATTESTED,
        reason,
        None if scorer is None else scorer.name,
        None if scorer is None else scorer.version,
        None if scorer is None else scorer.net,
        weights=weights,
        **kw,
    )


def load_attested_lpips(
    scorer: ScorerDoc | None,
    weights_dir: Path | None,
    device: str = "cpu",
    *,
    jobs: int | None = None,
) -> tuple[AttestedLpips | None, ScorerIdentity]:
    """Build LPIPS from weights verified against ``scorer`` (the bundle's ``scorer.json``).

    Args:
        scorer: the bundle's scorer identity (``name`` lpips, ``net`` alex,
            ``version``, ``weights`` with roles ``backbone`` and ``linear``).
        weights_dir: where to look for the weight files, by SHA-256.
        device: ``cpu`` (default), ``cuda[:N]`` or ``npu[:N]``.
        jobs: hashing threads.

    Returns:
        The scorer (None unless attested) and the identity used or refused,
        with the reason.

    Raises:
        DeviceError: the requested device is not available (a usage error).
    """
    if scorer is None:
        return _unattested(None, "the bundle has no scorer.json", [])
    try:
        uses = locate_weights(scorer, weights_dir, jobs)
    except Refused as r:
        return _unattested(scorer, r.reason, r.uses)
    try:
        import lpips
        import torch
        import torchvision  # noqa: F401 - lpips builds AlexNet through it
    except ImportError as exc:
        return _unattested(
            scorer,
            f"the [lpips] extra is not installed ({exc.name}): pip install 'reprobundle[lpips]'",
            uses,
        )
    versions: dict[str, Any] = {
        "package_version": _version("lpips"),
        "torch_version": str(torch.__version__),
        "torchvision_version": _version("torchvision"),
    }
    want_version = scorer.version
    if versions["package_version"] != want_version:
        return _unattested(
            scorer,
            f"scorer.json records lpips {want_version}, lpips "
            f"{versions['package_version']} is installed",
            uses,
            **versions,
        )
    dev = resolve_device(torch, device)
    try:
        model = build_network(lpips, read_state_dicts(torch, uses), uses)
    except Refused as r:
        return _unattested(scorer, r.reason, r.uses, **versions)
    model.to(dev)
    identity = ScorerIdentity(
        ATTESTED,
        "every weight verified by SHA-256 and loaded with strict key checks",
        scorer.name,
        want_version,
        "alex" if scorer.net is None else scorer.net,
        package_version=versions["package_version"],
        torch_version=versions["torch_version"],
        torchvision_version=versions["torchvision_version"],
        device=str(dev),
        weights=uses,
    )
    return AttestedLpips(model, dev, identity), identity
