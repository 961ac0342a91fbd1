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
``[lpips]`` extra) are imported only here, lazily.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import io
import re
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from replay.media.identity import OK, ArtifactRef, IdentityError, locate, read_verified

__all__ = [
    "ATTESTED",
    "BACKBONE_KEYS",
    "LINEAR_KEYS",
    "LPIPS_DEFINITION",
    "UNATTESTED",
    "AttestedLpips",
    "DeviceError",
    "ScorerIdentity",
    "WeightUse",
    "check_device",
    "cpu_batch",
    "gpu_batch",
    "load_attested_lpips",
    "yuv420p_to_rgb",
]

LPIPS_DEFINITION = "lpips/alex-v0.1-frame-mean"
ATTESTED = "attested"
UNATTESTED = "unattested"

# AlexNet conv layers inside torchvision's ``features`` Sequential, and the lpips
# slice each one lands in (lpips.pretrained_networks.alexnet: slices end at 2, 5, 8, 10, 12).
_ALEX_CONVS: tuple[tuple[int, int], ...] = ((0, 1), (3, 2), (6, 3), (8, 4), (10, 5))
BACKBONE_KEYS: frozenset[str] = frozenset(
    f"features.{i}.{p}" for i, _ in _ALEX_CONVS for p in ("weight", "bias")
)
# The real alexnet-owt-7be5be79.pth also carries the classifier, which LPIPS does not use.
_BACKBONE_IGNORED: frozenset[str] = frozenset(
    f"classifier.{i}.{p}" for i in (1, 4, 6) for p in ("weight", "bias")
)
LINEAR_KEYS: frozenset[str] = frozenset(f"lin{k}.model.1.weight" for k in range(5))

_load_lock = threading.Lock()

SMALL_FRAME_PIXELS = 320 * 180
"""Below this many pixels a CPU forward pass runs on one thread (see ``AttestedLpips``)."""


CPU_BATCH_PIXELS = 1_000_000
CPU_BATCH_MAX = 8
"""CPU: frames per LPIPS forward pass, as many as fit ``CPU_BATCH_PIXELS`` (at least 1, at
most ``CPU_BATCH_MAX``). Batching amortizes per-call overhead on small frames; at 720p one
frame per pass is fastest on CPU (4 per pass measured 1.3× slower)."""

GPU_BYTES_PER_PIXEL = 1024
"""Accelerator memory one frame pair needs per pixel in a forward pass, an upper estimate:
AlexNet's five feature maps hold about 10.5 floats per input pixel per image; LPIPS keeps
them, their normalized copies and squared differences for both images (about 60 floats,
240 bytes), doubled for the allocator's slack and the inputs, then doubled again."""
GPU_MEMORY_SHARE = 0.5
"""Share of the device's free memory (at the first batch) a forward pass may use."""
GPU_BATCH_MAX = 64


def cpu_batch(pixels: int) -> int:
    """Frames per CPU forward pass for frames of ``pixels`` pixels."""
    return min(CPU_BATCH_MAX, max(1, CPU_BATCH_PIXELS // max(1, pixels)))


def gpu_batch(free_bytes: int, pixels: int) -> int:
    """Frames per accelerator forward pass: what fits ``GPU_MEMORY_SHARE`` of ``free_bytes``."""
    fit = int(free_bytes * GPU_MEMORY_SHARE) // (GPU_BYTES_PER_PIXEL * max(1, pixels))
    return min(GPU_BATCH_MAX, max(1, fit))


class DeviceError(ValueError):
    """The requested torch device does not exist here (a usage error)."""


@dataclass(frozen=True)
class WeightUse:
    """One weights file the scorer needs, and what was found for it."""

    role: str
    recorded_file: str
    sha256: str
    recorded_bytes: int | None
    status: str  # ok | absent | mismatch | not-attested | unreadable | bad-layout | unused
    found_at: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class ScorerIdentity:
    """The LPIPS scorer identity the bundle records, and what was actually used."""

    status: str  # attested | unattested
    reason: str
    name: str | None
    version: str | None
    net: str | None
    definition: str = LPIPS_DEFINITION
    package_version: str | None = None
    torch_version: str | None = None
    torchvision_version: str | None = None
    device: str | None = None
    weights: list[WeightUse] = field(default_factory=list)

    @property
    def attested(self) -> bool:
        """True when every weight was verified and loaded strictly."""
        return self.status == ATTESTED

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return asdict(self)


# ---------------------------------------------------------------- colour


def yuv420p_to_rgb(
    y: npt.NDArray[np.uint8], u: npt.NDArray[np.uint8], v: npt.NDArray[np.uint8]
) -> npt.NDArray[np.float32]:
    """8-bit BT.601 limited-range 4:2:0 to LPIPS input: float32 ``[3, H, W]`` in [−1, 1].

    Chroma is upsampled by repeating each sample 2×2 (cropped to H×W); the
    matrix is BT.601 limited range (Kr 0.299, Kb 0.114; Y 16–235, C 16–240);
    RGB is rounded half to even, clipped to 0–255 as an 8-bit RGB decode
    would, then scaled by ``x / 127.5 − 1`` (``lpips.im2tensor``).
    """
    h, w = y.shape
    ch, cw = u.shape
    kr, kb = 0.299, 0.114
    kg = 1.0 - kr - kb
    ys = np.float32(255.0 / 219.0)
    cs = 255.0 / 224.0
    r_v = np.float32(cs * 2 * (1 - kr))
    b_u = np.float32(cs * 2 * (1 - kb))
    g_u = np.float32(cs * 2 * (1 - kb) * kb / kg)
    g_v = np.float32(cs * 2 * (1 - kr) * kr / kg)
    cu = u.astype(np.float32) - np.float32(128)
    cv = v.astype(np.float32) - np.float32(128)
    # Chroma terms at chroma resolution, then added 2×2 by broadcasting (no
    # upsampled copies): the same float32 operations per pixel as repeating first.
    terms = (r_v * cv, -(g_u * cu + g_v * cv), b_u * cu)
    full = np.empty((3, 2 * ch, 2 * cw), np.float32)
    yf = (y.astype(np.float32) - np.float32(16)) * ys
    for c in range(3):
        full[c, :h, :w] = yf
        view = full[c].reshape(ch, 2, cw, 2)
        view += terms[c][:, None, :, None]
    out = full[:, :h, :w]
    np.rint(out, out=out)
    np.clip(out, 0, 255, out=out)
    out *= np.float32(1 / 127.5)
    out -= np.float32(1)
    return np.ascontiguousarray(out)


# ---------------------------------------------------------------- loading


@contextlib.contextmanager
def _no_downloads() -> Iterator[None]:
    """Make every torch hub / torchvision weight download raise while inside."""
    import torch.hub

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            "download refused: attested LPIPS loads weights only from verified local files"
        )

    targets: list[tuple[Any, str]] = [
        (torch.hub, "load_state_dict_from_url"),
        (torch.hub, "download_url_to_file"),
    ]
    try:
        import torchvision.models._api as tv_api

        if hasattr(tv_api, "load_state_dict_from_url"):
            targets.append((tv_api, "load_state_dict_from_url"))
    except ImportError:  # pragma: no cover - torchvision is part of the extra
        pass
    saved = [(mod, name, getattr(mod, name)) for mod, name in targets]
    for mod, name in targets:
        setattr(mod, name, refuse)
    try:
        yield
    finally:
        for mod, name, orig in saved:
            setattr(mod, name, orig)


_DEVICE = re.compile(r"^(cpu|cuda|npu)(:[0-9]+)?$")


def check_device(device: str) -> None:
    """Refuse a device that is malformed or, torch being installed, absent.

    Called before any media work so that ``--device cuda`` on a machine
    without CUDA is a usage error, not an unattested LPIPS discovered later.
    Without torch nothing more is checked (LPIPS will be unattested anyway).

    Raises:
        DeviceError: the device is malformed or not available.
    """
    if not _DEVICE.match(device):
        raise DeviceError(f"--device {device}: expected cpu, cuda[:N] or npu[:N]")
    if device.startswith("cpu"):
        return
    try:
        import torch
    except ImportError:
        return
    _resolve_device(torch, device)


def _resolve_device(torch: Any, device: str) -> Any:
    if not _DEVICE.match(device):
        raise DeviceError(f"--device {device}: expected cpu, cuda[:N] or npu[:N]")
    kind = device.split(":", 1)[0]
    if kind == "cpu":
        return torch.device(device)
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(f"--device {device}: CUDA is not available here")
        return torch.device(device)
    if kind == "npu":
        try:
            # Importing torch_npu registers the "npu" device with torch.
            importlib.import_module("torch_npu")
        except ImportError as exc:
            raise DeviceError(f"--device {device}: torch_npu is not installed") from exc
        if not torch.npu.is_available():
            raise DeviceError(f"--device {device}: no Ascend NPU is available")
        return torch.device(device)
    raise DeviceError(f"--device {device}: expected cpu, cuda[:N] or npu[:N]")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


class AttestedLpips:
    """An LPIPS AlexNet v0.1 whose weights were verified; scores RGB frame batches."""

    def __init__(self, model: Any, device: Any, identity: ScorerIdentity) -> None:
        self._model = model
        self._device = device
        self.identity = identity
        self.cpu_threads: int | None = None
        """torch intra-op threads for CPU forward passes (None: torch's current setting).

        Set from the thread plan (:mod:`replay.media.threads`): two OpenMP pools
        of 2 threads on 2 cores wait on each other's barriers and run many times
        slower. Frames below :data:`SMALL_FRAME_PIXELS` always run on one thread
        (OpenMP's fork/join costs more than it gains there).
        """
        self.threads_seen: set[int] = set()
        """torch intra-op thread counts the CPU forward passes actually ran with."""
        self.batches_seen: set[int] = set()
        """Frames per forward pass actually used."""
        self.batch: int | None = None
        """Frames per forward pass asked for (None: chosen by :meth:`batch_for`)."""
        self.batch_plan: dict[str, int] = {}
        """Frame size (``WxH``) -> frames per forward pass chosen, with :attr:`batch_rule`."""
        self.batch_rule = ""
        self._lock = threading.Lock()

    def batch_for(self, height: int, width: int) -> int:
        """Frames per forward pass for ``height`` × ``width`` frames (recorded in ``batch_plan``).

        Given (:attr:`batch`): that. CPU: :func:`cpu_batch`. An accelerator:
        :func:`gpu_batch` from the device's free memory, asked once per frame size.
        """
        key = f"{width}x{height}"
        with self._lock:
            if key in self.batch_plan:
                return self.batch_plan[key]
            if self.batch is not None:
                n, rule = self.batch, "given (--lpips-batch)"
            elif self._device.type == "cpu":
                n = cpu_batch(height * width)
                rule = f"cpu: {CPU_BATCH_PIXELS:,} pixels per pass, at most {CPU_BATCH_MAX}"
            else:
                free = self._free_bytes()
                n = gpu_batch(free, height * width)
                rule = (
                    f"{self._device.type}: {GPU_MEMORY_SHARE:.0%} of {free / 2**30:.1f} GiB free "
                    f"at {GPU_BYTES_PER_PIXEL} bytes per pixel per frame pair, at most "
                    f"{GPU_BATCH_MAX}"
                )
            self.batch_plan[key] = n
            self.batch_rule = rule
            return n

    def _free_bytes(self) -> int:
        import torch

        mod = getattr(torch, self._device.type, None)
        info = getattr(mod, "mem_get_info", None)
        if info is None:
            return 0
        free, _total = info(self._device)
        return int(free)

    @property
    def device_type(self) -> str:
        """``cpu``, ``cuda`` or ``npu``."""
        return str(self._device.type)

    def distances(
        self, a: Sequence[npt.NDArray[np.float32]], b: Sequence[npt.NDArray[np.float32]]
    ) -> list[float]:
        """LPIPS of each pair of ``[3, H, W]`` frames in [−1, 1], one forward pass for all."""
        import torch

        if len(a) != len(b):
            raise ValueError("batches differ in length")
        if not a:
            return []
        self.batches_seen.add(len(a))
        if self._device.type != "cpu":
            return self._forward(a, b)
        small = a[0].shape[1] * a[0].shape[2] < SMALL_FRAME_PIXELS
        if self.cpu_threads is not None:
            # Planned (a re-score owns the process): set, never restored here, so that
            # comparisons running at once never undo each other's setting; equal
            # values whenever more than one runs (see replay.media.threads).
            want = 1 if small else self.cpu_threads
            if torch.get_num_threads() != want:
                torch.set_num_threads(want)
            self.threads_seen.add(torch.get_num_threads())
            return self._forward(a, b)
        before = torch.get_num_threads()
        want = 1 if small else before
        if want == before:
            self.threads_seen.add(before)
            return self._forward(a, b)
        torch.set_num_threads(want)
        try:
            self.threads_seen.add(torch.get_num_threads())
            return self._forward(a, b)
        finally:
            torch.set_num_threads(before)

    def _forward(
        self, a: Sequence[npt.NDArray[np.float32]], b: Sequence[npt.NDArray[np.float32]]
    ) -> list[float]:
        import torch

        with torch.inference_mode():
            x0 = torch.from_numpy(np.stack(a)).to(self._device)
            x1 = torch.from_numpy(np.stack(b)).to(self._device)
            d = self._model(x0, x1)
            return [float(v) for v in d.reshape(-1).cpu().tolist()]


def _unattested(
    scorer: Mapping[str, Any] | None, reason: str, weights: list[WeightUse], **kw: Any
) -> tuple[None, ScorerIdentity]:
    s = scorer or {}
    return None, ScorerIdentity(
        UNATTESTED,
        reason,
        s.get("name"),
        s.get("version"),
        s.get("net"),
        weights=weights,
        **kw,
    )


class _Refused(Exception):
    """A step of :func:`load_attested_lpips` refused the scorer: why, and the weights' state."""

    def __init__(self, reason: str, uses: list[WeightUse]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.uses = uses


def _located(
    scorer: Mapping[str, Any], weights_dir: Path | None, jobs: int | None
) -> list[WeightUse]:
    """The weight files ``scorer`` names, each found in ``weights_dir`` by SHA-256.

    Raises:
        _Refused: an unsupported scorer, a role without weights, no directory, or a
            file not found (or found with another digest).
    """
    name, net = scorer.get("name"), scorer.get("net", "alex")
    if name != "lpips" or net != "alex":
        raise _Refused(f"scorer {name!r} net {net!r}: only lpips with net alex is supported", [])
    entries = [w for w in scorer.get("weights") or [] if isinstance(w, Mapping)]
    by_role = {str(w.get("role")): w for w in entries}
    uses = [
        WeightUse(
            str(w.get("role")),
            str(w.get("file")),
            str(w.get("sha256")),
            w.get("bytes") if isinstance(w.get("bytes"), int) else None,
            "not-looked-for",
        )
        for w in entries
    ]
    missing_roles = [r for r in ("backbone", "linear") if r not in by_role]
    if missing_roles:
        raise _Refused(f"scorer.json names no weights for role(s) {', '.join(missing_roles)}", uses)
    if weights_dir is None:
        raise _Refused("no directory of scorer weight files was given", uses)
    refs = [ArtifactRef(u.recorded_file, u.sha256, u.recorded_bytes) for u in uses]
    locs = locate([u.sha256 for u in uses], refs, [Path(weights_dir)], jobs=jobs)
    uses = [
        WeightUse(
            u.role,
            u.recorded_file,
            u.sha256,
            u.recorded_bytes,
            locs[u.sha256].status,
            locs[u.sha256].path,
            locs[u.sha256].detail,
        )
        for u in uses
    ]
    bad = [u for u in uses if u.status != OK]
    if bad:
        raise _Refused(
            "weights not verified: " + "; ".join(f"{u.role} {u.status}" for u in bad), uses
        )
    return uses


def _with(u: WeightUse, status: str, detail: str = "") -> WeightUse:
    return WeightUse(**{**asdict(u), "status": status, "detail": detail or u.detail})


def _state_dicts(torch: Any, uses: list[WeightUse]) -> dict[str, dict[str, Any]]:
    """Each needed weight file re-read, re-hashed, and loaded with ``weights_only=True``.

    ``uses`` is updated in place (``unused``, ``mismatch``, ``bad-layout``).

    Raises:
        _Refused: a file changed since it was hashed, does not unpickle as plain
            tensors, or lacks (or adds) a key of the layout.
    """
    state: dict[str, dict[str, Any]] = {}
    for i, u in enumerate(uses):
        if u.role not in ("backbone", "linear"):
            uses[i] = _with(u, "unused")
            continue
        try:
            data = read_verified(Path(str(u.found_at)), u.sha256)
        except (OSError, IdentityError) as exc:
            uses[i] = _with(u, "mismatch", str(exc))
            raise _Refused(f"{u.role}: {exc}", uses) from exc
        try:
            sd = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
        except Exception as exc:  # any unpickling failure is a refusal
            uses[i] = _with(u, "bad-layout", str(exc))
            raise _Refused(f"{u.role}: not loadable with weights_only=True: {exc}", uses) from exc
        if not isinstance(sd, Mapping) or not all(isinstance(k, str) for k in sd):
            uses[i] = _with(u, "bad-layout")
            raise _Refused(f"{u.role}: not a state dict", uses)
        keys = set(sd)
        need, allowed = (
            (BACKBONE_KEYS, BACKBONE_KEYS | _BACKBONE_IGNORED)
            if u.role == "backbone"
            else (LINEAR_KEYS, LINEAR_KEYS)
        )
        missing, extra = sorted(need - keys), sorted(keys - allowed)
        if missing or extra:
            detail = f"missing keys {missing[:5]}, unexpected keys {extra[:5]}"
            uses[i] = _with(u, "bad-layout", detail)
            raise _Refused(f"{u.role}: {detail}", uses)
        state[u.role] = dict(sd)
    return state


def _model(lpips: Any, state: dict[str, dict[str, Any]], uses: list[WeightUse]) -> Any:
    """LPIPS built with no download and loaded from ``state`` with strict key checks.

    Raises:
        _Refused: the strict load failed (a shape or key mismatch).
    """
    with _load_lock, _no_downloads(), warnings.catch_warnings():
        # lpips 0.1.4 passes torchvision's deprecated ``pretrained=`` argument;
        # with pnet_rand=True it means weights=None, which is what we want.
        warnings.filterwarnings("ignore", category=UserWarning, module=r"torchvision\.")
        model = lpips.LPIPS(
            net="alex", version="0.1", pretrained=False, pnet_rand=True, verbose=False
        )
    try:
        bb = state["backbone"]
        model.net.load_state_dict(
            {
                f"slice{s}.{i}.{p}": bb[f"features.{i}.{p}"]
                for i, s in _ALEX_CONVS
                for p in ("weight", "bias")
            },
            strict=True,
        )
        lin = state["linear"]
        for k in range(5):
            model.lins[k].load_state_dict(
                {"model.1.weight": lin[f"lin{k}.model.1.weight"]}, strict=True
            )
    except RuntimeError as exc:
        for i, u in enumerate(uses):
            if u.role in ("backbone", "linear"):
                uses[i] = _with(u, "bad-layout", str(exc))
        raise _Refused(f"strict load failed: {exc}", uses) from exc
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def load_attested_lpips(
    scorer: Mapping[str, Any] | None,
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
        uses = _located(scorer, weights_dir, jobs)
    except _Refused as r:
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
    want_version = scorer.get("version")
    if want_version is not None and versions["package_version"] != str(want_version):
        return _unattested(
            scorer,
            f"scorer.json records lpips {want_version}, lpips "
            f"{versions['package_version']} is installed",
            uses,
            **versions,
        )
    dev = _resolve_device(torch, device)
    try:
        model = _model(lpips, _state_dicts(torch, uses), uses)
    except _Refused as r:
        return _unattested(scorer, r.reason, r.uses, **versions)
    model.to(dev)
    identity = ScorerIdentity(
        ATTESTED,
        "every weight verified by SHA-256 and loaded with strict key checks",
        str(scorer.get("name")),
        None if want_version is None else str(want_version),
        str(scorer.get("net", "alex")),
        package_version=versions["package_version"],
        torch_version=versions["torch_version"],
        torchvision_version=versions["torchvision_version"],
        device=str(dev),
        weights=uses,
    )
    return AttestedLpips(model, dev, identity), identity
