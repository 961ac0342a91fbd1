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

import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from bundler import version
from bundler.format.container import Limits
from bundler.format.trust import NO_TRUST, Trust
from bundler.verified import VerifiedBundle, open_verified
from replay.inputs import ReplayInputs
from replay.result import Integrity, ReplayResult
from replay.sections.against import (
    DEFAULT_TOLERANCE,
    RerunComparison,
    SideInputs,
    check_rerun_pair,
    compare,
)
from replay.sections.attempts import Window, check_attempts, windows
from replay.sections.attempts import accepted_attempt as find_accepted
from replay.sections.claims import ClaimsResult, check_claims, contradict_by_media
from replay.sections.conformance import check_conformance
from replay.sections.stats import StatsCache
from replay.serving.inputs import parse_standby
from replay.serving.summary import compare as compare_serving
from replay.serving.summary import summarize

__all__ = [
    "MediaRequest",
    "compare_bundles",
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
        "reprobundle": version(),
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


def integrity_of(bundle: VerifiedBundle) -> Integrity:
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
    return _derive(inputs, integrity, bundle)[0]


def _derive(
    inputs: ReplayInputs, integrity: Integrity, bundle: str
) -> tuple[ReplayResult, StatsCache]:
    """The result, and the engine's cache it filled (the rerun comparison reuses it)."""
    accepted = find_accepted(inputs)
    serving = summarize(inputs.serving)
    cache = StatsCache(inputs)
    stats = cache.get(accepted)
    attempt_rows = inputs.rows("attempts", ["attempt_id", "plan"])
    attempt_plan = next((a["plan"] for a in attempt_rows if a["attempt_id"] == accepted), None)
    result = ReplayResult(
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
        serving_changes=compare_serving(
            inputs.serving,
            inputs.arms_with_role("baseline"),
            inputs.arms_with_role("candidate"),
        ),
        serving_campaign=inputs.serving is not None,
        inputs=inputs,
    )
    return result, cache


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
        check_rerun_pair(bundle, against)
    # Each bundle is decoded once; every section, the comparison and the report read that.
    inputs = ReplayInputs.from_bundle(bundle, outcomes=against is not None)
    result, cache = _derive(inputs, integrity_of(bundle), str(bundle.path))
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
        tol = DEFAULT_TOLERANCE if tolerance is None else tolerance
        sealed = ReplayInputs.from_bundle(against, outcomes=True)
        comparison = compare(
            SideInputs(inputs, cache, bundle.trusted),
            SideInputs(sealed, StatsCache(sealed), against.trusted),
            tolerance=tol,
        )
    claims: ClaimsResult = result.claims
    if rescored is not None:
        claims = contradict_by_media(claims, rescored)
    return replace(result, claims=claims, media=rescored, against=comparison)


def compare_bundles(
    rerun: VerifiedBundle, sealed: VerifiedBundle, *, tolerance: float = DEFAULT_TOLERANCE
) -> RerunComparison:
    """Compare a rerun bundle with the sealed bundle it reran (the ``--against`` section
    alone), each decoded once: see :func:`replay.sections.against.compare`.

    Raises:
        ValueError: ``tolerance`` is negative or not finite.
        BundleFormatError: a document or table of either bundle is malformed.
    """
    r, s = (ReplayInputs.from_bundle(b, outcomes=True) for b in (rerun, sealed))
    return compare(
        SideInputs(r, StatsCache(r), rerun.trusted),
        SideInputs(s, StatsCache(s), sealed.trusted),
        tolerance=tolerance,
    )


def replay_bundle(
    path: Path | str,
    trust: Trust = NO_TRUST,
    limits: Limits | None = None,
) -> ReplayResult:
    """Verify the bundle at ``path``, then replay it (statistics only).

    Args:
        path: the bundle file.
        trust: the keys whose signature makes the bundle trusted; when it accepts
            unsigned bundles, one no trusted key signed is replayed and every section
            says UNSIGNED/UNTRUSTED.
        limits: container reading bounds (defaults: ``bundler.format.container.Limits()``).

    Returns:
        The structured result; ``.exit_code`` is 0, 4 or 5.

    Raises:
        IntegrityError: tampered, malformed, or not signed by a trusted key (unless
            ``trust`` accepts that).
        CouldNotRunError: the bundle holds no single accepted attempt.
        OSError: the file cannot be read.
    """
    # Parse workers boot and import while the bundle is verified (one core does that).
    with parse_standby(path):
        verified = open_verified(path, trust=trust, limits=limits)
        return replay(verified)
