"""``bundle export``: a verified bundle's tables and carried files, as plain files.

Verification comes first and is the same as every other reader's
(:func:`bundler.verified.open_verified`): a bundle with any integrity problem,
or one no trusted key verified (unless the caller allows unsigned bundles
explicitly), is refused and nothing is written. Then every table is written as
Parquet (the sealed member's bytes, unchanged) or CSV (one file per table;
nested columns as JSON text), with the documents, plans, logs and carried files
under their member names, and ``EXPORT.json`` saying where they came from. All
of it goes into a temporary sibling folder renamed into place at the end: an
export is complete or absent, never half-written.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv

from bundler.errors import BundleFormatError, UsageError
from bundler.format.trust import NO_TRUST, SignatureStatus, Trust
from bundler.verified import VerifiedBundle, open_verified

__all__ = ["FORMATS", "ExportResult", "export_bundle"]

FORMATS = ("parquet", "csv")

_TABLE_PREFIX = "tables/"
# Members that describe the container itself, not the campaign: not exported.
_CONTAINER_MEMBERS = frozenset({"manifest.json", "signatures.dsse.json"})


@dataclass(frozen=True)
class ExportResult:
    """What ``export_bundle`` wrote."""

    directory: Path
    format: str
    tables: dict[str, int]
    files: list[str]
    signature_status: SignatureStatus

    @property
    def trusted(self) -> bool:
        """True when a trusted key verified the signature (not merely accepted unsigned)."""
        return self.signature_status.trusted

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``--json``)."""
        return {
            "ok": True,
            "directory": str(self.directory),
            "format": self.format,
            "tables": self.tables,
            "files": self.files,
            "trusted": self.trusted,
            "signature_status": self.signature_status,
        }


def _csv_ready(table: pa.Table) -> pa.Table:
    """Nested columns (maps, structs, lists) as JSON text: CSV holds flat cells only."""
    columns: list[Any] = []
    for field, column in zip(table.schema, table.columns, strict=True):
        t = field.type
        if pa.types.is_map(t) or pa.types.is_struct(t) or pa.types.is_list(t):
            values = [
                None
                if v is None
                else json.dumps(dict(v) if pa.types.is_map(t) else v, sort_keys=True)
                for v in column.to_pylist()
            ]
            columns.append(pa.array(values, pa.string()))
        else:
            columns.append(column)
    return pa.Table.from_arrays(columns, names=table.column_names)


def _write_tables(vb: VerifiedBundle, root: Path, fmt: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    (root / "tables").mkdir()
    for name in sorted(vb.members):
        if not (name.startswith(_TABLE_PREFIX) and name.endswith(".parquet")):
            continue
        table_name = name[len(_TABLE_PREFIX) : -len(".parquet")]
        table = vb.table(table_name)
        counts[table_name] = table.num_rows
        if fmt == "parquet":
            data = vb.member_bytes(name)
            assert data is not None  # listed in members
            (root / name).write_bytes(data)
        else:
            buf = io.BytesIO()
            pacsv.write_csv(_csv_ready(table), buf)
            (root / "tables" / f"{table_name}.csv").write_bytes(buf.getvalue())
    return counts


def export_bundle(
    bundle: Path,
    directory: Path,
    *,
    fmt: str = "parquet",
    trust: Trust = NO_TRUST,
) -> ExportResult:
    """Verify ``bundle`` and write its tables and carried files into ``directory``.

    Raises:
        UsageError: unknown format; ``directory`` exists and is not an empty folder.
        IntegrityError: the bundle does not verify, or no trusted key verified it
            and ``trust`` does not accept that (nothing is written).
    """
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise UsageError(f"{directory}: exists and is not an empty folder; export writes a new one")
    vb = open_verified(bundle, trust=trust)
    parent = directory.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.export-", dir=parent))
    try:
        tables = _write_tables(vb, tmp, fmt)
        files = []
        for name in sorted(vb.members):
            if name.startswith(_TABLE_PREFIX) or name in _CONTAINER_MEMBERS:
                continue
            data = vb.member_bytes(name)
            assert data is not None
            # Member names passed the bundle format's name rules at verification
            # (relative, no '..', no empty component): safe to join under tmp.
            path = tmp / name
            if not path.resolve().is_relative_to(tmp.resolve()):  # defence in depth
                raise BundleFormatError(f"{bundle}: member {name!r} would leave the export folder")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            files.append(name)
        report = vb.report
        info = {
            "exported_from": str(bundle),
            "bundle_sha256": _sha256_file(bundle),
            "signature_status": report.signature_status,
            "trusted": vb.trusted,
            "format": fmt,
            "tables": tables,
            "files": files,
        }
        (tmp / "EXPORT.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
        tmp.chmod(0o755)
        if directory.exists():
            directory.rmdir()  # empty, checked above
        tmp.replace(directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ExportResult(directory, fmt, tables, files, report.signature_status)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
