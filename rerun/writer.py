"""Write a rerun as a campaign directory in the standard layout (``specs/campaign-layout.md``).

The directory is ready for ``bundle seal`` once it holds one accepted
attempt. It carries the sealed gates and scorer identity, and, once an
attempt is accepted, ``comparisons.jsonl``: the sealed campaign's quality
comparisons re-paired onto the rerun's clips (same server and seq), with no
metric values (the rerun does not score; ``bundle replay --media`` does).

Each run of ``bundle rerun`` into the same directory adds one attempt
(``rerun-1``, ``rerun-2``, ...): an interrupted or rejected attempt is kept
beside the accepted one, never mixed into it.

Rows are appended to the JSON Lines tables as they happen (a rerun killed
mid-way keeps every receipt written so far); the attempt row is written as
``interrupted`` when the attempt starts and rewritten with its real status at
the end, so a run that never reaches its end is recorded as interrupted.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bundler._internal.atomic import atomic_write_bytes
from bundler._internal.timefmt import format_ns
from bundler.errors import UsageError
from rerun.confine import output_path, safe_name

__all__ = ["APPENDED_TABLES", "RerunWriter", "SealedSource", "pair_comparisons"]

APPENDED_TABLES = ("receipts", "worker_exits", "telemetry", "artifacts")
_UNFINISHED = "in progress: the rerun did not record an end (killed, crashed or still running)"
_MEDIA_AVAILABILITY = (
    "written by bundle rerun into the rerun directory on the rerun host; hashed at seal, "
    "not carried in the bundle"
)


@dataclass(frozen=True)
class SealedSource:
    """What the rerun reproduces: the sealed campaign and its frozen plan."""

    bundle_sha256: str
    campaign: Mapping[str, Any]
    plan_name: str
    plan_bytes: bytes
    gates: Sequence[Mapping[str, Any]] = field(default_factory=tuple)
    scorer: Mapping[str, Any] | None = None
    comparisons: Sequence[Mapping[str, Any]] = field(default_factory=tuple)
    """The sealed accepted attempt's comparisons (ids and request ids)."""
    requests: Mapping[str, tuple[str, int, str]] = field(default_factory=dict)
    """Sealed request id -> (server, seq, phase), from the sealed receipts."""
    first_run: Mapping[str, Any] | None = None
    """For ``bundle run`` (an author's first run, no sealed bundle): the campaign's
    ``id``, ``title``, ``kind`` (campaign or pilot) and ``arms``; None for a rerun."""

    @property
    def attempt_prefix(self) -> str:
        """``run`` for a first run, ``rerun`` for a rerun."""
        return "rerun" if self.first_run is None else "run"

    @property
    def plan_sha256(self) -> str:
        """SHA-256 of the plan member's bytes."""
        return hashlib.sha256(self.plan_bytes).hexdigest()


def _dump(doc: Any) -> bytes:
    return (json.dumps(doc, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def _jsonl(rows: Sequence[Mapping[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def pair_comparisons(
    source: SealedSource, attempt_id: str, rerun: Mapping[tuple[str, int], Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], list[str]]:
    """Pair the rerun's clips the way the sealed campaign paired its own.

    Each sealed comparison's request ids are mapped to (server, seq, phase) by
    the sealed receipts and replaced by the rerun's requests at the same
    server and seq. ``metrics`` is empty: nothing was scored by the rerun,
    and an empty record must not read as a pass.

    Args:
        source: the sealed campaign (its comparisons and request positions).
        attempt_id: the rerun attempt the comparisons belong to.
        rerun: (server, seq) -> that attempt's receipt.

    Returns:
        The comparison rows, and one line per sealed comparison skipped (why).
    """
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    for n, cmp in enumerate(source.comparisons, start=1):
        cid = str(cmp["comparison_id"])
        pair: dict[str, tuple[str, str]] = {}
        for role in ("baseline", "candidate"):
            rid = str(cmp[f"{role}_request_id"])
            where = source.requests.get(rid)
            if where is None:
                skipped.append(f"{cid}: {role} request {rid} is not in the sealed receipts")
                break
            server, seq, phase = where
            got = rerun.get((server, seq))
            if got is None:
                skipped.append(f"{cid}: the rerun made no request {server} #{seq}")
                break
            if got.get("phase") != phase:
                skipped.append(
                    f"{cid}: the rerun's {server} #{seq} is {got.get('phase')}, the sealed {phase}"
                )
                break
            if not got.get("output_sha256"):
                skipped.append(f"{cid}: the rerun's {got['request_id']} has no clip")
                break
            pair[role] = (str(got["request_id"]), str(got["output_sha256"]))
        else:
            rows.append(
                {
                    "comparison_id": f"{attempt_id}-cmp-{n:03d}",
                    "attempt_id": attempt_id,
                    "baseline_request_id": pair["baseline"][0],
                    "candidate_request_id": pair["candidate"][0],
                    "baseline_sha256": pair["baseline"][1],
                    "candidate_sha256": pair["candidate"][1],
                    "metrics": {},
                    "sealed_comparison_id": cid,
                }
            )
    return rows, skipped


def _rerun_campaign(source: SealedSource, accelerator: str) -> dict[str, Any]:
    orig = source.campaign
    cid = f"{str(orig.get('id', 'campaign'))[:94]}-rerun"
    arms = [
        {k: a[k] for k in ("id", "role", "runtime_commit", "description") if k in a}
        for a in orig.get("arms", [])
        if isinstance(a, Mapping)
    ]
    doc: dict[str, Any] = {
        "layout_version": "1",
        "id": cid,
        "title": f"Rerun of {orig.get('title', orig.get('id'))}",
        "kind": "rerun",
        "hardware": {"accelerator": accelerator, "count": 0},
        "arms": arms,
        "plan": source.plan_name,
        "summary": (
            f"Hardware rerun of the sealed campaign {orig.get('id')} with bundle rerun, executing "
            f"its frozen plan {source.plan_name}. It publishes no claims of its own: compare it "
            "with the sealed bundle."
        ),
        "rerun_of": {
            "campaign_id": orig.get("id"),
            "bundle_sha256": source.bundle_sha256,
            "plan": source.plan_name,
            "plan_sha256": source.plan_sha256,
        },
    }
    if isinstance(orig.get("runtime"), Mapping):
        doc["runtime"] = dict(orig["runtime"])
    return doc


def _first_campaign(source: SealedSource, accelerator: str) -> dict[str, Any]:
    spec = source.first_run or {}
    return {
        "layout_version": "1",
        "id": spec["id"],
        "title": spec["title"],
        "kind": spec["kind"],
        "hardware": {"accelerator": accelerator, "count": 0},
        "arms": [dict(a) for a in spec["arms"]],
        "plan": source.plan_name,
        "summary": (
            f"First run of the frozen plan {source.plan_name} with bundle run (the runner "
            "bundle rerun uses: same timing boundary, deadlines, teardown and records). "
            "No claims yet: the author writes them before bundle seal."
        ),
    }


_FIRST_RUN_NOT_CLAIMED = {
    "what": "any statistic of this run as a published claim",
    "note": "bundle run records measurements only; claims are the author's to write "
    "(claims.json) before bundle seal",
}


class RerunWriter:
    """One rerun directory and the attempt being written into it."""

    def __init__(
        self,
        root: Path,
        attempt_id: str,
        attempts: list[dict[str, Any]],
        source: SealedSource | None = None,
    ) -> None:
        self.root = root
        self.source = source
        self.attempt_id = attempt_id
        self._attempts = attempts
        self._lock = threading.Lock()
        self._files: dict[str, IO[str]] = {}
        self.devices: set[str] = set()
        self.counts: dict[str, int] = dict.fromkeys(APPENDED_TABLES, 0)
        self._receipts: dict[tuple[str, int], dict[str, Any]] = {}
        self.comparisons_skipped: list[str] = []

    @classmethod
    def open(cls, root: Path, source: SealedSource, *, accelerator: str) -> RerunWriter:
        """Create ``root`` as a rerun of ``source``, or add an attempt to an earlier rerun of it.

        Raises:
            UsageError: ``root`` holds something else, a rerun of another bundle,
                or already an accepted attempt.
        """
        root = Path(root)
        if root.exists() and not root.is_dir():
            raise UsageError(f"{root}: exists and is not a directory")
        if root.is_dir() and any(root.iterdir()):
            attempts = cls._existing(root, source)
        else:
            root.mkdir(parents=True, exist_ok=True)
            cls._create(root, source, accelerator)
            attempts = []
        attempt_id = f"{source.attempt_prefix}-{len(attempts) + 1}"
        return cls(root, attempt_id, attempts, source)

    @staticmethod
    def _create(root: Path, source: SealedSource, accelerator: str) -> None:
        first = source.first_run is not None
        campaign = (_first_campaign if first else _rerun_campaign)(source, accelerator)
        atomic_write_bytes(output_path(root, "campaign.json"), _dump(campaign))
        # The plan's member name is a verified bundle member name, confined all the same.
        atomic_write_bytes(output_path(root, source.plan_name), source.plan_bytes)
        atomic_write_bytes(output_path(root, "claims.json"), b"[]\n")
        not_claimed = [
            _FIRST_RUN_NOT_CLAIMED
            if first
            else {
                "what": "any statistic of this rerun as a published claim",
                "note": "a rerun is evidence to compare with the sealed campaign "
                "(bundle replay RERUN.bundle --against SEALED.bundle), not a new publication",
            }
        ]
        atomic_write_bytes(output_path(root, "not_claimed.jsonl"), _jsonl(not_claimed))
        if source.gates:
            atomic_write_bytes(output_path(root, "gates.jsonl"), _jsonl(list(source.gates)))
        if source.scorer is not None:
            atomic_write_bytes(output_path(root, "scorer.json"), _dump(source.scorer))
        atomic_write_bytes(output_path(root, "attempts.jsonl"), b"")
        for name in APPENDED_TABLES:
            output_path(root, f"{name}.jsonl").touch()

    @staticmethod
    def _existing(root: Path, source: SealedSource) -> list[dict[str, Any]]:
        try:
            doc = json.loads((root / "campaign.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"{root}: not empty and not a rerun directory ({exc})") from exc
        if not isinstance(doc, dict):
            raise UsageError(f"{root}: not empty and not a rerun directory")
        if source.first_run is not None:
            RerunWriter._same_first_run(root, doc, source)
        else:
            of = doc.get("rerun_of")
            if doc.get("kind") != "rerun" or not isinstance(of, dict):
                raise UsageError(f"{root}: not empty and not a rerun directory")
            if of.get("bundle_sha256") != source.bundle_sha256:
                raise UsageError(
                    f"{root}: holds a rerun of another bundle ({of.get('bundle_sha256')})"
                )
        text = (root / "attempts.jsonl").read_text(encoding="utf-8")
        attempts = [json.loads(line) for line in text.splitlines() if line.strip()]
        accepted = [a["attempt_id"] for a in attempts if a.get("status") == "accepted"]
        if accepted:
            raise UsageError(
                f"{root}: already holds an accepted attempt ({accepted[0]}); "
                "rerun into a new directory"
            )
        return attempts

    @staticmethod
    def _same_first_run(root: Path, doc: Mapping[str, Any], source: SealedSource) -> None:
        spec = source.first_run or {}
        if (
            "rerun_of" in doc
            or doc.get("id") != spec.get("id")
            or doc.get("plan") != (source.plan_name)
        ):
            raise UsageError(f"{root}: not empty and not a bundle run directory of this campaign")
        try:
            plan = output_path(root, source.plan_name).read_bytes()
        except OSError as exc:
            raise UsageError(f"{root}: {source.plan_name} unreadable ({exc})") from exc
        if hashlib.sha256(plan).hexdigest() != source.plan_sha256:
            raise UsageError(f"{root}: holds a run of another version of {source.plan_name}")

    def _write_attempts(self) -> None:
        atomic_write_bytes(output_path(self.root, "attempts.jsonl"), _jsonl(self._attempts))

    def begin(self, start_ns: int, plan: str, note: str) -> None:
        """Record the attempt as started (status interrupted until :meth:`finish`)."""
        row = {
            "attempt_id": self.attempt_id,
            "status": "interrupted",
            "reason": _UNFINISHED,
            "plan": plan,
            "start": format_ns(start_ns),
            "end": None,
            "note": note,
        }
        with self._lock:
            self._attempts.append(row)
            self._write_attempts()

    def finish(self, status: str, reason: str | None, end_ns: int, note: str) -> None:
        """Record the attempt's real status and close the tables.

        An accepted attempt also gets ``comparisons.jsonl`` (see
        :func:`pair_comparisons`); how many were paired and skipped goes
        into the attempt's note.
        """
        with self._lock:
            if status == "accepted" and self.source is not None and self.source.comparisons:
                rows, self.comparisons_skipped = pair_comparisons(
                    self.source, self.attempt_id, self._receipts
                )
                atomic_write_bytes(output_path(self.root, "comparisons.jsonl"), _jsonl(rows))
                self.counts["comparisons"] = len(rows)
                note += (
                    f"; {len(rows)} of {len(self.source.comparisons)} sealed comparisons "
                    "re-paired onto the rerun's clips (metrics not scored: bundle replay --media)"
                )
                if self.comparisons_skipped:
                    note += "; skipped: " + "; ".join(self.comparisons_skipped)
            row = self._attempts[-1]
            row.update({"status": status, "reason": reason, "end": format_ns(end_ns), "note": note})
            self._write_attempts()
            for fh in self._files.values():
                fh.close()
            self._files.clear()
            path = output_path(self.root, "campaign.json")
            doc = json.loads(path.read_text(encoding="utf-8"))
            doc["hardware"]["count"] = max(int(doc["hardware"].get("count", 0)), len(self.devices))
            atomic_write_bytes(path, _dump(doc))

    def append(self, table: str, row: Mapping[str, Any]) -> None:
        """Append one row to ``table`` and flush it (thread-safe)."""
        if table not in APPENDED_TABLES:
            raise ValueError(f"{table} is not appended by the rerun")
        line = json.dumps(row, ensure_ascii=False) + "\n"
        with self._lock:
            fh = self._files.get(table)
            if fh is None:
                fh = output_path(self.root, f"{table}.jsonl").open("a", encoding="utf-8")
                self._files[table] = fh
            fh.write(line)
            fh.flush()
            self.counts[table] += 1
            if table == "telemetry":
                self.devices.add(str(row["device"]))
            elif table == "receipts":
                self._receipts[(str(row["server"]), int(row["seq"]))] = dict(row)

    def write_media(self, request_id: str, data: bytes) -> tuple[str, str]:
        """Store one output MP4 and its ``artifacts`` row; return (path, sha256).

        The file is named by :func:`~rerun.confine.safe_name` of the attempt
        and request ids (the request id holds the plan's server name); the receipt
        keeps the original id and this path in its ``media`` column.
        """
        rel = f"media/{safe_name(self.attempt_id)}/{safe_name(request_id)}.mp4"
        atomic_write_bytes(output_path(self.root, rel), data)
        digest = hashlib.sha256(data).hexdigest()
        self.append(
            "artifacts",
            {
                "path": rel,
                "sha256": digest,
                "bytes": len(data),
                "kind": "media",
                "availability": _MEDIA_AVAILABILITY,
                "uri": None,
            },
        )
        return rel, digest

    def log_path(self, name: str) -> Path:
        """``logs/<attempt>/<name>.log`` (sanitized when sealed), both parts :func:`safe_name`."""
        return output_path(self.root, f"logs/{safe_name(self.attempt_id)}/{safe_name(name)}.log")

    def log(self, text: str, time_ns: int) -> None:
        """One line in the attempt's own log."""
        with self._lock, self.log_path("rerun").open("a", encoding="utf-8") as fh:
            fh.write(f"{format_ns(time_ns)} {text}\n")

    def write_record(self, doc: Mapping[str, Any]) -> None:
        """The attempt's structured record, ``rerun/<attempt>.json`` (carried as a file)."""
        path = output_path(self.root, f"rerun/{safe_name(self.attempt_id)}.json")
        atomic_write_bytes(path, _dump(doc))
