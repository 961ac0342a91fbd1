"""``bundle import vllm-omni``: ``vllm bench serve --omni`` (``/v1/videos``) results (issue 21).

``fixtures/real_writers/vllm-omni-bench-0.30.0/`` holds files vLLM-Omni 0.30.0's own
benchmark client wrote against our reference server (``record_vllm_omni_bench.py``
and the README say how). The expected values are computed here with plain numpy
from each file's per-request arrays with the definitions read in the client's
source (a request succeeded when its ``errors`` entry is empty; input tokens summed
over the successful requests; throughput = completed / ``duration``); they must
equal the tool's own aggregates, and every claim the import makes from those must
be confirmed by replay. The tool writes no per-request latency, so its E2EL claims
are unverifiable, and its timing boundary (clock stopped at the poll that reads
``completed``, no download, no DELETE) is named at import and in replay's views.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bundler.format.serving_run import SourceError
from bundler.importers import vllm_omni

HERE = Path(__file__).resolve().parent
OMNI = HERE / "fixtures" / "real_writers" / "vllm-omni-bench-0.30.0"
RUNS = ("base-c2", "cand-c2")
LP = "rinf-c2"
POLL_S = 2.0  # the client's default poll_interval_s (patch.py), which the recording kept


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reprobundle.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _doc(run: str) -> dict[str, Any]:
    d: dict[str, Any] = json.loads((OMNI / f"{run}.json").read_text())
    return d


def test_recording_is_vllm_omni_0_30_0_videos_backend() -> None:
    rec = json.loads((OMNI / "recording.json").read_text())
    assert rec["version"] == "0.30.0" and rec["tool"].startswith("vllm-omni bench serve --omni")
    assert [r["file"] for r in rec["runs"]] == [f"{r}.json" for r in RUNS]
    for run in RUNS:
        doc = _doc(run)
        assert doc["backend"] == "/v1/videos" and "latencies" not in doc
        assert len(doc["errors"]) == 8
    assert _doc("cand-c2")["errors"][4].startswith("Polling failed HTTP 500: ")


def test_the_recorded_e2el_stops_at_a_poll_not_at_the_end_of_generation() -> None:
    # The server generated each video in a fixed time (its own figure, from the final
    # poll): 0.9 s and 2.6 s. The client's E2EL is the first poll at or after it.
    for run, gen_s in (("base-c2", 0.9), ("cand-c2", 2.6)):
        doc = _doc(run)
        assert doc["mean_video_generation_ms"] == pytest.approx(gen_s * 1000)
        first_poll = np.ceil(gen_s / POLL_S) * POLL_S
        assert first_poll * 1000 <= doc["mean_e2el_ms"] < (first_poll + 0.2) * 1000
        assert doc["mean_e2el_ms"] - gen_s * 1000 > 900  # far more than the generation


def _expected(run: str) -> dict[str, float]:
    """claim key -> the value from numpy over the per-request arrays."""
    doc = _doc(run)
    ok = np.array([e == "" for e in doc["errors"]])
    n_in = float(np.sum(np.array(doc["input_lens"])[ok]))
    n_out = float(np.sum(np.array(doc["output_lens"])[ok]))
    dur = doc["duration"]
    return {
        "completed": float(np.count_nonzero(ok)),
        "failed": float(np.count_nonzero(~ok)),
        "total_input_tokens": n_in,
        "total_output_tokens": n_out,
        "request_throughput": np.count_nonzero(ok) / dur,
        "output_throughput": n_out / dur,
        "total_token_throughput": (n_in + n_out) / dur,
    }


def test_numpy_over_the_records_gives_the_tools_aggregates() -> None:
    for run in RUNS:
        doc = _doc(run)
        for key, x in _expected(run).items():
            assert x == pytest.approx(doc[key], rel=1e-12), (run, key)


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("real-omnibench")
    base = ["import", "vllm-omni", "--arm", f"base={OMNI / 'base-c2.json'}"]
    base += ["--arm", f"cand={OMNI / 'cand-c2.json'}"]
    base += ["--commit", "base=aaaaaaa", "--commit", "cand=bbbbbbb"]
    res = _cli(*base, "-o", tmp / "camp", "--json")
    assert res.returncode == 0, res.stderr
    text_import = _cli(*base, "-o", tmp / "camp-text")
    assert text_import.returncode == 0, text_import.stderr
    # An author who drops the boundary from serving.json does not hide it: replay
    # takes it from the source's format.
    index_path = tmp / "camp" / "serving.json"
    index = json.loads(index_path.read_text())
    index["not_recorded"] = []
    index_path.write_text(json.dumps(index))
    seal = _cli("seal", tmp / "camp", "-o", tmp / "o.bundle", "--unsigned")
    assert seal.returncode == 0, seal.stderr
    rep = _cli("replay", tmp / "o.bundle", "--allow-unsigned", "--json")
    doc: dict[str, Any] = json.loads(rep.stdout)
    text = _cli("replay", tmp / "o.bundle", "--allow-unsigned")
    doc["_exit"] = rep.returncode
    doc["_text"] = text.stdout + text.stderr
    doc["_camp"] = tmp / "camp-text"
    doc["_import"] = json.loads(res.stdout)
    doc["_import_text"] = text_import.stdout + text_import.stderr
    return doc


def test_derivable_claims_confirmed_e2el_unverifiable_with_the_boundary(
    replayed: dict[str, Any],
) -> None:
    checks = {c["claim_id"]: c for c in replayed["claims"]["checks"]}
    assert replayed["_exit"] == 5  # the E2EL claims: unverifiable
    for run in RUNS:
        for key, x in _expected(run).items():
            c = checks.pop(f"{run[:4]}.{LP}.{key}")
            assert c["status"] == "confirmed", c
            assert Fraction(c["exact"]) == pytest.approx(Fraction(x), rel=1e-9), key
    expected_left = {
        f"{run[:4]}.{LP}.{s}_e2el_ms"
        for run in RUNS
        for s in ("mean", "median", "p50", "p90", "p99")
    }
    assert set(checks) == expected_left
    for c in checks.values():
        assert c["status"] == "unverifiable"
        assert "writes no per-request latency" in c["explanation"]
        assert "clock stops at the status poll that reads 'completed'" in c["explanation"]


def test_the_boundary_is_a_limit_at_import_and_in_replays_views(replayed: dict[str, Any]) -> None:
    limit = vllm_omni.BOUNDARY
    assert replayed["_import"]["limits"] == [limit]
    assert f"limit: {limit}" in replayed["_import_text"]
    for words in ("never downloaded", "never DELETEd", "2 s unless set"):
        assert words in limit
    # In replay's --json and text, although the sealed serving.json no longer lists it.
    assert limit in replayed["not_evidenced"]
    flat = " ".join(replayed["_text"].split())
    assert "clock stops at the status poll that reads 'completed'" in flat
    camp = replayed["_camp"]
    assert limit in json.loads((camp / "serving.json").read_text())["not_recorded"]
    plan = json.loads((camp / "plans" / "serving.json").read_text())
    assert plan["request"]["timing_boundary"] == limit
    # No receipts: nothing of this tool can stand beside a rerun's e2e_s.
    assert (camp / "receipts.jsonl").read_bytes() == b""
    nc = (camp / "not_claimed.jsonl").read_text()
    assert "mean_video_generation_ms = 900.0" in nc and "video_throughput" in nc


# --- what the importer refuses ------------------------------------------------------


def _refused(data: dict[str, Any] | bytes) -> list[tuple[str | None, str | None]]:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    with pytest.raises(SourceError) as exc:
        vllm_omni.parse(raw, "omni.json", "x")
    assert all(p.where == "omni.json" for p in exc.value.problems)
    return [(p.record, p.field) for p in exc.value.problems]


def _with(**changes: Any) -> dict[str, Any]:
    return _doc("cand-c2") | changes


def test_refusals_are_located() -> None:
    raw = (OMNI / "cand-c2.json").read_bytes()
    assert _refused(b"\xff" + raw) == [(None, None)]
    assert _refused(raw[: len(raw) // 2]) == [(None, None)]
    assert _refused(_with(backend="openai-chat")) == [(None, "backend")]
    doc = _doc("cand-c2")
    del doc["errors"]
    assert _refused(doc) == [(None, "errors")]
    assert _refused(_with(latencies=[1.0] * 8)) == [(None, "latencies")]
    assert _refused(_with(input_lens=[12] * 7)) == [(None, "input_lens")]
    assert _refused(_with(input_lens=[12, True, 8, 10, 6, 9, 7, 11])) == [(None, "input_lens[1]")]
    assert _refused(_with(ttfts=[0.0, -1.0, 0, 0, 0, 0, 0, 0])) == [(None, "ttfts[1]")]


def test_hostile_numbers_are_refused_where_they_are() -> None:
    text = (OMNI / "cand-c2.json").read_text()
    huge = text.replace('"duration": 16.055974209997657', '"duration": 1e999')
    assert huge != text
    assert _refused(huge.encode()) == [(None, "duration")]
    digits = text.replace('"input_lens": [12,', '"input_lens": [' + "9" * 5000 + ",")
    assert digits != text
    assert _refused(digits.encode()) == [(None, "input_lens[0]")]
    nan = text.replace('"duration": 16.055974209997657', '"duration": NaN')
    assert _refused(nan.encode()) == [(None, "duration")]


def test_import_refuses_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "cand.json"
    bad.write_text(json.dumps(_with(backend="openai-chat")))
    shutil.copyfile(OMNI / "base-c2.json", tmp_path / "base.json")
    res = _cli(
        "import",
        "vllm-omni",
        "--arm",
        f"base={tmp_path / 'base.json'}",
        "--arm",
        f"cand={bad}",
        "--commit",
        "base=aaaaaaa",
        "--commit",
        "cand=bbbbbbb",
        "-o",
        tmp_path / "out",
    )
    assert res.returncode == 2, res.stderr
    assert "backend" in res.stderr and str(bad) in res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists()
    assert {p.name for p in tmp_path.iterdir()} == {"cand.json", "base.json"}


# --- the reference server reads the form the client sends ----------------------------


def test_reference_server_reads_an_urlencoded_form_as_fastapi_does() -> None:
    # aiohttp's FormData without a file part is sent urlencoded (what vLLM-Omni's own
    # client sends for a text-only job); FastAPI's Form(...) reads it with Starlette's
    # Request.form(), which parses urlencoded bodies too.
    from tests.reference_server.form import FormError, parse_video_form

    body = b"model=reference-omni&prompt=a+violinist+at+dusk&size=64x64&seconds=1"
    form = parse_video_form("application/x-www-form-urlencoded", body, "reference-omni")
    assert form.fields["prompt"] == "a violinist at dusk"
    assert form.fields["seconds"] == "1" and not form.files
    # A file field cannot travel urlencoded: refused as FastAPI refuses a text value.
    with pytest.raises(FormError) as exc:
        parse_video_form(
            "application/x-www-form-urlencoded",
            body + b"&input_reference=x.png",
            "reference-omni",
        )
    assert exc.value.status == 400 and "Expected UploadFile" in exc.value.message
    assert exc.value.param == "body.input_reference"
