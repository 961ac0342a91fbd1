"""The views of a :class:`~replay.diff.model.BundleDiff`: terminal lines, JSON, Markdown.

Every view starts with the alerts (gates loosened, a changed frozen plan), then the
one-line summary, then the sections in a reviewer's order: verdict, gates and plan,
tables, members, externals, signers. A section with nothing changed says so, so
that a diff where only a note changed reads as exactly that.

Terminal lines are plain text: the CLI prints each through its one output path,
which escapes the author's control and bidi characters. Markdown escapes every
author string through :mod:`replay.report.escape` (values, ids and diff lines as
code spans, as the Markdown report shows them), so a pasted diff mentions no one,
links nothing and closes no issue.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from replay.diff.model import BundleDiff, FieldChange, GateChange, MemberChange, TableDiff
from replay.report.escape import markdown_code, markdown_text

__all__ = ["diff_to_dict", "headline", "render_markdown", "render_text", "summary"]


def _short(digest: str | None) -> str:
    return "-" if digest is None else digest[:12]


def _size(n: int | None) -> str:
    return "-" if n is None else f"{n:,} B"


def _more(n: int) -> list[str]:
    return [f"{n:,} more"] if n > 0 else []


def headline(d: BundleDiff) -> str:
    """IDENTICAL, IDENTICAL CONTENT (signers differ) or DIFFERS."""
    if d.identical:
        return "IDENTICAL"
    return "DIFFERS" if d.content_differs else "IDENTICAL CONTENT (signers differ)"


def summary(d: BundleDiff) -> str:
    """One line: what changed, section by section (``nothing else changed`` included)."""
    parts = []
    if d.old.outcome != d.new.outcome:
        parts.append(f"verdict {d.old.outcome} -> {d.new.outcome}")
    else:
        parts.append(f"verdict unchanged ({d.new.outcome})")
    if d.claims:
        parts.append(f"{len(d.claims) + d.claims_more} claim(s) changed")
    if d.gates:
        loose = sum(g.loosened for g in d.gates)
        shown = f"{len(d.gates) + d.gates_more} gate(s) changed"
        # Loosened gates are listed first, so those not listed may include more of them.
        more = "+" if d.gates_more and loose == len(d.gates) else ""
        parts.append(shown + (f", {loose}{more} loosened" if loose else ""))
    if d.plan is not None:
        parts.append("frozen plan changed")
    for t in d.tables:
        if t.differs:
            parts.append(f"{t.table}: {_table_counts(t)}")
    added, removed, changed = d.members_counts
    if any(d.members_counts):
        parts.append(f"members: {added} added, {removed} removed, {changed} changed")
    if d.externals:
        parts.append(f"{len(d.externals) + d.externals_more} external artifact(s) changed")
    if d.signers:
        parts.append(", ".join(f"signer {s.change} {s.keyid}" for s in d.signers))
    if not d.content_differs and not d.signers:
        parts.append("nothing changed")
    return "; ".join(parts)


def _table_counts(t: TableDiff) -> str:
    s = f"{t.added_count} row(s) added, {t.removed_count} removed, {t.changed_count} changed"
    if t.not_compared:
        s += f" ({t.not_compared:,} rows beyond the comparison cap not compared)"
    return s


def _fields(fields: tuple[FieldChange, ...]) -> str:
    return "; ".join(f"{f.field} {_v(f.old)} -> {_v(f.new)}" for f in fields)


def _v(value: str | None) -> str:
    return "(absent)" if value is None else value


def _member_line(m: MemberChange) -> str:
    if m.change == "changed":
        return (
            f"  changed {m.path} ({m.role}): {_size(m.old_size)} -> {_size(m.new_size)}, "
            f"sha256 {_short(m.old_sha256)} -> {_short(m.new_sha256)}"
        )
    size = m.new_size if m.change == "added" else m.old_size
    digest = m.new_sha256 if m.change == "added" else m.old_sha256
    return f"  {m.change} {m.path} ({m.role}): {_size(size)}, sha256 {_short(digest)}"


def render_text(d: BundleDiff) -> list[str]:
    """The diff as plain terminal lines (the caller escapes them when printing)."""
    out = [f"! {a}" for a in d.alerts]
    out.append(f"{d.old.path} -> {d.new.path}: {headline(d)}")
    out.append(f"  {summary(d)}")
    for section in (_t_verdict, _t_gates, _t_tables, _t_members, _t_externals, _t_signers):
        out += section(d)
    return out


def _t_verdict(d: BundleDiff) -> list[str]:
    out = [
        "verdict",
        f"  old {d.old.outcome} (signature {d.old.signature_status}), "
        f"new {d.new.outcome} (signature {d.new.signature_status})",
    ]
    if not d.claims:
        out.append("  no claim changed")
    for c in d.claims:
        if c.change == "changed":
            out.append(f"  claim {c.claim_id}: {_fields(c.fields)}")
        else:
            status = c.new_status if c.change == "added" else c.old_status
            out.append(f"  claim {c.claim_id} {c.change} ({status})")
    out += [f"  {s} claim change(s)" for s in _more(d.claims_more)]
    return out


def _gate_word(g: GateChange) -> str:
    if g.change == "changed":
        return "LOOSENED" if g.loosened else "changed"
    return "REMOVED" if g.change == "removed" else "added"


def _t_gates(d: BundleDiff) -> list[str]:
    out = ["gates and frozen plan"]
    if not d.gates and d.plan is None:
        out.append("  unchanged")
    for g in d.gates:
        out.append(
            f"  gate {g.gate_id} {_gate_word(g)}" + (f": {_fields(g.fields)}" if g.fields else "")
        )
    out += [f"  {s} gate change(s)" for s in _more(d.gates_more)]
    if d.plan is not None:
        out.append(f"  FROZEN PLAN CHANGED {_v(d.plan.old_path)} -> {_v(d.plan.new_path)}:")
        out += [f"    {f.field}: {_v(f.old)} -> {_v(f.new)}" for f in d.plan.fields]
        out += [f"    {s}" for s in _more(d.plan.more)]
    return out


def _t_tables(d: BundleDiff) -> list[str]:
    out = ["tables"]
    other = [t for t in d.tables if t.differs]
    if not other:
        out.append("  no row changed" if not d.gates else "  no other row changed")
    for t in other:
        out.append(f"  {t.table} (by {', '.join(t.key)}): {_table_counts(t)}")
        out += [f"    added {k}" for k in t.added]
        out += [f"    {s}" for s in _more(t.added_count - len(t.added))]
        out += [f"    removed {k}" for k in t.removed]
        out += [f"    {s}" for s in _more(t.removed_count - len(t.removed))]
        out += [f"    changed {r.key}: {_fields(r.fields)}" for r in t.changed]
        out += [f"    {s}" for s in _more(t.changed_count - len(t.changed))]
    return out


def _member_groups(d: BundleDiff) -> list[tuple[str, tuple[MemberChange, ...], int]]:
    """(kind, members listed, members not listed) for added, removed, changed."""
    listed = (d.members_added, d.members_removed, d.members_changed)
    return [
        (kind, ms, n - len(ms))
        for kind, ms, n in zip(
            ("added", "removed", "changed"), listed, d.members_counts, strict=True
        )
    ]


def _t_members(d: BundleDiff) -> list[str]:
    out = ["members"]
    if not any(d.members_counts):
        out.append("  unchanged")
    for kind, listed, hidden in _member_groups(d):
        for m in listed:
            out.append(_member_line(m))
            if m.text is not None:
                out += [f"    {line}" for line in m.text.lines]
                out += [f"    {s} diff line(s)" for s in _more(m.text.more)]
            elif m.text_note:
                out.append(f"    ({m.text_note})")
        out += [f"  {s} {kind}" for s in _more(hidden)]
    return out


def _t_externals(d: BundleDiff) -> list[str]:
    out = ["externals"]
    if not d.externals:
        out.append("  unchanged")
    for e in d.externals:
        out.append(f"  {e.change} {e.path}" + (f": {_fields(e.fields)}" if e.fields else ""))
    out += [f"  {s}" for s in _more(d.externals_more)]
    return out


def _t_signers(d: BundleDiff) -> list[str]:
    out = ["signers"]
    if not d.signers:
        out.append("  unchanged")
    for s in d.signers:
        who = f"verified by {s.verified_by}" if s.verified_by else "no trusted key verified it"
        out.append(f"  {s.change} {s.keyid} ({who})")
    return out


def diff_to_dict(d: BundleDiff, exit_code: int) -> dict[str, Any]:
    """The diff as JSON: every field, the alerts, the headline, the summary and the exit code."""
    doc = asdict(d)
    doc.update(
        {
            "alerts": list(d.alerts),
            "result": headline(d).split(" (")[0].lower().replace(" ", "_"),
            "identical": d.identical,
            "content_differs": d.content_differs,
            "summary": summary(d),
            "exit_code": exit_code,
        }
    )
    return doc


class _Md:
    """Markdown lines; every author string through :mod:`replay.report.escape`."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def w(self, line: str = "") -> None:
        self.lines.append(line)

    @staticmethod
    def text(s: str) -> str:
        return markdown_text(s)[0]

    @staticmethod
    def code(s: str | None) -> str:
        return "*(absent)*" if s is None else markdown_code(s)

    def fields(self, fields: tuple[FieldChange, ...]) -> str:
        return "; ".join(
            f"{self.code(f.field)} {self.code(f.old)} → {self.code(f.new)}" for f in fields
        )


def render_markdown(d: BundleDiff) -> str:
    """The diff as Markdown for a pull-request comment ("since the last reviewed head: ...")."""
    md = _Md()
    md.w(f"### bundle diff: {headline(d)}")
    md.w()
    _m_alerts(md, d)
    md.w(f"Since the last reviewed head: {md.text(summary(d))}.")
    md.w()
    md.w(f"{md.code(d.old.path)} → {md.code(d.new.path)}")
    for section in (_m_verdict, _m_gates, _m_tables, _m_members, _m_externals):
        md.w()
        section(md, d)
    return "\n".join(md.lines) + "\n"


def _m_alerts(md: _Md, d: BundleDiff) -> None:
    for g in d.gates:
        if g.loosened and g.change == "changed":
            md.w(f"> **GATE LOOSENED** {md.code(g.gate_id)}: {md.fields(g.fields)}  ")
        elif g.loosened:
            md.w(f"> **GATE REMOVED** {md.code(g.gate_id)}: it no longer applies  ")
    if d.plan is not None:
        md.w(
            f"> **FROZEN PLAN CHANGED** {md.code(d.plan.old_path)} → {md.code(d.plan.new_path)}: "
            f"{len(d.plan.fields) + d.plan.more} field(s), listed below  "
        )
    if d.alerts:
        md.w()


def _m_verdict(md: _Md, d: BundleDiff) -> None:
    md.w("**Verdict**")
    md.w()
    md.w(
        f"- old {md.text(d.old.outcome)} (signature {md.text(d.old.signature_status)}), "
        f"new {md.text(d.new.outcome)} (signature {md.text(d.new.signature_status)})"
    )
    if not d.claims:
        md.w("- no claim changed")
    for c in d.claims:
        if c.change == "changed":
            md.w(f"- claim {md.code(c.claim_id)}: {md.fields(c.fields)}")
        else:
            status = c.new_status if c.change == "added" else c.old_status
            md.w(f"- claim {md.code(c.claim_id)} {c.change} ({md.code(status)})")
    if d.claims_more:
        md.w(f"- {d.claims_more:,} more claim change(s)")


def _m_gates(md: _Md, d: BundleDiff) -> None:
    md.w("**Gates and frozen plan**")
    md.w()
    if not d.gates and d.plan is None:
        md.w("- unchanged")
    for g in d.gates:
        word = _gate_word(g)
        word = f"**{word}**" if word.isupper() else word
        md.w(
            f"- gate {md.code(g.gate_id)} {word}" + (f": {md.fields(g.fields)}" if g.fields else "")
        )
    if d.gates_more:
        md.w(f"- {d.gates_more:,} more gate change(s)")
    if d.plan is not None:
        for f in d.plan.fields:
            md.w(f"- plan {md.code(f.field)}: {md.code(f.old)} → {md.code(f.new)}")
        if d.plan.more:
            md.w(f"- {d.plan.more:,} more plan field(s)")


def _m_tables(md: _Md, d: BundleDiff) -> None:
    md.w("**Tables**")
    md.w()
    other = [t for t in d.tables if t.differs]
    if not other:
        md.w("- no row changed" if not d.gates else "- no other row changed")
    for t in other:
        md.w(f"- {md.code(t.table)} (by {', '.join(t.key)}): {_table_counts(t)}")
        for k in t.added:
            md.w(f"  - added {md.code(k)}")
        for k in t.removed:
            md.w(f"  - removed {md.code(k)}")
        for r in t.changed:
            md.w(f"  - changed {md.code(r.key)}: {md.fields(r.fields)}")
        hidden = (
            t.added_count
            + t.removed_count
            + t.changed_count
            - len(t.added)
            - len(t.removed)
            - len(t.changed)
        )
        if hidden:
            md.w(f"  - {hidden:,} more")


def _m_members(md: _Md, d: BundleDiff) -> None:
    md.w("**Members**")
    md.w()
    if not any(d.members_counts):
        md.w("- unchanged")
    for kind, listed, hidden in _member_groups(d):
        for m in listed:
            md.w(_md_member(md, m))
            if m.text is not None and m.text.lines:
                md.w("  <details><summary>text diff</summary>")
                md.w()
                for line in m.text.lines:
                    md.w(f"  - {md.code(line)}")
                if m.text.more:
                    md.w(f"  - {m.text.more:,} more diff line(s)")
                md.w()
                md.w("  </details>")
            elif m.text_note:
                md.w(f"  - ({md.text(m.text_note)})")
        if hidden:
            md.w(f"- {hidden:,} more {kind}")


def _m_externals(md: _Md, d: BundleDiff) -> None:
    md.w("**Externals and signers**")
    md.w()
    if not d.externals:
        md.w("- externals unchanged")
    for e in d.externals:
        md.w(
            f"- external {e.change} {md.code(e.path)}"
            + (f": {md.fields(e.fields)}" if e.fields else "")
        )
    if d.externals_more:
        md.w(f"- {d.externals_more:,} more external change(s)")
    if not d.signers:
        md.w("- signers unchanged")
    for s in d.signers:
        who = (
            f"verified by {md.code(s.verified_by)}"
            if s.verified_by
            else "no trusted key verified it"
        )
        md.w(f"- signer {s.change} {md.code(s.keyid)} ({who})")


def _md_member(md: _Md, m: MemberChange) -> str:
    if m.change == "changed":
        return (
            f"- changed {md.code(m.path)} ({md.text(m.role)}): {_size(m.old_size)} → "
            f"{_size(m.new_size)}, sha256 {md.code(_short(m.old_sha256))} → "
            f"{md.code(_short(m.new_sha256))}"
        )
    size = m.new_size if m.change == "added" else m.old_size
    digest = m.new_sha256 if m.change == "added" else m.old_sha256
    return (
        f"- {m.change} {md.code(m.path)} ({md.text(m.role)}): {_size(size)}, "
        f"sha256 {md.code(_short(digest))}"
    )
