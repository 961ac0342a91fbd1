"""What the report shows beyond the replay result, read from the same opened bundle.

Plain frozen data: :func:`replay.report.html.render.bundle_facts` fills it from the
verified bundle (signatures, manifest, the sources table, the accepted
attempt's individual requests), and the section builders of
:mod:`replay.report.html.sections` only read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bundler.format.model import ExternalEntry
from bundler.format.trust import SignatureStatus

__all__ = ["BundleFacts", "ServerTrials", "SignatureRow"]


@dataclass(frozen=True)
class ServerTrials:
    """One server's warmup and measured requests of the accepted attempt, in ``seq`` order."""

    arm: str
    server: str
    warmups: tuple[float, ...]
    measured_ok: tuple[float, ...]
    measured_failed: tuple[float, ...]  # measured, status not ok, with a time
    untimed: int  # requests without an end-to-end time (not drawn)


@dataclass(frozen=True)
class SignatureRow:
    """One signature of the envelope and what checking it found."""

    index: int
    keyid_hint: str | None
    valid: bool
    verified_by: str | None


@dataclass(frozen=True)
class BundleFacts:
    """What the report shows beyond the replay result, read from the same opened bundle."""

    file_name: str
    sha256: str
    size: int
    signature_status: SignatureStatus
    signatures: tuple[SignatureRow, ...]
    environment: Mapping[str, str]
    scrubbed: tuple[Mapping[str, Any], ...]
    unscrubbed: tuple[Mapping[str, Any], ...]
    members: int
    external: tuple[ExternalEntry, ...]  # the manifest's external entries
    sources: tuple[Mapping[str, Any], ...]
    trials: tuple[ServerTrials, ...]  # accepted attempt, per (arm, server)
    status_by_attempt: Mapping[str, Mapping[str, int]]  # attempt -> status -> receipts
    samples_by_attempt: Mapping[str, int]  # attempt -> measured receipts with status ok
