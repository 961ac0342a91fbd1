"""What a replay records about its LPIPS scorer: the weights it needed and found, and whether
the scorer was attested (``lpips/alex-v0.1-frame-mean``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Final

from replay.engine.verdicts import FileStatus, ScorerStatus

__all__ = ["ATTESTED", "LPIPS_DEFINITION", "UNATTESTED", "ScorerIdentity", "WeightUse"]

LPIPS_DEFINITION = "lpips/alex-v0.1-frame-mean"
# Names the LPIPS modules import; the words are :class:`ScorerStatus`'s.
ATTESTED: Final = ScorerStatus.ATTESTED
UNATTESTED: Final = ScorerStatus.UNATTESTED


@dataclass(frozen=True)
class WeightUse:
    """One weights file the scorer needs, and what was found for it."""

    role: str
    recorded_file: str
    sha256: str
    recorded_bytes: int | None
    status: FileStatus
    found_at: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class ScorerIdentity:
    """The LPIPS scorer identity the bundle records, and what was actually used."""

    status: ScorerStatus
    reason: str
    name: str | None
    version: str | None
    net: str | None
    definition: str = LPIPS_DEFINITION
    package_version: str | None = None
    torch_version: str | None = None
    torchvision_version: str | None = None
    device: str | None = None
    weights: list[WeightUse] = field(default_factory=list)

    @property
    def attested(self) -> bool:
        """True when every weight was verified and loaded strictly."""
        return self.status == ATTESTED

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return asdict(self)
