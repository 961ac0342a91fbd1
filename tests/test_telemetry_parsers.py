"""Telemetry parsers on recorded-format ``npu-smi info`` and ``nvidia-smi`` outputs.

Expected values are read off the fixture files by eye (tests/fixtures/README.md
says how they were written), never produced by the parser under test.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from rerun.telemetry import (
    CommandSource,
    DeviceSample,
    NoTelemetry,
    SampleContext,
    TelemetryError,
    TelemetrySampler,
    parse_npu_smi_info,
    parse_nvidia_smi_csv,
    source_for,
)

FIXTURES = Path(__file__).parent / "fixtures"


def _npu(name: str) -> str:
    return (FIXTURES / "npu-smi" / name).read_text(encoding="utf-8")


def test_idle_910b1_table_has_eight_devices_with_hbm_in_the_second_row() -> None:
    info = parse_npu_smi_info(_npu("info-910b1-idle.txt"))
    assert info.version == "24.1.0"
    assert [d.device for d in info.devices] == [f"npu:{i}" for i in range(8)]
    # HBM-Usage(MB) column of each chip row, in order.
    assert [d.hbm_used_mb for d in info.devices] == [
        3437,
        3378,
        3376,
        3376,
        3377,
        3376,
        3377,
        3376,
    ]
    assert {d.hbm_total_mb for d in info.devices} == {65536}
    assert {d.aicore_pct for d in info.devices} == {0}
    assert dict(info.names) == {f"npu:{i}": "910B1" for i in range(8)}
    assert info.processes == ()


def test_five_digit_used_value_touching_the_slash_is_read_whole() -> None:
    info = parse_npu_smi_info(_npu("info-910b1-serving.txt"))
    used = [d.hbm_used_mb for d in info.devices]
    # "59356/ 65536": no space after the used value once it has five digits.
    assert used == [59356, 59351, 59351, 59346, 59351, 59345, 59351, 9876]
    assert [d.aicore_pct for d in info.devices] == [88, 87, 86, 88, 85, 87, 86, 100]
    assert all(d.hbm_total_mb == 65536 for d in info.devices)
    assert "59356/ 65536" in _npu("info-910b1-serving.txt")


def test_process_table_is_parsed_and_never_taken_for_devices() -> None:
    info = parse_npu_smi_info(_npu("info-910b1-serving.txt"))
    assert len(info.devices) == 8
    assert [(p.npu, p.pid, p.name, p.memory_mb) for p in info.processes[:2]] == [
        (0, 418635, "vllm", 56057),
        (1, 418709, "VllmWorker", 56063),
    ]
    assert len(info.processes) == 8
    assert info.processes[-1].memory_mb == 6583


def test_wide_v26_layout_and_container_column() -> None:
    info = parse_npu_smi_info(_npu("info-910b1-v26-wide.txt"))
    assert info.version == "26.0.rc1"
    assert [(d.device, d.hbm_used_mb, d.hbm_total_mb, d.aicore_pct) for d in info.devices] == [
        ("npu:0", 53984, 65536, 7),
        ("npu:1", 2871, 65536, 42),
    ]
    assert [(p.npu, p.pid, p.name) for p in info.processes] == [(0, 1712733, "python3")]


def test_npu_smi_without_device_rows_is_an_error() -> None:
    with pytest.raises(TelemetryError):
        parse_npu_smi_info("npu-smi: command failed\n")


def test_nvidia_smi_query_gpu_csv() -> None:
    text = (FIXTURES / "nvidia-smi" / "query-gpu-h100x4.csv").read_text(encoding="utf-8")
    got = parse_nvidia_smi_csv(text)
    assert got == (
        DeviceSample("cuda:0", 61234, 81559, None, 97),
        DeviceSample("cuda:1", 61190, 81559, None, 95),
        DeviceSample("cuda:2", 1, 81559, None, 0),
        DeviceSample("cuda:3", 40960, 81559, None, None),  # "[N/A]" utilization
    )


@pytest.mark.parametrize("bad", ["0, 12, 80000\n", "x, 1, 2, 3\n", "0, [N/A], 2, 3\n", ""])
def test_nvidia_smi_malformed_lines_are_errors(bad: str) -> None:
    with pytest.raises(TelemetryError):
        parse_nvidia_smi_csv(bad)


def test_source_for_names_and_command_override() -> None:
    assert isinstance(source_for("none"), NoTelemetry)
    fixture = str(FIXTURES / "npu-smi" / "info-910b1-serving.txt")
    src = source_for("npu-smi", ["cat", fixture])
    assert src.sample(5.0)[0].hbm_used_mb == 59356
    with pytest.raises(ValueError, match="unknown telemetry source"):
        source_for("rocm-smi")


def test_a_failing_tool_is_a_telemetry_error() -> None:
    src = CommandSource("npu-smi", [sys.executable, "-c", "raise SystemExit(3)"], lambda t: ())
    with pytest.raises(TelemetryError, match="exited 3"):
        src.sample(5.0)


def test_sampler_attributes_samples_to_the_running_server_and_stops() -> None:
    fixture = str(FIXTURES / "nvidia-smi" / "query-gpu-h100x4.csv")
    got: list[tuple[str, int]] = []

    def sink(ctx: SampleContext, t_ns: int, rows: tuple[DeviceSample, ...]) -> None:
        got.append((ctx.server, len(rows)))

    sampler = TelemetrySampler(source_for("nvidia-smi", ["cat", fixture]), 0.05, sink)
    sampler.start()
    time.sleep(0.15)  # no context yet: nothing is sampled
    assert got == []
    sampler.set_context(SampleContext("baseline", "baseline-1"))
    deadline = time.monotonic() + 5
    while len(got) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    sampler.set_context(None)
    sampler.stop()
    assert len(got) >= 3
    assert set(got) == {("baseline-1", 4)}
