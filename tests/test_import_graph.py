"""The import graph the design promises: bundler → nothing of ours; replay → bundler; CLI → both.

``bundler`` (the packager) must not import ``replay`` or the CLI package: an
auditor's verify path stays small, and the library layers cannot depend on
how results are printed. ``replay`` must not import the CLI. Seal, verify and
statistical replay never import torch, PyAV or Ray (optional extras).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _imports(package: str) -> list[tuple[str, str]]:
    """(file, imported module) for every import statement under ``package``."""
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out += [(str(path.relative_to(ROOT)), a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out.append((str(path.relative_to(ROOT)), node.module))
    return out


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [("bundler", ("replay", "reprobundle")), ("replay", ("reprobundle",))],
)
def test_no_upward_import(package: str, forbidden: tuple[str, ...]) -> None:
    bad = [(f, m) for f, m in _imports(package) if m.split(".")[0] in forbidden]
    assert bad == []


def test_the_scanner_sees_imports() -> None:
    # The check above cannot pass vacuously: the CLI package does import both layers.
    tops = {m.split(".")[0] for _, m in _imports("reprobundle")}
    assert {"bundler", "replay", "click"} <= tops


def test_seal_verify_and_statistical_replay_never_load_the_heavy_extras(tmp_path: Path) -> None:
    script = f"""
import sys
from pathlib import Path
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from bundler.seal import seal_campaign
from bundler.format.trust import Trust
from bundler.verify import verify_bundle
from replay.api import replay_bundle
key = Ed25519PrivateKey.generate()
out = Path({str(tmp_path)!r}) / "s.bundle"
seal_campaign(Path({str(ROOT / "samples" / "h3-ref2va-5s")!r}), out, keys=[key], force=True)
verify_bundle(out, trust=Trust.keys([key.public_key()]))
r = replay_bundle(out, trust=Trust.keys([key.public_key()]))
assert r.exit_code == 0, r.outcome
loaded = sorted(m for m in ("torch", "torchvision", "lpips", "av", "ray", "matplotlib")
                if m in sys.modules)
print(",".join(loaded))
"""
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def test_only_the_ray_executor_imports_ray() -> None:
    users = sorted(
        {
            f
            for pkg in ("bundler", "replay", "reprobundle")
            for f, m in _imports(pkg)
            if m.split(".")[0] == "ray"
        }
    )
    assert users == ["replay/media/ray_executor.py"]
    # ... and the orchestration loads that module only inside the Ray branch (not at import).
    tree = ast.parse((ROOT / "replay/media/rescore.py").read_text(encoding="utf-8"))
    top = [n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module is not None]
    assert "replay.media.ray_executor" not in top
    assert "replay.media.ray_executor" in {
        n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
    }


def test_a_local_media_replay_never_loads_ray(tmp_path: Path) -> None:
    pytest.importorskip("av")
    script = f"""
import sys
from pathlib import Path
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from bundler.seal import seal_campaign
from bundler.format.trust import Trust
from bundler.verified import open_verified
from replay.media import rescore_bundle
key = Ed25519PrivateKey.generate()
out = Path({str(tmp_path)!r}) / "m.bundle"
sample = Path({str(ROOT / "samples" / "media-mini")!r})
seal_campaign(sample, out, keys=[key])
bundle = open_verified(out, trust=Trust.keys([key.public_key()]))
r = rescore_bundle(bundle, [sample / "media"], jobs=2)
assert len(r.comparisons) == 3
print("ray" in sys.modules)
"""
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
