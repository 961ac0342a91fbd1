"""``bundle seal``: validate a campaign, sanitize it, hash its externals, write one signed file."""

from __future__ import annotations

import functools
import hashlib
import io
import json
import platform
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TypeVar, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bundler import version
from bundler._internal import jcs
from bundler._internal.atomic import atomic_output
from bundler._internal.confined import ConfinedTree
from bundler.campaign.columnar import ColumnTable, per_row_forced, to_bundle_table
from bundler.campaign.load import Campaign, load_campaign
from bundler.campaign.plan_check import seal_plan_findings
from bundler.campaign.sanitize import (
    CREDENTIAL_RULES,
    RULES_VERSION,
    Finding,
    SanitizeError,
    Sanitizer,
)
from bundler.campaign.sanitize_rules import is_secret_name
from bundler.campaign.stream import StreamedTable, StreamLimits, objects_untouched, write_parquet
from bundler.errors import CampaignError, Problem, UsageError
from bundler.format.container import write_container
from bundler.format.dsse import INTOTO_PAYLOAD_TYPE, sign_payload
from bundler.format.hashing import default_jobs, hash_files
from bundler.format.keys import key_id
from bundler.format.manifest import (
    ENVELOPE_NAME,
    MANIFEST_NAME,
    build_manifest,
    build_statement,
)
from bundler.format.model import Manifest
from bundler.format.tables import (
    EXTRA_COLUMN,
    PARQUET_OPTIONS,
    TABLE_NAMES,
    rows_to_table,
    table_schema,
)

__all__ = ["PARQUET_OPTIONS", "Progress", "SealResult", "environment", "seal_campaign"]

Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``; stages: ``hash`` (bytes), ``write`` (members)."""


# Text logs outside ``logs/`` (``files/run.log``, rotated ``x.log.1``) are scrubbed like logs.
_LOG_NAME = re.compile(r"\.log(?:\.[0-9]+)?$", re.IGNORECASE)


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
        "reprobundle": version(),
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
        "zstandard": zstandard.__version__,
        "cryptography": cryptography.__version__,
        "platform": f"{platform.system()}-{platform.machine()}",
    }


def parquet_bytes(table: pa.Table, row_group_size: int | None = None) -> bytes:
    """Serialize ``table`` as a Parquet file with the bundle's fixed options.

    ``row_group_size`` (tests only) replaces the options' row group size.
    """
    buf = io.BytesIO()
    options = dict(PARQUET_OPTIONS)
    if row_group_size is not None:
        options["row_group_size"] = row_group_size
    pq.write_table(table, buf, **options)
    return buf.getvalue()


Member = tuple[str, "bytes | BinaryIO", str]
"""(name, content or a temporary file holding it, role)."""


def _digest(data: bytes | BinaryIO) -> tuple[str, int]:
    """SHA-256 and size of a member's content."""
    if isinstance(data, bytes):
        return hashlib.sha256(data).hexdigest(), len(data)
    h = hashlib.sha256()
    size = 0
    data.seek(0)
    while chunk := data.read(1 << 20):
        h.update(chunk)
        size += len(chunk)
    return h.hexdigest(), size


_T = TypeVar("_T")
_R = TypeVar("_R")


def _parallel(fn: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
    """``[fn(x) for x in items]`` on one thread per CPU (at most 8): for work that releases
    the GIL (SHA-256, RE2), in the items' order; the first error is raised."""
    n = min(len(items), default_jobs(), 8)
    if n <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="seal") as pool:
        return list(pool.map(fn, items))


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


def _locate(path: str, roots: Sequence[Path], camp: Campaign) -> Path | None:
    for root in roots:
        cand = root / path
        if cand.is_file():
            return cand
    # In the campaign folder, only a file the walk found (no link) is an artifact found.
    return camp.root / path if path in camp.walked else None


def _size(p: Path) -> int:
    """For the progress total only: a file gone since it was found is reported by hashing."""
    try:
        return p.stat().st_size
    except OSError:
        return 0


def _externals(
    camp: Campaign,
    artifact_dirs: Sequence[Path],
    jobs: int | None,
    progress: Progress | None,
) -> tuple[list[dict[str, Any]], list[Problem]]:
    rel = camp.table_files.get("artifacts", "artifacts")
    rows = camp.tables.get("artifacts", [])
    found = {
        i: _locate(str(r["path"]), artifact_dirs, camp) for i, r in enumerate(rows) if "path" in r
    }
    local = [p for p in found.values() if p is not None]
    total = sum(_size(p) for p in local)
    with ConfinedTree(camp.root) as tree:
        # Artifacts in the campaign folder are opened as the walk found them: a file
        # swapped for a link since is refused, never hashed and signed.
        tree.files.update(camp.walked)
        openers = {
            camp.root / r: functools.partial(tree.open, r)
            for r in {str(row.get("path")) for row in rows}
            if r in camp.walked and camp.root / r in local
        }
        digests = hash_files(
            local, jobs=jobs, progress=_Counter("hash", total, progress), openers=openers
        )
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


def _scrub_externals(external: list[dict[str, Any]], san: Sanitizer) -> None:
    """Scrub the artifacts' free text as it goes into the manifest and the signed statement.

    The same text was scrubbed in ``tables/artifacts.parquet`` already, so it gets the same
    pseudonyms there and here; the path is a name and is checked, not changed
    (:func:`_name_problems`).
    """
    for e in external:
        for key in ("availability", "uri"):
            if isinstance(e.get(key), str):
                e[key] = san.scrub(e[key], MANIFEST_NAME, f"external.{key}")


def _name_problems(camp: Campaign, san: Sanitizer) -> list[Problem]:
    """Names the sanitizer would change: refused, because names are carried verbatim.

    The campaign id, artifact paths and carried file names appear in the manifest, the tar
    headers and the signed statement, and other records refer to them; rewriting them would
    break those references, so the author renames them instead.
    """

    def why(name: str) -> str | None:
        rules = san.would_change(name)
        if not rules:
            return None
        return (
            f"would be scrubbed ({', '.join(rules)}) but is carried verbatim as a name "
            "(manifest, signed statement); rename it"
        )

    out: list[Problem] = []
    cid = camp.doc.get("id")
    if isinstance(cid, str) and (msg := why(cid)) is not None:
        out.append(Problem("campaign.json", None, "id", f"the campaign id {msg}"))
    rel = camp.table_files.get("artifacts", "artifacts")
    for r in camp.tables.get("artifacts", []):
        if isinstance(r.get("path"), str) and (msg := why(r["path"])) is not None:
            out.append(Problem(rel, camp.label(r), "path", f"the artifact path {msg}"))
    for name in sorted({*camp.logs, *camp.plans, *camp.files}):
        if (msg := why(name)) is not None:
            out.append(Problem(name, None, None, f"the file name {msg}"))
    return out


def _scrub_unknown_keys(
    camp: Campaign, name: str, san: Sanitizer
) -> tuple[list[dict[str, Any]], list[Problem]]:
    """Rows with the names of their unknown fields scrubbed (they go into ``extra`` as keys)."""
    rows = camp.tables.get(name, [])
    known = set(table_schema(name)["properties"])
    member = f"tables/{name}.parquet"
    out: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for r in rows:
        if all(k in known for k in r):
            out.append(r)
            continue
        new: dict[str, Any] = {}
        for k, v in r.items():
            nk = k if k in known else san.scrub_key(k, member, f"{EXTRA_COLUMN}.(key)")
            if nk in new:
                problems.append(
                    Problem(
                        camp.table_files.get(name, name),
                        camp.label(r),
                        None,
                        f"two unknown field names become {nk!r} once scrubbed; rename one",
                    )
                )
            new[nk] = v
        out.append(new)
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


def _credential_problems(findings: list[Finding]) -> list[Problem]:
    """A credential in a member carried verbatim refuses the seal: it could never be removed."""
    return [
        Problem(
            f.member,
            f"line {f.line}",
            None,
            f"looks like a credential ({f.rule}) in a file carried verbatim (not scrubbed): "
            "remove it from the file (a signed bundle cannot be cleaned afterwards)",
        )
        for f in findings
        if f.rule in CREDENTIAL_RULES
    ]


def _needs_rows(ct: ColumnTable, san: Sanitizer) -> bool:
    """Whether scrubbing ``ct``'s unknown fields column-wise could differ from per row.

    Per row, unknown field names are scrubbed first (a renamed one may collide), then
    values row by row across fields: pseudonyms are numbered in that order. Column
    by column gives the same numbers only while field names stay as they are and at
    most one unknown string field has values the rules change. Otherwise the
    table is read again row by row (rare: addresses or host names in two unknown fields).
    Names in a map column (``comparisons.metrics``) are object keys, scrubbed per row in
    key order and refused when two become one; the column holds them sorted, so a
    name the rules would change sends the table per row too.
    """
    if any(san.would_change(u.name) for u in ct.unknown):
        return True
    if not objects_untouched(san, ct.unknown):
        return True
    for f in ct.table.schema:
        if pa.types.is_map(f.type):
            keys: Any = ct.column(f.name).keys  # type: ignore[attr-defined]
            if any(san.would_change(k) for k in pc.unique(keys).to_pylist()):
                return True
    changing = [
        u
        for u in ct.unknown
        if pa.types.is_string(u.values.type)
        and not is_secret_name(u.name.rsplit(".", 1)[-1])
        and san.changes_some(u.values)
    ]
    return len(changing) > 1


def _stream_needs_rows(st: StreamedTable, san: Sanitizer) -> bool:
    """:func:`_needs_rows` for a streamed table, from the values its survey picked."""
    if any(san.would_change(u) for u in st.unknown):
        return True
    changing = [
        f
        for f, picked in st.picked.items()
        if f.startswith(f"{EXTRA_COLUMN}.") and any(san.would_change(t) for t in picked)
    ]
    return len(changing) > 1


def _streamed_member(name: str, st: StreamedTable, san: Sanitizer, files: ExitStack) -> Member:
    """The Parquet member of a streamed table, in a temporary file (removed when
    ``files`` closes); its first row groups were written while it was read.

    The sanitizer first sees each column's picked values as a whole-column scrub would
    (same pseudonym numbers, same counts), then scrubs the blocks as they are written.
    """
    member = f"tables/{name}.parquet"
    for fname, picked in st.picked.items():
        san.prime_column(picked, member, fname)
    out = files.enter_context(write_parquet(st, san))
    return member, out, "table"


def _column_member(
    name: str, ct: ColumnTable, san: Sanitizer, row_group_size: int | None = None
) -> Member:
    """The Parquet member of a table read column-wise, scrubbed column by column."""
    member = f"tables/{name}.parquet"

    def scrub(field_name: str, arr: pa.Array[Any]) -> pa.Array[Any]:
        return san.scrub_arrow(arr, member, field_name)

    return member, parquet_bytes(to_bundle_table(name, ct, scrub=scrub), row_group_size), "table"


def _table_members(  # noqa: PLR0917
    camp: Campaign,
    san: Sanitizer,
    files: ExitStack,
    row_group_size: int | None,
    members: list[Member],
    counts: dict[str, int],
) -> list[Problem]:
    """Each table's Parquet member into ``members``, its row count into ``counts``."""
    problems: list[Problem] = []
    for name in TABLE_NAMES:
        if (st := camp.streamed.get(name)) is not None:
            members.append(_streamed_member(name, st, san, files))
            counts[name] = st.num_rows
            continue
        if (ct := camp.columns.get(name)) is not None:
            members.append(_column_member(name, ct, san, row_group_size))
            counts[name] = ct.num_rows
            continue
        rows, key_problems = _scrub_unknown_keys(camp, name, san)
        problems += key_problems
        try:
            table = rows_to_table(name, rows, scrub=_table_scrubber(name, san))
        except SanitizeError as exc:
            problems.append(Problem(exc.member, None, exc.field, exc.message))
            continue
        members.append((f"tables/{name}.parquet", parquet_bytes(table, row_group_size), "table"))
        counts[name] = len(rows)
    return problems


def _members(
    camp: Campaign,
    doc: dict[str, Any],
    san: Sanitizer,
    files: ExitStack,
    row_group_size: int | None,
) -> tuple[list[Member], dict[str, int], list[Finding], list[Problem]]:
    members: list[Member] = []
    problems: list[Problem] = []
    members.append(("campaign.json", jcs.dumps(doc), "document"))
    if camp.scorer is not None:
        try:
            scorer = san.scrub_value(camp.scorer, "scorer.json", "")
        except SanitizeError as exc:
            problems.append(Problem(exc.member, None, exc.field, exc.message))
        else:
            members.append(("scorer.json", jcs.dumps(scorer), "document"))
    counts: dict[str, int] = {}
    problems += _table_members(camp, san, files, row_group_size, members, counts)
    # Logs: everything under logs/, and text logs anywhere else (carried under files/).
    logs = [(rel, rel, data) for rel, data in camp.logs.items()]
    logs += [(rel, f"files/{rel}", d) for rel, d in camp.files.items() if _LOG_NAME.search(rel)]
    for rel, member, data in sorted(logs, key=lambda x: x[1]):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(
                Problem(rel, None, None, f"log files must be UTF-8 text ({exc.reason})")
            )
            continue
        members.append((member, san.scrub(text, member, "text").encode("utf-8"), "log"))
    carried: list[Member] = [(rel, data, "plan") for rel, data in sorted(camp.plans.items())]
    carried += [
        (f"files/{rel}", data, "file")
        for rel, data in sorted(camp.files.items())
        if not _LOG_NAME.search(rel)
    ]
    members += carried
    # The scan's RE2 pass releases the GIL: a serving campaign's 178 MiB of carried
    # sources are scanned on every core at once (findings kept in member order).
    findings = [
        f
        for found in _parallel(lambda m: _scan(cast(bytes, m[1]), m[0], san), carried)
        for f in found
    ]
    problems += _credential_problems(findings)
    members.sort(key=lambda m: m[0])
    return members, counts, findings, problems


class _HashingWriter(io.RawIOBase):
    """Passes writes through to ``out`` and hashes them on the way."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self.sha256 = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        data = bytes(b)
        self._out.write(data)
        self.sha256.update(data)
        self.size += len(data)
        return len(data)


def seal_campaign(
    campaign_dir: Path,
    output: Path,
    *,
    keys: Sequence[Ed25519PrivateKey] = (),
    artifact_dirs: Sequence[Path] = (),
    jobs: int | None = None,
    progress: Progress | None = None,
    force: bool = False,
    stream: StreamLimits | None = None,
) -> SealResult:
    """Seal ``campaign_dir`` into the bundle ``output``, signed by each of ``keys``.

    Every problem in the campaign is reported at once in a :class:`CampaignError`.
    The output is written atomically: if anything fails, no file appears.
    External artifacts are looked up under ``artifact_dirs`` then the campaign
    directory, hashed in parallel and compared with any recorded digest.
    A large receipts file (JSON Lines or CSV) is sealed in blocks (``stream``, by default
    :class:`StreamLimits`; its ``row_group_rows`` then applies to every table, tests only).
    """
    campaign_dir = Path(campaign_dir)
    output = Path(output)
    if output.exists() and not force:
        raise UsageError(f"{output}: already exists (pass --force to replace it)")
    if output.resolve().is_relative_to(campaign_dir.resolve()):
        raise UsageError(f"{output}: the bundle must not be written inside the campaign directory")
    # Large tables are read column-wise; the env switch keeps the per-row path for benchmarks.
    limits = stream or StreamLimits(row_group_rows=PARQUET_OPTIONS["row_group_size"])
    row_group_size = None if stream is None else stream.row_group_rows
    camp, problems = load_campaign(campaign_dir, columnar=not per_row_forced(), stream=limits)
    try:
        return _seal_loaded(
            camp,
            problems,
            campaign_dir,
            output,
            _SealOptions(keys, artifact_dirs, jobs, progress, force, row_group_size),
        )
    finally:
        # A streamed table holds a writing thread and temporary files until sealed.
        for st in camp.streamed.values():
            st.close()


@dataclass(frozen=True)
class _SealOptions:
    keys: Sequence[Ed25519PrivateKey]
    artifact_dirs: Sequence[Path]
    jobs: int | None
    progress: Progress | None
    force: bool
    row_group_size: int | None


def _seal_loaded(
    camp: Campaign,
    problems: list[Problem],
    campaign_dir: Path,
    output: Path,
    opts: _SealOptions,
) -> SealResult:
    """``seal_campaign`` once the campaign is loaded."""
    keys, artifact_dirs, jobs, progress = opts.keys, opts.artifact_dirs, opts.jobs, opts.progress
    force, row_group_size = opts.force, opts.row_group_size
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
    san = Sanitizer.for_campaign(camp.doc)
    if any(_needs_rows(ct, san) for ct in camp.columns.values()) or any(
        _stream_needs_rows(st, san) for st in camp.streamed.values()
    ):
        camp, problems = load_campaign(campaign_dir, columnar=False)
        if problems:  # the folder changed under us since the first read
            raise CampaignError(
                f"{campaign_dir}: {len(problems)} problem(s); nothing written", problems
            )
    name_problems = _name_problems(camp, san)
    external, ext_problems = _externals(camp, artifact_dirs, jobs, progress)
    try:
        scrubbed_doc: dict[str, Any] = san.scrub_value(camp.doc, "campaign.json", "")
    except SanitizeError as exc:
        all_p = [*name_problems, *ext_problems, Problem(exc.member, None, exc.field, exc.message)]
        raise CampaignError(
            f"{campaign_dir}: {len(all_p)} problem(s); nothing written", all_p
        ) from exc
    # A streamed table's member is written to a file here, gone once the bundle is.
    with ExitStack() as files:
        members, counts, findings, mem_problems = _members(
            camp, scrubbed_doc, san, files, row_group_size
        )
        _scrub_externals(external, san)
        if name_problems or ext_problems or mem_problems:
            all_p = name_problems + ext_problems + mem_problems
            raise CampaignError(f"{campaign_dir}: {len(all_p)} problem(s); nothing written", all_p)

        listed = [
            {"path": name, "sha256": sha, "size": size, "role": role}
            for (name, _, role), (sha, size) in zip(
                members, _parallel(lambda m: _digest(m[1]), members), strict=True
            )
        ]
        arms = [
            {k: a.get(k) for k in ("id", "role", "runtime_commit")} for a in scrubbed_doc["arms"]
        ]
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
            rules_version=RULES_VERSION,
        )
        msha = hashlib.sha256(manifest).hexdigest()
        statement = build_statement(manifest, msha, Manifest.from_dict(json.loads(manifest)))
        envelope = sign_payload(statement, list(keys), INTOTO_PAYLOAD_TYPE)
        ordered = [
            (MANIFEST_NAME, manifest),
            *((n, d) for n, d, _ in members),
            (ENVELOPE_NAME, envelope.to_bytes()),
        ]
        total = len(ordered)
        # Hash what we write, never re-read the path: another seal may replace it (--force).
        with atomic_output(output, replace=force) as fh:
            tee = _HashingWriter(fh)
            write_container(cast(BinaryIO, tee), ordered)
    if progress:
        progress("write", total, total)
    return SealResult(
        output=output,
        bundle_sha256=tee.sha256.hexdigest(),
        bundle_bytes=tee.size,
        campaign_id=camp.doc["id"],
        members=total,
        tables=counts,
        external=external,
        sanitization=san.report(),
        findings=finding_rows,
        signers=[key_id(k.public_key()) for k in keys],
        warnings=[str(w) for w in plan_warnings],
    )
