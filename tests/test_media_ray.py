"""Media re-scoring on a real local Ray cluster (127.0.0.1) against the local executor.

The cluster is started inside the test module (``ray.init(address="local")``,
2 CPUs, no dashboard) and stopped after it. The local executor's result on
``samples/media-mini`` with attested LPIPS is the reference: the Ray result
must be the same in every value and verdict (same device type: CPU). One
test makes a worker process exit in the middle of a task (``os._exit``, as a
killed worker) and checks that Ray re-ran it, the retry is recorded, and the
result is still the same.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="the [ray] extra is not installed")
pytest.importorskip("av")
pytest.importorskip("torch", reason="the [lpips] extra is not installed")
pytest.importorskip("lpips", reason="the [lpips] extra is not installed")

import ray

from bundler.format.trust import Trust
from bundler.seal import seal_campaign
from bundler.verified import VerifiedBundle, open_verified
from replay.media import MediaProgress, MediaReplayResult, rescore_bundle
from replay.media.executors.ray import CRASH_DIR_ENV
from tests.conftest import make_keys

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "media-mini"


@pytest.fixture(scope="module")
def crash_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("crash")


@pytest.fixture(scope="module")
def cluster(crash_dir: Path) -> Iterator[None]:
    # Workers inherit the environment of the raylet this process starts.
    os.environ[CRASH_DIR_ENV] = str(crash_dir)
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        logging_level=logging.ERROR,
        _node_ip_address="127.0.0.1",
    )
    try:
        yield
    finally:
        ray.shutdown()
        os.environ.pop(CRASH_DIR_ENV, None)


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = importlib.util.spec_from_file_location("mtw", SAMPLE / "make_test_weights.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    d = tmp_path_factory.mktemp("weights")
    mod.write_weights(d)
    return d


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> VerifiedBundle:
    d = tmp_path_factory.mktemp("sealed")
    keys = make_keys(d)
    seal_campaign(SAMPLE, d / "mini.bundle", keys=[keys.private])
    return open_verified(d / "mini.bundle", trust=Trust.keys([keys.public]))


@pytest.fixture(scope="module")
def local(bundle: VerifiedBundle, weights: Path) -> MediaReplayResult:
    return rescore_bundle(bundle, [SAMPLE / "media"], weights_dir=weights, jobs=2)


def _values(r: MediaReplayResult) -> dict[str, Any]:
    """Everything but wall times and how it ran."""
    d = r.to_dict(per_frame=True)
    for k in ("seconds", "execution", "jobs"):
        d.pop(k)
    for c in d["comparisons"]:
        c.pop("seconds")
    return d


def test_ray_tasks_give_the_local_result(
    cluster: None, bundle: VerifiedBundle, weights: Path, local: MediaReplayResult
) -> None:
    events: list[MediaProgress] = []
    r = rescore_bundle(
        bundle, [SAMPLE / "media"], weights_dir=weights, executor="ray", progress=events.append
    )
    assert r.scorer is not None and r.scorer.attested
    lp = r.comparisons[0].per_frame["lpips/alex-v0.1-frame-mean"]
    assert len(lp) == 48 and max(lp) > 0  # LPIPS really ran in the tasks
    assert _values(r) == _values(local)  # bit for bit: same code, same device type
    assert [c.comparison_id for c in r.comparisons] == ["cmp-01", "cmp-02", "cmp-03"]
    ex = r.execution
    assert ex is not None and ex.executor == "ray" and ex.device == "cpu"
    assert ex.ray_resources == {"num_cpus": 1}  # no GPU in this cluster
    assert ex.retries == []
    # Ray gives each 1-CPU task OMP_NUM_THREADS=1; the plan follows it.
    assert (ex.threads.cores, ex.threads.cores_source) == (1, "OMP_NUM_THREADS")
    assert ex.torch_threads_seen == [1]
    assert ex.lpips_batch == {"160x90": 8}
    done = [e for e in events if e.stage == "comparison-done"]
    assert sorted(e.comparison_id or "" for e in done) == ["cmp-01", "cmp-02", "cmp-03"]
    assert [e.comparisons_done for e in done] == [1, 2, 3]
    assert {e.comparisons_total for e in events} == {3}


def test_a_worker_killed_mid_task_is_retried_and_recorded(
    cluster: None, bundle: VerifiedBundle, weights: Path, local: MediaReplayResult, crash_dir: Path
) -> None:
    (crash_dir / "crash-cmp-02").write_text("exit the worker running cmp-02 once\n")
    r = rescore_bundle(bundle, [SAMPLE / "media"], weights_dir=weights, executor="ray")
    assert not (crash_dir / "crash-cmp-02").exists()
    crashed = list(crash_dir.glob("crashed-cmp-02-*"))
    assert len(crashed) == 1  # one worker process did exit
    assert r.execution is not None
    retries = r.execution.retries
    assert [(x.comparison_id, x.attempts, x.outcome) for x in retries] == [
        ("cmp-02", 2, "completed")
    ]
    # Nothing lost, nothing counted twice, and the same values as the local executor.
    assert [c.comparison_id for c in r.comparisons] == ["cmp-01", "cmp-02", "cmp-03"]
    assert _values(r) == _values(local)
    assert r.to_dict()["execution"]["retries"][0]["comparison_id"] == "cmp-02"


def test_cuda_on_a_cluster_without_gpus_is_a_usage_error(
    cluster: None, bundle: VerifiedBundle
) -> None:
    from replay.media import DeviceError

    with pytest.raises(DeviceError, match="no GPU"):
        rescore_bundle(bundle, [SAMPLE / "media"], executor="ray", device="cuda")


def _strip(doc: dict[str, Any]) -> dict[str, Any]:
    m: dict[str, Any] = doc["media"]
    for k in ("seconds", "execution"):
        m.pop(k)
    for c in m["comparisons"]:
        c.pop("seconds")
    return m


def test_cli_starts_a_local_cluster_and_agrees_with_local(tmp_path: Path) -> None:
    keys = make_keys(tmp_path)
    out = tmp_path / "mini.bundle"
    seal_campaign(SAMPLE, out, keys=[keys.private])
    env = {k: v for k, v in os.environ.items() if k != CRASH_DIR_ENV}
    cmd = [sys.executable, "-m", "reprobundle.cli", "replay", str(out), "--allow-unsigned"]
    cmd += ["--media", str(SAMPLE / "media"), "--json"]
    runs = {
        ex: subprocess.run(
            [*cmd, "--executor", ex], capture_output=True, text=True, env=env, timeout=300
        )
        for ex in ("local", "ray")
    }
    assert runs["ray"].returncode == runs["local"].returncode == 4, runs["ray"].stderr
    docs = {ex: json.loads(p.stdout) for ex, p in runs.items()}
    assert docs["ray"]["media"]["execution"]["executor"] == "ray"
    assert _strip(docs["ray"]) == _strip(docs["local"])
    p = subprocess.run(
        [*cmd, "--ray-address", "127.0.0.1:1"], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 2, p.stderr
    assert "--ray-address needs --executor ray" in p.stdout + p.stderr
