"""Render a replay result as the HTML page or the Markdown pull-request body.

The caller verifies the bundle once (:func:`bundler.verified.open_verified`)
and replays it once (:func:`replay.api.replay`); the same verified bundle then
feeds the report's other sections (signatures, sources, external artifacts,
individual requests), so the report can never describe two different files,
and its verdict is the result's.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow.compute as pc

from bundler import version
from bundler.errors import UsageError
from bundler.format.trust import NO_TRUST, Trust
from bundler.verified import VerifiedBundle
from replay.inputs import ReplayInputs
from replay.report.html.model import BundleFacts, ServerTrials, SignatureRow, build_model
from replay.report.html.view import Report
from replay.result import ReplayResult

__all__ = [
    "FORMATS",
    "RenderedReport",
    "bundle_facts",
    "render_bundle",
    "render_report",
    "report_model",
]

FORMATS = ("html", "md")


def _sha256(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _values(
    e2e: npt.NDArray[np.float64], rows: npt.NDArray[np.intp], mask: npt.NDArray[np.bool_]
) -> tuple[float, ...]:
    return tuple(e2e[rows[mask]].tolist())


def _trials(inputs: ReplayInputs, attempt: str) -> tuple[ServerTrials, ...]:
    """The accepted attempt's warmup and measured latencies per (arm, server), vectorized."""
    r = inputs.receipts
    warm, meas = r.phase.mask("warmup"), r.phase.mask("measured")
    idx = np.flatnonzero(r.attempt.mask(attempt) & (warm | meas))
    if not idx.size:
        return ()
    timed = pc.is_valid(r.table.column("e2e_s")).to_numpy(zero_copy_only=False)
    timed = np.asarray(timed, dtype=bool) & np.isfinite(r.e2e_s)
    # One sort by (arm, server, seq), then contiguous runs per (arm, server).
    nserv = max(len(r.server.values), 1)
    group = r.arm.codes[idx].astype(np.int64) * nserv + r.server.codes[idx]
    idx = idx[np.lexsort((r.seq[idx], group))]
    group = r.arm.codes[idx].astype(np.int64) * nserv + r.server.codes[idx]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    out = []
    for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), idx.size], strict=True):
        rows = idx[lo:hi]
        t = timed[rows]
        ok = r.ok[rows]
        is_warm, is_meas = warm[rows], meas[rows]
        arm_code, server_code = int(r.arm.codes[rows[0]]), int(r.server.codes[rows[0]])
        out.append(
            ServerTrials(
                arm=r.arm.values[arm_code] if arm_code >= 0 else "",
                server=r.server.values[server_code] if server_code >= 0 else "",
                warmups=_values(r.e2e_s, rows, t & is_warm),
                measured_ok=_values(r.e2e_s, rows, t & is_meas & ok),
                measured_failed=_values(r.e2e_s, rows, t & is_meas & ~ok),
                untimed=int(np.count_nonzero(~t)),
            )
        )
    return tuple(out)


def _status_counts(inputs: ReplayInputs) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """Receipts per attempt and status, and latency samples (measured, ok) per attempt."""
    r = inputs.receipts
    status = inputs.table("receipts").column("status")
    from replay.inputs import Codes

    codes = Codes.of(status)
    by: dict[str, dict[str, int]] = {}
    samples: dict[str, int] = {}
    measured = r.phase.mask("measured")
    for a_code, attempt in enumerate(r.attempt.values):
        m = r.attempt.codes == a_code
        counts = np.bincount(codes.codes[m & (codes.codes >= 0)], minlength=len(codes.values))
        by[attempt] = {codes.values[k]: int(c) for k, c in enumerate(counts) if c}
        samples[attempt] = int(np.count_nonzero(m & measured & r.ok))
    return by, samples


def bundle_facts(bundle: VerifiedBundle, inputs: ReplayInputs, attempt: str) -> BundleFacts:
    """What the report shows beyond the replay, from the verified bundle and its inputs."""
    path = bundle.path
    sha, size = _sha256(path)
    manifest = bundle.manifest
    by_status, samples = _status_counts(inputs)
    sources_cols = ["source_id", "optimization", "origin", "adopted", "evidence", "evidence_limit"]
    sources_table = inputs.table("sources")
    cols = [c for c in (*sources_cols, "effect_pct") if c in sources_table.column_names]
    return BundleFacts(
        file_name=path.name,
        sha256=sha,
        size=size,
        signature_status=bundle.report.signature_status,
        signatures=tuple(
            SignatureRow(s.index, s.keyid_hint, s.valid, s.verified_by)
            for s in bundle.report.signatures
        ),
        environment=dict(manifest.environment) if manifest else {},
        scrubbed=manifest.sanitization.scrubbed if manifest else (),
        unscrubbed=manifest.sanitization.unscrubbed if manifest else (),
        members=len(manifest.members) if manifest else 0,
        external=manifest.external if manifest else (),
        sources=tuple(sources_table.select(cols).to_pylist()),
        trials=_trials(inputs, attempt),
        status_by_attempt=by_status,
        samples_by_attempt=samples,
    )


def report_model(bundle: VerifiedBundle, result: ReplayResult, *, charts: bool = True) -> Report:
    """The report's view model of ``result``, the replay of ``bundle``.

    The media re-score and rerun comparison, when done, are part of ``result``;
    the model renders them and its outcome is ``result.outcome`` (never recomputed).

    Raises:
        CouldNotRunError: ``charts`` and matplotlib is missing.
        OSError: the bundle file cannot be read (for its SHA-256).
    """
    # The inputs the replay decoded: the report reads the same tables, never a second copy.
    inputs = result.inputs if result.inputs is not None else ReplayInputs.from_bundle(bundle)
    facts = bundle_facts(bundle, inputs, result.accepted_attempt)
    return build_model(
        result,
        facts,
        charts=charts,
        generator=f"reprobundle {version()} (bundle report)",
    )


def render_report(bundle: VerifiedBundle, result: ReplayResult, fmt: str = "html") -> str:
    """The report of ``result`` (the replay of ``bundle``) as HTML or Markdown (``"md"``).

    The same bundle and the same result always give the same bytes.

    Raises:
        UsageError: unknown ``fmt``.
        CouldNotRunError, OSError: see :func:`report_model`.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown report format {fmt!r}; use one of {', '.join(FORMATS)}")
    report = report_model(bundle, result, charts=fmt == "html")
    if fmt == "html":
        from replay.report.html.html import render_html

        return render_html(report)
    from replay.report.markdown import render_markdown

    return render_markdown(report)


@dataclass(frozen=True)
class RenderedReport:
    """The report text and the one result it renders."""

    text: str
    result: ReplayResult


def render_bundle(
    path: Path | str,
    fmt: str = "html",
    *,
    trust: Trust = NO_TRUST,
) -> RenderedReport:
    """Verify, replay (statistics only) and render the bundle at ``path`` in one call.

    Raises:
        IntegrityError: see :func:`bundler.verified.open_verified`.
        UsageError, CouldNotRunError, OSError: see :func:`render_report`.
    """
    from bundler.verified import open_verified
    from replay.api import replay

    verified = open_verified(path, trust=trust)
    result = replay(verified)
    return RenderedReport(render_report(verified, result, fmt), result)
