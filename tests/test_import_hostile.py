"""Hostile numbers, types and nesting in ``bundle import`` sources and ``inventory.json``.

Every case starts from bytes a real writer wrote (``tests/fixtures/real_writers``:
``vllm bench serve`` 0.33.0 and ``aiperf profile`` 0.13.0) and changes one value,
spliced into the JSON text as the literal an attacker would write (Python's own
``json.dumps`` could not write a 5000-digit integer). Each must end in exit 2 with the
file and the field named, no traceback and nothing written. Before the shared loader
(``bundler/_internal/jsonload.py``) these gave OverflowError / ValueError /
RecursionError tracebacks, an I/O error ("File name too long"), or imported silently
(a string or ``true`` read as a number, 10**30 as a concurrency).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from reprobundle.cli.main import main
from tests.campaign_builder import write_campaign

ROOT = Path(__file__).resolve().parents[1]
VLLM = ROOT / "tests" / "fixtures" / "real_writers" / "vllm-0.33.0"
AIPERF = ROOT / "tests" / "fixtures" / "real_writers" / "aiperf-0.13.0"
MARK = "@@raw@@"

D400 = "9" * 400  # float(int) overflows: OverflowError
D5000 = "9" * 5000  # more than Python's 4300-digit limit: ValueError inside json
D300 = "1" + "0" * 299  # a load point id (and file name) of 300+ characters
DEEP = "[" * 100_000 + "]" * 100_000  # RecursionError in the C scanner


def _splice(doc: Any, setter: Callable[[Any], None], raw: str) -> str:
    """``doc`` as JSON text with the value ``setter`` marks replaced by the literal ``raw``."""
    setter(doc)
    text = json.dumps(doc)
    assert text.count(f'"{MARK}"') == 1
    return text.replace(f'"{MARK}"', raw)


def _put(*path: str | int) -> Callable[[Any], None]:
    def setter(doc: Any) -> None:
        for k in path[:-1]:
            doc = doc[k]
        doc[path[-1]] = MARK

    return setter


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=True)


def _refused(res: Result, file: str, field: str) -> None:
    # A traceback shows here as an exception other than SystemExit.
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 2, res.output
    assert file in res.output, res.output
    assert f"field '{field}'" in res.output, res.output


def _nothing_written(tmp: Path, out: Path) -> None:
    assert not out.exists()
    assert not [p for p in tmp.iterdir() if "partial" in p.name]


# --- vLLM ----------------------------------------------------------------------------


def _vllm_import(tmp: Path, cand_text: str) -> tuple[Result, Path]:
    cand = tmp / "cand.json"
    cand.write_text(cand_text, encoding="utf-8")
    out = tmp / "camp"
    res = _invoke(
        "import",
        "vllm",
        "--arm",
        f"base={VLLM / 'base-c2.json'}",
        "--arm",
        f"cand={cand}",
        "--commit",
        "base=aaaaaaa",
        "--commit",
        "cand=bbbbbbb",
        "-o",
        str(out),
    )
    return res, out


def _vllm_doc() -> Any:
    return json.loads((VLLM / "cand-c2.json").read_text(encoding="utf-8"))


VLLM_CASES: list[tuple[str, Callable[[Any], None], str, str]] = [
    # (id, where, literal, field named)
    ("duration-400-digits", _put("duration"), D400, "duration"),
    ("aggregate-5000-digits", _put("mean_ttft_ms"), D5000, "mean_ttft_ms"),
    ("aggregate-overflows-double", _put("p99_ttft_ms"), "1e400", "p99_ttft_ms"),
    ("ttft-400-digits", _put("ttfts", 3), D400, "ttfts[3]"),
    ("itl-5000-digits", _put("itls", 1, 0), D5000, "itls[1][0]"),
    ("ttft-string", _put("ttfts", 0), '"0.1"', "ttfts[0]"),
    ("ttft-true", _put("ttfts", 1), "true", "ttfts[1]"),
    ("latency-string", _put("latencies", 2), '"0.5"', "latencies[2]"),
    ("input-len-string", _put("input_lens", 2), '"12"', "input_lens[2]"),
    ("output-len-false", _put("output_lens", 0), "false", "output_lens[0]"),
    ("itl-true", _put("itls", 1, 0), "true", "itls[1][0]"),
    ("token-count-beyond-int64", _put("input_lens", 0), "1e300", "input_lens[0]"),
    ("concurrency-10e30", _put("max_concurrency"), str(10**30), "max_concurrency"),
    ("concurrency-above-2e53", _put("max_concurrency"), str(2**53 + 1), "max_concurrency"),
    ("concurrency-300-digits", _put("max_concurrency"), D300, "max_concurrency"),
    ("concurrency-5000-digits", _put("max_concurrency"), D5000, "max_concurrency"),
    ("nested-100000-deep", _put("label"), DEEP, "label[0][0][0][0][0][0][0]..."),
    # The arrival process is part of a load point id (issue 23): a bad one is refused.
    ("burstiness-string", _put("burstiness"), '"0.5"', "burstiness"),
    ("burstiness-true", _put("burstiness"), "true", "burstiness"),
    ("burstiness-negative", _put("burstiness"), "-1", "burstiness"),
    ("burstiness-zero", _put("burstiness"), "0", "burstiness"),
    ("burstiness-nan", _put("burstiness"), "NaN", "burstiness"),
]


@pytest.mark.parametrize(
    ("setter", "raw", "field"),
    [pytest.param(s, r, f, id=i) for i, s, r, f in VLLM_CASES],
)
def test_vllm_hostile_values_are_refused_naming_the_field(
    tmp_path: Path, setter: Callable[[Any], None], raw: str, field: str
) -> None:
    res, out = _vllm_import(tmp_path, _splice(_vllm_doc(), setter, raw))
    _refused(res, "cand.json", field)
    _nothing_written(tmp_path, out)


def test_vllm_fixture_imports_unchanged(tmp_path: Path) -> None:
    # The control: the same pipeline with the value left alone imports.
    res, out = _vllm_import(tmp_path, (VLLM / "cand-c2.json").read_text(encoding="utf-8"))
    assert res.exit_code == 0, res.output
    assert (out / "claims.jsonl").is_file()


def test_vllm_large_finite_aggregate_is_imported_as_a_claim(tmp_path: Path) -> None:
    # 1e300 is a finite double: no refusal, but quantizing it to 12 places needs 313
    # digits (the default decimal context's 28 raised InvalidOperation). The claim
    # text is the exact value of the double nearest 1e300, an integer: int() is exact.
    text = _splice(_vllm_doc(), _put("mean_ttft_ms"), "1e300")
    cand = tmp_path / "cand.json"
    cand.write_text(text, encoding="utf-8")
    res = _invoke(
        "import",
        "vllm",
        "--arm",
        f"base={VLLM / 'base-c2.json'}",
        "--arm",
        f"cand={cand}",
        "--commit",
        "base=aaaaaaa",
        "--commit",
        "cand=bbbbbbb",
        "--decimals",
        "12",
        "-o",
        str(tmp_path / "camp"),
    )
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in (tmp_path / "camp" / "claims.jsonl").read_text().splitlines()]
    (claim,) = [r for r in rows if r["claim_id"] == "cand.rinf-c2.mean_ttft_ms"]
    assert claim["value"] == f"{int(1e300)}.000000000000"


# --- AIPerf --------------------------------------------------------------------------


def _aiperf_import(tmp: Path, records: str | None, aggregate: str | None) -> tuple[Result, Path]:
    run = tmp / "cand-run"
    shutil.copytree(AIPERF / "cand-c2", run)
    if records is not None:
        (run / "profile_export.jsonl").write_text(records, encoding="utf-8")
    if aggregate is not None:
        (run / "profile_export_aiperf.json").write_text(aggregate, encoding="utf-8")
    out = tmp / "camp"
    res = _invoke(
        "import",
        "aiperf",
        "--arm",
        f"base={AIPERF / 'base-c2'}",
        "--arm",
        f"cand={run}",
        "--commit",
        "base=aaaaaaa",
        "--commit",
        "cand=bbbbbbb",
        "-o",
        str(out),
    )
    return res, out


def _record_lines() -> list[str]:
    return (AIPERF / "cand-c2" / "profile_export.jsonl").read_text(encoding="utf-8").splitlines()


AIPERF_RECORD_CASES: list[tuple[str, Callable[[Any], None], str, str]] = [
    ("latency-400-digits", _put("metrics", "request_latency", "value"), D400, "request_latency"),
    (
        "isl-5000-digits",
        _put("metrics", "input_sequence_length", "value"),
        D5000,
        "input_sequence_length",
    ),
    (
        "osl-beyond-int64",
        _put("metrics", "output_sequence_length", "value"),
        "1e300",
        "output_sequence_length",
    ),
    ("start-ns-2e64", _put("metadata", "request_start_ns"), str(2**64), "request_start_ns"),
    ("nested-100000-deep", _put("metadata", "worker_id"), DEEP, "metadata.worker_id[0]"),
]


@pytest.mark.parametrize(
    ("setter", "raw", "field"),
    [pytest.param(s, r, f, id=i) for i, s, r, f in AIPERF_RECORD_CASES],
)
def test_aiperf_records_hostile_values_are_refused_naming_line_and_field(
    tmp_path: Path, setter: Callable[[Any], None], raw: str, field: str
) -> None:
    lines = _record_lines()
    lines[2] = _splice(json.loads(lines[2]), setter, raw)
    res, out = _aiperf_import(tmp_path, "\n".join(lines) + "\n", None)
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 2, res.output
    assert "profile_export.jsonl, record line 3, field '" in res.output, res.output
    assert field in res.output, res.output
    _nothing_written(tmp_path, out)


def _aggregate_doc() -> Any:
    return json.loads(
        (AIPERF / "cand-c2" / "profile_export_aiperf.json").read_text(encoding="utf-8")
    )


AIPERF_AGGREGATE_CASES: list[tuple[str, Callable[[Any], None], str, str]] = [
    ("p99-400-digits", _put("request_latency", "p99"), D400, "request_latency.p99"),
    ("duration-5000-digits", _put("benchmark_duration", "avg"), D5000, "benchmark_duration.avg"),
    (
        "concurrency-10e30",
        _put("input_config", "phases", 0, "concurrency"),
        str(10**30),
        "input_config.phases[0].concurrency",
    ),
    (
        "concurrency-above-2e53",
        _put("input_config", "phases", 0, "concurrency"),
        str(2**53 + 1),
        "input_config.phases[0].concurrency",
    ),
    (
        "concurrency-300-digits",
        _put("input_config", "phases", 0, "concurrency"),
        D300,
        "input_config.phases[0].concurrency",
    ),
    (
        "start-time-before-utc-year-1",
        _put("start_time"),
        '"0001-01-01T00:00:00+05:00"',
        "start_time",
    ),
    ("nested-100000-deep", _put("benchmark_id"), DEEP, "benchmark_id[0][0][0][0][0][0][0]..."),
    # Goodput SLOs become claim params (issue 23): a bad threshold is refused.
    (
        "slo-negative",
        _put("input_config", "slos"),
        '{"time_to_first_token": -5}',
        "input_config.slos.time_to_first_token",
    ),
    (
        "slo-string",
        _put("input_config", "slos"),
        '{"inter_token_latency": "20"}',
        "input_config.slos.inter_token_latency",
    ),
    (
        "slo-nan",
        _put("input_config", "slos"),
        '{"request_latency": NaN}',
        "input_config.slos.request_latency",
    ),
]


@pytest.mark.parametrize(
    ("setter", "raw", "field"),
    [pytest.param(s, r, f, id=i) for i, s, r, f in AIPERF_AGGREGATE_CASES],
)
def test_aiperf_aggregate_hostile_values_are_refused_naming_the_field(
    tmp_path: Path, setter: Callable[[Any], None], raw: str, field: str
) -> None:
    res, out = _aiperf_import(tmp_path, None, _splice(_aggregate_doc(), setter, raw))
    _refused(res, "profile_export_aiperf.json", field)
    _nothing_written(tmp_path, out)


def test_aiperf_fixture_imports_unchanged(tmp_path: Path) -> None:
    res, out = _aiperf_import(tmp_path, None, None)
    assert res.exit_code == 0, res.output
    assert (out / "claims.jsonl").is_file()


# --- inventory.json ------------------------------------------------------------------


def _inventory_root(tmp: Path, register_text: str) -> Path:
    root = tmp / "evidence"
    root.mkdir()
    # An unregistered campaign directory, so that --fix has something it would write.
    write_campaign(root / "camp")
    (root / "inventory.json").write_text(register_text, encoding="utf-8")
    return root


INVENTORY_CASES: list[tuple[str, Callable[[Any], None], str, str]] = [
    ("top-level-5000-digits", _put("note"), D5000, "note"),
    ("entry-400-digits", _put("entries", 0, "sha256"), D400, "entries[0].sha256"),
    ("overflows-double", _put("entries", 0, "bytes"), "1e400", "entries[0].bytes"),
    ("nan-constant", _put("entries", 0, "bytes"), "NaN", "entries[0].bytes"),
    ("nested-100000-deep", _put("note"), DEEP, "note[0][0][0][0][0][0][0]..."),
]


@pytest.mark.parametrize(
    ("setter", "raw", "field"),
    [pytest.param(s, r, f, id=i) for i, s, r, f in INVENTORY_CASES],
)
def test_inventory_hostile_values_are_refused_naming_the_field(
    tmp_path: Path, setter: Callable[[Any], None], raw: str, field: str
) -> None:
    doc = {
        "inventory_version": "1",
        "entries": [{"path": "gone.bundle", "sha256": "0" * 64}],
    }
    text = _splice(doc, setter, raw)
    root = _inventory_root(tmp_path, text)
    before = sorted(p.name for p in root.iterdir())
    res = _invoke("inventory", str(root), "--allow-unsigned", "--fix")
    _refused(res, "inventory.json", field)
    # --fix wrote nothing: the register is as it was (a rewrite would carry Infinity/NaN).
    assert (root / "inventory.json").read_text(encoding="utf-8") == text
    assert sorted(p.name for p in root.iterdir()) == before


def test_inventory_fix_still_registers_on_an_honest_register(tmp_path: Path) -> None:
    text = json.dumps({"inventory_version": "1", "entries": []})
    root = _inventory_root(tmp_path, text)
    res = _invoke("inventory", str(root), "--allow-unsigned", "--fix")
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    doc = json.loads((root / "inventory.json").read_text(encoding="utf-8"))
    assert [e["path"] for e in doc["entries"]] == ["camp"]


# --- the loader's scan for hostile numbers ---------------------------------------------


@pytest.mark.parametrize("literal", [D400[:21], "1e400", "-1E+400"])
@pytest.mark.parametrize("shift", [-30, -12, -3, 0, 5])
def test_loader_finds_a_hostile_number_across_its_scan_blocks(literal: str, shift: int) -> None:
    # The scan reads the text in blocks of _BLOCK bytes: a number straddling a block
    # boundary must still switch the exact hooks on.
    from bundler._internal import jsonload

    pad = jsonload._BLOCK + shift - len('{"pad": "", "x": ')
    text = '{"pad": "' + "a" * pad + '", "x": ' + literal + "}"
    with pytest.raises(jsonload.JsonLoadError) as err:
        jsonload.loads(text)
    assert err.value.field == "x"


# --- inference-perf config.yaml ---------------------------------------------------------

INFPERF = ROOT / "tests" / "fixtures" / "real_writers" / "inference-perf-0.7.0"


def _infperf_import(tmp: Path, config_text: str) -> tuple[Result, Path]:
    run = tmp / "cand-constant-r8"
    shutil.copytree(INFPERF / "cand-constant-r8", run)
    (run / "config.yaml").write_text(config_text, encoding="utf-8")
    out = tmp / "camp"
    res = _invoke(
        "import",
        "inference-perf",
        "--arm",
        f"base={INFPERF / 'base-constant-r8'}",
        "--arm",
        f"cand={run}",
        "--commit",
        "base=aaaaaaa",
        "--commit",
        "cand=bbbbbbb",
        "-o",
        str(out),
    )
    return res, out


def _infperf_config() -> str:
    return (INFPERF / "cand-constant-r8" / "config.yaml").read_text(encoding="utf-8")


RATE = "  - rate: 8.0\n"

INFPERF_CONFIG_CASES: list[tuple[str, str, str, str]] = [
    # (id, text replaced, its replacement, field named). The writer is yaml.dump of a
    # model: it never writes these.
    # float(int) overflows: OverflowError.
    ("rate-400-digits", RATE, f"  - rate: {D400}\n", "load.stages[0].rate"),
    # Python refuses to convert it: ValueError inside the YAML constructor.
    ("rate-5000-digits", RATE, f"  - rate: {D5000}\n", "load.stages[0].rate"),
    # Anywhere in the file, read or not: the constructor converts every integer.
    ("unread-key-5000-digits", "load:\n", f"note: {D5000}\nload:\n", "note"),
    ("hex-400-digits", RATE, f"  - rate: 0x{'f' * 400}\n", "load.stages[0].rate"),
    # Read one way by a reviewer (the first), imported the other (PyYAML keeps the last).
    ("load-type-twice", "  type: constant\n", "  type: poisson\n  type: constant\n", "load.type"),
    ("rate-twice", RATE, "  - rate: 1.0\n    rate: 8.0\n", "load.stages[0].rate"),
]


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [pytest.param(o, n, f, id=i) for i, o, n, f in INFPERF_CONFIG_CASES],
)
def test_infperf_hostile_config_is_refused_naming_the_field(
    tmp_path: Path, old: str, new: str, field: str
) -> None:
    text = _infperf_config()
    assert text.count(old) == 1
    res, out = _infperf_import(tmp_path, text.replace(old, new))
    _refused(res, "config.yaml", field)
    _nothing_written(tmp_path, out)


def test_infperf_large_config_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    # 200 KB of one flow list (100,000 integers) under an unread key: libyaml builds a
    # node per integer (~15 us each); 1 MB took 12 s. A real config is 2.3 KB.
    text = _infperf_config() + "padding: [" + "1," * 100_000 + "1]\n"
    t0 = time.monotonic()
    res, out = _infperf_import(tmp_path, text)
    assert time.monotonic() - t0 < 10
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 2, res.output
    assert "config.yaml" in res.output and "larger than any inference-perf config" in res.output
    _nothing_written(tmp_path, out)


def test_infperf_config_imports_unchanged(tmp_path: Path) -> None:
    res, out = _infperf_import(tmp_path, _infperf_config())
    assert res.exit_code == 0, res.output
    assert (out / "claims.jsonl").is_file()
