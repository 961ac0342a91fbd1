"""The one result of a replay: every section, and the verdict computed from all of them.

Text, JSON, Markdown and HTML are views of a :class:`ReplayResult`; none of
them computes a verdict. The outcome, the exit code, the reasons behind them
and the list of what the campaign does not evidence are methods here, and they
see every section, including media re-scoring (``--media``) and the rerun
comparison (``--against``) when those were done.

Outcome precedence (``specs/replay-report.md`` §"Outcome"): integrity (1) >
contradicted or failed (4) > unverifiable (5) > not evidenced (5) > confirmed (0).
"Not evidenced" is the outcome only when the bundle states no claim at all and
no media re-score or rerun comparison was asked for (those are evidence of their
own: a rerun bundle states no claims, and its comparison with the sealed bundle is
what it is checked by); otherwise the sections that hold no evidence are listed
beside the outcome and never shown as passing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bundler.format.trust import SignatureStatus
from replay.engine.verdicts import ClaimStatus, GateVerdict, Outcome, decide
from replay.inputs import ReplayInputs
from replay.sections.attempts import AttemptsResult
from replay.sections.claims import ClaimsResult
from replay.sections.conformance import ConformanceResult
from replay.sections.latency import LatencyResult
from replay.sections.lifecycle import LifecycleResult
from replay.sections.quality import QualityResult
from replay.sections.telemetry import TelemetryResult
from replay.serving.summary import LIMITS as SERVING_LIMITS
from replay.serving.summary import ServingChange, ServingPoint

if TYPE_CHECKING:
    # Types only: the media package loads numpy and scipy, and the rerun comparison
    # imports this package's front door; a statistical replay loads neither.
    from replay.media.result import MediaReplayResult
    from replay.sections.against import RerunComparison

__all__ = [
    "SECTIONS",
    "UNTRUSTED_NOTE",
    "Integrity",
    "Outcome",
    "ReplayResult",
]

UNTRUSTED_NOTE = (
    "UNSIGNED/UNTRUSTED: no trusted key verified this bundle's signature; "
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

    signature_status: SignatureStatus
    verified_by: tuple[str, ...]
    format_version: str | None
    members: int
    external: int
    environment: Mapping[str, str]  # recorded at seal time
    environment_now: Mapping[str, str]

    @property
    def trusted(self) -> bool:
        """True when a trusted key verified the signature."""
        return self.signature_status.trusted

    @property
    def limits(self) -> tuple[str, ...]:
        """What the integrity check proves and what it cannot."""
        return (
            "Every member's SHA-256 matches the signed manifest: the tables are exactly what "
            "the signer sealed. That says nothing of whether the signer measured honestly.",
        )


@dataclass(frozen=True)
class ReplayResult:
    """Everything one replay established: the re-derived sections, and optionally the
    media re-score and the rerun comparison.

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
    media: MediaReplayResult | None = None
    against: RerunComparison | None = None
    serving: tuple[ServingPoint, ...] = ()
    serving_changes: tuple[ServingChange, ...] = ()
    """Baseline → candidate per load point (p99 TTFT, TPOT, E2E latency, throughput)."""
    serving_campaign: bool = False
    """The bundle is a serving campaign (``files/serving.json``): its result is per load
    point from the benchmark tool's files, not per server from receipts."""
    inputs: ReplayInputs | None = field(default=None, repr=False, compare=False)
    """The decoded inputs the sections were derived from (the report's other sections
    read them rather than decoding the bundle again); no view serializes them."""

    @property
    def accepted_attempt(self) -> str:
        """The attempt whose rows the sections describe."""
        return self.attempts.accepted

    # --- evidence limits ------------------------------------------------------------

    def limits(self, section: str) -> tuple[str, ...]:
        """Evidence limits of ``section``, led by the trust note when the bundle is untrusted."""
        own = self._own_limits(section)
        return own if self.integrity.trusted else (UNTRUSTED_NOTE, *own)

    def _own_limits(self, section: str) -> tuple[str, ...]:
        if section == "media":
            return () if self.media is None else self.media.limits
        if section == "against":
            return () if self.against is None else self.against.limits
        if section == "serving":
            return SERVING_LIMITS
        own: tuple[str, ...] = getattr(self, section).limits
        if section == "integrity":
            n = self.integrity.external
            if self.media is None and n:
                own = (
                    *own,
                    f"{n} external artifact(s) (raw media, weights, logs) are known by "
                    "hash only and were not looked at (no re-score was asked for).",
                )
            elif self.media is not None:
                own = (
                    *own,
                    "External media were looked up by SHA-256 and re-scored: see the "
                    "media section.",
                )
        if section == "quality":
            own = tuple(x for x in own if "not re-scored" not in x) if self.media else own
            own = (*own, self._quality_media_note())
        return own

    def _quality_media_note(self) -> str:
        if self.media is None:
            return (
                "Media not re-scored: every verdict here comes from the metric values the "
                "author recorded."
            )
        return (
            "The recorded values are checked here; the media themselves were re-scored "
            "(media section), and their verdicts count toward the outcome too."
        )

    # --- what was checked, and what is not evidenced --------------------------------

    def checks_done(self) -> tuple[str, ...]:
        """What kind of check this replay is, for the headline, beside the outcome."""
        media = (
            "media re-scored from the raw files"
            if self.media is not None
            else "media not re-scored"
        )
        rerun = (
            "plan re-run on hardware and compared"
            if self.against is not None
            else "hardware not re-run"
        )
        trust = () if self.integrity.trusted else ("UNSIGNED/UNTRUSTED: no trusted key signed it",)
        return (*trust, "re-derived from the author's receipts", media, rerun)

    def not_evidenced(self) -> tuple[str, ...]:
        """What the campaign does not evidence: sections with nothing to show, never a pass."""
        out = []
        if not self.claims.checks:
            out.append("claims (the bundle states none)")
        if self.latency.samples_used == 0 and not self.conformance.serving:
            out.append("latency (no measured request with status ok)")
        if self.quality.comparisons_total == 0 and not self.quality.gates:
            out.append("quality (no gates, no comparisons)")
        elif self.quality.comparisons_total == 0:
            out.append("quality (gates frozen, but no comparison recorded)")
        elif not self.quality.gates:
            out.append("quality (comparisons recorded, but no gate frozen)")
        if self.lifecycle.total == 0:
            out.append("worker exits (none recorded)")
        if not self.telemetry.peaks:
            out.append("telemetry (no samples)")
        if not self.conformance.checked:
            out.append("plan conformance (no frozen plan)")
        out += list(self.conformance.not_evidenced)
        return tuple(out)

    def not_applicable(self, section: str) -> str | None:
        """Why ``section`` does not apply to this campaign (None: it applies).

        A serving campaign is measured by a benchmark tool per load point: it has no
        per-server receipts, worker exits or gates unless its bundle records them. Such
        a section is still not evidenced (never a pass); this only says why nothing was
        expected there, so that no view shows an empty table or an alarm.
        """
        if not self.serving_campaign:
            return None
        why = {
            "latency": (
                "serving campaign: per-request latency is per load point (serving section), "
                "not per server",
                self.latency.samples_used == 0,
            ),
            "lifecycle": (
                "serving campaign: the benchmark tool records no worker exits",
                self.lifecycle.total == 0,
            ),
            "telemetry": (
                "serving campaign: the benchmark tool records no device telemetry",
                not self.telemetry.peaks,
            ),
            "quality": (
                "serving campaign, no gates",
                self.quality.comparisons_total == 0 and not self.quality.gates,
            ),
            "scorer": (
                "serving campaign, no gates: no learned scorer is used",
                self.quality.comparisons_total == 0 and not self.quality.gates,
            ),
        }
        text, applies = why.get(section, ("", False))
        return f"not applicable: {text}" if applies else None

    def evidenced(self, section: str) -> bool:
        """False when ``section`` holds no evidence (its view says "not evidenced")."""
        checks = {
            "claims": bool(self.claims.checks),
            "latency": self.latency.samples_used > 0,
            "quality": self.quality.comparisons_total > 0 and bool(self.quality.gates),
            "lifecycle": self.lifecycle.total > 0,
            "telemetry": bool(self.telemetry.peaks),
            "conformance": self.conformance.checked and not self.conformance.empty,
            "media": self.media is not None,
            "against": self.against is not None,
        }
        return checks.get(section, True)

    # --- the verdict ------------------------------------------------------------------

    def integrity_failures(self) -> list[str]:
        """Why the result fails integrity (exit 1): content that differs from what was sealed."""
        out: list[str] = []
        for extra in (self.media, self.against):
            if extra is not None:
                out += extra.integrity_failures()
        return out

    def failures(self) -> list[str]:
        """Why the result is contradicted (exit 4), one line each; empty when none."""
        out = []
        if n := self.claims.count(ClaimStatus.CONTRADICTED):
            out.append(f"{n} claim(s) contradicted")
        if n := self.quality.count(GateVerdict.FAIL):
            out.append(f"{n} recorded gate check(s) failed")
        if n := len(self.conformance.deviations):
            out.append(f"{n} deviation(s) from the frozen plan")
        if not self.attempts.isolated:
            out.append("rows of other attempts reach the accepted attempt")
        if self.media is not None:
            out += [f"media: {why}" for why in self.media.failures()]
        if self.against is not None:
            out += [f"rerun: {why}" for why in self.against.failures()]
        return out

    def gaps(self) -> list[str]:
        """Why the result is not fully verified (exit 5), one line each; empty when none."""
        out = []
        if n := self.claims.count(ClaimStatus.UNVERIFIABLE):
            out.append(f"{n} claim(s) unverifiable")
        if n := self.quality.count(GateVerdict.UNATTESTED):
            out.append(f"{n} gate check(s) unattested (no scorer identity)")
        if not self.conformance.checked:
            out.append("no frozen plan to check the receipts against")
        if self.media is not None:
            out += [f"media: {why}" for why in self.media.gaps()]
        if self.against is not None:
            out += [f"rerun: {why}" for why in self.against.gaps()]
        return out

    @property
    def outcome(self) -> Outcome:
        """The verdict, from every section (precedence in the module docstring)."""
        decided = decide(self.integrity_failures(), self.failures(), self.gaps())
        nothing_asked = self.media is None and self.against is None
        if decided is Outcome.CONFIRMED and not self.claims.checks and nothing_asked:
            return Outcome.NOT_EVIDENCED
        return decided

    def media_outcome(self) -> Outcome | None:
        """The media section judged alone, by the one precedence over its own reasons
        (None: not re-scored). Its word is ``MediaVerdict.of(...)``; it never decides
        the replay's outcome, which sees the same reasons among all the others."""
        m = self.media
        return None if m is None else decide(m.integrity_failures(), m.failures(), m.gaps())

    @property
    def exit_code(self) -> int:
        """0 confirmed; 1 media differ from the seal; 4 contradicted or failed; 5 unverified."""
        return self.outcome.exit_code
