"""The torch device a media replay scores on: ``cpu``, ``cuda[:N]`` or ``npu[:N]``, checked early.

torch (and torch_npu) are imported lazily, only when a non-CPU device is asked for.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

__all__ = ["DeviceError", "check_device", "resolve_device"]


class DeviceError(ValueError):
    """The requested torch device does not exist here (a usage error)."""


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
    resolve_device(torch, device)


def resolve_device(torch: Any, device: str) -> Any:
    """The ``torch.device`` for ``device``, once it is known to exist here.

    Raises:
        DeviceError: the device is malformed or not available.
    """
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
