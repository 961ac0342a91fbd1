"""LPIPS AlexNet weight files: found by the SHA-256 that ``scorer.json`` records, re-hashed
when read, unpickled with ``weights_only=True``, and checked against the expected key layout.

A step that refuses raises :class:`Refused` with the reason and the state of every weight
file, which :func:`replay.media.lpips_attested.load_attested_lpips` turns into an
``unattested`` scorer identity.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bundler.format.plan_model import ScorerDoc
from replay.engine.verdicts import FileStatus
from replay.media.identity import OK, ArtifactRef, IdentityError, locate, read_verified
from replay.media.lpips_identity import WeightUse

__all__ = [
    "ALEX_CONVS",
    "BACKBONE_KEYS",
    "LINEAR_KEYS",
    "Refused",
    "locate_weights",
    "read_state_dicts",
    "with_status",
]

# AlexNet conv layers inside torchvision's ``features`` Sequential, and the lpips
# slice each one lands in (lpips.pretrained_networks.alexnet: slices end at 2, 5, 8, 10, 12).
ALEX_CONVS: tuple[tuple[int, int], ...] = ((0, 1), (3, 2), (6, 3), (8, 4), (10, 5))
BACKBONE_KEYS: frozenset[str] = frozenset(
    f"features.{i}.{p}" for i, _ in ALEX_CONVS for p in ("weight", "bias")
)
# The real alexnet-owt-7be5be79.pth also carries the classifier, which LPIPS does not use.
_BACKBONE_IGNORED: frozenset[str] = frozenset(
    f"classifier.{i}.{p}" for i in (1, 4, 6) for p in ("weight", "bias")
)
LINEAR_KEYS: frozenset[str] = frozenset(f"lin{k}.model.1.weight" for k in range(5))


class Refused(Exception):
    """A step of loading refused the scorer: why, and the weights' state.

    :func:`replay.media.lpips_attested.load_attested_lpips` turns it into an unattested identity.
    """

    def __init__(self, reason: str, uses: list[WeightUse]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.uses = uses


def locate_weights(
    scorer: ScorerDoc, weights_dir: Path | None, jobs: int | None
) -> list[WeightUse]:
    """The weight files ``scorer`` names, each found in ``weights_dir`` by SHA-256.

    Raises:
        Refused: an unsupported scorer, a role without weights, no directory, or a
            file not found (or found with another digest).
    """
    name, net = scorer.name, "alex" if scorer.net is None else scorer.net
    if name != "lpips" or net != "alex":
        raise Refused(f"scorer {name!r} net {net!r}: only lpips with net alex is supported", [])
    by_role = {w.role: w for w in scorer.weights}
    uses = [
        WeightUse(w.role, w.file, w.sha256, w.bytes, FileStatus.NOT_LOOKED_FOR)
        for w in scorer.weights
    ]
    missing_roles = [r for r in ("backbone", "linear") if r not in by_role]
    if missing_roles:
        raise Refused(f"scorer.json names no weights for role(s) {', '.join(missing_roles)}", uses)
    if weights_dir is None:
        raise Refused("no directory of scorer weight files was given", uses)
    refs = [ArtifactRef(u.recorded_file, u.sha256, u.recorded_bytes) for u in uses]
    locs = locate([u.sha256 for u in uses], refs, [Path(weights_dir)], jobs=jobs)
    uses = [
        WeightUse(
            u.role,
            u.recorded_file,
            u.sha256,
            u.recorded_bytes,
            locs[u.sha256].status,
            locs[u.sha256].path,
            locs[u.sha256].detail,
        )
        for u in uses
    ]
    bad = [u for u in uses if u.status != OK]
    if bad:
        raise Refused(
            "weights not verified: " + "; ".join(f"{u.role} {u.status}" for u in bad), uses
        )
    return uses


def with_status(u: WeightUse, status: FileStatus, detail: str = "") -> WeightUse:
    """``u`` with ``status`` (and ``detail``, when given) replaced."""
    return WeightUse(**{**asdict(u), "status": status, "detail": detail or u.detail})


def read_state_dicts(torch: Any, uses: list[WeightUse]) -> dict[str, dict[str, Any]]:
    """Each needed weight file re-read, re-hashed, and loaded with ``weights_only=True``.

    ``uses`` is updated in place (``unused``, ``mismatch``, ``bad-layout``).

    Raises:
        Refused: a file changed since it was hashed, does not unpickle as plain
            tensors, or lacks (or adds) a key of the layout.
    """
    state: dict[str, dict[str, Any]] = {}
    for i, u in enumerate(uses):
        if u.role not in ("backbone", "linear"):
            uses[i] = with_status(u, FileStatus.UNUSED)
            continue
        try:
            data = read_verified(Path(str(u.found_at)), u.sha256)
        except (OSError, IdentityError) as exc:
            uses[i] = with_status(u, FileStatus.MISMATCH, str(exc))
            raise Refused(f"{u.role}: {exc}", uses) from exc
        try:
            sd = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
        except Exception as exc:  # any unpickling failure is a refusal
            uses[i] = with_status(u, FileStatus.BAD_LAYOUT, str(exc))
            raise Refused(f"{u.role}: not loadable with weights_only=True: {exc}", uses) from exc
        if not isinstance(sd, Mapping) or not all(isinstance(k, str) for k in sd):
            uses[i] = with_status(u, FileStatus.BAD_LAYOUT)
            raise Refused(f"{u.role}: not a state dict", uses)
        keys = set(sd)
        need, allowed = (
            (BACKBONE_KEYS, BACKBONE_KEYS | _BACKBONE_IGNORED)
            if u.role == "backbone"
            else (LINEAR_KEYS, LINEAR_KEYS)
        )
        missing, extra = sorted(need - keys), sorted(keys - allowed)
        if missing or extra:
            detail = f"missing keys {missing[:5]}, unexpected keys {extra[:5]}"
            uses[i] = with_status(u, FileStatus.BAD_LAYOUT, detail)
            raise Refused(f"{u.role}: {detail}", uses)
        state[u.role] = dict(sd)
    return state
