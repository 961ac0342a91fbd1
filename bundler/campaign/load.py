"""Read a campaign directory (``specs/campaign-layout.md``) and check all of it.

Every problem found is collected, each naming file, record and field, so an
author fixes everything in one round. Nothing here writes or prints.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from bundler._internal.confined import ChangedFileError, ConfinedTree, FileIdentity
from bundler._internal.jsonload import MAX_JSON_DEPTH
from bundler._internal.jsonload import depth_exceeds as json_depth_exceeds
from bundler._internal.schemas import document_errors
from bundler._internal.textsafe import safe
from bundler._internal.userfile import open_user_file
from bundler.campaign.columnar import ColumnTable, read_columnar
from bundler.campaign.comparison_columns import read_comparisons
from bundler.campaign.plan_slots import is_serving_plan
from bundler.campaign.sanitize import Sanitizer
from bundler.campaign.stream import STREAMED_TABLES, StreamedTable, StreamLimits, survey
from bundler.errors import Problem, UsageError
from bundler.format.container import member_name_problem
from bundler.format.contract import TableView, cross_checks, name_problem, referenced_requests
from bundler.format.tables import TABLE_NAMES, check_rows, table_schema

__all__ = [
    "MAX_JSON_DEPTH",
    "REQUIRED_TABLES",
    "Campaign",
    "JsonRefusedError",
    "JsonTooDeepError",
    "json_depth_exceeds",
    "load_campaign",
    "name_problem",
    "read_json",
]

REQUIRED_TABLES = ("attempts", "receipts", "claims")
_TABLE_EXTS = (".jsonl", ".csv", ".json")
_MAX_PROBLEMS_PER_FILE = 200


@dataclass
class Campaign:
    """A campaign read from disk: documents, raw table rows, plans, logs and other files."""

    root: Path
    doc: dict[str, Any]
    plans: dict[str, bytes] = field(default_factory=dict)
    plan_docs: dict[str, dict[str, Any]] = field(default_factory=dict)
    scorer: dict[str, Any] | None = None
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    table_files: dict[str, str] = field(default_factory=dict)
    logs: dict[str, bytes] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    row_labels: dict[int, str] = field(default_factory=dict)
    columns: dict[str, ColumnTable] = field(default_factory=dict)
    """Tables read column-wise (``load_campaign(columnar=True)``); their ``tables`` entry is
    empty."""
    streamed: dict[str, StreamedTable] = field(default_factory=dict)
    """Large tables checked block by block (``load_campaign(stream=...)``), written by seal
    in a second pass; their ``tables`` entry is empty."""
    walked: dict[str, FileIdentity] = field(default_factory=dict)
    """Every regular file the walk found, with its identity: a later reader (seal hashing
    external artifacts kept in the campaign folder) must open these files and no others."""

    def label(self, row: dict[str, Any]) -> str:
        """Where ``row`` came from in its file (``line N`` or ``#N``)."""
        return self.row_labels.get(id(row), "?")

    @property
    def arm_ids(self) -> list[str]:
        """Arm ids in the order campaign.json lists them."""
        return [str(a.get("id")) for a in _arms(self)]

    @property
    def plan(self) -> dict[str, Any] | None:
        """The frozen plan campaign.json names, if it parsed."""
        return self.plan_docs.get(str(self.doc.get("plan", "")))


class JsonRefusedError(ValueError):
    """Valid JSON that no later stage can carry safely; the message says why."""


class JsonTooDeepError(JsonRefusedError):
    """A JSON value nests arrays/objects deeper than :data:`MAX_JSON_DEPTH`."""

    def __init__(self) -> None:
        super().__init__(f"nested deeper than {MAX_JSON_DEPTH} levels")


def _arms(camp: Campaign) -> list[dict[str, Any]]:
    """The arm objects of campaign.json (anything else was reported by the schema check)."""
    arms = camp.doc.get("arms", [])
    return [a for a in arms if isinstance(a, dict)] if isinstance(arms, list) else []


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# JSON may spell a UTF-16 surrogate as an escape; a lone one is not Unicode text and
# no UTF-8 encoder (Parquet, RFC 8785) can write it.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(value: Any) -> str | None:
    """The first string (key or value) of ``value`` holding a lone surrogate, if any."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if _SURROGATE.search(v):
                return v
        elif isinstance(v, dict):
            stack += v.keys()
            stack += v.values()
        elif isinstance(v, list):
            stack += v
    return None


def _loads(text: str, limit: int = MAX_JSON_DEPTH) -> Any:
    """Parse JSON text, refusing NaN/Infinity, lone surrogates and values nested deeper
    than ``limit``."""
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:  # the C scanner gives up around the interpreter's limit
        raise JsonTooDeepError from None
    if json_depth_exceeds(value, limit):
        raise JsonTooDeepError
    if _SURROGATE_ESCAPE.search(text) and (bad := _lone_surrogate(value)) is not None:
        raise JsonRefusedError(
            f"string '{safe(bad)[:80]}' holds a lone UTF-16 surrogate escape: not Unicode text"
        )
    return value


def _text(data: bytes) -> str:
    """``data`` decoded as ``Path.read_text(encoding="utf-8")`` decodes a file.

    Universal newlines included (``\r\n`` and ``\r`` become ``\n``): sealed bytes
    and error positions stay what they were when files were read by path.
    """
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8").read()


def read_json(path: Path, rel: str, problems: list[Problem]) -> Any:
    """Parse the JSON file ``path``; on failure add a problem located at ``rel`` and return None.

    ``path`` must be a regular file (a FIFO or device is a problem, never waited on).
    """
    try:
        with open_user_file(path, what="file") as fh:
            data = fh.read()
    except UsageError as exc:
        problems.append(Problem(rel, None, None, exc.message.removeprefix(f"{path}: ")))
        return None
    except OSError as exc:
        problems.append(Problem(rel, None, None, f"cannot read: {exc.strerror or exc}"))
        return None
    return _json_bytes(data, rel, problems)


def _json_bytes(data: bytes, rel: str, problems: list[Problem]) -> Any:
    """Parse the bytes of the JSON file ``rel``; on failure add a problem and return None."""
    try:
        return _loads(_text(data))
    except UnicodeDecodeError as exc:
        problems.append(Problem(rel, None, None, f"not UTF-8 text ({exc.reason})"))
    except JsonRefusedError as exc:
        problems.append(Problem(rel, None, None, str(exc)))
    except ValueError as exc:
        problems.append(Problem(rel, None, None, f"not valid JSON: {exc}"))
    return None


def _read_walked(tree: ConfinedTree, rel: str, problems: list[Problem]) -> bytes | None:
    """The bytes of walked file ``rel``; None, with a problem, when it changed since the walk.

    Other ``OSError`` propagate: the caller decides whether they are campaign problems.
    """
    try:
        return tree.read(rel)
    except ChangedFileError as exc:
        problems.append(Problem(rel, None, None, str(exc)))
        return None


def _read_walked_json(tree: ConfinedTree, rel: str, problems: list[Problem]) -> Any:
    """Parse walked JSON file ``rel``; None, with a problem, when it cannot be read or parsed."""
    try:
        data = _read_walked(tree, rel, problems)
    except OSError as exc:
        problems.append(Problem(rel, None, None, f"cannot read: {exc.strerror or exc}"))
        return None
    return None if data is None else _json_bytes(data, rel, problems)


def _coerce_csv(value: str, prop: dict[str, Any]) -> Any:
    """CSV cells are text: turn them into the JSON type the schema asks for, if they parse."""
    if value == "":
        return None
    t = prop.get("type", "string")
    kinds = [t] if isinstance(t, str) else list(t)
    try:
        if "integer" in kinds and value.lstrip("-").isdigit():
            return int(value)
        if "number" in kinds:
            return float(value)
        if "boolean" in kinds and value.lower() in ("true", "false"):
            return value.lower() == "true"
    except ValueError:
        return value
    return value


_JCS_INT = 2**53 - 1


def _jcs_problem(value: Any, path: str = "") -> tuple[str, str] | None:
    """(field, message) if ``value`` cannot be written as RFC 8785 JSON exactly.

    JCS (ECMAScript numbers) cannot carry integers beyond ±(2**53 − 1) exactly;
    rather than round them we refuse them, naming the field.
    """
    if isinstance(value, bool) or value is None or isinstance(value, str | float):
        return None
    if isinstance(value, int):
        if abs(value) > _JCS_INT:
            return path, f"{value} is beyond ±(2**53 − 1); write it as a string"
        return None
    if isinstance(value, dict):
        items: Any = value.items()
    else:
        items = enumerate(value)
    for k, v in items:
        found = _jcs_problem(v, f"{path}.{k}" if path else str(k))
        if found:
            return found
    return None


def _jsonl_rows(text: str, rel: str, problems: list[Problem]) -> list[tuple[str, dict[str, Any]]]:
    numbered = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    try:
        # One C-level parse for the whole file; a count, type or depth surprise falls
        # back to the line-by-line path below, which names the bad line.
        parsed = _loads("[" + ",".join(line for _, line in numbered) + "]", MAX_JSON_DEPTH + 1)
    except ValueError:
        parsed = None
    if (
        isinstance(parsed, list)
        and len(parsed) == len(numbered)
        and all(type(r) is dict for r in parsed)
    ):
        return [(f"line {n}", r) for (n, _), r in zip(numbered, parsed, strict=True)]
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = _loads(line)
        except JsonRefusedError as exc:
            problems.append(Problem(rel, f"line {n}", None, str(exc)))
            continue
        except ValueError as exc:
            problems.append(Problem(rel, f"line {n}", None, f"not valid JSON: {exc}"))
            continue
        if not isinstance(row, dict):
            problems.append(Problem(rel, f"line {n}", None, "a record must be a JSON object"))
            continue
        out.append((f"line {n}", row))
    return out


def _is_metric(column: str | None) -> bool:
    """Whether a CSV column holds one entry of ``metrics`` (``metrics.<name>``)."""
    return column is not None and column.startswith("metrics.")


def _csv_rows(
    text: str, rel: str, name: str, problems: list[Problem]
) -> list[tuple[str, dict[str, Any]]]:
    props = table_schema(name)["properties"]
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = reader.fieldnames or []
    if "metrics" in props and "metrics" in header and any(_is_metric(h) for h in header):
        # Both spell the one object: whichever cell came last would replace the other.
        why = "a `metrics` column beside `metrics.<name>` columns; keep only the latter"
        problems.append(Problem(rel, "line 1", "metrics", why))
        return []
    out = []
    for n, raw in enumerate(reader, start=2):
        cells: dict[str, Any] = {}
        for k, v in raw.items():
            if k is None:
                problems.append(Problem(rel, f"line {n}", None, "more cells than header columns"))
            elif _is_metric(k) and "metrics" in props:
                metric = _coerce_csv(v or "", {"type": "number"})
                cells.setdefault("metrics", {})[k.removeprefix("metrics.")] = metric
            else:
                cells[k] = _coerce_csv(v or "", props.get(k, {}))
        out.append((f"line {n}", {k: v for k, v in cells.items() if v is not None}))
    return out


def _read_table_rows(
    data: bytes, rel: str, name: str, problems: list[Problem]
) -> list[tuple[str, dict[str, Any]]]:
    """(record label, row) pairs of the table file ``rel`` (its bytes), in file order."""
    suffix = PurePosixPath(rel).suffix
    if suffix == ".json":
        doc = _json_bytes(data, rel, problems)
        if doc is None:
            return []
        if not isinstance(doc, list) or not all(isinstance(r, dict) for r in doc):
            problems.append(Problem(rel, None, None, "a .json table must be an array of objects"))
            return []
        return [(f"#{i}", r) for i, r in enumerate(doc)]
    try:
        text = _text(data)
    except UnicodeDecodeError as exc:
        problems.append(Problem(rel, None, None, f"cannot read as UTF-8 text: {exc}"))
        return []
    if suffix == ".jsonl":
        return _jsonl_rows(text, rel, problems)
    return _csv_rows(text, rel, name, problems)


def _walk(tree: ConfinedTree, problems: list[Problem]) -> list[str]:
    """Every regular file of ``tree`` as a POSIX relative path, sorted; links refused.

    Each file's identity is recorded in ``tree.files``, so that reading it later
    refuses a file swapped in since. Names that are not UTF-8 or hold control
    characters are refused (a folder once, not each file under it), named with
    those characters escaped.
    """
    out: list[str] = []
    for rel_dir, dirnames, linked, entries in tree.walk():
        dirnames.sort()
        for d in list(dirnames):
            rel = f"{rel_dir}/{d}" if rel_dir else d
            if d in linked:
                problems.append(Problem(safe(rel), None, None, "symbolic links are not carried"))
                dirnames.remove(d)
            elif (why := name_problem(rel)) is not None:
                problems.append(Problem(safe(rel), None, None, f"folder {why}"))
                dirnames.remove(d)
        for f, st in sorted(entries):
            rel = f"{rel_dir}/{f}" if rel_dir else f
            if (why := name_problem(rel)) is not None:
                problems.append(Problem(safe(rel), None, None, f"file {why}"))
            elif stat.S_ISLNK(st.st_mode):
                problems.append(Problem(rel, None, None, "symbolic links are not carried"))
            elif stat.S_ISREG(st.st_mode):
                tree.files[rel] = FileIdentity.of(st)
                out.append(rel)
            else:
                problems.append(Problem(rel, None, None, "not a regular file"))
    return sorted(out)


def load_campaign(
    root: Path, *, columnar: bool = False, stream: StreamLimits | None = None
) -> tuple[Campaign, list[Problem]]:
    """Read and check the campaign at ``root``; return it with every problem found.

    With ``columnar``, a large table that passes the column-wise checks
    (:mod:`bundler.campaign.columnar`) is kept as Arrow columns in ``Campaign.columns``
    instead of row dicts; any other table, and any table with a problem, is
    read row by row. With ``stream`` too, a JSON Lines or CSV receipts file of at least
    ``stream.min_bytes`` is checked block by block and kept in ``Campaign.streamed``
    (:mod:`bundler.campaign.stream`), unless a block is not sure: then it is read whole.
    """
    if not root.is_dir():
        return Campaign(root, {}), [Problem(str(root), None, None, "not a directory")]
    try:
        tree = ConfinedTree(root)
    except OSError as exc:
        return Campaign(root, {}), [
            Problem(str(root), None, None, f"cannot read: {exc.strerror or exc}")
        ]
    with tree:
        return _load(tree, columnar, stream if columnar else None)


def _load(
    tree: ConfinedTree, columnar: bool, stream: StreamLimits | None
) -> tuple[Campaign, list[Problem]]:
    """:func:`load_campaign` on the opened folder: every file read is a file walked."""
    problems: list[Problem] = []
    root = tree.root
    rels = _walk(tree, problems)
    doc = _read_walked_json(tree, "campaign.json", problems) if ("campaign.json" in rels) else None
    if "campaign.json" not in rels:
        problems.append(Problem("campaign.json", None, None, "missing: every campaign needs one"))
    camp = Campaign(root, doc if isinstance(doc, dict) else {}, walked=dict(tree.files))
    if doc is not None:
        problems += [
            Problem("campaign.json", None, f, m) for f, m in document_errors("campaign", doc)
        ]
        if (bad := _jcs_problem(doc)) is not None:
            problems.append(Problem("campaign.json", None, *bad))

    claimed = {"campaign.json"}
    _load_tables(tree, rels, camp, claimed, problems, columnar, stream)
    _load_plans(tree, rels, camp, claimed, problems)
    if "scorer.json" in rels:
        claimed.add("scorer.json")
        sc = _read_walked_json(tree, "scorer.json", problems)
        if sc is not None:
            problems += [
                Problem("scorer.json", None, f, m) for f, m in document_errors("scorer", sc)
            ]
            camp.scorer = sc if isinstance(sc, dict) else None
            if (bad := _jcs_problem(sc)) is not None:
                problems.append(Problem("scorer.json", None, *bad))
    external = {str(r.get("path")) for r in camp.tables.get("artifacts", [])}
    for rel in rels:
        if rel in claimed or rel in external:
            continue
        if (why := member_name_problem(rel)) is not None:
            problems.append(Problem(rel, None, None, f"file name cannot be carried: {why}"))
            continue
        # An OSError here is "could not run" (exit 3), as it always was for carried files.
        data = _read_walked(tree, rel, problems)
        if data is None:
            continue
        if rel.startswith("logs/"):
            camp.logs[rel] = data
        else:
            camp.files[rel] = data
    problems += _cross_checks(camp)
    return camp, problems


def _load_tables(  # noqa: PLR0917
    tree: ConfinedTree,
    rels: list[str],
    camp: Campaign,
    claimed: set[str],
    problems: list[Problem],
    columnar: bool,
    stream: StreamLimits | None = None,
) -> None:
    deferred: list[tuple[str, str]] = []
    for name in TABLE_NAMES:
        found = [f"{name}{ext}" for ext in _TABLE_EXTS if f"{name}{ext}" in rels]
        if len(found) > 1:
            problems.append(Problem(found[0], None, None, f"table {name} given twice: {found}"))
        if not found:
            if name in REQUIRED_TABLES:
                problems.append(Problem(f"{name}.jsonl", None, None, "missing: a required table"))
            camp.tables[name] = []
            continue
        rel = found[0]
        claimed.update(found)
        if stream is not None and _streamable(tree, name, rel, stream, problems):
            # Checked once every other table is read: receipts refer to attempts.
            deferred.append((name, rel))
            continue
        _load_table(tree, camp, name, rel, problems, columnar)
    for name, rel in deferred:
        assert stream is not None
        if not _stream_table(tree, camp, name, rel, stream, problems):
            _load_table(tree, camp, name, rel, problems, columnar)


def _streamable(
    tree: ConfinedTree, name: str, rel: str, stream: StreamLimits, problems: list[Problem]
) -> bool:
    """Whether table file ``rel`` is large JSON Lines or CSV, to be checked block by block."""
    if name not in STREAMED_TABLES or not rel.endswith((".jsonl", ".csv")):
        return False
    try:
        fd = tree.open(rel)
    except (OSError, ChangedFileError):
        return False  # the whole read reports it
    try:
        return os.fstat(fd).st_size >= stream.min_bytes
    finally:
        os.close(fd)


def _stream_table(  # noqa: PLR0917
    tree: ConfinedTree,
    camp: Campaign,
    name: str,
    rel: str,
    stream: StreamLimits,
    problems: list[Problem],
) -> bool:
    """Check table ``name`` block by block; False when the per-row path must read it."""
    try:
        san = Sanitizer.for_campaign(camp.doc)
    except (AttributeError, TypeError):
        return False  # a malformed sanitize section: reported by the schema check
    wanted = referenced_requests(_views(camp)["comparisons"])
    attempts = {
        v for r in camp.tables.get("attempts", []) if isinstance(v := r.get("attempt_id"), str)
    }
    try:
        got = survey(tree, rel, name, stream, (attempts, set(camp.arm_ids), wanted), san)
    except (OSError, ChangedFileError):
        return False
    if got is None:
        return False
    camp.streamed[name], found = got
    camp.tables[name] = []
    camp.table_files[name] = rel
    problems += found
    return True


def _read_columns(path: Path, name: str, data: bytes) -> ColumnTable | None:
    """Table ``name`` read column-wise from its file's content, or None (per-row)."""
    if name == "comparisons":
        return read_comparisons(path, data=data)
    return read_columnar(path, name, data=data)


def _load_table(  # noqa: PLR0917
    tree: ConfinedTree,
    camp: Campaign,
    name: str,
    rel: str,
    problems: list[Problem],
    columnar: bool,
) -> None:
    """Read and check table ``name`` from walked file ``rel``, whole."""
    try:
        data = _read_walked(tree, rel, problems)
    except OSError as exc:
        why = f"cannot read: {exc.strerror or exc}"
        problems.append(Problem(rel, None, None, why))
        data = None
    if data is None:
        camp.tables[name] = []
        return
    # One read serves both paths: the column-wise reader parses these bytes too.
    if columnar and (ct := _read_columns(tree.root / rel, name, data)) is not None:
        camp.tables[name] = []
        camp.columns[name] = ct
        camp.table_files[name] = rel
        return
    pairs = _read_table_rows(data, rel, name, problems)
    labels = [label for label, _ in pairs]
    rows = [row for _, row in pairs]
    errs = check_rows(name, rows)
    for e in errs[:_MAX_PROBLEMS_PER_FILE]:
        problems.append(Problem(rel, labels[e.index], e.field, e.message))
    if len(errs) > _MAX_PROBLEMS_PER_FILE:
        problems.append(
            Problem(rel, None, None, f"... and {len(errs) - _MAX_PROBLEMS_PER_FILE} more")
        )
    camp.tables[name] = rows
    camp.table_files[name] = rel
    known = set(table_schema(name)["properties"])
    for row, label in zip(rows, labels, strict=True):
        camp.row_labels[id(row)] = label
        unknown = row.keys() - known
        if unknown and (bad := _jcs_problem({k: row[k] for k in unknown})) is not None:
            problems.append(Problem(rel, label, *bad))


def _load_plans(
    tree: ConfinedTree, rels: list[str], camp: Campaign, claimed: set[str], problems: list[Problem]
) -> None:
    for rel in rels:
        if not (rel.startswith("plans/") and rel.endswith(".json")):
            continue
        claimed.add(rel)
        if (bad := member_name_problem(rel)) is not None:
            problems.append(Problem(rel, None, None, f"file name cannot be carried: {bad}"))
            continue
        raw = _read_walked(tree, rel, problems)
        if raw is None:
            continue
        camp.plans[rel] = raw
        # The bytes carried are the bytes checked (the file was read by path twice before).
        doc = _json_bytes(raw, rel, problems)
        if isinstance(doc, dict):
            problems += [Problem(rel, None, f, m) for f, m in document_errors("plan", doc)]
            camp.plan_docs[rel] = doc
        elif doc is not None:
            problems.append(Problem(rel, None, None, "a plan must be a JSON object"))
    want = camp.doc.get("plan")
    if isinstance(want, str) and want not in camp.plans:
        problems.append(Problem("campaign.json", None, "plan", f"names {want!r}, which is absent"))


def _views(camp: Campaign) -> dict[str, TableView]:
    """The campaign's tables as the contract's cross checks see them, located by file line."""
    views = {}
    for name in TABLE_NAMES:
        where = camp.table_files.get(name, name)
        present = name in camp.table_files
        if (ct := camp.columns.get(name)) is not None:
            views[name] = TableView(where, columns=ct, present=present)
            continue
        if (st := camp.streamed.get(name)) is not None:
            # Checked block by block already; what the other tables' checks need of it
            # is the request ids they refer to that it holds.
            held = sorted(st.referenced)
            views[name] = TableView(where, [{"request_id": v} for v in held], ["?"] * len(held))
            continue
        rows = camp.tables.get(name, [])
        views[name] = TableView(where, rows, [camp.label(r) for r in rows], present=present)
    return views


def _cross_checks(camp: Campaign) -> list[Problem]:
    # The same checks every bundle reader runs on a bundle's tables (bundler/format/contract.py).
    return cross_checks(camp.doc, _views(camp)) + _plan_checks(camp, set(camp.arm_ids))


def _plan_checks(camp: Campaign, arms: set[str]) -> list[Problem]:
    plan = camp.plan
    if plan is None:
        return []
    rel = str(camp.doc.get("plan"))
    out = []
    order = plan.get("arm_order", [])
    # The schema check names a non-list or a non-string entry; only strings are looked up.
    for i, a in enumerate(order if isinstance(order, list) else []):
        if isinstance(a, str) and a not in arms:
            out.append(Problem(rel, None, f"arm_order.{i}", f"{a!r} is not an arm of the campaign"))
    teardown = plan.get("teardown", {})
    if isinstance(teardown, dict) and not is_serving_plan(plan):
        for a in arms - set(teardown):
            out.append(Problem(rel, None, "teardown", f"no teardown budget for arm {a!r}"))
    return out
