"""The import graph the design promises: bundler → nothing of ours; replay → bundler; CLI → both.

``bundler`` (the packager) must not import ``replay``, ``rerun`` or the CLI package:
an auditor's verify path stays small, and the library layers cannot depend on
how results are printed. ``bundler.format`` (the bytes of a bundle) imports
nothing of bundler above it. ``rerun`` (a recorder) imports bundler only, never
replay. ``replay`` must not import the CLI. No module imports itself back through
others: no import circle, counting the imports inside functions too (a lazy
import hides a circle from the interpreter, not from the design). Seal, verify
and statistical replay never import torch, PyAV or Ray (optional extras).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bundler", "replay", "rerun", "reprobundle")


def _modules(root: Path, packages: Sequence[str]) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``packages`` under ``root``."""
    out = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module ``node`` imports from (relative imports resolved)."""
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")
    if path.name != "__init__.py":  # a module's level 1 is its package
        parts = parts[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, *([node.module] if node.module else [])])


def import_graph(root: Path, packages: Sequence[str] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports, anywhere in its body.

    Every ``import``/``from ... import`` node counts (``ast.walk``: in functions and
    ``if`` blocks too); ``from pkg import name`` counts ``pkg.name`` when that is a
    module, else ``pkg``.
    """
    mods = _modules(root, packages)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(mod, path, node)
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            else:
                continue
            for target in targets:
                t = target
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    edges[mod].add(t)
    return edges


def circles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(edges) + 100))
    try:
        for v in sorted(edges):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def _in(module: str, packages: Sequence[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_no_import_circle_lazy_imports_included() -> None:
    assert circles(import_graph(ROOT)) == []


@pytest.mark.parametrize(
    ("package", "allowed"),
    [
        # The format (a bundle's bytes) knows nothing of campaigns, sealing or verifying.
        ("bundler.format", ("bundler.format", "bundler._internal", "bundler.errors")),
        # The recorder reads a sealed bundle through bundler only: never replay, never the CLI.
        ("rerun", ("rerun", "bundler")),
        ("bundler", ("bundler",)),
        ("replay", ("replay", "bundler")),
    ],
)
def test_layers_import_only_below(package: str, allowed: tuple[str, ...]) -> None:
    edges = import_graph(ROOT)
    bad = sorted(
        (m, t) for m, ts in edges.items() if _in(m, (package,)) for t in ts if not _in(t, allowed)
    )
    assert bad == []


def _write(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_circle_finder_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    # A circle only through a function-level relative import, one through a package
    # __init__ re-export, and a chain that is no circle.
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.sub import c\n",
            "pkg/a.py": "from pkg import b\n",
            "pkg/b.py": "def f():\n    from . import a\n    return a\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/c.py": "import pkg\n",
            "pkg/sub/d.py": "from ..a import x\nfrom .c import y\n",
        },
    )
    edges = import_graph(tmp_path, ("pkg",))
    assert edges["pkg.b"] == {"pkg", "pkg.a"}
    assert edges["pkg.sub.d"] == {"pkg.a", "pkg.sub.c"}
    # pkg runs pkg.sub.c, which imports pkg; a and b import each other (b lazily). The
    # empty pkg.sub imports nothing, so it is on no circle.
    assert circles(edges) == [["pkg", "pkg.sub.c"], ["pkg.a", "pkg.b"]]


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
    [
        ("bundler", ("replay", "rerun", "reprobundle")),
        ("replay", ("reprobundle",)),
        ("rerun", ("replay", "reprobundle")),
    ],
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
    users = sorted({f for pkg in PACKAGES for f, m in _imports(pkg) if m.split(".")[0] == "ray"})
    assert users == ["replay/media/executors/ray.py"]
    # ... and the orchestration loads that module only inside the Ray branch (not at import).
    tree = ast.parse((ROOT / "replay/media/rescore.py").read_text(encoding="utf-8"))
    top = [n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module is not None]
    assert "replay.media.executors.ray" not in top
    assert "replay.media.executors.ray" in {
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
