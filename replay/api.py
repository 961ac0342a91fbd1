"""``replay_bundle``: verify a bundle, then re-derive every statistic, verdict and claim.

Integrity comes first: a bundle with any integrity problem is refused, and an
unsigned or untrusted one too unless ``allow_unsigned`` (then every section of
the result says so). The rest is the pure core :func:`replay_inputs`, which
works on Arrow tables and documents and never touches a file.
"""

from __future__ import annotations

import io
import platform
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from bundler import __version__
from bundler.container import Limits
from bundler.errors import IntegrityError
from bundler.tables import TABLE_NAMES, arrow_schema
from bundler.verify import OpenedBundle, open_bundle
from replay.attempts import Window, check_attempts, windows
from replay.attempts import accepted_attempt as find_accepted
from replay.claims import check_claims
from replay.conformance import check_conformance
from replay.inputs import CODED_COLUMNS, RECEIPT_COLUMNS, ReplayInputs
from replay.result import Integrity, ReplayResult
from replay.stats import StatsCache

__all__ = ["inputs_from_bundle", "integrity_of", "replay_bundle", "replay_inputs"]

_COMPARED_ENVIRONMENT = ("reprobundle", "python", "pyarrow")


def _environment_now() -> dict[str, str]:
    """The compared keys of ``bundler.seal.environment()``, without importing the sealer.

    Importing ``bundler.seal`` pulls in campaign validation (jsonschema): 0.4 s that
    replay never needs.
    """
    return {
        "reprobundle": __version__,
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
    }


def inputs_from_bundle(opened: OpenedBundle) -> ReplayInputs:
    """Documents and tables of an opened (and already checked) bundle."""
    campaign = opened.document("campaign.json") or {}
    plan_path = campaign.get("plan")
    plan = opened.document(plan_path) if isinstance(plan_path, str) else None
    tables = {name: _table(opened, name) for name in TABLE_NAMES}
    return ReplayInputs(
        campaign=campaign,
        plan=plan,
        plan_path=plan_path if plan is not None else None,
        scorer=opened.document("scorer.json"),
        tables=tables,
    )


def _table(opened: OpenedBundle, name: str) -> pa.Table:
    member = opened.members.get(f"tables/{name}.parquet")
    if member is None:
        return arrow_schema(name).empty_table()
    if name != "receipts":
        return opened.table(name)
    # Receipts are the big table: read only the columns replay uses, and the
    # repeated strings straight as dictionaries (Parquet stores them so).
    return pq.read_table(
        io.BytesIO(member.data), columns=list(RECEIPT_COLUMNS), read_dictionary=list(CODED_COLUMNS)
    )


def integrity_of(opened: OpenedBundle) -> Integrity:
    """What the integrity check of ``opened`` established (signature, members, environment)."""
    rep = opened.report
    manifest = opened.manifest or {}
    recorded = manifest.get("environment", {})
    now = _environment_now()
    return Integrity(
        signature_status=rep.signature_status,
        verified_by=tuple(s.verified_by for s in rep.signatures if s.valid and s.verified_by),
        format_version=rep.format_version,
        members=len(manifest.get("members", [])),
        external=len(manifest.get("external", [])),
        environment={k: str(recorded.get(k)) for k in _COMPARED_ENVIRONMENT if k in recorded},
        environment_now={k: now[k] for k in _COMPARED_ENVIRONMENT},
    )


def replay_inputs(inputs: ReplayInputs, integrity: Integrity, bundle: str = "") -> ReplayResult:
    """Re-derive every section and check every claim from already-verified inputs.

    Raises:
        CouldNotRunError: the tables have no single accepted attempt.
    """
    accepted = find_accepted(inputs)
    cache = StatsCache(inputs)
    stats = cache.get(accepted)
    attempt_rows = inputs.rows("attempts", ["attempt_id", "plan"])
    attempt_plan = next((a["plan"] for a in attempt_rows if a["attempt_id"] == accepted), None)
    return ReplayResult(
        bundle=bundle,
        campaign={k: inputs.campaign.get(k) for k in ("id", "title", "kind", "arms", "plan")},
        integrity=integrity,
        attempts=check_attempts(inputs, accepted),
        conformance=check_conformance(
            inputs, accepted, windows(inputs).get(accepted, Window(None, None)), attempt_plan
        ),
        latency=stats.latency,
        lifecycle=stats.lifecycle,
        telemetry=stats.telemetry,
        quality=stats.quality,
        claims=check_claims(inputs, cache, accepted),
    )


def replay_bundle(
    path: Path | str,
    trusted: Sequence[Ed25519PublicKey] = (),
    allow_unsigned: bool = False,
    limits: Limits | None = None,
) -> ReplayResult:
    """Verify the bundle at ``path``, then replay it.

    Args:
        path: the bundle file.
        trusted: public keys whose signature makes the bundle trusted.
        allow_unsigned: replay a bundle no trusted key signed; every section then says
            UNSIGNED/UNTRUSTED.
        limits: container reading bounds (defaults: ``bundler.container.Limits()``).

    Returns:
        The structured result; ``.exit_code`` is 0, 4 or 5.

    Raises:
        IntegrityError: tampered, malformed, or (without ``allow_unsigned``) not signed
            by a trusted key.
        CouldNotRunError: the bundle holds no single accepted attempt.
        OSError: the file cannot be read.
    """
    opened = open_bundle(Path(path), trusted=trusted, allow_unsigned=allow_unsigned, limits=limits)
    rep = opened.report
    if rep.problems:
        raise IntegrityError(
            f"{path}: does not verify ({len(rep.problems)} problem(s)); nothing replayed",
            rep.problems,
        )
    if rep.signature_status != "verified" and not allow_unsigned:
        raise IntegrityError(
            f"{path}: signature {rep.signature_status}: no trusted key verified it; "
            "give the signer's public key (--key) or --allow-unsigned; nothing replayed"
        )
    return replay_inputs(inputs_from_bundle(opened), integrity_of(opened), bundle=str(path))
