"""What ``bundle diff`` found between two verified bundles: typed, so every view renders one result.

Every string held here that came from a bundle (ids, values, member names, text
lines) is the author's and hostile: the views escape it (terminal text through
the CLI's one output path, Markdown through :mod:`replay.report.escape`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "BundleDiff",
    "ClaimChange",
    "DiffLimits",
    "ExternalChange",
    "FieldChange",
    "GateChange",
    "MemberChange",
    "PlanChange",
    "RowChange",
    "Side",
    "SignerChange",
    "TableDiff",
    "TextDiff",
]


@dataclass(frozen=True)
class DiffLimits:
    """Bounds on the cost and length of a diff of two hostile bundles.

    Attributes:
        max_rows_compared: rows per table compared field by field (beyond: counted, not
            compared, and said).
        max_rows_listed: changed rows listed per table (the rest counted: "N more").
        max_members_listed: members listed per kind of change (added, removed, changed).
        max_text_bytes: a text member is diffed line by line only when both sides are at
            most this size.
        max_text_lines_compared: ... and have at most this many lines each: difflib's
            matching grows about as the cube of the line count when lines repeat just
            under its "popular line" cut (a 60 KB member of 16,000 short repeating lines
            took 90 s; 2,000 such lines take a third of a second).
        max_text_lines: diff lines shown per member.
        max_total_text_lines: diff lines shown over all members together.
        max_plan_fields: frozen-plan fields listed.
        max_claims_listed: claim changes listed (loosened gates, too, are listed first and
            capped at this).
        max_value_chars: characters of one value or diff line shown (the rest cut, with
            its length said).
    """

    max_rows_compared: int = 200_000
    max_rows_listed: int = 20
    max_members_listed: int = 50
    max_text_bytes: int = 64 << 10
    max_text_lines_compared: int = 2_000
    max_text_lines: int = 80
    max_total_text_lines: int = 400
    max_plan_fields: int = 100
    max_claims_listed: int = 50
    max_value_chars: int = 400


@dataclass(frozen=True)
class Side:
    """One bundle of the pair: its path, campaign id, signature status and replay outcome."""

    path: str
    campaign_id: str
    signature_status: str
    outcome: str
    exit_code: int


@dataclass(frozen=True)
class FieldChange:
    """One field whose value differs: both values shown as text (``None``: absent)."""

    field: str
    old: str | None
    new: str | None


@dataclass(frozen=True)
class ClaimChange:
    """A claim added, removed, or whose status, claimed or recomputed value changed."""

    claim_id: str
    change: str  # added, removed, changed
    old_status: str | None
    new_status: str | None
    fields: tuple[FieldChange, ...]


@dataclass(frozen=True)
class GateChange:
    """A quality gate added, removed or changed, and whether that loosened it.

    ``loosened`` is True when NEW lets through a value OLD failed: a gate removed, a
    ``<=``/``<`` threshold raised, a ``>=``/``>`` threshold lowered, or the operator or
    metric changed (a changed comparison cannot be trusted to be stricter).
    """

    gate_id: str
    change: str  # added, removed, changed
    loosened: bool
    fields: tuple[FieldChange, ...]


@dataclass(frozen=True)
class PlanChange:
    """The frozen plan, field by field (dotted JSON paths)."""

    old_path: str | None
    new_path: str | None
    fields: tuple[FieldChange, ...]
    more: int  # changed fields not listed (DiffLimits.max_plan_fields)


@dataclass(frozen=True)
class RowChange:
    """A row changed between the two tables, keyed by the table's id column(s)."""

    key: str
    fields: tuple[FieldChange, ...]


@dataclass(frozen=True)
class TableDiff:
    """One table's rows added, removed and changed (lists capped; counts exact up to the cap).

    ``not_compared`` counts rows beyond :attr:`DiffLimits.max_rows_compared` on either
    side: the member digests differ, but those rows were not compared.
    """

    table: str
    key: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[RowChange, ...]
    added_count: int
    removed_count: int
    changed_count: int
    not_compared: int = 0

    @property
    def differs(self) -> bool:
        """True when a row was added, removed or changed, or rows could not be compared."""
        return bool(self.added_count or self.removed_count or self.changed_count) or (
            self.not_compared > 0
        )


@dataclass(frozen=True)
class TextDiff:
    """A unified diff of a small UTF-8 member, capped at ``DiffLimits.max_text_lines``."""

    lines: tuple[str, ...]
    more: int  # diff lines not shown


@dataclass(frozen=True)
class MemberChange:
    """A member added, removed or changed, with its sizes and SHA-256 digests."""

    path: str
    change: str  # added, removed, changed
    role: str
    old_size: int | None
    new_size: int | None
    old_sha256: str | None
    new_sha256: str | None
    text: TextDiff | None = None
    text_note: str | None = None  # why no text diff is shown, for a changed member


@dataclass(frozen=True)
class ExternalChange:
    """An external artifact added, removed, or whose digest, size or availability changed."""

    path: str
    change: str  # added, removed, changed
    fields: tuple[FieldChange, ...]


@dataclass(frozen=True)
class SignerChange:
    """A signature present in one bundle and not the other.

    Signatures are matched by key id hint *and* the trusted key that verified them
    (None: none did): the hint is the signer's own claim, so a stranger's signature
    carrying a known hint still shows as a change.
    """

    keyid: str
    change: str  # added, removed
    verified_by: str | None  # the trusted key that verified it, if one did


@dataclass(frozen=True)
class BundleDiff:
    """Everything that differs between OLD and NEW, in the order a reviewer needs it.

    ``alerts`` come first in every view: gates loosened and a changed frozen plan.
    """

    old: Side
    new: Side
    claims: tuple[ClaimChange, ...]
    claims_more: int
    gates: tuple[GateChange, ...]
    gates_more: int
    plan: PlanChange | None
    tables: tuple[TableDiff, ...]
    members_added: tuple[MemberChange, ...]
    members_removed: tuple[MemberChange, ...]
    members_changed: tuple[MemberChange, ...]
    members_counts: tuple[int, int, int]  # added, removed, changed (before capping)
    externals: tuple[ExternalChange, ...]
    externals_more: int
    signers: tuple[SignerChange, ...]
    limits: DiffLimits = field(default_factory=DiffLimits)

    @property
    def alerts(self) -> tuple[str, ...]:
        """The loud lines: each loosened gate, then a changed frozen plan (plain text)."""
        out = [
            f"GATE LOOSENED {g.gate_id}: " + _fields_text(g.fields)
            if g.change == "changed"
            else f"GATE REMOVED {g.gate_id}: it no longer applies"
            for g in self.gates
            if g.loosened
        ]
        if self.plan is not None:
            out.append(
                f"FROZEN PLAN CHANGED ({self.plan.old_path} -> {self.plan.new_path}): "
                f"{len(self.plan.fields) + self.plan.more} field(s)"
            )
        return tuple(out)

    @property
    def verdict_changed(self) -> bool:
        """True when the replay outcome differs or a claim changed."""
        return self.old.outcome != self.new.outcome or bool(self.claims)

    @property
    def content_differs(self) -> bool:
        """True when anything but the signatures differs (exit ``EXIT_DIFFERS``)."""
        return (
            self.verdict_changed
            or bool(self.gates)
            or self.plan is not None
            or any(t.differs for t in self.tables)
            or any(self.members_counts)
            or bool(self.externals)
        )

    @property
    def identical(self) -> bool:
        """True when nothing at all differs, signatures included."""
        return not self.content_differs and not self.signers


def _fields_text(fields: tuple[FieldChange, ...]) -> str:
    return "; ".join(f"{f.field} {f.old} -> {f.new}" for f in fields)
