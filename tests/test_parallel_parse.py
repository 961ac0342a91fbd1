"""Sources parsed in worker processes (``bundler/_internal/parallel_parse.py``) give what
the serial parse gives: the same runs, the same errors, the same campaign and replay;
a dead worker, a failing source or a script without a ``__main__`` guard change
nothing but the time taken. The sources are the files vLLM 0.33.0 wrote
(``tests/fixtures/real_writers``), parsed for real in real processes.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import math
import operator
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bundler._internal import parallel_parse
from bundler._internal.parallel_parse import prefetch
from bundler.format.serving_run import ServingRun, SourceError
from bundler.format.trust import Trust
from bundler.importers import vllm
from bundler.importers.staged_tree import StagedTree
from bundler.importers.write import import_campaign
from bundler.seal import seal_campaign
from replay.api import replay_bundle
from replay.report.json_view import result_to_dict

VLLM = Path(__file__).resolve().parent / "fixtures" / "real_writers" / "vllm-0.33.0"
FILES = ["base-c2.json", "base-c4.json", "cand-c2.json", "cand-c4.json"]
ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    parallel_parse._cpus() < 2, reason="worker processes are only started with two CPUs"
)


@pytest.fixture
def always(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers for any input size (the real bound, 32 MiB, is for large sweeps)."""
    monkeypatch.setattr(parallel_parse, "MIN_BYTES", 0)


def _jobs(names: list[str]) -> list[tuple[Any, tuple[Any, ...], int]]:
    out: list[tuple[Any, tuple[Any, ...], int]] = []
    for name in names:
        data = (VLLM / name).read_bytes()
        out.append((vllm.parse, (data, name, name.split("-")[0]), len(data)))
    return out


def _same(a: ServingRun, b: ServingRun) -> None:
    for f in dataclasses.fields(ServingRun):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype, f.name
            np.testing.assert_array_equal(x, y, err_msg=f.name)
        else:
            assert x == y, f.name


@pytest.mark.usefixtures("always")
def test_worker_results_are_the_serial_results_in_job_order() -> None:
    jobs = _jobs(FILES)
    with prefetch(jobs) as pre:
        want = min(parallel_parse._cpus() - 1, parallel_parse.MAX_WORKERS, len(jobs) - 1)
        assert pre.workers == want >= 1
        got = [t() for t in pre.thunks]
    for (fn, args, _), run in zip(jobs, got, strict=True):
        _same(run, fn(*args))
    assert [r.source for r in got] == FILES


def test_small_inputs_stay_in_process() -> None:
    with prefetch(_jobs(FILES)) as pre:
        assert pre.workers == 0
        assert len([t() for t in pre.thunks]) == len(FILES)


@pytest.mark.usefixtures("always")
@pytest.mark.parametrize(("cap", "want"), [("0", 0), ("1", 1), ("many", None), ("-1", None)])
def test_the_user_caps_or_turns_off_the_workers(
    monkeypatch: pytest.MonkeyPatch, cap: str, want: int | None
) -> None:
    jobs = _jobs(FILES)
    uncapped = min(parallel_parse._cpus() - 1, parallel_parse.MAX_WORKERS, len(jobs) - 1)
    monkeypatch.setenv(parallel_parse.WORKERS_ENV, cap)
    with prefetch(jobs) as pre:
        assert pre.workers == (uncapped if want is None else want)
        got = [t() for t in pre.thunks]
    for (fn, args, _), run in zip(jobs, got, strict=True):
        _same(run, fn(*args))


@pytest.mark.usefixtures("always")
def test_a_failing_job_raises_the_serial_error_in_the_caller() -> None:
    bad = b'{"date": "x", "ttfts": [1, "slow"]'  # truncated JSON
    jobs = [*_jobs(FILES[:2]), (vllm.parse, (bad, "bad.json", "base"), len(bad))]
    with pytest.raises(SourceError) as serial:
        vllm.parse(bad, "bad.json", "base")
    with prefetch(jobs) as pre:
        assert pre.workers >= 1
        _same(pre.thunks[0](), vllm.parse(*jobs[0][1]))
        with pytest.raises(SourceError) as parallel:
            pre.thunks[2]()
    assert type(parallel.value) is type(serial.value)
    assert str(parallel.value) == str(serial.value)
    assert parallel.value.problems == serial.value.problems


@pytest.mark.usefixtures("always")
def test_dead_workers_leave_their_jobs_to_the_caller() -> None:
    jobs = _jobs(FILES * 3)
    with prefetch(jobs) as pre:
        for w in pre._workers:
            w.proc.kill()
        got = [t() for t in pre.thunks]
    for (fn, args, _), run in zip(jobs, got, strict=True):
        _same(run, fn(*args))


def test_a_script_without_a_main_guard_runs_once(tmp_path: Path) -> None:
    """multiprocessing's spawn would import the script again in each worker. Run from a
    folder holding a ``bundler`` package of its own (a campaign under audit could): the
    workers, like the script, import the real one."""
    counter = tmp_path / "runs.txt"
    hostile = tmp_path / "hostile"
    (hostile / "bundler").mkdir(parents=True)
    (hostile / "bundler" / "__init__.py").write_text(
        f"open({str(tmp_path / 'pwned')!r}, 'w').close()\n"
    )
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "unguarded.py"
    script.write_text(
        textwrap.dedent(
            f"""
            from pathlib import Path
            from bundler._internal import parallel_parse
            from bundler.importers import vllm
            with open({str(counter)!r}, "a") as f:
                f.write("ran\\n")
            parallel_parse.MIN_BYTES = 0
            files = sorted(Path({str(VLLM)!r}).glob("*-c*.json"))
            jobs = [(vllm.parse, (p.read_bytes(), p.name, "a"), 1) for p in files]
            with parallel_parse.prefetch(jobs) as pre:
                print(pre.workers, [t().source for t in pre.thunks])
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=hostile,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert counter.read_text() == "ran\n"
    workers, names = done.stdout.split(" ", 1)
    assert int(workers) >= 1
    assert names.strip() == repr(sorted(FILES))
    assert not (tmp_path / "pwned").exists()


def _tree(root: Path) -> dict[str, bytes]:
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


def _import(out: Path) -> Any:
    sources = [(name.split("-")[0], VLLM / name) for name in FILES]
    commits = {"base": "a" * 7, "cand": "b" * 7}
    return import_campaign("vllm", sources, out, commits, campaign_id="sweep")


def test_import_and_replay_with_workers_are_the_serial_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    serial = tmp_path / "serial"
    _import(serial)
    monkeypatch.setattr(parallel_parse, "MIN_BYTES", 0)
    parallel = tmp_path / "parallel"
    _import(parallel)
    assert _tree(parallel) == _tree(serial)
    assert not [p for p in tmp_path.iterdir() if "partial" in p.name]

    bundle = tmp_path / "c.bundle"
    seal_campaign(serial, bundle)
    with_workers = replay_bundle(bundle, trust=Trust.allow_unsigned())
    monkeypatch.setattr(parallel_parse, "MIN_BYTES", 1 << 60)
    without = replay_bundle(bundle, trust=Trust.allow_unsigned())
    assert with_workers.claims.count("confirmed") == len(with_workers.claims.checks) > 0
    assert json.dumps(result_to_dict(with_workers), sort_keys=True) == json.dumps(
        result_to_dict(without), sort_keys=True
    )


@pytest.mark.usefixtures("always")
def test_a_bad_source_among_parsed_ones_writes_nothing(tmp_path: Path) -> None:
    """The carried sources are written while later ones parse; a later failure removes
    them: neither the campaign nor its staging folder is left."""
    src = tmp_path / "src"
    src.mkdir()
    for name in FILES:
        (src / name).write_bytes((VLLM / name).read_bytes())
    (src / "cand-c4.json").write_bytes(b'{"date": ')
    out = tmp_path / "camp"
    sources = [(name.split("-")[0], src / name) for name in FILES]
    with pytest.raises(SourceError) as err:
        import_campaign("vllm", sources, out, {"base": "a" * 7, "cand": "b" * 7})
    assert [p.where for p in err.value.problems] == [str(src / "cand-c4.json")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_a_write_error_is_raised_and_nothing_is_left(tmp_path: Path) -> None:
    def stage() -> None:
        with StagedTree(tmp_path / "camp") as tree:
            tree.put("sources/a", b"a file")
            tree.put("sources/a/b.json", b"under a file: fails")
            tree.finish({"campaign.json": b"{}"})

    with pytest.raises(FileExistsError):  # mkdir of sources/a, a file already
        stage()
    assert list(tmp_path.iterdir()) == []


def _bounded(body: Any, seconds: float = 60) -> Any:
    """Run ``body`` in a thread; a hang fails the test instead of the whole run."""
    out: list[Any] = []
    err: list[BaseException] = []

    def run() -> None:
        try:
            out.append(body())
        except BaseException as exc:
            err.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"no answer in {seconds} s"
    if err:
        raise err[0]
    return out[0]


@pytest.mark.usefixtures("always")
def test_jobs_the_caller_runs_while_waiting_keep_their_order_and_errors() -> None:
    """Every worker holds a slow job; the caller, waiting for the first, runs the later
    jobs itself: each call still returns its own job's value, and the failing one
    raises at its own call, not earlier."""
    slow = min(parallel_parse._cpus() - 1, parallel_parse.MAX_WORKERS)
    jobs: list[tuple[Any, tuple[Any, ...], int]] = [(time.sleep, (1.0,), 1)] * slow + [
        (math.sqrt, (4.0,), 1),
        (operator.truediv, (1, 0), 1),
        (math.sqrt, (9.0,), 1),
    ]

    def body() -> list[Any]:
        got: list[Any] = []
        with prefetch(jobs) as pre:
            assert pre.workers == slow
            deadline = time.monotonic() + 30
            while not all(t._taken for t in pre.thunks[:slow]) and time.monotonic() < deadline:
                time.sleep(0.01)  # until each worker has taken a slow job
            assert not any(t._taken for t in pre.thunks[slow:])
            got += [t() for t in pre.thunks[:slow]]
            assert all(t._here is not None for t in pre.thunks[slow:])  # run while waiting
            got.append(pre.thunks[slow]())
            with pytest.raises(ZeroDivisionError):
                pre.thunks[slow + 1]()
            got.append(pre.thunks[slow + 2]())
        return got

    assert _bounded(body) == [None] * slow + [2.0, 3.0]


@pytest.mark.usefixtures("always")
def test_arguments_are_made_when_their_job_starts_and_once() -> None:
    """A job's arguments made by a function (replay: a bundle member, maybe spilled to
    disk) are made when the job starts, not when the jobs are handed over."""
    slow = min(parallel_parse._cpus() - 1, parallel_parse.MAX_WORKERS)
    made: list[int] = []

    def maker(i: int, args: tuple[Any, ...]) -> Any:
        def make() -> tuple[Any, ...]:
            made.append(i)
            return args

        return make

    jobs: list[parallel_parse.Job] = [(time.sleep, maker(i, (1.0,)), 1) for i in range(slow)] + [
        (math.sqrt, maker(slow + i, (float(i * i),)), 1) for i in range(3)
    ]

    def body() -> list[Any]:
        with prefetch(jobs) as pre:
            deadline = time.monotonic() + 30
            while len(made) < slow and time.monotonic() < deadline:
                time.sleep(0.01)  # each worker busy with a slow job for a second
            assert sorted(made) == list(range(slow))  # only the started ones
            return [t() for t in pre.thunks]

    assert _bounded(body) == [None] * slow + [0.0, 1.0, 2.0]
    assert sorted(made) == list(range(slow + 3))


REAL = VLLM.parent
# (format, arms and sources, the files each source carries): one file, a file holding
# several runs (carried once for all of them), a directory of two files (AIPerf).
_FORMATS = [
    ("vllm", [(n.split("-")[0], VLLM / n) for n in FILES], lambda p: [p]),
    (
        "guidellm",
        [(a, REAL / "guidellm-0.8.1-sweep" / f"{a}-sweep.json") for a in ("base", "cand")],
        lambda p: [p],
    ),
    (
        "aiperf",
        [(n.split("-")[0], REAL / "aiperf-0.13.0" / n) for n in ("base-c2", "base-c4", "cand-c4")],
        lambda p: sorted(x for x in p.iterdir() if x.is_file()),
    ),
]


@pytest.mark.parametrize(("fmt", "sources", "carried"), _FORMATS, ids=[f[0] for f in _FORMATS])
def test_workers_write_the_carried_files_the_serial_import_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, sources: Any, carried: Any
) -> None:
    """Workers write each carried file into the staging folder and send back its digest:
    the campaign is the serial one byte for byte, each carried file is its source's
    bytes, listed with their SHA-256, and no staging part is left anywhere."""
    commits = {"base": "a" * 7, "cand": "b" * 7}
    monkeypatch.setenv(parallel_parse.WORKERS_ENV, "0")
    import_campaign(fmt, sources, tmp_path / "serial", commits, campaign_id="c")
    monkeypatch.delenv(parallel_parse.WORKERS_ENV)
    monkeypatch.setattr(parallel_parse, "MIN_BYTES", 0)
    import_campaign(fmt, sources, tmp_path / "parallel", commits, campaign_id="c")
    got = _tree(tmp_path / "parallel")
    assert got == _tree(tmp_path / "serial")
    index = json.loads(got["serving.json"])
    want_bytes = sorted(p.read_bytes() for _, src in sources for p in carried(src))
    assert sorted(v for k, v in got.items() if k.startswith("sources/")) == want_bytes
    for entry in index["sources"]:
        for key in ("", "aggregate_"):
            if f"{key}path" in entry:
                data = got[entry[f"{key}path"]]
                assert entry[f"{key}sha256"] == hashlib.sha256(data).hexdigest()
    assert not [k for k in got if ".parts" in k]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parallel", "serial"]


@pytest.mark.usefixtures("always")
def test_standby_workers_are_the_ones_prefetch_uses() -> None:
    """Workers started ahead (replay starts them while it verifies the bundle) import
    the parser's modules and take the jobs of the next prefetch: none is started
    then, the results are the serial ones, and every process is gone afterwards."""
    jobs = _jobs(FILES)
    with parallel_parse.standby(1, preload=("bundler.importers.vllm",)) as started:
        spare = list(parallel_parse._STANDBY.get() or [])
        assert started == len(spare) == min(parallel_parse._cpus() - 1, parallel_parse.MAX_WORKERS)
        with prefetch(jobs) as pre:
            assert pre.workers == min(started, len(jobs) - 1)
            assert all(w in spare for w in pre._workers)  # taken, not started anew
            got = [t() for t in pre.thunks]
    for (fn, args, _), run in zip(jobs, got, strict=True):
        _same(run, fn(*args))
    assert all(w.proc.poll() is not None for w in spare)


@pytest.mark.usefixtures("always")
def test_standby_workers_no_prefetch_takes_are_stopped() -> None:
    with parallel_parse.standby(1) as started:
        spare = list(parallel_parse._STANDBY.get() or [])
        assert started == len(spare) >= 1
    assert all(w.proc.poll() is not None for w in spare)
    assert parallel_parse._STANDBY.get() is None


def test_standby_starts_nothing_below_the_bound_or_when_turned_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with parallel_parse.standby(parallel_parse.MIN_BYTES - 1) as started:
        assert started == 0
    monkeypatch.setenv(parallel_parse.WORKERS_ENV, "0")
    with parallel_parse.standby(parallel_parse.MIN_BYTES) as started:
        assert started == 0


@pytest.mark.usefixtures("always")
def test_a_preload_that_fails_in_the_worker_changes_no_result() -> None:
    jobs = _jobs(FILES)
    with parallel_parse.standby(1, preload=("no_such_module_here",)), prefetch(jobs) as pre:
        got = [t() for t in pre.thunks]
    for (fn, args, _), run in zip(jobs, got, strict=True):
        _same(run, fn(*args))


@pytest.mark.usefixtures("always")
@pytest.mark.parametrize("cap", ["0", ""])
def test_jobs_run_with_the_cyclic_collector_paused_and_restored(
    monkeypatch: pytest.MonkeyPatch, cap: str
) -> None:
    """Each job, in a worker or in the caller, runs without the cyclic collector (a
    parsed document's containers hold no cycle); the caller's setting is back after."""
    monkeypatch.setenv(parallel_parse.WORKERS_ENV, cap)
    jobs: list[parallel_parse.Job] = [(gc.isenabled, (), 1)] * 4
    assert gc.isenabled()
    with prefetch(jobs) as pre:
        assert pre.workers == (0 if cap == "0" else min(parallel_parse._cpus() - 1, len(jobs) - 1))
        got = [t() for t in pre.thunks]
    assert got == [False] * 4
    assert gc.isenabled()
