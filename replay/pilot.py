"""The server-to-server spread of a sealed pilot or baseline bundle (``bundle plan check --pilot``).

The pilot is hostile input like any bundle: it is opened through
:func:`bundler.verified.open_verified` and its tables read through
:func:`bundler.content.read_content` (content limits, table contract) before any
statistic is taken. The spread is the SD across the server means of its accepted
attempt's baseline arm(s), the same server means replay's latency section uses.
"""

from __future__ import annotations

from pathlib import Path

from bundler.campaign.detectable import ServerSpread
from bundler.format.trust import Trust
from bundler.verified import open_verified
from replay.inputs import ReplayInputs
from replay.sections.attempts import accepted_attempt
from replay.sections.latency import compute_latency, server_spread

__all__ = ["pilot_spread"]


def pilot_spread(path: Path, *, trust: Trust | None = None) -> ServerSpread:
    """The server-to-server spread of ``path``'s baseline arm(s), accepted attempt.

    Args:
        path: a sealed bundle (a pilot, or an earlier campaign's baseline).
        trust: the trust to open it with; by default an unsigned or untrusted
            bundle is accepted (integrity still checked), as ``bundle plan check``
            accepts a bundle's plan: the figure informs a plan, it judges no claim.

    Raises:
        IntegrityError: the bundle is tampered.
        BundleFormatError: its content breaks the limits or the table contract.
        CouldNotRunError: it has no single accepted attempt.
    """
    bundle = open_verified(path, trust=trust or Trust.allow_unsigned())
    inputs = ReplayInputs.from_bundle(bundle)
    attempt = accepted_attempt(inputs)
    latency = compute_latency(inputs, attempt)
    baselines = [a for a in latency.arms if a.role == "baseline"]
    kind = "pilot" if inputs.campaign.get("kind") == "pilot" else "bundle"
    names = ", ".join(a.arm for a in baselines) or "(none)"
    plural = "s" if len(baselines) > 1 else ""
    source = f"the {kind} {path.name}'s baseline arm{plural} {names} (attempt {attempt})"
    return server_spread(baselines, source)
