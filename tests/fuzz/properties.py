"""The properties every mutant must satisfy, shared by the fuzz tests and ``bench/fuzz_long.py``.

Each check returns an outcome instead of raising, so the long run can count
failures and go on; the tests assert on the outcome.

* ``check_verify``: the library's ``check_bundle`` (with the author's key, and
  with ``allow_unsigned``) and ``open_verified`` raise nothing but the
  project's typed errors (:class:`~bundler.errors.BundleError`); and whenever
  the author's key verified the mutant with no problem, every member's
  decompressed bytes and every decoded table equal the original's.
* ``check_cli_verify``: ``bundle verify --json`` exits with a documented code
  (0, 1, 2, 3; ``docs/exit-codes.md``), prints one JSON document and no
  traceback; exit 0 only for content equal to the original.
* ``check_seal``: a mutated campaign either seals (and the bundle verifies with
  the key) or fails with a typed error whose problems are located (each names
  a file) — never a traceback.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
from cryptography.hazmat.primitives import serialization

from bundler.container import read_container
from bundler.dsse import parse_envelope
from bundler.errors import BundleError
from bundler.manifest import ENVELOPE_NAME
from bundler.seal import seal_campaign
from bundler.tables import TABLE_NAMES
from bundler.verified import open_verified
from bundler.verify import check_bundle
from tests.fuzz.strategies import Base, CampaignMutant

__all__ = [
    "DOCUMENTED_EXIT_CODES",
    "Outcome",
    "check_cli_verify",
    "check_seal",
    "check_verify",
    "write_public_key",
]

DOCUMENTED_EXIT_CODES = frozenset({0, 1, 2, 3})  # bundle verify's codes, docs/exit-codes.md


@dataclass
class Outcome:
    """What one case did: accepted with the trusted key, and any property violation."""

    kind: str
    accepted: bool = False
    traceback: str | None = None  # an exception outside the project's error tree
    content_change: str | None = None  # accepted although some content differs
    unlocated: str | None = None  # seal refused without naming where

    @property
    def failed(self) -> bool:
        """True when any property was violated."""
        return bool(self.traceback or self.content_change or self.unlocated)


def _content_difference(base: Base, path: Path) -> str | None:
    """None when every member and decoded table equals the original; else what differs."""
    got = {m.name: m.read_bytes() for m in read_container(path)}
    want = base.content
    if set(got) != set(want):
        return f"member names differ: {sorted(set(got) ^ set(want))}"
    for name, data in want.items():
        if name == ENVELOPE_NAME:
            # The envelope's signature list and JSON spelling are not signed (DSSE: anyone
            # may add a signature); what is signed is the payload and its type.
            new, old = parse_envelope(got[name]), parse_envelope(data)
            if (new.payload, new.payload_type) != (old.payload, old.payload_type):
                return "signed payload differs"
        elif got[name] != data:
            return f"member {name} differs"
    vb = open_verified(path, trusted=[base.trusted])
    for name, table in base.tables.items():
        short = name.removeprefix("tables/").removesuffix(".parquet")
        if not vb.table(short).equals(table):
            return f"decoded table {name} differs"
        if not pq.read_table(io.BytesIO(got[name]), use_threads=False).equals(table):
            return f"decoded table {name} differs"
    return None


def check_verify(base: Base, kind: str, data: bytes, workdir: Path) -> Outcome:
    """Verify ``data`` (written under ``workdir``) through the library; see the module doc."""
    out = Outcome(kind)
    path = workdir / "mutant.bundle"
    path.write_bytes(data)
    try:
        rep = check_bundle(path, trusted=[base.trusted])
        out.accepted = rep.ok and rep.signature_status == "verified"
        check_bundle(path, allow_unsigned=True)
        try:
            vb = open_verified(path, allow_unsigned=True)
            for name in ("campaign.json", "scorer.json"):
                vb.document(name)
            for name in TABLE_NAMES:
                vb.table(name)
        except BundleError:
            pass
        if out.accepted:
            out.content_change = _content_difference(base, path)
    except BundleError as exc:
        # check_bundle reports problems, it does not raise them: a raise is a defect too.
        out.traceback = f"check_bundle raised {type(exc).__name__}: {exc}"
    except Exception:  # the property under test: nothing else escapes
        out.traceback = traceback.format_exc()
    return out


def write_public_key(base: Base, workdir: Path) -> Path:
    """The author's public key as a PEM file under ``workdir``."""
    pub = workdir / "author.pub"
    pub.write_bytes(
        base.trusted.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pub


def check_cli_verify(base: Base, kind: str, data: bytes, workdir: Path) -> Outcome:
    """Run ``bundle verify --json`` on ``data`` in a child process; see the module doc."""
    out = Outcome(kind)
    path = workdir / "mutant.bundle"
    path.write_bytes(data)
    pub = write_public_key(base, workdir)
    proc = subprocess.run(
        [sys.executable, "-m", "reprobundle.cli", "verify", str(path), "--key", str(pub), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )
    if proc.returncode not in DOCUMENTED_EXIT_CODES or "Traceback" in proc.stderr + proc.stdout:
        out.traceback = f"exit {proc.returncode}\n{proc.stderr[-2000:]}"
        return out
    try:
        json.loads(proc.stdout)
    except json.JSONDecodeError:
        out.traceback = f"exit {proc.returncode}: stdout is not one JSON document"
        return out
    out.accepted = proc.returncode == 0
    if out.accepted:
        try:
            out.content_change = _content_difference(base, path)
        except BundleError as exc:
            out.content_change = f"CLI accepted what the library refuses: {exc}"
    return out


def check_seal(base: Base, mutant: CampaignMutant, workdir: Path) -> Outcome:
    """Seal ``mutant`` under ``workdir``; see the module doc."""
    out = Outcome(mutant.kind)
    with tempfile.TemporaryDirectory(dir=workdir) as d:
        root = Path(d) / "c"
        for rel, data in mutant.files.items():
            if data is None:
                continue
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        dest = Path(d) / "out.bundle"
        try:
            seal_campaign(root, dest, keys=[base.author])
        except BundleError as exc:
            if dest.exists():
                out.traceback = "seal failed but left an output file"
            elif not exc.problems or any(not p.where for p in exc.problems):
                out.unlocated = str(exc)
            return out
        except Exception:
            out.traceback = traceback.format_exc()
            return out
        try:
            rep = check_bundle(dest, trusted=[base.trusted])
        except Exception:
            out.traceback = traceback.format_exc()
            return out
        out.accepted = True
        if not rep.ok:
            out.traceback = f"sealed a bundle that does not verify: {rep.problems[:3]}"
    return out
