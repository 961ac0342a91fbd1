"""A bundle's members against its manifest and signed statement, and its tables' formats.

Every check appends located problems to the :class:`~bundler.verify_report.VerifyReport`;
none raises for what it finds.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from bundler.errors import Problem
from bundler.format.container import Limits, Member
from bundler.format.manifest import ENVELOPE_NAME, EXTERNAL_PREFIX, MANIFEST_NAME
from bundler.format.model import ExternalEntry, Manifest, MemberEntry, Statement
from bundler.format.tables import TABLE_FORMAT_VERSION, TABLE_NAMES, arrow_schema
from bundler.verify_report import VerifyReport

__all__ = ["check_duplicates", "check_members", "check_statement", "check_tables"]


def check_duplicates(report: VerifyReport, manifest: Manifest) -> None:
    """A path listed twice is refused: every check keyed by path would see only one entry.

    Left to a dict, the last entry wins and the other, whatever its digest or size,
    would go unchecked (members) or unhashed (external artifacts).
    """
    entries: tuple[tuple[Sequence[MemberEntry | ExternalEntry], str, str], ...] = (
        (manifest.members, "member", ""),
        (manifest.external, "external artifact", EXTERNAL_PREFIX),
    )
    for listed, name, prefix in entries:
        counts = Counter(e.path for e in listed)
        for path, n in counts.items():
            if n > 1:
                report.problems.append(
                    Problem(
                        prefix + path,
                        None,
                        "path",
                        f"{name} listed {n} times in the manifest (each path once)",
                    )
                )


def check_members(report: VerifyReport, members: dict[str, Member], manifest: Manifest) -> None:
    listed = {m.path: m for m in manifest.members}
    report.members = [m.to_dict() for m in manifest.members]
    for path, m in listed.items():
        got = members.get(path)
        if got is None:
            report.problems.append(Problem(path, None, None, "listed in the manifest but absent"))
            continue
        if got.size != m.size:
            report.problems.append(
                Problem(path, None, "size", f"{got.size} bytes, manifest says {m.size}")
            )
        if got.sha256 != m.sha256:
            report.problems.append(
                Problem(path, None, "sha256", "digest does not match the manifest")
            )
    for path in members:
        if path not in listed and path not in (MANIFEST_NAME, ENVELOPE_NAME):
            report.problems.append(Problem(path, None, None, "present but not in the manifest"))


def check_statement(
    report: VerifyReport,
    members: dict[str, Member],
    manifest: Manifest,
    statement: Statement,
) -> None:
    """The signed statement must name exactly the manifest, its members and its externals."""
    subj = {s.name: s.sha256 for s in statement.subjects}
    want = {MANIFEST_NAME: members[MANIFEST_NAME].sha256}
    want.update({m.path: m.sha256 for m in manifest.members})
    want.update({EXTERNAL_PREFIX + e.path: e.sha256 for e in manifest.external})
    if subj != want:
        diff = sorted(set(subj.items()) ^ set(want.items()), key=str)
        names = sorted({str(n) for n, _ in diff})[:5]
        report.problems.append(
            Problem(
                ENVELOPE_NAME,
                None,
                "subject",
                f"signed subjects differ from the manifest for {names}",
            )
        )
    if (
        statement.bound_manifest_sha256 != members[MANIFEST_NAME].sha256
        or statement.campaign_id != manifest.campaign.id
    ):
        report.problems.append(
            Problem(
                ENVELOPE_NAME, None, "predicate", "signed predicate does not bind this manifest"
            )
        )


def _parquet_footer_problem(m: Member, lim: Limits) -> str | None:
    """Refuse a footer (Parquet metadata) over the bound before pyarrow allocates it."""
    if m.size < 12:
        return None  # pyarrow says what is wrong with it
    with m.open() as fh:
        fh.seek(-8, io.SEEK_END)
        tail = fh.read(8)
    size = int.from_bytes(tail[:4], "little")
    if tail[4:] == b"PAR1" and size > lim.max_parquet_footer_bytes:
        return (
            f"not a readable Parquet file: footer of {size:,} bytes, over the "
            f"{lim.max_parquet_footer_bytes:,}-byte bound"
        )
    return None


def check_tables(
    report: VerifyReport, members: dict[str, Member], manifest: Manifest, lim: Limits
) -> None:
    listed = {m.path for m in manifest.members}
    for name in TABLE_NAMES:
        path = f"tables/{name}.parquet"
        m = members.get(path)
        if path not in listed:
            # Format 1 always has every table (empty ones too): a dropped table is tampering.
            report.problems.append(Problem(path, None, None, "format 1 requires this table"))
        if m is None:
            continue  # reported as absent (or unlisted) already
        if (why := _parquet_footer_problem(m, lim)) is not None:
            report.problems.append(Problem(path, None, None, why))
            continue
        try:
            with m.open() as fh:
                meta_file = pq.read_metadata(fh)
            schema = meta_file.schema.to_arrow_schema()
            meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
        except (pa.ArrowException, OSError, ValueError) as exc:
            # ValueError covers UnicodeDecodeError: pyarrow decodes column names as
            # UTF-8, and so do we for the key-value metadata (found by the fuzzer).
            report.problems.append(
                Problem(
                    path, None, None, f"not a readable Parquet file: {type(exc).__name__}: {exc}"
                )
            )
            continue
        version = meta.get("format_version")
        if version != TABLE_FORMAT_VERSION:
            report.problems.append(
                Problem(path, None, "format_version", f"unknown table format version {version!r}")
            )
            continue
        if not schema.remove_metadata().equals(arrow_schema(name).remove_metadata()):
            report.problems.append(Problem(path, None, None, "Arrow schema differs from the spec"))
        rows = manifest.tables.get(name)
        if rows != meta_file.num_rows:
            report.problems.append(
                Problem(path, None, "rows", f"{meta_file.num_rows} rows, manifest says {rows}")
            )
