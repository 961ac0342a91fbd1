"""``bundle rerun``: execute a sealed bundle's frozen plan against real servers.

:func:`prepare_rerun` reads the bundle and resolves everything that can be
checked before touching a device (schedule, targets, input files, plan check);
:func:`run_rerun` then runs it: for each ``arm_order`` position, start (or
reach) the server, check the runtime commit it reports, send the warmups,
measured and quality requests at the plan's timing boundary, tear the server
down with the plan's TERM/KILL budgets, while a telemetry sampler and the
reservation watchdog run beside it. Everything is written as a campaign
directory (:mod:`replay.rerun.writer`). Progress goes to a callback; nothing
here prints.
"""

from __future__ import annotations

import hashlib
import json
import platform
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from bundler import __version__
from bundler._internal.timefmt import format_ns
from bundler.errors import IntegrityError, UsageError
from bundler.plan_check import PlanCheckResult, PlanShapeError, check_plan
from bundler.tables import EXTRA_COLUMN
from bundler.verify import OpenedBundle, open_bundle
from replay.rerun.client import (
    Deadline,
    DeadlineExceeded,
    FilePart,
    RequestOutcome,
    VersionReport,
    VideoClient,
    commit_matches,
)
from replay.rerun.launcher import (
    LaunchError,
    LaunchSpec,
    ProcessExit,
    ServerProcess,
    child_subreaper,
    expand_command,
    free_port,
)
from replay.rerun.schedule import (
    PlannedRequest,
    SlotEstimate,
    SlotPlan,
    build_schedule,
    estimate,
)
from replay.rerun.telemetry import (
    DeviceSample,
    SampleContext,
    TelemetrySampler,
    TelemetrySource,
    source_for,
)
from replay.rerun.watchdog import ReservationWatchdog, StopFlag
from replay.rerun.writer import RerunWriter, SealedSource

__all__ = [
    "FILE_FIELDS",
    "PreparedRerun",
    "Progress",
    "RerunControl",
    "RerunEvent",
    "RerunOptions",
    "RerunResult",
    "SlotResult",
    "prepare_rerun",
    "run_rerun",
]

FILE_FIELDS = ("input_reference",)
"""Payload fields whose value names a file, sent as a multipart file part."""
_VERSION_TIMEOUT_S = 10.0
_HEALTH_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class RerunEvent:
    """One progress event: ``kind`` (plan, slot, ready, request, teardown, watchdog, note, done)."""

    kind: str
    message: str
    done: int = 0
    total: int = 0


Progress = Callable[[RerunEvent], None]


@dataclass(frozen=True)
class RerunOptions:
    """How to run: targets, inputs, telemetry, trust, and reservation bookkeeping.

    Exactly one of ``endpoints`` (server name or arm id -> base URL) and
    ``launch`` (start servers from the plan's ``launch`` templates, or from
    ``launch_command``) must be given.
    """

    endpoints: Mapping[str, str] = field(default_factory=dict)
    launch: bool = False
    launch_command: str | None = None
    launch_cwd: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    inputs: Sequence[Path] = ()
    telemetry: str | None = None
    telemetry_command: Sequence[str] | None = None
    telemetry_source: TelemetrySource | None = None
    allow_unverified_commit: bool = False
    reservation_used_s: float = 0.0
    accelerator: str | None = None
    trusted: Sequence[Ed25519PublicKey] = ()
    allow_unsigned: bool = False
    host: str = "127.0.0.1"


class RerunControl:
    """A handle to stop a running rerun from outside (signals, another thread)."""

    def __init__(self) -> None:
        self.stop = StopFlag()

    def interrupt(self, level: str | None, reason: str) -> None:
        """Stop the run: ``level`` ``reservation`` (a soft TERM) or None (a user stop)."""
        self.stop.set(level, reason)

    def install_signal_handlers(self) -> Callable[[], None]:
        """SIGTERM -> reservation stop, SIGINT -> user stop; returns a function restoring them.

        Call from the main thread only (CLI use).
        """

        def on_term(signum: int, frame: FrameType | None) -> None:
            self.interrupt("reservation", "SIGTERM received (the reservation's soft TERM)")

        def on_int(signum: int, frame: FrameType | None) -> None:
            self.interrupt(None, "interrupted by the user (SIGINT)")

        old_term = signal.signal(signal.SIGTERM, on_term)
        old_int = signal.signal(signal.SIGINT, on_int)

        def restore() -> None:
            signal.signal(signal.SIGTERM, old_term)
            signal.signal(signal.SIGINT, old_int)

        return restore


@dataclass(frozen=True)
class Target:
    """Where one slot's server is: a URL, or a command to start it."""

    url: str | None
    argv_template: tuple[str, ...] | str | None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PreparedRerun:
    """Everything resolved before any server is touched."""

    source: SealedSource
    plan: Mapping[str, Any]
    schedule: tuple[SlotPlan, ...]
    targets: tuple[Target, ...]
    files: Mapping[str, FilePart]
    check: PlanCheckResult
    estimates: tuple[SlotEstimate, ...]
    sealed_attempt: str | None
    api: str
    timing_boundary: str
    poll_interval_s: float
    telemetry: str
    telemetry_interval_s: float | None

    @property
    def total_requests(self) -> int:
        """Requests in the whole plan."""
        return sum(len(s.requests) for s in self.schedule)

    def launch_commands(self) -> list[list[str]]:
        """The expanded launch command of every slot (``{port}`` shown as ``PORT``)."""
        out = []
        for sp, t in zip(self.schedule, self.targets, strict=True):
            if t.argv_template is not None:
                values = _values(sp, "PORT", "127.0.0.1", self.plan)
                out.append(expand_command(t.argv_template, values, t.args))
        return out


@dataclass(frozen=True)
class SlotResult:
    """How one arm position went."""

    position: int
    arm: str
    server: str
    outcome: str
    statuses: Mapping[str, int]
    timeout_levels: Mapping[str, int]
    not_sent: int
    version: Mapping[str, Any] | None
    exits: tuple[ProcessExit, ...] = ()
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for the attempt record."""
        return {
            "position": self.position,
            "arm": self.arm,
            "server": self.server,
            "outcome": self.outcome,
            "statuses": dict(self.statuses),
            "timeout_levels": dict(self.timeout_levels),
            "not_sent": self.not_sent,
            "version": None if self.version is None else dict(self.version),
            "worker_exits": len(self.exits),
            "unclean_exits": sum(1 for e in self.exits if not e.clean),
            "note": self.note,
        }


@dataclass(frozen=True)
class RerunResult:
    """What :func:`run_rerun` did and wrote."""

    out_dir: Path
    attempt_id: str
    status: str
    reason: str | None
    slots: tuple[SlotResult, ...]
    counts: Mapping[str, int]
    check: PlanCheckResult

    @property
    def statuses(self) -> dict[str, int]:
        """Receipts by status, over every slot."""
        total: Counter[str] = Counter()
        for s in self.slots:
            total.update(s.statuses)
        return dict(total)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``bundle rerun --json``)."""
        return {
            "out_dir": str(self.out_dir),
            "attempt_id": self.attempt_id,
            "status": self.status,
            "reason": self.reason,
            "rows": dict(self.counts),
            "statuses": self.statuses,
            "slots": [s.to_dict() for s in self.slots],
            "plan_check_ok": self.check.ok,
        }


def _values(sp: SlotPlan, port: str, host: str, plan: Mapping[str, Any]) -> dict[str, str]:
    payload = plan.get("request", {}).get("payload", {}) if isinstance(plan, Mapping) else {}
    return {
        "port": port,
        "host": host,
        "arm": sp.arm,
        "server": sp.server,
        "commit": sp.commit,
        "python": sys.executable,
        "model": str(payload.get("model", "")) if isinstance(payload, Mapping) else "",
    }


def _read_bundle(bundle: Path, options: RerunOptions) -> tuple[OpenedBundle, str]:
    data_sha = hashlib.sha256(Path(bundle).read_bytes()).hexdigest()
    opened = open_bundle(bundle, trusted=options.trusted, allow_unsigned=options.allow_unsigned)
    rep = opened.report
    if rep.problems:
        raise IntegrityError(f"{bundle}: the bundle does not verify", list(rep.problems))
    if not rep.ok:
        raise IntegrityError(
            f"{bundle}: signature {rep.signature_status}; give a trusted --key or --allow-unsigned"
        )
    return opened, data_sha


def _table_rows(opened: OpenedBundle, name: str, columns: Sequence[str]) -> list[dict[str, Any]]:
    table = opened.table(name)
    present = [c for c in columns if c in table.column_names]
    # Timestamp columns are left out: their to_pylist needs pandas for nanoseconds.
    rows: list[dict[str, Any]] = table.select(present).to_pylist()
    return rows


def _launch_target(
    plan: Mapping[str, Any], sp: SlotPlan, options: RerunOptions
) -> tuple[Target | None, str | None]:
    launch = plan.get("launch")
    launch = launch if isinstance(launch, Mapping) else {}
    per_arm = launch.get(sp.arm)
    per_arm = per_arm if isinstance(per_arm, Mapping) else {}
    template = options.launch_command or per_arm.get("command") or launch.get("command")
    if not template:
        return None, f"no launch command for arm {sp.arm!r}"
    if not isinstance(template, str | list):
        return None, f"launch command of arm {sp.arm!r} must be a string or a list"
    args = per_arm.get("args") or []
    env = per_arm.get("env") or {}
    if not isinstance(args, list) or not isinstance(env, Mapping):
        return None, f"launch.{sp.arm}: args must be a list and env an object"
    env_all = {**{str(k): str(v) for k, v in env.items()}, **options.env}
    tmpl = template if isinstance(template, str) else tuple(str(t) for t in template)
    try:
        expand_command(tmpl, _values(sp, "0", options.host, plan), [str(a) for a in args])
    except LaunchError as exc:
        return None, f"arm {sp.arm!r}: {exc}"
    return Target(None, tmpl, tuple(str(a) for a in args), env_all), None


def _targets(
    plan: Mapping[str, Any], schedule: Sequence[SlotPlan], options: RerunOptions
) -> tuple[Target, ...]:
    if options.launch == bool(options.endpoints):
        raise UsageError("give either --launch or one --endpoint NAME=URL per arm or server")
    out: list[Target] = []
    problems: list[str] = []
    for sp in schedule:
        if options.launch:
            target, err = _launch_target(plan, sp, options)
        else:
            url = options.endpoints.get(sp.server) or options.endpoints.get(sp.arm)
            target, err = (
                (Target(url, None), None) if url else (None, f"no endpoint for {sp.server}")
            )
        if err:
            problems.append(err)
        elif target is not None:
            out.append(target)
    if problems:
        hint = (
            "give --launch-command TEMPLATE or add launch.command to the plan"
            if options.launch
            else "give --endpoint SERVER=URL or --endpoint ARM=URL"
        )
        raise UsageError(f"cannot reach every server ({hint}): " + "; ".join(problems))
    for name in options.endpoints:
        if name not in {sp.server for sp in schedule} | {sp.arm for sp in schedule}:
            raise UsageError(f"--endpoint {name}: neither a server nor an arm of the plan")
    return tuple(out)


def _input_files(
    plan: Mapping[str, Any], opened: OpenedBundle, options: RerunOptions
) -> dict[str, FilePart]:
    payload = plan.get("request", {}).get("payload") or {}
    artifacts = {
        r["path"]: r.get("sha256")
        for r in _table_rows(opened, "artifacts", ["path", "sha256"])
        if r.get("path")
    }
    out: dict[str, FilePart] = {}
    for key in FILE_FIELDS:
        rel = payload.get(key)
        if not isinstance(rel, str) or not rel:
            continue
        member = opened.members.get(f"files/{rel}")
        data = member.data if member is not None else None
        if data is None:
            for d in options.inputs:
                candidate = Path(d) / rel
                if candidate.is_file():
                    data = candidate.read_bytes()
                    break
        if data is None:
            raise UsageError(
                f"payload field {key} names {rel!r}, which is not in the bundle: "
                "give --inputs DIR holding it"
            )
        want = artifacts.get(rel)
        if member is None and want and hashlib.sha256(data).hexdigest() != want:
            raise UsageError(f"{rel}: its SHA-256 differs from the sealed artifact's")
        out[key] = FilePart(Path(rel).name, data)
    return out


def _sealed_gates(opened: OpenedBundle) -> list[dict[str, Any]]:
    """The sealed gates as rows again: null fields left out, unknown fields restored."""
    cols = ["gate_id", "metric", "op", "threshold", "definition", "warn_within", "requires_scorer"]
    out = []
    for g in _table_rows(opened, "gates", [*cols, EXTRA_COLUMN]):
        extra = g.pop(EXTRA_COLUMN, None)
        row = {k: v for k, v in g.items() if v is not None}
        if extra:
            row.update(json.loads(extra))
        out.append(row)
    return out


def prepare_rerun(bundle: Path, options: RerunOptions) -> PreparedRerun:
    """Read ``bundle`` and resolve the run without starting anything.

    Raises:
        IntegrityError: the bundle does not verify.
        UsageError: the plan cannot be scheduled, a target or an input is missing.
    """
    opened, bundle_sha = _read_bundle(bundle, options)
    campaign = opened.document("campaign.json") or {}
    plan_name = str(campaign.get("plan", ""))
    member = opened.members.get(plan_name)
    if member is None:
        raise UsageError(f"{bundle}: campaign.json names plan {plan_name!r}, which is absent")
    plan = json.loads(member.data)
    commits = {str(a["id"]): str(a["runtime_commit"]) for a in campaign.get("arms", [])}
    try:
        schedule = build_schedule(plan, commits)
    except PlanShapeError as exc:
        raise UsageError(f"{plan_name}: {exc}") from exc
    request = plan.get("request", {})
    api = str(request.get("api", "videos-async"))
    poll = request.get("poll_interval_s")
    if api == "videos-async" and not isinstance(poll, int | float):
        raise UsageError(f"{plan_name}: request.poll_interval_s is needed for videos-async")
    telemetry = plan.get("telemetry") if isinstance(plan.get("telemetry"), Mapping) else {}
    attempts = _table_rows(opened, "attempts", ["attempt_id", "status"])
    accepted = [a["attempt_id"] for a in attempts if a.get("status") == "accepted"]
    sealed_attempt = accepted[0] if len(accepted) == 1 else None
    receipts = _table_rows(opened, "receipts", ["attempt_id", "server", "e2e_s"])
    source = SealedSource(
        bundle_sha,
        campaign,
        plan_name,
        member.data,
        _sealed_gates(opened),
        opened.document("scorer.json"),
        [
            c
            for c in _table_rows(
                opened,
                "comparisons",
                ["comparison_id", "attempt_id", "baseline_request_id", "candidate_request_id"],
            )
            if sealed_attempt is None or c["attempt_id"] == sealed_attempt
        ],
        {
            str(r["request_id"]): (str(r["server"]), int(r["seq"]), str(r["phase"]))
            for r in _table_rows(opened, "receipts", ["request_id", "server", "seq", "phase"])
        },
    )
    return PreparedRerun(
        source=source,
        plan=plan,
        schedule=schedule,
        targets=_targets(plan, schedule, options),
        files=_input_files(plan, opened, options),
        check=check_plan(plan, elapsed_s=options.reservation_used_s),
        estimates=estimate(plan, schedule, receipts, sealed_attempt),
        sealed_attempt=sealed_attempt,
        api=api,
        timing_boundary=str(request.get("timing_boundary", "")),
        poll_interval_s=float(poll) if isinstance(poll, int | float) else 0.0,
        telemetry=options.telemetry or str(telemetry.get("source", "none")),
        telemetry_interval_s=(
            float(telemetry["interval_s"])
            if isinstance(telemetry.get("interval_s"), int | float)
            else None
        ),
    )


def _num(plan: Mapping[str, Any], *path: str) -> float | None:
    node: Any = plan
    for p in path:
        node = node.get(p) if isinstance(node, Mapping) else None
    return float(node) if isinstance(node, int | float) and not isinstance(node, bool) else None


class _Run:
    """One attempt in progress."""

    def __init__(
        self,
        prep: PreparedRerun,
        writer: RerunWriter,
        options: RerunOptions,
        stop: StopFlag,
        progress: Progress | None,
    ) -> None:
        self.prep = prep
        self.writer = writer
        self.options = options
        self.stop = stop
        self.progress = progress
        self.plan = prep.plan
        self.request_s = _num(self.plan, "timeouts", "request_s") or 0.0
        self.wave_s = _num(self.plan, "timeouts", "wave_s")
        self.arm_s = _num(self.plan, "timeouts", "arm_s")
        self.startup_s = _num(self.plan, "startup_budget_s")
        self.grace_s = _num(self.plan, "reservation", "kill_grace_s") or 0.0
        self.t0 = time.monotonic()
        hard = _num(self.plan, "reservation", "hard_limit_s")
        soft = _num(self.plan, "reservation", "soft_term_s") or hard
        used = options.reservation_used_s
        self.soft_at = None if soft is None else self.t0 - used + soft
        self.live: list[ServerProcess] = []
        self.slots: list[SlotResult] = []
        self.done = 0
        self.reject_reason: str | None = None
        self.version_reports: dict[str, VersionReport] = {}

    def emit(self, kind: str, message: str) -> None:
        self.writer.log(f"[{kind}] {message}", time.time_ns())
        if self.progress:
            self.progress(RerunEvent(kind, message, self.done, self.prep.total_requests))

    # -- telemetry ---------------------------------------------------------------------------

    def telemetry_sink(self, ctx: SampleContext, t_ns: int, rows: tuple[DeviceSample, ...]) -> None:
        for d in rows:
            row: dict[str, Any] = {
                "attempt_id": self.writer.attempt_id,
                "arm": ctx.arm,
                "server": ctx.server,
                "device": d.device,
                "time": format_ns(t_ns),
                "hbm_used_mb": d.hbm_used_mb,
                "hbm_total_mb": d.hbm_total_mb,
                "aicore_pct": d.aicore_pct,
                "source": self.prep.telemetry,
            }
            if d.gpu_util_pct is not None:
                row["gpu_util_pct"] = d.gpu_util_pct
            self.writer.append("telemetry", row)

    # -- one request -------------------------------------------------------------------------

    def outer(self, wave_at: float | None, arm_at: float | None) -> dict[str, float | None]:
        return {"wave": wave_at, "arm": arm_at, "reservation": self.soft_at}

    def send(
        self, client: VideoClient, req: PlannedRequest, outer: Mapping[str, float | None]
    ) -> RequestOutcome:
        fields = {k: v for k, v in req.fields.items() if k not in FILE_FIELDS}
        files = {k: v for k, v in self.prep.files.items() if k in req.fields}
        deadline = Deadline({"request": time.monotonic() + self.request_s, **outer}, self.stop)
        if self.prep.api == "videos-sync":
            return client.video_sync(fields, files, deadline=deadline)
        return client.video_async(
            fields, files, poll_interval_s=self.prep.poll_interval_s, deadline=deadline
        )

    def receipt(self, sp: SlotPlan, req: PlannedRequest, out: RequestOutcome) -> None:
        rid = f"{self.writer.attempt_id}-{sp.server}-{req.seq:02d}"
        digest = media = None
        if out.body is not None:
            media, digest = self.writer.write_media(rid, out.body)
        e2e = round(out.e2e_s, 6)
        row: dict[str, Any] = {
            "request_id": rid,
            "attempt_id": self.writer.attempt_id,
            "arm": sp.arm,
            "server": sp.server,
            "phase": req.phase,
            "seq": req.seq,
            "start": format_ns(out.start_ns),
            # end = start + e2e keeps the two consistent even if the wall clock steps.
            "end": format_ns(out.start_ns + round(e2e * 1e9)),
            "e2e_s": e2e,
            "status": out.status,
            "timeout_level": out.timeout_level,
            "http_status": out.http_status,
            "output_sha256": digest,
            "error": out.error,
            "timing_boundary": self.prep.timing_boundary,
            "job_id": out.job_id,
        }
        if self.prep.api == "videos-async":
            row["poll_interval_s"] = self.prep.poll_interval_s
            row["polls"] = out.polls
        if media is not None:
            row["media"] = media
            row["output_bytes"] = len(out.body or b"")
        if req.prompt_id is not None:
            row["prompt_id"] = req.prompt_id
        if out.cleanup is not None:
            row["cleanup"] = out.cleanup
        for header, key in (
            ("x-inference-time-s", "server_inference_s"),
            ("x-peak-memory-mb", "server_peak_memory_mb"),
        ):
            if header in out.server_headers:
                try:
                    row[key] = float(out.server_headers[header])
                except ValueError:
                    row[key + "_text"] = out.server_headers[header]
        self.writer.append("receipts", row)

    # -- one slot ----------------------------------------------------------------------------

    def wave(
        self, sp: SlotPlan, client: VideoClient, arm_at: float | None
    ) -> tuple[Counter[str], Counter[str], int]:
        statuses: Counter[str] = Counter()
        levels: Counter[str] = Counter()
        wave_at = None if self.wave_s is None else time.monotonic() + self.wave_s
        outer = self.outer(wave_at, arm_at)
        for i, req in enumerate(sp.requests):
            try:
                Deadline(outer, self.stop).check()
            except DeadlineExceeded as exc:
                self.emit(
                    "note",
                    f"{sp.server}: {len(sp.requests) - i} request(s) not sent "
                    f"({exc.level or exc.reason})",
                )
                return statuses, levels, len(sp.requests) - i
            out = self.send(client, req, outer)
            self.receipt(sp, req, out)
            self.done += 1
            statuses[out.status] += 1
            if out.timeout_level:
                levels[out.timeout_level] += 1
            lvl = f" [{out.timeout_level} timeout]" if out.timeout_level else ""
            self.emit(
                "request",
                f"{sp.server} {req.phase} #{req.seq}: {out.status} {out.e2e_s:.3f} s{lvl}"
                + (f" ({out.error})" if out.error and out.status == "failed" else ""),
            )
            if out.status == "cancelled" or out.timeout_level in ("wave", "arm", "reservation"):
                rest = len(sp.requests) - i - 1
                if rest:
                    self.emit("note", f"{sp.server}: {rest} request(s) not sent")
                return statuses, levels, rest
        return statuses, levels, 0

    def check_version(
        self, sp: SlotPlan, client: VideoClient, timeout: float
    ) -> tuple[dict[str, Any], str | None]:
        rep = client.version(timeout=timeout)
        if rep.commit is None:
            verdict = "unverified"
        else:
            verdict = "verified" if commit_matches(rep.commit, sp.commit) else "mismatch"
        doc = {
            "verdict": verdict,
            "reported_commit": rep.commit,
            "reported_version": rep.version,
            "found_in": rep.source,
            "arm_commit": sp.commit,
            "error": rep.error,
        }
        if verdict == "mismatch":
            return doc, f"{sp.server} reports runtime commit {rep.commit}, the arm's is {sp.commit}"
        if verdict == "unverified" and not self.options.allow_unverified_commit:
            return doc, (
                f"{sp.server} does not report its runtime commit (GET /version); "
                "pass --allow-unverified-commit to run anyway"
            )
        return doc, None

    def wait_ready(
        self, client: VideoClient, proc: ServerProcess, deadline: Deadline
    ) -> str | None:
        t0 = time.monotonic()
        while True:
            rc = proc.exit_status()
            if rc is not None:
                return f"server exited ({rc}) before it was ready"
            if client.health(timeout=min(_HEALTH_TIMEOUT_S, deadline.io_timeout())):
                return None
            try:
                # Poll often at first, then about every tenth of the time waited, up to 1 s.
                deadline.sleep(min(1.0, max(0.02, (time.monotonic() - t0) / 10)))
            except DeadlineExceeded as exc:
                return f"not ready before the {exc.level or 'stop'} deadline"

    def teardown_budgets(self, sp: SlotPlan) -> tuple[float, float]:
        term, kill = sp.term_wait_s, sp.kill_wait_s
        if self.stop.is_set() and self.stop.at is not None:
            # After the soft TERM only the kill grace is left: fit the teardown into it.
            left = max(0.0, self.stop.at + self.grace_s - time.monotonic())
            term = min(term, left)
            kill = min(kill, max(0.5, left - term))
        return term, kill

    def exits(self, sp: SlotPlan, exits: Sequence[ProcessExit], term: float, kill: float) -> None:
        for e in exits:
            self.writer.append(
                "worker_exits",
                {
                    "attempt_id": self.writer.attempt_id,
                    "arm": sp.arm,
                    "server": sp.server,
                    "worker": e.name,
                    "exit_code": e.exit_code,
                    "signal": e.signal,
                    "exit_s": e.exit_s,
                    "killed": e.killed,
                    "role": e.role,
                    "comm": e.comm,
                    "clean": e.clean,
                    "exited_before_term": e.exited_before_term,
                    "still_running": e.still_running,
                    "term_wait_s": term,
                    "kill_wait_s": kill,
                    "plan_term_wait_s": sp.term_wait_s,
                    "plan_kill_wait_s": sp.kill_wait_s,
                },
            )
        unclean = [f"{e.name} ({e.signal or e.exit_code})" for e in exits if not e.clean]
        self.emit(
            "teardown",
            f"{sp.server}: {len(exits)} process(es) stopped"
            + (f"; unclean: {', '.join(unclean)}" if unclean else ", all clean"),
        )

    def run_launched(self, sp: SlotPlan, target: Target, sampler: TelemetrySampler) -> SlotResult:
        t_slot = time.monotonic()
        arm_at = None if self.arm_s is None else t_slot + self.arm_s
        port = str(free_port(self.options.host))
        assert target.argv_template is not None
        argv = expand_command(
            target.argv_template, _values(sp, port, self.options.host, self.plan), target.args
        )
        spec = LaunchSpec(
            tuple(argv),
            self.options.launch_cwd or Path.cwd(),
            target.env,
            self.writer.log_path(sp.server),
        )
        self.emit(
            "slot",
            f"position {sp.slot.position}: {sp.arm} on {sp.server}: starting {' '.join(argv)}",
        )
        try:
            proc = ServerProcess.start(spec)
        except LaunchError as exc:
            self.emit("note", f"{sp.server}: {exc}")
            return SlotResult(
                sp.slot.position,
                sp.arm,
                sp.server,
                "launch-failed",
                {},
                {},
                len(sp.requests),
                None,
                (),
                str(exc),
            )
        self.live.append(proc)
        sampler.set_context(SampleContext(sp.arm, sp.server))
        client = VideoClient(f"http://{self.options.host}:{port}")
        startup_at = None if self.startup_s is None else t_slot + self.startup_s
        statuses: Counter[str] = Counter()
        levels: Counter[str] = Counter()
        not_sent = len(sp.requests)
        version: dict[str, Any] | None = None
        note = None
        outcome = "completed"
        try:
            ready = self.wait_ready(
                client,
                proc,
                Deadline({"startup": startup_at, **self.outer(None, arm_at)}, self.stop),
            )
            if ready is not None:
                outcome, note = "not-ready", ready
            else:
                self.emit("ready", f"{sp.server} ready after {time.monotonic() - t_slot:.2f} s")
                proc.observe_workers()
                version, reject = self.check_version(sp, client, _VERSION_TIMEOUT_S)
                if reject:
                    outcome, note, self.reject_reason = "commit-mismatch", reject, reject
                else:
                    statuses, levels, not_sent = self.wave(sp, client, arm_at)
                    if not_sent:
                        outcome = "cut"
        finally:
            term, kill = self.teardown_budgets(sp)
            exits = proc.teardown(term, kill)
            self.live.remove(proc)
            sampler.set_context(None)
            self.exits(sp, exits, term, kill)
        return SlotResult(
            sp.slot.position,
            sp.arm,
            sp.server,
            outcome,
            dict(statuses),
            dict(levels),
            not_sent,
            version,
            tuple(exits),
            note,
        )

    def run_endpoint(self, sp: SlotPlan, target: Target, sampler: TelemetrySampler) -> SlotResult:
        assert target.url is not None
        t_slot = time.monotonic()
        arm_at = None if self.arm_s is None else t_slot + self.arm_s
        self.emit("slot", f"position {sp.slot.position}: {sp.arm} on {sp.server} at {target.url}")
        client = VideoClient(target.url)
        version, reject = self.check_version(sp, client, _VERSION_TIMEOUT_S)
        if reject:
            self.reject_reason = reject
            return SlotResult(
                sp.slot.position,
                sp.arm,
                sp.server,
                "commit-mismatch",
                {},
                {},
                len(sp.requests),
                version,
                (),
                reject,
            )
        sampler.set_context(SampleContext(sp.arm, sp.server))
        try:
            statuses, levels, not_sent = self.wave(sp, client, arm_at)
        finally:
            sampler.set_context(None)
        return SlotResult(
            sp.slot.position,
            sp.arm,
            sp.server,
            "cut" if not_sent else "completed",
            dict(statuses),
            dict(levels),
            not_sent,
            version,
            (),
            "endpoint mode: the server was not launched here, so no teardown was recorded",
        )

    # -- the attempt -------------------------------------------------------------------------

    def verdict(self) -> tuple[str, str | None]:
        never = [sp.server for sp in self.prep.schedule[len(self.slots) :]]
        if self.stop.is_set():
            reason = self.stop.reason or "stopped"
            if never:
                reason += "; never started: " + ", ".join(never)
            return "interrupted", reason
        if self.reject_reason:
            return "rejected", self.reject_reason + (
                "; not run: " + ", ".join(never) if never else ""
            )
        bad: Counter[str] = Counter()
        for s in self.slots:
            for k, v in s.statuses.items():
                if k != "ok":
                    bad[k] += v
        problems = [f"{v} request(s) {k}" for k, v in sorted(bad.items())]
        problems += [
            f"{s.server}: {s.outcome}" for s in self.slots if s.outcome not in ("completed",)
        ]
        if problems:
            return (
                "rejected",
                "the plan ran to its end but not every request succeeded: " + "; ".join(problems),
            )
        return "accepted", None

    def run(self, sampler: TelemetrySampler) -> None:
        for sp, target in zip(self.prep.schedule, self.prep.targets, strict=True):
            if self.stop.is_set() or self.reject_reason:
                return
            if target.url is not None:
                result = self.run_endpoint(sp, target, sampler)
            else:
                result = self.run_launched(sp, target, sampler)
            self.slots.append(result)

    def kill_all(self) -> None:
        for proc in list(self.live):
            proc.kill_now()


def _record(
    run: _Run,
    status: str,
    reason: str | None,
    watchdog: ReservationWatchdog,
    sampler: TelemetrySampler,
) -> dict[str, Any]:
    prep = run.prep
    return {
        "attempt_id": run.writer.attempt_id,
        "status": status,
        "reason": reason,
        "rerun_of": {
            "campaign_id": prep.source.campaign.get("id"),
            "bundle_sha256": prep.source.bundle_sha256,
            "plan": prep.source.plan_name,
            "plan_sha256": prep.source.plan_sha256,
            "sealed_accepted_attempt": prep.sealed_attempt,
        },
        "mode": "launch" if run.options.launch else "endpoint",
        "api": prep.api,
        "timing_boundary": prep.timing_boundary,
        "poll_interval_s": prep.poll_interval_s,
        "timeouts": {
            "request_s": run.request_s,
            "wave_s": run.wave_s,
            "arm_s": run.arm_s,
            "startup_budget_s": run.startup_s,
        },
        "reservation_used_s": run.options.reservation_used_s,
        "watchdog": {
            "soft_term_after_s": None if run.soft_at is None else run.soft_at - run.t0,
            "fired": watchdog.fired,
            "grace_expired": watchdog.grace_expired,
            "stop_level": run.stop.level,
            "stop_reason": run.stop.reason,
        },
        "telemetry": {
            "source": prep.telemetry,
            "interval_s": prep.telemetry_interval_s,
            "samples": sampler.samples,
            "errors": sampler.errors,
        },
        "plan_check": prep.check.to_dict(),
        "slots": [s.to_dict() for s in run.slots],
        "not_started": [sp.server for sp in prep.schedule[len(run.slots) :]],
        "tool": {"reprobundle": __version__, "python": platform.python_version()},
    }


def _telemetry_source(prep: PreparedRerun, options: RerunOptions) -> TelemetrySource:
    if options.telemetry_source is not None:
        return options.telemetry_source
    try:
        return source_for(prep.telemetry, options.telemetry_command)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _check_endpoints(prep: PreparedRerun, options: RerunOptions) -> None:
    problems = []
    for sp, t in zip(prep.schedule, prep.targets, strict=True):
        if t.url is None:
            continue
        rep = VideoClient(t.url).version(timeout=_VERSION_TIMEOUT_S)
        if rep.commit is not None and not commit_matches(rep.commit, sp.commit):
            problems.append(f"{sp.server}: reports {rep.commit}, the arm's commit is {sp.commit}")
        elif rep.commit is None and not options.allow_unverified_commit:
            problems.append(
                f"{sp.server}: reports no runtime commit ({rep.error or 'GET /version'})"
            )
    if problems:
        raise UsageError(
            "endpoint runtime check failed (nothing was run): "
            + "; ".join(problems)
            + (
                ""
                if options.allow_unverified_commit
                else " (--allow-unverified-commit accepts a server that reports none)"
            )
        )


def run_rerun(
    bundle: Path,
    out_dir: Path,
    options: RerunOptions,
    *,
    progress: Progress | None = None,
    control: RerunControl | None = None,
) -> RerunResult:
    """Execute ``bundle``'s frozen plan and write the rerun campaign into ``out_dir``.

    Returns the attempt's result; an interrupted or rejected attempt is a
    result too (``status``), never an exception.

    Raises:
        IntegrityError: the bundle does not verify.
        UsageError: the plan cannot be run as given (see :func:`prepare_rerun`),
            or an endpoint reports another runtime commit.
    """
    prep = prepare_rerun(bundle, options)
    if not options.launch:
        _check_endpoints(prep, options)
    source = _telemetry_source(prep, options)
    control = control or RerunControl()
    writer = RerunWriter.open(
        out_dir, prep.source, accelerator=options.accelerator or "unspecified"
    )
    run = _Run(prep, writer, options, control.stop, progress)
    start_ns = time.time_ns()
    writer.begin(
        start_ns,
        prep.source.plan_name,
        f"bundle rerun {__version__}; {'launch' if options.launch else 'endpoint'} mode",
    )
    for f in prep.check.findings:
        run.emit("plan", str(f))
    sampler = TelemetrySampler(
        source,
        prep.telemetry_interval_s or 5.0,
        run.telemetry_sink,
        on_error=lambda m: run.emit("note", m),
    )
    watchdog = ReservationWatchdog(
        control.stop,
        soft_at=run.soft_at,
        grace_s=run.grace_s,
        on_grace_expired=run.kill_all,
        on_fire=lambda m: run.emit("watchdog", m),
    )
    watchdog.start()
    sampler.start()
    status: str = "interrupted"
    reason: str | None = "the runner stopped on an error"
    try:
        with child_subreaper():
            run.run(sampler)
        status, reason = run.verdict()
    except BaseException as exc:
        run.kill_all()
        reason = f"the runner stopped: {type(exc).__name__}: {exc}"
        raise
    finally:
        sampler.stop()
        watchdog.finish()
        end_ns = time.time_ns()
        writer.write_record(_record(run, status, reason, watchdog, sampler))
        writer.finish(
            status, reason, end_ns, f"{len(run.slots)} of {len(prep.schedule)} arm positions run"
        )
        run.emit(
            "done", f"attempt {writer.attempt_id}: {status}" + (f" ({reason})" if reason else "")
        )
    return RerunResult(
        out_dir,
        writer.attempt_id,
        status,
        reason,
        tuple(run.slots),
        dict(writer.counts),
        prep.check,
    )
