"""Signed bundles whose *content* is hostile: tables and documents written straight with pyarrow.

A signature says who sealed a bundle, not that its content is sane. Each
builder here starts from the mini campaign sealed by ``bundle seal``
(``tests/campaign_builder.py``), replaces some members (tables written with
``bundler.format.tables.arrow_schema`` and the sealer's Parquet options,
``campaign.json`` edited), rebuilds the manifest and the in-toto statement over
the new members and signs them with the given key: ``bundle verify`` accepts
the result, so only replay's own bounds stand between it and the content.

Used by ``tests/test_replay_limits.py`` and ``bench/replay_amplification.py``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bundler._internal import jcs
from bundler.format.container import read_container
from bundler.format.tables import arrow_schema
from bundler.seal import parquet_bytes, seal_campaign
from tests.campaign_builder import BASELINE_COMMIT, CANDIDATE_COMMIT, write_campaign
from tests.resign import resign

__all__ = [
    "HOSTILE",
    "hostile_bundle",
    "many_arms",
    "many_claims",
    "many_gates",
    "many_receipts",
    "table_bytes",
]

_T0_NS = 1_772_359_200_000_000_000  # 2026-03-01T10:00:00Z


def table_bytes(name: str, columns: Mapping[str, Any]) -> bytes:
    """Parquet bytes of table ``name``: ``columns`` given, every other column null."""
    schema = arrow_schema(name)
    n = len(next(iter(columns.values())))
    arrays = [
        pa.array(columns[f.name], type=f.type) if f.name in columns else pa.nulls(n, f.type)
        for f in schema
    ]
    return parquet_bytes(pa.Table.from_arrays(arrays, schema=schema))


def hostile_bundle(
    out: Path,
    key: Ed25519PrivateKey,
    replace: Mapping[str, bytes],
    campaign_edit: Callable[[dict[str, Any]], None] | None = None,
    extra_files: Mapping[str, bytes] | None = None,
) -> Path:
    """The sealed mini campaign with ``replace`` members swapped in, re-signed by ``key``.

    ``extra_files`` are written into the campaign directory before it is sealed.
    """
    with tempfile.TemporaryDirectory() as d:
        base = Path(d) / "base.bundle"
        camp = write_campaign(Path(d) / "c")
        for name, data in (extra_files or {}).items():
            (camp / name).write_bytes(data)
        seal_campaign(camp, base, keys=[key])
        members = {m.name: m.data for m in read_container(base)}
    if campaign_edit is not None:
        doc = json.loads(members["campaign.json"])
        campaign_edit(doc)
        members["campaign.json"] = json.dumps(doc, indent=1).encode()
    members.update(replace)
    out.write_bytes(resign(members, [key]))
    return out


def many_arms(out: Path, key: Ed25519PrivateKey, arms: int = 50_000) -> Path:
    """``arms`` arms (half baseline), each on a server of its own, one measured request each.

    The issue's case: a small file whose arms x servers grid is 2.5e9 cells, and whose
    baseline x candidate pairs number 625 million.
    """
    # The first two keep the mini campaign's arm ids, which its claims name: the table
    # contract would otherwise refuse the bundle before the limits are reached.
    ids = ["baseline", "candidate", *(f"a{i}" for i in range(2, arms))]

    def edit(doc: dict[str, Any]) -> None:
        doc["arms"] = [
            {
                "id": a,
                "role": "baseline" if i % 2 == 0 else "candidate",
                "runtime_commit": BASELINE_COMMIT if i % 2 == 0 else CANDIDATE_COMMIT,
            }
            for i, a in enumerate(ids)
        ]

    receipts = table_bytes(
        "receipts",
        {
            "request_id": [f"r{i}" for i in range(arms)],
            "attempt_id": ["a2"] * arms,
            "arm": ids,
            "server": [f"s{i}" for i in range(arms)],
            "phase": ["measured"] * arms,
            "seq": list(range(arms)),
            "start": [_T0_NS + i for i in range(arms)],
            "end": [_T0_NS + i + 10**9 for i in range(arms)],
            "e2e_s": [1.0 + (i % 7) for i in range(arms)],
            "status": ["ok"] * arms,
        },
    )
    return hostile_bundle(out, key, {"tables/receipts.parquet": receipts}, edit)


def many_claims(out: Path, key: Ed25519PrivateKey, claims: int = 1_000_000) -> Path:
    """``claims`` copies of the mini campaign's percent-lower claim."""
    params = jcs.dumps({"baseline": "baseline", "candidate": "candidate"}).decode()
    data = table_bytes(
        "claims",
        {
            "claim_id": [f"c{i}" for i in range(claims)],
            "statistic": ["percent_lower"] * claims,
            "params": [params] * claims,
            "value": ["60.00"] * claims,
            "unit": ["%"] * claims,
            "decimals": [2] * claims,
        },
    )
    return hostile_bundle(out, key, {"tables/claims.parquet": data})


def many_gates(out: Path, key: Ed25519PrivateKey, gates: int = 1_000_000) -> Path:
    """``gates`` quality gates on one metric."""
    data = table_bytes(
        "gates",
        {
            "gate_id": [f"g{i}" for i in range(gates)],
            "metric": ["lpips"] * gates,
            "op": ["<="] * gates,
            "threshold": [0.1] * gates,
            "definition": ["lpips of candidate vs baseline"] * gates,
        },
    )
    return hostile_bundle(out, key, {"tables/gates.parquet": data})


def many_receipts(out: Path, key: Ed25519PrivateKey, rows: int = 1_000_000) -> Path:
    """``rows`` measured requests of the mini campaign's two arms on four servers each."""
    server = [i % 8 for i in range(rows)]
    receipts = table_bytes(
        "receipts",
        {
            "request_id": [f"r{i}" for i in range(rows)],
            "attempt_id": ["a2"] * rows,
            "arm": ["baseline" if s < 4 else "candidate" for s in server],
            "server": [f"s{s}" for s in server],
            "phase": ["measured"] * rows,
            "seq": list(range(rows)),
            "start": [_T0_NS + i for i in range(rows)],
            "end": [_T0_NS + i + 10**9 for i in range(rows)],
            "e2e_s": [1.0 + (i % 7) / 8 for i in range(rows)],
            "status": ["ok"] * rows,
        },
    )
    return hostile_bundle(out, key, {"tables/receipts.parquet": receipts})


HOSTILE: dict[str, Callable[[Path, Ed25519PrivateKey, int], Path]] = {
    "arms": many_arms,
    "claims": many_claims,
    "gates": many_gates,
    "receipts": many_receipts,
}
