"""``bundle seal``: validate a campaign, sanitize it, hash its externals, write one signed file."""

from __future__ import annotations

import hashlib
import io
import json
import platform
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bundler import __version__
from bundler._internal import jcs
from bundler._internal.atomic import atomic_output
from bundler.campaign import Campaign, load_campaign
from bundler.container import write_container
from bundler.dsse import INTOTO_PAYLOAD_TYPE, sign_payload
from bundler.errors import CampaignError, Problem, UsageError
from bundler.hashing import hash_files
from bundler.keys import key_id
from bundler.manifest import (
    ENVELOPE_NAME,
    MANIFEST_NAME,
    build_manifest,
    build_statement,
)
from bundler.plan_check import seal_plan_findings
from bundler.sanitize import Finding, Sanitizer
from bundler.tables import TABLE_NAMES, rows_to_table

__all__ = ["PARQUET_OPTIONS", "Progress", "SealResult", "environment", "seal_campaign"]

Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``; stages: ``hash`` (bytes), ``write`` (members)."""

PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 9,
    "use_dictionary": True,
    "write_statistics": True,
    "row_group_size": 1 << 20,
    "data_page_version": "1.0",
}


@dataclass(frozen=True)
class SealResult:
    """What ``seal_campaign`` wrote."""

    output: Path
    bundle_sha256: str
    bundle_bytes: int
    campaign_id: str
    members: int
    tables: dict[str, int]
    external: list[dict[str, Any]]
    sanitization: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    signers: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def environment() -> dict[str, str]:
    """The environment recorded in the manifest (and compared by replay)."""
    import cryptography
    import zstandard

    return {
        "reprobundle": __version__,
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
        "zstandard": zstandard.__version__,
        "cryptography": cryptography.__version__,
        "platform": f"{platform.system()}-{platform.machine()}",
    }


def parquet_bytes(table: pa.Table) -> bytes:
    """Serialize ``table`` as a Parquet file with the bundle's fixed options."""
    buf = io.BytesIO()
    pq.write_table(table, buf, **PARQUET_OPTIONS)
    return buf.getvalue()


class _Counter:
    """Thread-safe running total for a progress callback."""

    def __init__(self, stage: str, total: int, cb: Progress | None) -> None:
        self._lock = threading.Lock()
        self.done = 0
        self.stage, self.total, self.cb = stage, total, cb

    def __call__(self, n: int) -> None:
        if self.cb is None:
            return
        with self._lock:
            self.done += n
            self.cb(self.stage, self.done, self.total)


def _locate(path: str, roots: Sequence[Path]) -> Path | None:
    for root in roots:
        cand = root / path
        if cand.is_file():
            return cand
    return None


def _externals(
    camp: Campaign, roots: Sequence[Path], jobs: int | None, progress: Progress | None
) -> tuple[list[dict[str, Any]], list[Problem]]:
    rel = camp.table_files.get("artifacts", "artifacts")
    rows = camp.tables.get("artifacts", [])
    found = {i: _locate(str(r["path"]), roots) for i, r in enumerate(rows) if "path" in r}
    local = [p for p in found.values() if p is not None]
    total = sum(p.stat().st_size for p in local)
    digests = hash_files(local, jobs=jobs, progress=_Counter("hash", total, progress))
    out: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for i, r in enumerate(rows):
        p = found.get(i)
        entry = {
            "path": r.get("path"),
            "sha256": r.get("sha256"),
            "bytes": r.get("bytes"),
            "kind": r.get("kind"),
            "availability": r.get("availability"),
            "uri": r.get("uri"),
            "hashed_at_seal": False,
        }
        label = camp.label(r)
        if p is not None:
            d = digests[p]
            if d.error:
                problems.append(Problem(rel, label, "path", f"{p}: cannot read: {d.error}"))
            elif r.get("sha256") not in (None, d.sha256):
                problems.append(
                    Problem(
                        rel, label, "sha256", f"{p} hashes to {d.sha256}, not the recorded value"
                    )
                )
            elif r.get("bytes") not in (None, d.size):
                problems.append(
                    Problem(rel, label, "bytes", f"{p} has {d.size} bytes, not {r.get('bytes')}")
                )
            else:
                entry.update(sha256=d.sha256, bytes=d.size, hashed_at_seal=True)
        elif r.get("sha256") is None:
            problems.append(
                Problem(
                    rel,
                    label,
                    "sha256",
                    "absent locally and no sha256 recorded: cannot be attested",
                )
            )
        out.append(entry)
    return out, problems


def _table_scrubber(name: str, san: Sanitizer) -> Callable[[str, list[Any]], list[Any]]:
    member = f"tables/{name}.parquet"

    def scrub(field_name: str, values: list[Any]) -> list[Any]:
        return san.scrub_column(values, member, field_name)

    return scrub


def _scan(data: bytes, member: str, san: Sanitizer) -> list[Finding]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return []  # binary files (charts) are carried as-is and not scanned
    return san.scan(text, member)


def _members(
    camp: Campaign, doc: dict[str, Any], san: Sanitizer
) -> tuple[list[tuple[str, bytes, str]], dict[str, int], list[Finding], list[Problem]]:
    members: list[tuple[str, bytes, str]] = []
    problems: list[Problem] = []
    members.append(("campaign.json", jcs.dumps(doc), "document"))
    if camp.scorer is not None:
        members.append(
            ("scorer.json", jcs.dumps(san.scrub_value(camp.scorer, "scorer.json", "")), "document")
        )
    counts: dict[str, int] = {}
    for name in TABLE_NAMES:
        rows = camp.tables.get(name, [])
        table = rows_to_table(name, rows, scrub=_table_scrubber(name, san))
        members.append((f"tables/{name}.parquet", parquet_bytes(table), "table"))
        counts[name] = len(rows)
    for rel, data in sorted(camp.logs.items()):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(Problem(rel, None, None, f"logs must be UTF-8 text ({exc.reason})"))
            continue
        members.append((rel, san.scrub(text, rel, "text").encode("utf-8"), "log"))
    findings: list[Finding] = []
    for rel, data in sorted(camp.plans.items()):
        members.append((rel, data, "plan"))
        findings += _scan(data, rel, san)
    for rel, data in sorted(camp.files.items()):
        members.append((f"files/{rel}", data, "file"))
        findings += _scan(data, f"files/{rel}", san)
    members.sort(key=lambda m: m[0])
    return members, counts, findings, problems


def seal_campaign(
    campaign_dir: Path,
    output: Path,
    *,
    keys: Sequence[Ed25519PrivateKey] = (),
    artifact_dirs: Sequence[Path] = (),
    jobs: int | None = None,
    progress: Progress | None = None,
    force: bool = False,
) -> SealResult:
    """Seal ``campaign_dir`` into the bundle ``output``, signed by each of ``keys``.

    Every problem in the campaign is reported at once in a :class:`CampaignError`.
    The output is written atomically: if anything fails, no file appears.
    External artifacts are looked up under ``artifact_dirs`` then the campaign
    directory, hashed in parallel and compared with any recorded digest.
    """
    campaign_dir = Path(campaign_dir)
    output = Path(output)
    if output.exists() and not force:
        raise UsageError(f"{output}: already exists (pass --force to replace it)")
    if output.resolve().is_relative_to(campaign_dir.resolve()):
        raise UsageError(f"{output}: the bundle must not be written inside the campaign directory")
    camp, problems = load_campaign(campaign_dir)
    plan_warnings: list[Problem] = []
    if camp.plan is not None and not problems:
        blocking, plan_warnings = seal_plan_findings(
            camp.plan, kind=str(camp.doc.get("kind")), where=str(camp.doc.get("plan"))
        )
        problems += blocking
    if problems:
        raise CampaignError(
            f"{campaign_dir}: {len(problems)} problem(s); nothing written", problems
        )
    external, ext_problems = _externals(camp, [*artifact_dirs, campaign_dir], jobs, progress)
    rules = camp.doc.get("sanitize", {})
    san = Sanitizer(rules.get("hostnames", []), keep_hosts=rules.get("keep_hosts", []))
    scrubbed_doc = san.scrub_value(camp.doc, "campaign.json", "")
    members, counts, findings, mem_problems = _members(camp, scrubbed_doc, san)
    if ext_problems or mem_problems:
        all_p = ext_problems + mem_problems
        raise CampaignError(f"{campaign_dir}: {len(all_p)} problem(s); nothing written", all_p)

    listed = [
        {"path": name, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "role": role}
        for name, data, role in members
    ]
    arms = [{k: a.get(k) for k in ("id", "role", "runtime_commit")} for a in scrubbed_doc["arms"]]
    summary = {
        "id": camp.doc["id"],
        "title": scrubbed_doc["title"],
        "kind": camp.doc["kind"],
        "arms": arms,
    }
    finding_rows = [{"member": f.member, "line": f.line, "rule": f.rule} for f in findings]
    manifest = build_manifest(
        campaign=summary,
        members=listed,
        tables=counts,
        external=external,
        sanitization=san.report(),
        findings=finding_rows,
        environment=environment(),
    )
    msha = hashlib.sha256(manifest).hexdigest()
    statement = build_statement(manifest, msha, json.loads(manifest))
    envelope = sign_payload(statement, list(keys), INTOTO_PAYLOAD_TYPE)
    ordered = [
        (MANIFEST_NAME, manifest),
        *((n, d) for n, d, _ in members),
        (ENVELOPE_NAME, envelope.to_bytes()),
    ]
    total = len(ordered)
    with atomic_output(output) as fh:
        write_container(fh, ordered)
        if progress:
            progress("write", total, total)
    data = output.read_bytes()
    return SealResult(
        output=output,
        bundle_sha256=hashlib.sha256(data).hexdigest(),
        bundle_bytes=len(data),
        campaign_id=camp.doc["id"],
        members=total,
        tables=counts,
        external=external,
        sanitization=san.report(),
        findings=finding_rows,
        signers=[key_id(k.public_key()) for k in keys],
        warnings=[str(w) for w in plan_warnings],
    )
