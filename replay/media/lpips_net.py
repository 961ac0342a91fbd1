"""The LPIPS AlexNet network: built with every download refused, loaded strictly from
verified state dicts, and run on frame batches (:class:`AttestedLpips`).

torch and lpips are imported lazily (the ``[lpips]`` extra).
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from replay.engine.verdicts import FileStatus
from replay.media.lpips_batch import (
    CPU_BATCH_MAX,
    CPU_BATCH_PIXELS,
    GPU_BATCH_MAX,
    GPU_BYTES_PER_PIXEL,
    GPU_MEMORY_SHARE,
    cpu_batch,
    gpu_batch,
)
from replay.media.lpips_identity import ScorerIdentity, WeightUse
from replay.media.lpips_weights import ALEX_CONVS, Refused, with_status

__all__ = ["SMALL_FRAME_PIXELS", "AttestedLpips", "build_network"]

_load_lock = threading.Lock()

SMALL_FRAME_PIXELS = 320 * 180
"""Below this many pixels a CPU forward pass runs on one thread (see ``AttestedLpips``)."""


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


def build_network(lpips: Any, state: dict[str, dict[str, Any]], uses: list[WeightUse]) -> Any:
    """LPIPS built with no download and loaded from ``state`` with strict key checks.

    Raises:
        Refused: the strict load failed (a shape or key mismatch).
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
                for i, s in ALEX_CONVS
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
                uses[i] = with_status(u, FileStatus.BAD_LAYOUT, str(exc))
        raise Refused(f"strict load failed: {exc}", uses) from exc
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


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
