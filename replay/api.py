"""``replay``: re-derive every statistic, verdict and claim of a verified bundle, once.

Integrity comes first and exists in one place: :func:`bundler.verified.open_verified`
makes the :class:`~bundler.verified.VerifiedBundle` every entry point here takes
(a bundle with any integrity problem is refused, and an unsigned or untrusted
one too unless the caller allows it; then every section of the result says so).
:func:`replay` adds, when asked, the media re-score and the rerun comparison, and
returns the one :class:`~replay.result.ReplayResult` whose outcome every view
renders. The statistical core :func:`replay_inputs` works on Arrow tables and
documents and never touches a file.
"""

from __future__ import annotations

import io
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from bundler import __version__
from bundler.errors import BundleFormatError, Problem
from bundler.format.container import Limits
from bundler.format.contract import check_bundle_tables
from bundler.format.tables import TABLE_NAMES, arrow_schema
from bundler.verified import VerifiedBundle, open_verified
from bundler.verify import OpenedBundle
from replay.engine.limits import check_content_limits
from replay.inputs import CODED_COLUMNS, RECEIPT_COLUMNS, ReplayInputs
from replay.result import Integrity, ReplayResult
from replay.sections.attempts import Window, check_attempts, windows
from replay.sections.attempts import accepted_attempt as find_accepted
from replay.sections.claims import ClaimsResult, check_claims, contradict_by_media
from replay.sections.conformance import check_conformance
from replay.sections.stats import StatsCache
from replay.serving.inputs import load_serving
from replay.serving.summary import summarize

__all__ = [
    "MediaRequest",
    "inputs_from_bundle",
    "integrity_of",
    "replay",
    "replay_bundle",
    "replay_inputs",
]

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


@dataclass(frozen=True)
class MediaRequest:
    """What re-scoring the raw media needs (``--media``): see ``replay.media.rescore_bundle``."""

    media_dirs: Sequence[Path]
    weights_dir: Path | None = None
    jobs: int = 1
    device: str | None = "cpu"
    """None: cpu locally, a GPU on a Ray cluster that has one."""
    progress: Callable[[Any], None] | None = None
    executor: str = "local"
    """``local`` (threads here) or ``ray`` (one task per comparison)."""
    ray_address: str | None = None
    lpips_batch: int | None = None


def inputs_from_bundle(bundle: VerifiedBundle | OpenedBundle) -> ReplayInputs:
    """Documents and tables of a verified bundle.

    Raises:
        BundleFormatError: a document is not a JSON object, or the plan the campaign
            names is a table or absent (possible only in a bundle sealed by another tool,
            accepted unsigned); or the content is over replay's limits
            (:func:`replay.engine.limits.check_content_limits`); or a table breaks the
            contract seal enforces (:func:`bundler.format.contract.check_bundle_tables`), each
            problem located by member, row and field. A signature vouches for who
            sealed, not for sanity.
    """
    document = bundle.document if isinstance(bundle, VerifiedBundle) else _opened_document(bundle)
    campaign = document("campaign.json") or {}
    plan_path = campaign.get("plan")
    plan = document(plan_path) if isinstance(plan_path, str) else None
    opened = bundle.opened if isinstance(bundle, VerifiedBundle) else bundle
    check_content_limits(opened.members, campaign, bundle=str(opened.report.path))
    tables = {name: _table(opened, name) for name in TABLE_NAMES}
    _check_contract(opened, campaign, tables)
    return ReplayInputs(
        campaign=campaign,
        plan=plan,
        plan_path=plan_path if plan is not None else None,
        scorer=document("scorer.json"),
        tables=tables,
        serving=load_serving(lambda name: _member_bytes(opened, name)),
    )


def _check_contract(
    opened: OpenedBundle, campaign: dict[str, Any], tables: dict[str, pa.Table]
) -> None:
    """Refuse tables that seal would have refused, before any statistic is computed."""
    problems = check_bundle_tables(campaign, tables)
    if problems:
        raise BundleFormatError(
            f"{opened.report.path}: {len(problems)} table problem(s): the tables break the "
            "contract seal enforces; refused",
            problems,
        )


def _member_bytes(opened: OpenedBundle, name: str) -> bytes | None:
    m = opened.members.get(name)
    return None if m is None else m.data


def _opened_document(opened: OpenedBundle) -> Callable[[str], dict[str, Any] | None]:
    def document(name: str) -> dict[str, Any] | None:
        try:
            doc = opened.document(name)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise BundleFormatError(
                f"member {name!r} is not JSON", [Problem(name, None, None, str(exc))]
            ) from exc
        if doc is not None and not isinstance(doc, dict):
            raise BundleFormatError(
                f"member {name!r} is not a JSON object",
                [Problem(name, None, None, "expected a JSON object")],
            )
        return doc

    return document


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


def integrity_of(bundle: VerifiedBundle | OpenedBundle) -> Integrity:
    """What the integrity check of ``bundle`` established (signature, members, environment)."""
    rep = bundle.report
    manifest = bundle.manifest
    recorded = manifest.environment if manifest else {}
    now = _environment_now()
    return Integrity(
        signature_status=rep.signature_status,
        verified_by=tuple(s.verified_by for s in rep.signatures if s.valid and s.verified_by),
        format_version=rep.format_version,
        members=len(manifest.members) if manifest else 0,
        external=len(manifest.external) if manifest else 0,
        environment={k: recorded[k] for k in _COMPARED_ENVIRONMENT if k in recorded},
        environment_now={k: now[k] for k in _COMPARED_ENVIRONMENT},
    )


def replay_inputs(inputs: ReplayInputs, integrity: Integrity, bundle: str = "") -> ReplayResult:
    """Re-derive every section and check every claim from already-verified inputs.

    Raises:
        CouldNotRunError: the tables have no single accepted attempt.
    """
    accepted = find_accepted(inputs)
    serving = summarize(inputs.serving)
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
        serving=serving,
    )


def replay(
    bundle: VerifiedBundle,
    *,
    media: MediaRequest | None = None,
    against: VerifiedBundle | None = None,
    tolerance: float | None = None,
) -> ReplayResult:
    """Replay a verified bundle; with ``media`` re-score its raw media, with ``against``
    compare it (a rerun) with the sealed bundle it reran. One result, one verdict.

    Raises:
        UsageError: ``against`` is not the sealed bundle that ``bundle`` is a rerun of
            (:func:`replay.sections.against.check_rerun_pair`).
        CouldNotRunError: the tables have no single accepted attempt.
        BundleFormatError: a document of an unsigned bundle is malformed.
        replay.media.DeviceError: ``media.device`` is not available.
    """
    if against is not None:
        # Before any work: a pair that is not a rerun of the sealed bundle is refused.
        from replay.sections.against import check_rerun_pair

        check_rerun_pair(bundle, against)
    result = replay_inputs(
        inputs_from_bundle(bundle), integrity_of(bundle), bundle=str(bundle.path)
    )
    rescored = None
    if media is not None:
        from replay.media import rescore_bundle

        rescored = rescore_bundle(
            bundle,
            list(media.media_dirs),
            weights_dir=media.weights_dir,
            jobs=media.jobs,
            device=media.device,
            progress=media.progress,
            executor=media.executor,
            ray_address=media.ray_address,
            lpips_batch=media.lpips_batch,
        )
    comparison = None
    if against is not None:
        from replay.sections.against import DEFAULT_TOLERANCE, compare_bundles

        tol = DEFAULT_TOLERANCE if tolerance is None else tolerance
        comparison = compare_bundles(bundle, against, tolerance=tol)
    claims: ClaimsResult = result.claims
    if rescored is not None:
        claims = contradict_by_media(claims, rescored)
    return replace(result, claims=claims, media=rescored, against=comparison)


def replay_bundle(
    path: Path | str,
    trusted: Sequence[Ed25519PublicKey] = (),
    allow_unsigned: bool = False,
    limits: Limits | None = None,
) -> ReplayResult:
    """Verify the bundle at ``path``, then replay it (statistics only).

    Args:
        path: the bundle file.
        trusted: public keys whose signature makes the bundle trusted.
        allow_unsigned: replay a bundle no trusted key signed; every section then says
            UNSIGNED/UNTRUSTED.
        limits: container reading bounds (defaults: ``bundler.format.container.Limits()``).

    Returns:
        The structured result; ``.exit_code`` is 0, 4 or 5.

    Raises:
        IntegrityError: tampered, malformed, or (without ``allow_unsigned``) not signed
            by a trusted key.
        CouldNotRunError: the bundle holds no single accepted attempt.
        OSError: the file cannot be read.
    """
    verified = open_verified(path, trusted=trusted, allow_unsigned=allow_unsigned, limits=limits)
    return replay(verified)
