"""Open a bundle once, replay it, and render the report as HTML or Markdown.

The bundle is opened and checked exactly as :func:`replay.api.replay_bundle`
does (any integrity problem refuses it; an unsigned or untrusted one too
unless ``allow_unsigned``), then the same opened bundle feeds both the replay
and the report's other sections (signatures, sources, external artifacts,
individual requests), so the report can never describe two different files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow.compute as pc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from bundler import __version__
from bundler.container import Limits
from bundler.errors import IntegrityError, UsageError
from bundler.verify import OpenedBundle, open_bundle
from replay.api import inputs_from_bundle, integrity_of, replay_inputs
from replay.html.extras import normalize_media, normalize_rerun
from replay.html.model import BundleFacts, ServerTrials, SignatureRow, build_model
from replay.html.view import Report
from replay.inputs import ReplayInputs
from replay.result import ReplayResult

__all__ = ["FORMATS", "RenderedReport", "bundle_facts", "render_report", "report_model"]

FORMATS = ("html", "md")


@dataclass(frozen=True)
class RenderedReport:
    """The report text, the model it was drawn from, and the replay under it."""

    text: str
    report: Report
    result: ReplayResult


def _sha256(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _open_checked(
    path: Path,
    trusted: Sequence[Ed25519PublicKey],
    allow_unsigned: bool,
    limits: Limits | None,
) -> OpenedBundle:
    opened = open_bundle(path, trusted=trusted, allow_unsigned=allow_unsigned, limits=limits)
    rep = opened.report
    if rep.problems:
        raise IntegrityError(
            f"{path}: does not verify ({len(rep.problems)} problem(s)); no report written",
            rep.problems,
        )
    if rep.signature_status != "verified" and not allow_unsigned:
        raise IntegrityError(
            f"{path}: signature {rep.signature_status}: no trusted key verified it; give the "
            "signer's public key (--key / --trusted-keys) or --allow-unsigned; no report written"
        )
    return opened


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


def bundle_facts(
    path: Path, opened: OpenedBundle, inputs: ReplayInputs, attempt: str
) -> BundleFacts:
    """What the report shows beyond the replay, from the opened bundle."""
    sha, size = _sha256(path)
    manifest = opened.manifest or {}
    sanitization = manifest.get("sanitization") or {}
    by_status, samples = _status_counts(inputs)
    sources_cols = ["source_id", "optimization", "origin", "adopted", "evidence", "evidence_limit"]
    sources_table = inputs.table("sources")
    cols = [c for c in (*sources_cols, "effect_pct") if c in sources_table.column_names]
    return BundleFacts(
        file_name=path.name,
        sha256=sha,
        size=size,
        signature_status=opened.report.signature_status,
        signatures=tuple(
            SignatureRow(s.index, s.keyid_hint, s.valid, s.verified_by)
            for s in opened.report.signatures
        ),
        environment={str(k): str(v) for k, v in (manifest.get("environment") or {}).items()},
        scrubbed=tuple(sanitization.get("scrubbed") or ()),
        unscrubbed=tuple(sanitization.get("unscrubbed") or ()),
        members=len(manifest.get("members") or ()),
        external=tuple(manifest.get("external") or ()),
        sources=tuple(sources_table.select(cols).to_pylist()),
        trials=_trials(inputs, attempt),
        status_by_attempt=by_status,
        samples_by_attempt=samples,
    )


def report_model(
    path: Path | str,
    *,
    trusted: Sequence[Ed25519PublicKey] = (),
    allow_unsigned: bool = False,
    media: Any = None,
    rerun: Any = None,
    charts: bool = True,
    limits: Limits | None = None,
) -> tuple[Report, ReplayResult]:
    """Verify and replay the bundle at ``path`` and build the report's view model.

    Args:
        path: the bundle file.
        trusted: public keys whose signature makes the bundle trusted.
        allow_unsigned: report on a bundle no trusted key signed (every section says so).
        media: a media replay (``MediaReplayResult`` or its ``to_dict()`` form), or None.
        rerun: a rerun comparison (``RerunComparison`` or its ``to_dict()`` form), or None.
        charts: draw the charts (HTML); needs matplotlib.
        limits: container reading bounds.

    Raises:
        IntegrityError: tampered, malformed, or (without ``allow_unsigned``) untrusted.
        UsageError: ``media`` or ``rerun`` is not such a result.
        CouldNotRunError: no single accepted attempt; matplotlib missing for charts.
        OSError: the bundle cannot be read.
    """
    media_d: Mapping[str, Any] | None = None if media is None else normalize_media(media)
    rerun_d: Mapping[str, Any] | None = None if rerun is None else normalize_rerun(rerun)
    path = Path(path)
    opened = _open_checked(path, trusted, allow_unsigned, limits)
    inputs = inputs_from_bundle(opened)
    result = replay_inputs(inputs, integrity_of(opened), bundle=path.name)
    facts = bundle_facts(path, opened, inputs, result.accepted_attempt)
    report = build_model(
        result,
        facts,
        media=media_d,
        rerun=rerun_d,
        charts=charts,
        generator=f"reprobundle {__version__} (bundle report)",
    )
    return report, result


def render_report(
    path: Path | str,
    fmt: str = "html",
    *,
    trusted: Sequence[Ed25519PublicKey] = (),
    allow_unsigned: bool = False,
    media: Any = None,
    rerun: Any = None,
    limits: Limits | None = None,
) -> RenderedReport:
    """The report of the bundle at ``path`` as HTML (``fmt="html"``) or Markdown (``"md"``).

    The same bundle (and the same optional results) always give the same bytes.

    Raises:
        UsageError: unknown ``fmt``; ``media`` or ``rerun`` is not such a result.
        IntegrityError, CouldNotRunError, OSError: see :func:`report_model`.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown report format {fmt!r}; use one of {', '.join(FORMATS)}")
    report, result = report_model(
        path,
        trusted=trusted,
        allow_unsigned=allow_unsigned,
        media=media,
        rerun=rerun,
        charts=fmt == "html",
        limits=limits,
    )
    if fmt == "html":
        from replay.html.html import render_html

        return RenderedReport(render_html(report), report, result)
    from replay.html.markdown import render_markdown

    return RenderedReport(render_markdown(report), report, result)
