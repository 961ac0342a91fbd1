"""Signed-but-hostile bundles (issue 19): they VERIFY under the trusted key: hostile content.

A signature says who sealed a bundle, not that its content is sane. Every case
here is an honest campaign sealed with the fixed author key
(``tests/fuzz/strategies.py`` ``AUTHOR_SEED``), then edited where no seal
check runs: tables written directly with pyarrow under
``bundler.format.tables.arrow_schema``, documents rewritten, the manifest and the
in-toto statement rebuilt and signed again with the SAME author key. So
``bundle verify --key author.pub`` accepts every case; what it holds is:

* ``data`` families (on the seed-like campaign of ``tests/replay_factory.py``,
  which replays to exit 0 when honest): NaN, +-inf, negative, huge (1e308)
  values; a claim value with 5,000 decimals; ``decimals`` out of its schema
  range; receipts ending before they start; a claim unit that does not fit its
  statistic; duplicated ids; ids referenced but absent.
* ``name`` families: a hostile string in one author string (arm, server,
  attempt id, plan id, claim id, claim text, gate metric, campaign title),
  renamed consistently wherever the campaign refers to it: path separators
  aimed at a sentinel folder, control and bidi characters, mathtext,
  Markdown mentions, autolinks and closing keywords.
* ``rerun`` families (on the reference server's campaign,
  ``tests/reference_server/campaign.py``): a payload ``input_reference`` that
  is absolute, climbs out with ``..`` or is a symbolic link out of
  ``--inputs``; hostile server and attempt names; warmup or measured counts
  of 250,000 to 10**19 per server; an ``arm_order`` of 1,001 or 20,000 positions.

Each family is a Hypothesis strategy (:data:`FAMILIES`); the properties they
must satisfy are in ``tests/fuzz/properties.py`` (``check_hostile``).
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import io
import json
import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import strategies as st

from bundler._internal import jcs
from bundler.format.container import read_container
from bundler.format.tables import arrow_schema
from bundler.seal import parquet_bytes, seal_campaign
from tests.fuzz.strategies import AUTHOR_SEED
from tests.resign import resign

__all__ = [
    "CLOSING",
    "FAMILIES",
    "INPUT_PATHS",
    "MENTION",
    "SECRET",
    "URL",
    "WWW",
    "Edit",
    "HostileBase",
    "HostileCase",
    "hostile_names",
    "input_case",
    "make_data_base",
    "make_rerun_base",
    "name_case",
    "reseal",
]

MENTION = "@fuzz-octocat"
URL = "http://evil.invalid/x"
WWW = "www.evil.invalid"
CLOSING = "fixes #1"
SECRET = "secret.png"
"""The file in the sentinel folder that hostile input paths point at; nothing may read it."""

_FLOAT_FIELDS = (
    ("receipts", "e2e_s"),
    ("gates", "threshold"),
    ("comparisons", "metrics"),
    ("telemetry", "hbm_used_mb"),
    ("worker_exits", "exit_s"),
)


def hostile_names(sentinel: Path) -> list[str]:
    """Hostile author strings; the path ones aim at ``sentinel`` (a folder no command may touch).

    Relative ones climb from the command's working folder (``<root>/work-N``), from ``-o``
    (``work-N/out``) and from the logs below it (``out/logs/<attempt>/``).
    """
    return [
        "../sentinel/pwn",
        "../../sentinel/pwn",
        "../../../sentinel/pwn",
        "../../../../sentinel/pwn",
        str(sentinel / "pwn"),
        "a/b",
        "\x1b[2K\rCONFIRMED (exit 0)",
        "a\rb",
        "a\nb",
        "x\x85y\x9bz",
        "x\u2028y\u2029z",
        "\u202egnp.exe",
        "b$\\foo{$x",
        MENTION,
        f"x` {MENTION} `y",
        f"see {URL}",
        WWW,
        f"{CLOSING} now",
    ]


@dataclass(frozen=True, repr=False)
class HostileBase:
    """An honest sealed bundle, decoded into the documents and rows the families edit."""

    author: Ed25519PrivateKey
    members: tuple[tuple[str, bytes], ...]
    campaign: dict[str, Any]
    plan_member: str
    plan: dict[str, Any]
    tables: dict[str, list[dict[str, Any]]]
    sentinel: Path

    def __repr__(self) -> str:
        return f"HostileBase({self.campaign.get('id')!r}, {len(self.members)} members)"

    def edit(self) -> Edit:
        """A deep copy to edit."""
        return Edit(
            copy.deepcopy(self.campaign), copy.deepcopy(self.plan), copy.deepcopy(self.tables)
        )


@dataclass
class Edit:
    """One case's documents and rows, edited in place by a family."""

    campaign: dict[str, Any]
    plan: dict[str, Any]
    tables: dict[str, list[dict[str, Any]]]
    drop_files: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class HostileCase:
    """A signed-but-hostile bundle and what the properties expect of it.

    ``impossible``: the bundle holds data no honest measurement can produce, so
    no replay may confirm it (exit 0). ``rerun``: its plan runs on the
    reference server. ``inputs_link``: the ``--inputs`` folder holds, at
    ``link_name``, a symbolic link to the sentinel's secret.
    """

    family: str
    detail: str
    impossible: bool
    data: bytes
    rerun: bool = False
    inputs_link: str | None = None

    def __repr__(self) -> str:
        digest = hashlib.sha256(self.data).hexdigest()[:12]
        return f"HostileCase({self.family!r}, {self.detail!r}, sha256 {digest}…)"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        # Hypothesis pretty-prints dataclasses field by field (the bundle's bytes included)
        # unless the object says how to print itself.
        p.text(repr(self))


def _author() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(AUTHOR_SEED)


def _decode(bundle: Path, sentinel: Path) -> HostileBase:
    members = tuple((m.name, m.read_bytes()) for m in read_container(bundle))
    content = dict(members)
    campaign = json.loads(content["campaign.json"])
    plan_member = campaign["plan"]
    tables = {
        name.removeprefix("tables/").removesuffix(".parquet"): pq.read_table(
            io.BytesIO(data), use_threads=False
        ).to_pylist()
        for name, data in members
        if name.startswith("tables/")
    }
    plan = json.loads(content[plan_member])
    return HostileBase(_author(), members, campaign, plan_member, plan, tables, sentinel)


def make_data_base(sentinel: Path) -> HostileBase:
    """The seed-like campaign (every table populated, 36 claims, replay exit 0), sealed."""
    from tests.replay_factory import build, seed_like

    files = build(seed_like())
    # What rerun --dry-run needs to expand the schedule (the seed's plan has it too).
    files.plan["request"]["poll_interval_s"] = 5.0
    files.plan["request"]["payload"] = {"model": "m", "prompt": "a violinist at dusk"}
    with tempfile.TemporaryDirectory() as d:
        path = files.seal(Path(d), _author())
        return _decode(path, sentinel)


def make_rerun_base(sentinel: Path) -> HostileBase:
    """The reference server's campaign, its plan made quick and bounded, sealed.

    Latency 0.05 s per request and at most 60 HTTP requests per server
    (``--max-requests``), so a rerun against it is short and cannot loop.
    """
    from tests.reference_server.campaign import campaign_plan, write_campaign

    plan = campaign_plan()
    plan["launch"]["command"] = [*plan["launch"]["command"], "--max-requests", "60"]
    for arm in ("baseline", "candidate"):
        plan["launch"][arm]["args"] = ["--latency", "0.05"]
    with tempfile.TemporaryDirectory() as d:
        camp = write_campaign(Path(d) / "c", plan)
        out = Path(d) / "r.bundle"
        seal_campaign(camp, out, keys=[_author()])
        return _decode(out, sentinel)


def reseal(base: HostileBase, edit: Edit) -> bytes:
    """The edited documents and tables, manifest and statement rebuilt, signed by the AUTHOR."""
    content = dict(base.members)
    content["campaign.json"] = jcs.dumps(edit.campaign)
    content[base.plan_member] = json.dumps(edit.plan, indent=1).encode()
    for name, rows in edit.tables.items():
        table = pa.Table.from_pylist(rows, schema=arrow_schema(name))
        content[f"tables/{name}.parquet"] = parquet_bytes(table)
    for name in edit.drop_files:
        content.pop(name, None)

    def identity(doc: dict[str, Any]) -> None:
        doc["campaign"]["title"] = edit.campaign["title"]
        doc["campaign"]["arms"] = [
            {k: a[k] for k in ("id", "role", "runtime_commit")} for a in edit.campaign["arms"]
        ]

    names = [n for n, _ in base.members if n in content]
    return resign([(n, content[n]) for n in names], [base.author], edit_manifest=identity)


# --- helpers on rows ---------------------------------------------------------------------


def _params(row: dict[str, Any]) -> dict[str, Any]:
    p = json.loads(row["params"]) if row.get("params") else {}
    assert isinstance(p, dict)
    return p


def _set_params(row: dict[str, Any], params: dict[str, Any]) -> None:
    row["params"] = jcs.dumps(params).decode()


def _measured(edit: Edit) -> list[dict[str, Any]]:
    return [r for r in edit.tables["receipts"] if r["phase"] == "measured" and r["status"] == "ok"]


def _accepted(edit: Edit) -> str:
    return str(next(a["attempt_id"] for a in edit.tables["attempts"] if a["status"] == "accepted"))


def _set_float(edit: Edit, table: str, column: str, value: float, k: int) -> str:
    rows = _measured(edit) if table == "receipts" else edit.tables[table]
    row = rows[k % len(rows)]
    if column == "metrics":
        # map<string, float64> comes back from pyarrow as a list of (key, value) pairs
        pairs = list(row["metrics"])
        key = pairs[0][0]
        row["metrics"] = [(key, value), *pairs[1:]]
        return f"{table}.metrics[{key}] = {value!r}"
    row[column] = value
    return f"{table}.{column} = {value!r} (row {k % len(rows)})"


# --- data families -----------------------------------------------------------------------

Family = Callable[[HostileBase], st.SearchStrategy[HostileCase]]


def _case(
    base: HostileBase, family: str, detail: str, edit: Edit, *, impossible: bool, **kw: Any
) -> HostileCase:
    return HostileCase(family, detail, impossible, reseal(base, edit), **kw)


@st.composite
def _nonfinite(draw: st.DrawFn, base: HostileBase) -> HostileCase:
    table, column = draw(st.sampled_from(_FLOAT_FIELDS))
    value = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    edit = base.edit()
    detail = _set_float(edit, table, column, value, draw(st.integers(0, 40)))
    family = "nan" if math.isnan(value) else "inf"
    return _case(base, family, detail, edit, impossible=True)


@st.composite
def _negative(draw: st.DrawFn, base: HostileBase) -> HostileCase:
    table, column = draw(
        st.sampled_from(
            [("receipts", "e2e_s"), ("telemetry", "hbm_used_mb"), ("worker_exits", "exit_s")]
        )
    )
    value = draw(st.sampled_from([-1.0, -396.3, -1e-300, -0.0]))
    if value == 0.0:
        value = -1.0  # -0.0 == 0.0 is a possible latency reading: keep the case impossible
    edit = base.edit()
    detail = _set_float(edit, table, column, value, draw(st.integers(0, 40)))
    return _case(base, "negative", detail, edit, impossible=True)


@st.composite
def _huge(draw: st.DrawFn, base: HostileBase) -> HostileCase:
    table, column = draw(st.sampled_from(_FLOAT_FIELDS))
    value = draw(st.sampled_from([1e308, 1.7976931348623157e308, 5e-324]))
    edit = base.edit()
    detail = _set_float(edit, table, column, value, draw(st.integers(0, 40)))
    return _case(base, "huge", detail, edit, impossible=False)


@st.composite
def _over_precise(draw: st.DrawFn, base: HostileBase) -> HostileCase:
    edit = base.edit()
    claims = edit.tables["claims"]
    k = draw(st.integers(0, len(claims) - 1))
    row = claims[k]
    shape = draw(st.sampled_from(["decimals", "integer-digits", "zeros"]))
    whole, _, frac = row["value"].partition(".")
    if shape == "decimals":
        row["value"] = f"{whole}.{frac}{'3' * (5000 - len(frac))}"
    elif shape == "integer-digits":
        row["value"] = "9" * 5000 + (f".{frac}" if frac else "")
    else:
        row["value"] = f"{whole}.{frac}{'0' * (5000 - len(frac))}"
    row["decimals"] = draw(st.sampled_from([None, row["decimals"]]))
    detail = f"claim {row['claim_id']} value with {shape} (5,000 digits)"
    return _case(base, "over-precise", detail, edit, impossible=False)


@st.composite
def _decimals(draw: st.DrawFn, base: HostileBase) -> HostileCase:
    edit = base.edit()
    claims = edit.tables["claims"]
    row = claims[draw(st.integers(0, len(claims) - 1))]
    row["decimals"] = draw(st.sampled_from([-1, 13, 400, 2**62, -(2**63)]))
    detail = f"claim {row['claim_id']} decimals {row['decimals']}"
    return _case(base, "decimals", detail, edit, impossible=True)


@st.composite
def _end_before_start(draw: st.DrawFn, base: HostileBase) -> HostileCase:
    edit = base.edit()
    rows = _measured(edit)
    row = rows[draw(st.integers(0, len(rows) - 1))]
    back = dt.timedelta(seconds=draw(st.sampled_from([1, 3600, 10**6])))
    row["end"] = row["start"] - back
    detail = f"receipt {row['request_id']} ends {back} before it starts"
    return _case(base, "end-before-start", detail, edit, impossible=True)


_WRONG_UNITS = {
    "server_mean_s": ["ms", "%", "count"],
    "arm_mean_s": ["ms", "x"],
    "percent_lower": ["s", "x", "ratio"],
    "speedup": ["%", "s"],
    "requests_total": ["%", "s"],
    "hbm_peak_mean_mb": ["s", "ms"],
}


@st.composite
def _unit_mismatch(draw: st.DrawFn, base: HostileBase) -> HostileCase:
    edit = base.edit()
    claims = [c for c in edit.tables["claims"] if c["statistic"] in _WRONG_UNITS]
    row = draw(st.sampled_from(claims))
    row["unit"] = draw(st.sampled_from(_WRONG_UNITS[row["statistic"]]))
    detail = f"claim {row['claim_id']} ({row['statistic']}) in unit {row['unit']!r}"
    return _case(base, "unit-mismatch", detail, edit, impossible=True)


@st.composite
def _duplicate_id(draw: st.DrawFn, base: HostileBase) -> HostileCase:
    edit = base.edit()
    what = draw(st.sampled_from(["request", "claim", "gate", "attempt", "comparison"]))
    t = edit.tables
    if what == "request":
        rows = _measured(edit)
        a, b = rows[0], rows[draw(st.integers(1, len(rows) - 1))]
        b["request_id"] = a["request_id"]
        detail = f"request id {a['request_id']} twice (servers {a['server']}, {b['server']})"
    elif what == "claim":
        a = t["claims"][0]
        dup = {**t["claims"][1], "claim_id": a["claim_id"]}
        t["claims"].append(dup)
        detail = f"claim id {a['claim_id']} twice ({a['statistic']}, {dup['statistic']})"
    elif what == "gate":
        a = t["gates"][0]
        t["gates"].append({**t["gates"][1], "gate_id": a["gate_id"]})
        detail = f"gate id {a['gate_id']} twice"
    elif what == "attempt":
        acc = next(r for r in t["attempts"] if r["status"] == "accepted")
        t["attempts"].append({**acc, "status": draw(st.sampled_from(["rejected", "accepted"]))})
        detail = f"attempt id {acc['attempt_id']} twice"
    else:
        a = t["comparisons"][0]
        t["comparisons"][1]["comparison_id"] = a["comparison_id"]
        detail = f"comparison id {a['comparison_id']} twice"
    return _case(base, "duplicate-id", detail, edit, impossible=True)


@st.composite
def _dangling_id(draw: st.DrawFn, base: HostileBase) -> HostileCase:
    edit = base.edit()
    t = edit.tables
    what = draw(
        st.sampled_from(
            [
                "receipt-attempt",
                "comparison-request",
                "comparison-attempt",
                "worker-exit-attempt",
                "telemetry-attempt",
                "claim-attempt",
                "claim-server",
                "claim-metric",
                "attempts-missing",
            ]
        )
    )
    ghost = "ghost-" + draw(st.sampled_from(["1", "final-3", "x"]))
    if what == "receipt-attempt":
        _measured(edit)[draw(st.integers(0, 11))]["attempt_id"] = ghost
    elif what == "comparison-request":
        t["comparisons"][draw(st.integers(0, 13))][
            draw(st.sampled_from(["baseline_request_id", "candidate_request_id"]))
        ] = ghost
    elif what == "comparison-attempt":
        t["comparisons"][draw(st.integers(0, 13))]["attempt_id"] = ghost
    elif what == "worker-exit-attempt":
        t["worker_exits"][draw(st.integers(0, 31))]["attempt_id"] = ghost
    elif what == "telemetry-attempt":
        t["telemetry"][draw(st.integers(0, 63))]["attempt_id"] = ghost
    elif what == "attempts-missing":
        # The accepted attempt's row is gone; its receipts still name it.
        t["attempts"] = [a for a in t["attempts"] if a["status"] != "accepted"]
        ghost = _accepted(base.edit())
    else:
        key = {"claim-attempt": "attempt", "claim-server": "server", "claim-metric": "metric"}[what]
        stat = {
            "claim-attempt": "server_mean_s",
            "claim-server": "server_mean_s",
            "claim-metric": "metric_max",
        }[what]
        row = next(c for c in t["claims"] if c["statistic"] == stat)
        p = _params(row)
        p[key] = ghost
        _set_params(row, p)
    return _case(base, "dangling-id", f"{what} -> {ghost}", edit, impossible=True)


# --- name families -----------------------------------------------------------------------


def _rename_arm(edit: Edit, new: str) -> None:
    old = edit.campaign["arms"][1]["id"]
    edit.campaign["arms"][1]["id"] = new
    plan = edit.plan
    plan["arm_order"] = [new if a == old else a for a in plan["arm_order"]]
    for key in ("teardown", "launch"):
        if isinstance(plan.get(key), dict) and old in plan[key]:
            plan[key][new] = plan[key].pop(old)
    for name in ("receipts", "worker_exits", "telemetry"):
        for r in edit.tables[name]:
            if r["arm"] == old:
                r["arm"] = new
    for c in edit.tables["claims"]:
        p = _params(c)
        for k in ("arm", "baseline", "candidate"):
            if p.get(k) == old:
                p[k] = new
        _set_params(c, p)


def _rename_server(edit: Edit, new: str) -> None:
    old = _measured(edit)[-1]["server"]
    if isinstance(edit.plan.get("servers"), list):
        edit.plan["servers"] = [new if s == old else s for s in edit.plan["servers"]]
    for name in ("receipts", "worker_exits", "telemetry"):
        for r in edit.tables[name]:
            if r["server"] == old:
                r["server"] = new
    for c in edit.tables["claims"]:
        p = _params(c)
        if p.get("server") == old:
            p["server"] = new
            _set_params(c, p)


def _rename_attempt(edit: Edit, new: str) -> None:
    old = _accepted(edit)
    for name in ("attempts", "receipts", "worker_exits", "telemetry", "comparisons"):
        for r in edit.tables[name]:
            if r["attempt_id"] == old:
                r["attempt_id"] = new
    for c in edit.tables["claims"]:
        p = _params(c)
        if p.get("attempt") == old:
            p["attempt"] = new
            _set_params(c, p)


def _rename_metric(edit: Edit, new: str) -> None:
    # ssim: a gate that needs no attested scorer, so the rename changes only the name's text
    old = "ssim"
    for g in edit.tables["gates"]:
        if g["metric"] == old:
            g["metric"] = new
    for r in edit.tables["comparisons"]:
        r["metrics"] = [(new if k == old else k, v) for k, v in r["metrics"]]
    for c in edit.tables["claims"]:
        p = _params(c)
        if p.get("metric") == old:
            p["metric"] = new
            _set_params(c, p)


def _rename_plan_id(edit: Edit, new: str) -> None:
    edit.plan["id"] = new


def _rename_claim_id(edit: Edit, new: str) -> None:
    edit.tables["claims"][0]["claim_id"] = new


def _set_claim_text(edit: Edit, new: str) -> None:
    for c in edit.tables["claims"][:3]:
        c["text"] = new


def _set_title(edit: Edit, new: str) -> None:
    edit.campaign["title"] = new


_RENAMES: dict[str, Callable[[Edit, str], None]] = {
    "arm": _rename_arm,
    "server": _rename_server,
    "attempt": _rename_attempt,
    "plan-id": _rename_plan_id,
    "claim-id": _rename_claim_id,
    "claim-text": _set_claim_text,
    "gate-metric": _rename_metric,
    "title": _set_title,
}


def name_case(base: HostileBase, target: str, name: str, *, rerun: bool = False) -> HostileCase:
    """``base`` with the author string ``target`` (a key of the renames) set to ``name``."""
    edit = base.edit()
    _RENAMES[target](edit, name)
    family = f"{'rerun' if rerun else 'name'}-{target}"
    return _case(base, family, f"{target} = {name!r}", edit, impossible=False, rerun=rerun)


@st.composite
def _hostile_name(draw: st.DrawFn, base: HostileBase) -> HostileCase:
    target = draw(st.sampled_from(sorted(_RENAMES)))
    return name_case(base, target, draw(st.sampled_from(hostile_names(base.sentinel))))


# --- rerun families (reference server campaign) ------------------------------------------


INPUT_PATHS = ("absolute", "dotdot", "dotdot-inputs", "symlink")


@st.composite
def _rerun_input(draw: st.DrawFn, base: HostileBase) -> HostileCase:
    return input_case(base, draw(st.sampled_from(INPUT_PATHS)))


def input_case(base: HostileBase, how: str) -> HostileCase:
    """The reference plan's ``input_reference`` aimed at the sentinel's secret (``how``: one
    of :data:`INPUT_PATHS`)."""
    edit = base.edit()
    secret = base.sentinel / SECRET
    link = None
    ref = {
        "absolute": str(secret),
        "dotdot": f"../sentinel/{SECRET}",
        "dotdot-inputs": f"inputs/../../../sentinel/{SECRET}",
        "symlink": "inputs/link.png",
    }[how]
    if how == "symlink":
        link = ref
    edit.plan["request"]["payload"]["input_reference"] = ref
    # The bundle no longer carries the input: the rerun must look in --inputs (or refuse).
    edit.drop_files.add("files/inputs/reference.png")
    return _case(
        base, "rerun-input", f"input_reference {how}: {ref!r}", edit, impossible=False,
        rerun=True, inputs_link=link,
    )  # fmt: skip


@st.composite
def _rerun_names(draw: st.DrawFn, base: HostileBase) -> HostileCase:
    target = draw(st.sampled_from(["server", "attempt", "arm"]))
    name = draw(st.sampled_from(hostile_names(base.sentinel)))
    return name_case(base, target, name, rerun=True)


PLAN_COUNTS = (250_000, 10**8, 10**19)
"""Requests per server that put the reference plan's 4 positions past the bound on what
``bundle rerun`` schedules (``MAX_SCHEDULED_REQUESTS``, 1,000,000: 250,000 just past it,
10**8 far past it) or on what a plan may declare (``MAX_PLANNED_REQUESTS``,
10**9); 10**19 is the largest count the bounded JSON loader lets through (20 digits)."""


@st.composite
def _plan_counts(draw: st.DrawFn, base: HostileBase) -> HostileCase:
    # The plan schema bounds the counts from below only; before the bounds, rerun's
    # scheduler built one request object per planned request (10**8: 24 GB).
    key = draw(st.sampled_from(["warmups_per_server", "measured_per_server"]))
    count = draw(st.sampled_from(PLAN_COUNTS))
    edit = base.edit()
    edit.plan[key] = count
    return _case(base, "plan-counts", f"{key} = {count}", edit, impossible=False, rerun=True)


PLAN_POSITIONS = (1_001, 20_000)
"""Arm positions past the bound on a plan's ``arm_order`` (``MAX_ARM_POSITIONS``, 1,000:
1,001 just past it). Before the bound, the plan check of the reference plan, whose
reservation cannot hold a stuck request after the sixth position, named every later
server for each position: 20,000 positions held some 200 million names."""


@st.composite
def _plan_positions(draw: st.DrawFn, base: HostileBase) -> HostileCase:
    # Only the plan member's size bounded arm_order; each position keeps one server name
    # (the reference plan lists them), so the plan stays well-formed but for its length.
    n = draw(st.sampled_from(PLAN_POSITIONS))
    edit = base.edit()
    order = list(edit.plan["arm_order"])
    edit.plan["arm_order"] = [order[i % len(order)] for i in range(n)]
    edit.plan["servers"] = [f"{arm}-{i + 1}" for i, arm in enumerate(edit.plan["arm_order"])]
    return _case(base, "plan-positions", f"{n:,} arm positions", edit, impossible=False, rerun=True)


FAMILIES: dict[str, tuple[str, Family]] = {
    "nonfinite": ("data", _nonfinite),
    "negative": ("data", _negative),
    "huge": ("data", _huge),
    "over-precise": ("data", _over_precise),
    "decimals": ("data", _decimals),
    "end-before-start": ("data", _end_before_start),
    "unit-mismatch": ("data", _unit_mismatch),
    "duplicate-id": ("data", _duplicate_id),
    "dangling-id": ("data", _dangling_id),
    "names": ("data", _hostile_name),
    "rerun-input": ("rerun", _rerun_input),
    "rerun-names": ("rerun", _rerun_names),
    "plan-counts": ("rerun", _plan_counts),
    "plan-positions": ("rerun", _plan_positions),
}
"""Family name -> (which base it edits: ``data`` or ``rerun``, its strategy)."""
