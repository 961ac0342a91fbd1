"""How many frame pairs one LPIPS forward pass takes: a pixel budget on CPU, a share of the
device's free memory on an accelerator."""

from __future__ import annotations

__all__ = [
    "CPU_BATCH_MAX",
    "CPU_BATCH_PIXELS",
    "GPU_BATCH_MAX",
    "GPU_BYTES_PER_PIXEL",
    "GPU_MEMORY_SHARE",
    "cpu_batch",
    "gpu_batch",
]

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
