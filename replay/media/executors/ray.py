"""Media re-scoring on a Ray cluster: one Ray task per comparison (``--executor ray``).

Each task re-scores one comparison with the very code the local executor
runs (:func:`replay.media.pipeline.rescore_comparison`): it reads both media
files by the path the driver found them at (every node must see the same
paths; the bytes are re-hashed against the sealed SHA-256 where they are
read), decodes, measures SSIM/PSNR/audio and, when a gate needs it, LPIPS
from the weight files under the same ``--scorer-weights`` path, verified
again on the worker. The driver combines the returned comparisons, in the
bundle's order, into the one media result.

Placement: every task asks for one CPU; when LPIPS runs on an accelerator
(``--device cuda``, or by default when the cluster has GPUs) it also asks for
one GPU (``num_gpus=1``), and Ray places it on a node with a free GPU and
sets ``CUDA_VISIBLE_DEVICES`` for it. Ray sets ``OMP_NUM_THREADS`` to the
task's CPUs, which the thread plan (:mod:`replay.media.threads`) respects.

Failures: a task whose worker process dies is re-run by Ray (``max_retries``,
:data:`MAX_RETRIES`); a small ledger actor counts the attempts each
comparison started, and every comparison started more than once is recorded
in the result (:class:`~replay.media.execution.Retry`). A comparison whose
every attempt died is reported INCOMPLETE with the reason, never dropped; each
comparison's result is taken from exactly one task's return value.

``ray`` (the ``[ray]`` extra) is imported only here, and this module only when
``--executor ray`` is asked for.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from bundler.errors import CouldNotRunError
from bundler.format.plan_model import ScorerDoc
from replay.media.bundle_read import ComparisonRow
from replay.media.device import DeviceError
from replay.media.execution import RAY, Execution, Retry
from replay.media.executors import Job
from replay.media.judge import Attestation
from replay.media.lpips_attested import load_attested_lpips
from replay.media.lpips_identity import ScorerIdentity
from replay.media.lpips_net import AttestedLpips
from replay.media.pipeline import Context, rescore_comparison, unscored_comparison
from replay.media.result import ComparisonReplay
from replay.media.threads import ThreadPlan, available_cores, plan_threads

__all__ = ["CRASH_DIR_ENV", "MAX_RETRIES", "RayCluster"]

MAX_RETRIES: Final = 3
"""Times Ray re-runs a task whose worker died (system failures only: a Python
exception in our code is a bug and is raised, as the local executor would)."""

CRASH_DIR_ENV: Final = "REPROBUNDLE_RAY_CRASH_DIR"
"""Fault injection for tests: a task for comparison ``C`` whose worker finds the file
``$REPROBUNDLE_RAY_CRASH_DIR/crash-C`` renames it away and exits the worker process
at once (``os._exit``), as a killed worker would. Without the file nothing happens."""

_WAIT_S: Final = 1.0


@dataclass(frozen=True)
class _TaskSpec:
    """What every task of one re-score shares (sent once, by reference)."""

    gates: Sequence[Any]
    locs: Mapping[str, Any]
    params: Any
    attestation: Attestation
    scorer_doc: ScorerDoc | None
    weights_dir: str | None
    device: str
    lpips_batch: int | None


_SCORERS: dict[tuple[str, str, str], tuple[AttestedLpips | None, ScorerIdentity]] = {}
"""A worker process's scorers, built once and reused by the tasks it runs."""


def _worker_scorer(spec: _TaskSpec) -> tuple[AttestedLpips | None, ScorerIdentity]:
    assert spec.scorer_doc is not None
    digests = ",".join(sorted(w.sha256 for w in spec.scorer_doc.weights))
    key = (digests, str(spec.weights_dir), spec.device)
    if key not in _SCORERS:
        wdir = Path(spec.weights_dir) if spec.weights_dir else None
        _SCORERS[key] = load_attested_lpips(spec.scorer_doc, wdir, spec.device)
    return _SCORERS[key]


def _crash_if_asked(cid: str) -> None:
    d = os.environ.get(CRASH_DIR_ENV)
    if not d:
        return
    marker = Path(d) / f"crash-{cid}"
    try:
        marker.rename(Path(d) / f"crashed-{cid}-{os.getpid()}")
    except OSError:
        return
    os._exit(1)


def _task(
    cmp: ComparisonRow, spec: _TaskSpec, ledger: Any
) -> tuple[ComparisonReplay, dict[str, Any]]:
    """One comparison, on a Ray worker: the local executor's code, the worker's threads."""
    import ray

    ray.get(ledger.start.remote(cmp.comparison_id))  # counted before any work
    _crash_if_asked(cmp.comparison_id)
    plan = plan_threads(1, 1)  # Ray sets OMP_NUM_THREADS to this task's CPUs
    scorer: AttestedLpips | None = None
    att = spec.attestation
    if spec.scorer_doc is not None and att.rederived:
        scorer, ident = _worker_scorer(spec)
        if scorer is None:
            att = Attestation(att.recorded, False, f"on the Ray worker: {ident.reason}")
        else:
            scorer.cpu_threads = plan.torch_threads
            scorer.batch = spec.lpips_batch
    ctx = Context(spec.gates, spec.locs, spec.params, scorer, att, plan.decoder_threads)
    rep = rescore_comparison(cmp, ctx)
    if scorer is None and spec.scorer_doc is not None and att is not spec.attestation:
        rep.problems.append(f"LPIPS unattested {att.reason}")
    info = {
        "threads": plan.to_dict(),
        "torch_threads_seen": sorted(scorer.threads_seen) if scorer else [],
        "batch_plan": dict(scorer.batch_plan) if scorer else {},
        "batch_rule": scorer.batch_rule if scorer else "",
    }
    return rep, info


class _Ledger:
    """Attempts started per comparison (a Ray actor: one per re-score)."""

    def __init__(self) -> None:
        self.n: dict[str, int] = {}

    def start(self, cid: str) -> int:
        self.n[cid] = self.n.get(cid, 0) + 1
        return self.n[cid]

    def attempts(self) -> dict[str, int]:
        return dict(self.n)


class RayCluster:
    """A Ray cluster joined for one re-score (and left after it, when joined here): the
    :class:`~replay.media.executors.Executor` of ``--executor ray``."""

    remote = True

    def __init__(self, ray: Any, *, joined_here: bool, address: str | None, device: str) -> None:
        self.ray = ray
        self.joined_here = joined_here
        self.address = address
        self.device = device

    @classmethod
    def join(cls, address: str | None, device: str | None) -> RayCluster:
        """Join the cluster at ``address`` (None: the one joined already, else a local one).

        ``device`` None: ``cuda`` when the cluster has GPUs, else ``cpu``.

        Raises:
            DeviceError: ray is not installed; a device the cluster lacks (usage errors).
            CouldNotRunError: the cluster cannot be reached.
        """
        try:
            import ray
        except ImportError as exc:
            raise DeviceError(
                "--executor ray needs the [ray] extra: pip install 'reprobundle[ray]'"
            ) from exc
        if device is not None and not (device == "cpu" or device.startswith("cuda")):
            raise DeviceError(f"--device {device}: on Ray, LPIPS runs on cpu or cuda")
        joined_here = False
        if not ray.is_initialized():
            kw: dict[str, Any] = {"logging_level": logging.ERROR, "configure_logging": True}
            try:
                if address:
                    ray.init(address=address, **kw)
                else:
                    ray.init(
                        address="local",
                        num_cpus=available_cores()[0],
                        include_dashboard=False,
                        **kw,
                    )
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise CouldNotRunError(
                    f"cannot join the Ray cluster at {address or 'a new local cluster'}: {exc}"
                ) from exc
            joined_here = True
        gpus = float(ray.cluster_resources().get("GPU", 0))  # type: ignore[no-untyped-call]
        if device is None:
            device = "cuda" if gpus > 0 else "cpu"
        elif device.startswith("cuda") and gpus <= 0:
            if joined_here:
                ray.shutdown()
            raise DeviceError(f"--device {device}: the Ray cluster has no GPU")
        # Ray gives each GPU task its own CUDA_VISIBLE_DEVICES: the task's GPU is cuda:0.
        return cls(
            ray,
            joined_here=joined_here,
            address=address,
            device="cuda" if device.startswith("cuda") else "cpu",
        )

    def close(self) -> None:
        """Disconnect (and stop a local cluster) when :meth:`join` connected."""
        if self.joined_here:
            self.ray.shutdown()

    def run(
        self, cmps: Sequence[ComparisonRow], job: Job
    ) -> tuple[list[ComparisonReplay], Execution]:
        """Every comparison as one task; results in ``cmps``' order, with how they ran."""
        ray = self.ray
        # The driver's scorer gave the identity only: tasks load their own from the doc.
        scorer_doc = job.scorer_doc if job.scorer is not None else None
        weights_dir, lpips_batch = job.weights_dir, job.lpips_batch
        ctx = Context(job.gates, job.locs, job.params, None, job.attestation, 1, job.emit)
        resources: dict[str, float] = {"num_cpus": 1}
        if scorer_doc is not None and self.device != "cpu":
            resources["num_gpus"] = 1
        spec = _TaskSpec(
            ctx.gates,
            ctx.locs,
            ctx.params,
            ctx.attestation,
            scorer_doc,
            str(Path(weights_dir).resolve()) if weights_dir else None,
            self.device,
            lpips_batch,
        )
        ledger = ray.remote(num_cpus=0)(_Ledger).remote()
        task = ray.remote(_task).options(max_retries=MAX_RETRIES, **resources)
        spec_ref = ray.put(spec)
        by_ref = {}
        for c in cmps:
            by_ref[task.remote(c, spec_ref, ledger)] = c
            ctx.emit("comparison-start", c.comparison_id, frames_total=ctx.params.num_frames)
        done: dict[str, ComparisonReplay] = {}
        failed: dict[str, str] = {}
        infos: list[dict[str, Any]] = []
        pending = list(by_ref)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=_WAIT_S)
            for ref in ready:
                c = by_ref[ref]
                try:
                    rep, info = ray.get(ref)
                    infos.append(info)
                except ray.exceptions.RayTaskError as exc:  # our code raised: as locally
                    raise exc.as_instanceof_cause() from None
                except ray.exceptions.RayError as exc:  # the worker died every time
                    failed[c.comparison_id] = f"{type(exc).__name__}: {exc}".splitlines()[0]
                    rep = unscored_comparison(
                        c,
                        ctx,
                        f"its Ray task died on every attempt ({MAX_RETRIES + 1}): "
                        f"{failed[c.comparison_id]}",
                    )
                if c.comparison_id in done:  # pragma: no cover - one ref per comparison
                    raise RuntimeError(f"{c.comparison_id} returned twice")
                done[c.comparison_id] = rep
                ctx.emit("comparison-done", c.comparison_id)
        attempts: dict[str, int] = ray.get(ledger.attempts.remote())
        ray.kill(ledger)
        retries = [
            Retry(
                cid,
                n,
                "failed" if cid in failed else "completed",
                failed.get(
                    cid, "a worker died; Ray re-ran the task and this attempt's result is kept"
                ),
            )
            for cid, n in sorted(attempts.items())
            if n > 1 or cid in failed
        ]
        plan = ThreadPlan(**infos[0]["threads"]) if infos else plan_threads(1, 1)
        batch: dict[str, int] = {}
        for i in infos:
            batch.update(i["batch_plan"])
        execution = Execution(
            RAY,
            self.device,
            plan,
            job.lpips_tolerance,
            batch,
            next((i["batch_rule"] for i in infos if i["batch_rule"]), ""),
            sorted({t for i in infos for t in i["torch_threads_seen"]}),
            ray_address=self.address or "local",
            ray_resources=resources,
            retries=retries,
        )
        return [done[c.comparison_id] for c in cmps], execution
