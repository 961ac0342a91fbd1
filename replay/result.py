"""The structured result of a replay and the exit code it maps to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bundler.errors import EXIT_CLAIM_CONTRADICTED, EXIT_OK, EXIT_UNVERIFIABLE
from replay.attempts import AttemptsResult
from replay.claims import CONTRADICTED, UNVERIFIABLE, ClaimsResult
from replay.conformance import ConformanceResult
from replay.latency import LatencyResult
from replay.lifecycle import LifecycleResult
from replay.quality import FAIL, UNATTESTED, QualityResult
from replay.telemetry import TelemetryResult

__all__ = ["SECTIONS", "UNTRUSTED_NOTE", "Integrity", "ReplayResult"]

UNTRUSTED_NOTE = (
    "UNSIGNED/UNTRUSTED: no trusted key verified this bundle's signature (--allow-unsigned); "
    "its tables are intact as sealed but anyone could have sealed them."
)
SECTIONS = (
    "integrity",
    "attempts",
    "conformance",
    "latency",
    "lifecycle",
    "telemetry",
    "quality",
    "claims",
)


@dataclass(frozen=True)
class Integrity:
    """What the integrity check established before anything was replayed."""

    signature_status: str  # verified | unsigned | untrusted | unchecked
    verified_by: tuple[str, ...]
    format_version: str | None
    members: int
    external: int
    environment: Mapping[str, str]  # recorded at seal time
    environment_now: Mapping[str, str]

    @property
    def trusted(self) -> bool:
        """True when a trusted key verified the signature."""
        return self.signature_status == "verified"

    @property
    def limits(self) -> tuple[str, ...]:
        """What the integrity check proves and what it cannot."""
        return (
            "Every member's SHA-256 matches the signed manifest: the tables are exactly what "
            "the signer sealed. That says nothing of whether the signer measured honestly.",
            f"{self.external} external artifact(s) (raw media, weights, logs) are known by "
            "hash only and were not looked at.",
        )


@dataclass(frozen=True)
class ReplayResult:
    """Everything ``replay_bundle`` re-derived from one bundle.

    The sections describe the accepted attempt; claims may name other attempts.
    """

    bundle: str
    campaign: Mapping[str, Any]
    integrity: Integrity
    attempts: AttemptsResult
    conformance: ConformanceResult
    latency: LatencyResult
    lifecycle: LifecycleResult
    telemetry: TelemetryResult
    quality: QualityResult
    claims: ClaimsResult

    @property
    def accepted_attempt(self) -> str:
        """The attempt whose rows the sections describe."""
        return self.attempts.accepted

    def limits(self, section: str) -> tuple[str, ...]:
        """Evidence limits of ``section``, led by the trust note when the bundle is untrusted."""
        own: tuple[str, ...] = getattr(self, section).limits
        return own if self.integrity.trusted else (UNTRUSTED_NOTE, *own)

    def failures(self) -> list[str]:
        """Why the result is contradicted (exit 4), one line each; empty when none."""
        out = []
        if n := self.claims.count(CONTRADICTED):
            out.append(f"{n} claim(s) contradicted")
        if n := self.quality.count(FAIL):
            out.append(f"{n} gate check(s) failed")
        if n := len(self.conformance.deviations):
            out.append(f"{n} deviation(s) from the frozen plan")
        if not self.attempts.isolated:
            out.append("rows of other attempts reach the accepted attempt")
        return out

    def gaps(self) -> list[str]:
        """Why the result is not fully verified (exit 5), one line each; empty when none."""
        out = []
        if n := self.claims.count(UNVERIFIABLE):
            out.append(f"{n} claim(s) unverifiable")
        if n := self.quality.count(UNATTESTED):
            out.append(f"{n} gate check(s) unattested (no scorer identity)")
        if not self.conformance.checked:
            out.append("no frozen plan to check the receipts against")
        return out

    @property
    def exit_code(self) -> int:
        """0 all confirmed and passing; 4 anything contradicted or failed; 5 anything unverified."""
        if self.failures():
            return EXIT_CLAIM_CONTRADICTED
        if self.gaps():
            return EXIT_UNVERIFIABLE
        return EXIT_OK

    @property
    def outcome(self) -> str:
        """One word for the headline: CONFIRMED, CONTRADICTED or UNVERIFIED."""
        return {
            EXIT_OK: "CONFIRMED",
            EXIT_CLAIM_CONTRADICTED: "CONTRADICTED",
            EXIT_UNVERIFIABLE: "UNVERIFIED",
        }[self.exit_code]
