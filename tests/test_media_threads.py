"""Thread plan: --jobs and the cores available decide torch and decoder threads (issue 11)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from replay.media.threads import available_cores, plan_threads
from tests.conftest import make_keys

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "media-mini"
CLI = (sys.executable, "-m", "reprobundle.cli")


@pytest.mark.parametrize(
    "case",
    [
        # Worked by hand: per comparison cores // parallel, decoders half of that.
        (2, 1, 3, 1, 2, 1),
        (2, 2, 3, 2, 1, 1),
        (2, 4, 3, 2, 1, 1),  # never more comparisons at once than cores
        (2, 2, 1, 1, 2, 1),  # one comparison: all cores to it
        (8, 2, 9, 2, 4, 2),
        (8, 3, 9, 3, 2, 1),
        (1, 2, 3, 1, 1, 1),
    ],
)
def test_plan_by_hand(case: tuple[int, ...]) -> None:
    # (cores, jobs, comparisons) -> (parallel, torch threads, decoder threads per file)
    cores, jobs, comparisons, *expected = case
    p = plan_threads(jobs, comparisons, cores=cores)
    assert [p.parallel, p.torch_threads, p.decoder_threads] == expected


def test_busy_threads_never_exceed_cores() -> None:
    for cores in range(1, 33):
        for jobs in range(1, 40):
            for comparisons in (1, 2, 5, 100):
                p = plan_threads(jobs, comparisons, cores=cores)
                # torch's OpenMP pool (which spins) within the cores; decoders (two per
                # comparison, which block on a full prefetch queue instead of spinning)
                # too, except for their floor of one thread each.
                assert p.parallel * p.torch_threads <= cores
                assert p.parallel * 2 * p.decoder_threads <= max(cores, 2 * p.parallel)
                assert p.parallel <= jobs


def test_omp_num_threads_caps_the_cores() -> None:
    affinity = len(os.sched_getaffinity(0))
    assert available_cores({}) == (affinity, "sched_getaffinity")
    assert available_cores({"OMP_NUM_THREADS": "1"}) == (
        1,
        "OMP_NUM_THREADS" if affinity > 1 else "sched_getaffinity",
    )
    # Malformed or larger than the affinity mask: ignored.
    assert available_cores({"OMP_NUM_THREADS": "two"})[0] == affinity
    assert available_cores({"OMP_NUM_THREADS": str(affinity + 5)})[0] == affinity


def _seal(tmp: Path) -> Path:
    keys = make_keys(tmp)
    bundle = tmp / "mini.bundle"
    subprocess.run(
        [*CLI, "seal", str(SAMPLE), "-o", str(bundle), "--key", str(keys.private_path)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return bundle


def _replay_json(bundle: Path, env: dict[str, str], *args: str) -> dict:  # type: ignore[type-arg]
    p = subprocess.run(
        [*CLI, "replay", str(bundle), "--allow-unsigned", "--json", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert p.returncode in (4, 5), p.stderr  # the sample's cmp-02/03 fail coverage
    doc: dict = json.loads(p.stdout)  # type: ignore[type-arg]
    return doc


def test_the_plan_is_recorded_in_the_result_and_respects_omp(tmp_path: Path) -> None:
    pytest.importorskip("av")
    bundle = _seal(tmp_path)
    bare = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    media = ("--media", str(SAMPLE / "media"))
    doc = _replay_json(bundle, {**bare, "OMP_NUM_THREADS": "1"}, *media, "--jobs", "2")
    ex = doc["media"]["execution"]
    assert ex["executor"] == "local"
    assert ex["threads"]["cores"] == 1
    assert ex["threads"]["parallel"] == 1  # --jobs 2 on one allowed core: one at a time
    assert (ex["threads"]["torch_threads"], ex["threads"]["decoder_threads"]) == (1, 1)
    assert ex["threads"]["jobs"] == 2
    cores = len(os.sched_getaffinity(0))
    t = _replay_json(bundle, bare, *media, "--jobs", "2")["media"]["execution"]["threads"]
    assert (t["cores"], t["cores_source"]) == (cores, "sched_getaffinity")
    assert t["parallel"] == min(2, cores)
    assert t["torch_threads"] == max(1, cores // t["parallel"])


def test_planned_lpips_threads_are_the_ones_torch_runs_with(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("lpips")
    import importlib.util

    import numpy as np

    from bundler.format.plan_model import ScorerDoc
    from replay.media.lpips_attested import load_attested_lpips

    spec = importlib.util.spec_from_file_location("mtw", SAMPLE / "make_test_weights.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.write_weights(tmp_path)
    scorer, ident = load_attested_lpips(
        ScorerDoc.from_dict(json.loads((SAMPLE / "scorer.json").read_text())), tmp_path
    )
    assert scorer is not None, ident.reason
    rng = np.random.default_rng(0)
    big = [rng.uniform(-1, 1, (3, 192, 320)).astype(np.float32) for _ in range(2)]
    small = [rng.uniform(-1, 1, (3, 90, 160)).astype(np.float32) for _ in range(2)]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        scorer.cpu_threads = 1
        scorer.distances(big[:1], big[1:])
        assert scorer.threads_seen == {1}
        assert torch.get_num_threads() == 1  # planned: set for the whole re-score
        scorer.cpu_threads, scorer.threads_seen = 2, set()
        scorer.distances(big[:1], big[1:])
        assert scorer.threads_seen == {2}
        scorer.threads_seen = set()
        scorer.distances(small[:1], small[1:])  # small frames: always one thread
        assert scorer.threads_seen == {1}
    finally:
        torch.set_num_threads(before)
