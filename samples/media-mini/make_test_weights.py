"""Write LPIPS test weights with the real files' layout, deterministically.

The real AlexNet backbone (torchvision's ``alexnet-owt-7be5be79.pth``,
244,408,911 bytes) cannot be had here (no network), so the media-mini sample
and the tests use a backbone generated here with the same layout: a
``torch.save`` state dict with torchvision's AlexNet ``features.{0,3,6,8,10}``
convolution keys and shapes (the classifier, which LPIPS does not use, is left
out). Values come from numpy's PCG64 (seed 0, He-normal weights, zero biases),
stable across numpy versions; the file is saved through an in-memory buffer so
its bytes do not depend on the output file name. The bytes depend on torch's
serialization format: ``samples/media-mini/scorer.json`` records the digest
written by torch 2.14.1.

The linear layers are the real ones: ``lpips/weights/v0.1/alex.pth`` as
shipped inside the lpips 0.1.4 package (6,009 bytes, published SHA-256
``df73285e…``), copied after its digest is checked.

Usage::

    python samples/media-mini/make_test_weights.py --out DIR
"""

from __future__ import annotations

import argparse
import hashlib
import io
from pathlib import Path

import numpy as np

BACKBONE_NAME = "test-alexnet-features-pcg64-0.pth"
LINEAR_NAME = "alex.pth"
LINEAR_SHA256 = "df73285e35b22355a2df87cdb6b70b343713b667eddbda73e1977e0c860835c0"

# torchvision AlexNet ``features``: index -> (out_channels, in_channels, kernel).
ALEX_CONVS: dict[int, tuple[int, int, int]] = {
    0: (64, 3, 11),
    3: (192, 64, 5),
    6: (384, 192, 3),
    8: (256, 384, 3),
    10: (256, 256, 3),
}


def backbone_bytes(seed: int = 0) -> bytes:
    """The test backbone file's bytes (needs torch)."""
    import torch

    rng = np.random.default_rng(seed)
    state: dict[str, torch.Tensor] = {}
    for idx, (out_c, in_c, k) in ALEX_CONVS.items():
        std = np.sqrt(2.0 / (in_c * k * k))
        w = (rng.standard_normal((out_c, in_c, k, k)) * std).astype(np.float32)
        state[f"features.{idx}.weight"] = torch.from_numpy(w)
        state[f"features.{idx}.bias"] = torch.zeros(out_c, dtype=torch.float32)
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def linear_bytes() -> bytes:
    """The real LPIPS v0.1 AlexNet linear weights from the installed lpips package.

    Raises:
        RuntimeError: the packaged file does not have the published digest.
    """
    import lpips

    path = Path(lpips.__file__).parent / "weights" / "v0.1" / "alex.pth"
    data = path.read_bytes()
    got = hashlib.sha256(data).hexdigest()
    if got != LINEAR_SHA256:
        raise RuntimeError(f"{path}: sha256 {got}, published {LINEAR_SHA256}")
    return data


def write_weights(out: Path) -> dict[str, Path]:
    """Write both files into ``out``; returns role -> path."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"backbone": out / BACKBONE_NAME, "linear": out / LINEAR_NAME}
    paths["backbone"].write_bytes(backbone_bytes())
    paths["linear"].write_bytes(linear_bytes())
    return paths


def main() -> None:
    """Command line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="directory to write the weights into")
    args = ap.parse_args()
    for role, p in write_weights(args.out).items():
        data = p.read_bytes()
        print(f"{role}: {p} {len(data)} bytes sha256 {hashlib.sha256(data).hexdigest()}")


if __name__ == "__main__":
    main()
