"""Device telemetry during a rerun: parsers for ``npu-smi``/``nvidia-smi`` and a sampler thread.

Sources are pluggable (:class:`TelemetrySource`): a command whose output a
parser turns into :class:`DeviceSample` rows (``npu-smi info`` on Ascend,
``nvidia-smi --query-gpu=...`` on CUDA), or none. The sampler runs one source
at the plan's ``telemetry.interval_s`` on a fixed grid (a slow sample skips
ticks instead of drifting) and hands rows to a sink with the arm and server
running at that moment.

This is the recorder's side; the replay section that re-derives the figures
from a sealed ``telemetry`` table is :mod:`replay.sections.telemetry`.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "NVIDIA_SMI_QUERY",
    "CommandSource",
    "DeviceSample",
    "NoTelemetry",
    "NpuProcess",
    "NpuSmiInfo",
    "TelemetryError",
    "TelemetrySampler",
    "TelemetrySource",
    "parse_npu_smi_info",
    "parse_nvidia_smi_csv",
    "source_for",
]

NVIDIA_SMI_QUERY = (
    "nvidia-smi",
    "--query-gpu=index,memory.used,memory.total,utilization.gpu",
    "--format=csv,noheader,nounits",
)
_NPU_SMI_INFO = ("npu-smi", "info")


class TelemetryError(ValueError):
    """A telemetry output could not be parsed, or the tool failed."""


@dataclass(frozen=True)
class DeviceSample:
    """One device at one moment; memory as the tool prints it (npu-smi MB, nvidia-smi MiB)."""

    device: str
    hbm_used_mb: float
    hbm_total_mb: float | None = None
    aicore_pct: float | None = None
    gpu_util_pct: float | None = None

    def __post_init__(self) -> None:
        if self.hbm_used_mb < 0:
            raise ValueError("memory used cannot be negative")


@dataclass(frozen=True)
class NpuProcess:
    """One row of ``npu-smi info``'s process table."""

    npu: int
    chip: int
    pid: int
    name: str
    memory_mb: float


@dataclass(frozen=True)
class NpuSmiInfo:
    """What ``npu-smi info`` printed: devices and the processes holding them."""

    version: str | None
    devices: tuple[DeviceSample, ...]
    names: tuple[tuple[str, str], ...]
    processes: tuple[NpuProcess, ...] = field(default_factory=tuple)


# "used / total" where "used" may touch the slash: "59356/ 65536" once it has five digits.
_PAIR = r"(\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)"
_CHIP_METRICS = re.compile(rf"^\s*(\d+(?:\.\d+)?|-|NA)\s+{_PAIR}\s+{_PAIR}\s*$")
_CHIP_METRICS_ONE = re.compile(rf"^\s*(\d+(?:\.\d+)?|-|NA)\s+{_PAIR}\s*$")
_NPU_HEAD = re.compile(r"^\s*(\d+)\s+(\S+)\s*$")
_CHIP_HEAD = re.compile(r"^\s*(\d+)\s*$")
_PROC_HEAD = re.compile(r"^\s*(\d+)\s+(\d+)\s*$")
_VERSION = re.compile(r"npu-smi\s+(\S+)")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _pct(text: str) -> float | None:
    return None if text in ("-", "NA") else float(text)


def _device_name(npu: int, chip: int, chips_of_npu: int) -> str:
    return f"npu:{npu}" if chips_of_npu == 1 else f"npu:{npu}.{chip}"


def _chip_row(cells: list[str]) -> tuple[int, float | None, float, float | None] | None:
    """(chip, aicore %, used, total) of a device's second row, or None if it is not one."""
    if len(cells) < 3 or not _CHIP_HEAD.match(cells[0]):
        return None
    m = _CHIP_METRICS.match(cells[2])
    if m:
        # AICore(%), Memory-Usage(MB) used/total, HBM-Usage(MB) used/total: HBM is device memory.
        return int(cells[0]), _pct(m.group(1)), float(m.group(4)), float(m.group(5))
    m = _CHIP_METRICS_ONE.match(cells[2])
    if m:  # boards without HBM print one memory pair
        return int(cells[0]), _pct(m.group(1)), float(m.group(2)), float(m.group(3))
    return None


def parse_npu_smi_info(text: str) -> NpuSmiInfo:
    """Parse the table ``npu-smi info`` prints.

    Each device takes two rows: ``| NPU Name | Health | Power Temp Hugepages |``
    then ``| Chip | Bus-Id | AICore(%) Memory-Usage(MB) HBM-Usage(MB) |`` with
    each usage as ``used / total`` (no space once ``used`` has five digits:
    ``59356/ 65536``). The process table that follows is parsed too.

    Raises:
        TelemetryError: no device row was found.
    """
    version_m = _VERSION.search(text)
    pending: list[tuple[int, int, float | None, float, float | None]] = []
    names: list[tuple[int, str]] = []
    processes: list[NpuProcess] = []
    npu: int | None = None
    in_processes = False
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        cells = _cells(line)
        if "Process id" in line or "Process name" in line:
            in_processes = True
            continue
        if in_processes:
            if len(cells) >= 4 and _PROC_HEAD.match(cells[0]) and cells[1].isdigit():
                n, c = (int(x) for x in cells[0].split())
                mem = cells[3].split()[0] if cells[3] else ""
                if re.fullmatch(r"\d+(?:\.\d+)?", mem):
                    processes.append(NpuProcess(n, c, int(cells[1]), cells[2], float(mem)))
            continue
        head = _NPU_HEAD.match(cells[0]) if len(cells) >= 3 else None
        if head and not _CHIP_HEAD.match(cells[0]):
            npu = int(head.group(1))
            names.append((npu, head.group(2)))
            continue
        chip = _chip_row(cells)
        if chip is not None and npu is not None:
            c, aicore, used, total = chip
            pending.append((npu, c, aicore, used, total))
    if not pending:
        raise TelemetryError("npu-smi info: no device rows found")
    chips: dict[int, int] = {}
    for n, *_ in pending:
        chips[n] = chips.get(n, 0) + 1
    devices = tuple(
        DeviceSample(_device_name(n, c, chips[n]), used, total, aicore)
        for n, c, aicore, used, total in pending
    )
    return NpuSmiInfo(
        version_m.group(1) if version_m else None,
        devices,
        tuple((f"npu:{n}", name) for n, name in names),
        tuple(processes),
    )


def _csv_number(text: str) -> float | None:
    text = text.strip()
    if not text or text.startswith("[") or text.upper() in ("N/A", "NA"):
        return None  # "[N/A]", "[Not Supported]"
    return float(text)


def parse_nvidia_smi_csv(text: str) -> tuple[DeviceSample, ...]:
    """Parse ``nvidia-smi --query-gpu=index,memory.used,memory.total,utilization.gpu
    --format=csv,noheader,nounits`` (MiB and percent).

    Raises:
        TelemetryError: a line does not have four fields, or memory used is missing.
    """
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 4 or not fields[0].isdigit():
            raise TelemetryError(f"nvidia-smi line {n}: expected 'index, used, total, util'")
        try:
            used = _csv_number(fields[1])
            total = _csv_number(fields[2])
            util = _csv_number(fields[3])
        except ValueError as exc:
            raise TelemetryError(f"nvidia-smi line {n}: {exc}") from exc
        if used is None:
            raise TelemetryError(f"nvidia-smi line {n}: no memory.used value")
        out.append(DeviceSample(f"cuda:{fields[0]}", used, total, None, util))
    if not out:
        raise TelemetryError("nvidia-smi: no device lines")
    return tuple(out)


class TelemetrySource(Protocol):
    """Anything that can take one sample of every device."""

    name: str

    def sample(self, timeout_s: float) -> tuple[DeviceSample, ...]:
        """Sample every device now; raise :class:`TelemetryError` on failure."""
        ...


class NoTelemetry:
    """The ``none`` source: no samples."""

    name = "none"

    def sample(self, timeout_s: float) -> tuple[DeviceSample, ...]:
        """Nothing to sample."""
        return ()


class CommandSource:
    """Run a command and parse its standard output."""

    def __init__(
        self, name: str, argv: Sequence[str], parser: Callable[[str], tuple[DeviceSample, ...]]
    ) -> None:
        self.name = name
        self.argv = tuple(argv)
        self.parser = parser

    def sample(self, timeout_s: float) -> tuple[DeviceSample, ...]:
        """Run the command (bounded by ``timeout_s``) and parse what it printed."""
        try:
            proc = subprocess.run(
                self.argv, capture_output=True, text=True, timeout=timeout_s, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TelemetryError(f"{self.argv[0]}: {exc}") from exc
        if proc.returncode != 0:
            raise TelemetryError(f"{self.argv[0]} exited {proc.returncode}: {proc.stderr[:200]}")
        return self.parser(proc.stdout)


def _npu_devices(text: str) -> tuple[DeviceSample, ...]:
    return parse_npu_smi_info(text).devices


def source_for(name: str, command: Sequence[str] | None = None) -> TelemetrySource:
    """The source called ``name`` (``npu-smi``, ``nvidia-smi``, ``none``).

    ``command`` replaces the tool's command line (a wrapper, a full path); its
    output must be in the tool's format.

    Raises:
        ValueError: unknown source name.
    """
    if name == "none":
        return NoTelemetry()
    if name == "npu-smi":
        return CommandSource(name, command or _NPU_SMI_INFO, _npu_devices)
    if name == "nvidia-smi":
        return CommandSource(name, command or NVIDIA_SMI_QUERY, parse_nvidia_smi_csv)
    raise ValueError(f"unknown telemetry source {name!r} (npu-smi, nvidia-smi, none)")


@dataclass(frozen=True)
class SampleContext:
    """Who is running while a sample is taken."""

    arm: str
    server: str


Sink = Callable[[SampleContext, int, tuple[DeviceSample, ...]], None]
"""``sink(context, time_ns, samples)``; called on the sampler thread."""


class TelemetrySampler:
    """Sample a source every ``interval_s`` on a background thread while a context is set."""

    def __init__(
        self,
        source: TelemetrySource,
        interval_s: float,
        sink: Sink,
        on_error: Callable[[str], None] | None = None,
        max_errors: int = 20,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self.source = source
        self.interval_s = interval_s
        self.sink = sink
        self.on_error = on_error
        self.max_errors = max_errors
        self.samples = 0
        self.errors = 0
        self._context: SampleContext | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="telemetry", daemon=True)

    def start(self) -> None:
        """Start the thread (no samples until :meth:`set_context`)."""
        if not isinstance(self.source, NoTelemetry):
            self._thread.start()

    def set_context(self, context: SampleContext | None) -> None:
        """Attribute the next samples to ``context``; ``None`` pauses sampling."""
        with self._lock:
            self._context = context

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the thread and wait for it (bounded)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _loop(self) -> None:
        t0 = time.monotonic()
        tick = 0
        while not self._stop.is_set():
            with self._lock:
                ctx = self._context
            if ctx is not None:
                self._take(ctx)
            tick += 1
            now = time.monotonic()
            # Fixed grid: a sample slower than the interval skips ticks instead of drifting.
            tick = max(tick, int((now - t0) / self.interval_s) + 1)
            self._stop.wait(max(0.0, t0 + tick * self.interval_s - now))

    def _take(self, ctx: SampleContext) -> None:
        if self.errors >= self.max_errors:
            return
        try:
            rows = self.source.sample(timeout_s=max(1.0, self.interval_s * 4))
        except TelemetryError as exc:
            self.errors += 1
            if self.on_error:
                self.on_error(f"telemetry sample failed ({self.errors}): {exc}")
            return
        self.samples += 1
        self.sink(ctx, time.time_ns(), rows)
