"""Regenerate the test vectors in this folder from fixed inputs.

Run: ``python -m tests.vectors.make_vectors [OUT_DIR]`` (default: this folder).

Positive: ``mini.bundle``, the mini campaign of ``tests/campaign_builder.py``
sealed with a fixed Ed25519 key (seed bytes 0..31; Ed25519 signatures are
deterministic), and ``mini.pub``; ``extra.bundle``, the same campaign whose
receipts carry fields beyond the schema (kept in ``extra``) and nulls
(:func:`extra_receipts`), sealed column-wise (``tests/test_vectors.py`` checks
the per-row path writes the same bytes). Negative vectors, each named for what it
breaks, are derived from it: a ``../`` member, a truncated file, a changed
table row with the manifest left alone, an unknown format version, and a key
that did not sign it. ``environment.json`` records the library versions the
bytes depend on (Parquet's ``created_by`` and zstd's output are stable only
within one version).
"""

from __future__ import annotations

import io
import json
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
import zstandard
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bundler._internal import jcs
from bundler.format.container import read_container, write_container
from bundler.seal import PARQUET_OPTIONS, environment, seal_campaign
from tests.campaign_builder import receipts, write_campaign

HERE = Path(__file__).parent
AUTHOR_SEED = bytes(range(32))
STRANGER_SEED = bytes(range(32, 64))


def _pub_pem(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _rewrite(src: bytes, change: dict[str, bytes], out: Path) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "src.bundle"
        p.write_bytes(src)
        members = [(m.name, change.get(m.name, m.data)) for m in read_container(p)]
    with out.open("wb") as fh:
        write_container(fh, members)


def extra_receipts() -> list[dict[str, Any]]:
    """The mini receipts with unknown fields of every scalar type, absent, present and null,
    a secret-named one, a scrubbed address, and nulls in the nullable schema fields."""
    rows = receipts()
    for i, r in enumerate(rows):
        r["prompt_id"] = f"p{i % 4}"
        r["http_status"] = None if i % 3 == 0 else 200
        r["error"] = None if i % 2 else ""
        if i % 2:
            r["npu.clock_mhz"] = None if i % 4 == 1 else 1800 + i
            r["ratio"] = [0.5, 1.5e-7, -0.0, 3.0, 2.0**52][i % 5]
        if i % 3 == 0:
            r["warm"] = i % 2 == 0
            r["note"] = None if i % 6 else f'retry "{i}" \\ via 10.1.2.{i} caf\u00e9'
        r["api_token"] = "tok-" + str(i) if i % 5 == 0 else None
    return rows


def make(out: Path) -> None:
    """Write every vector into ``out``."""
    (out / "negative").mkdir(parents=True, exist_ok=True)
    author = Ed25519PrivateKey.from_private_bytes(AUTHOR_SEED)
    stranger = Ed25519PrivateKey.from_private_bytes(STRANGER_SEED)
    with tempfile.TemporaryDirectory() as d:
        camp = write_campaign(Path(d) / "mini")
        seal_campaign(camp, out / "mini.bundle", keys=[author], force=True)
        extra = write_campaign(Path(d) / "extra", **{"receipts.jsonl": extra_receipts()})
        seal_campaign(extra, out / "extra.bundle", keys=[author], force=True)
    (out / "mini.pub").write_bytes(_pub_pem(author))
    (out / "negative" / "wrong-key.pub").write_bytes(_pub_pem(stranger))
    good = (out / "mini.bundle").read_bytes()
    members = {}
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.bundle"
        p.write_bytes(good)
        members = {m.name: m.data for m in read_container(p)}

    # A receipt's e2e_s changed after sealing; the manifest still lists the old digest.
    table = pq.read_table(io.BytesIO(members["tables/receipts.parquet"]))
    e2e = table.column("e2e_s")
    table = table.set_column(table.schema.get_field_index("e2e_s"), "e2e_s", pc.multiply(e2e, 0.5))
    buf = io.BytesIO()
    pq.write_table(table, buf, **PARQUET_OPTIONS)
    _rewrite(
        good, {"tables/receipts.parquet": buf.getvalue()}, out / "negative" / "tampered-row.bundle"
    )

    manifest = json.loads(members["manifest.json"])
    manifest["format_version"] = "2"
    _rewrite(
        good,
        {"manifest.json": jcs.dumps(manifest)},
        out / "negative" / "unknown-format-version.bundle",
    )

    (out / "negative" / "truncated.bundle").write_bytes(good[: len(good) // 2])

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in [
            ("manifest.json", members["manifest.json"]),
            ("../escape.sh", b"echo pwned\n"),
        ]:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mtime = 0
            tar.addfile(ti, io.BytesIO(data))
    (out / "negative" / "dotdot-member.bundle").write_bytes(
        zstandard.ZstdCompressor(level=3).compress(raw.getvalue())
    )
    env = environment()
    (out / "environment.json").write_text(json.dumps(env, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    make(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
