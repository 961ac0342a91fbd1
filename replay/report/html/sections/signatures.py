"""The signatures section: who signed the bundle, what was verified, and the environment.

A key id an envelope names is only a hint; a signer is established by a valid
signature under a key the reader trusts. The environment recorded at seal is
printed next to this replay's, and the sanitization done at seal is summed up.
"""

from __future__ import annotations

from collections import Counter

from replay.report.html.facts import BundleFacts
from replay.report.html.sections.common import _join_code
from replay.report.html.view import Block, Para, Section, Span, Table, cell, rich
from replay.result import Integrity, ReplayResult

__all__ = ["signatures_section"]


def _signatures_table(facts: BundleFacts) -> Table:
    rows = tuple(
        (
            cell(str(s.index), num=True),
            cell(Span(s.keyid_hint or "-", "code")),
            cell("valid" if s.valid else "not verified", "good" if s.valid else "warn"),
            cell(Span(s.verified_by, "code") if s.verified_by else "no trusted key given for it"),
        )
        for s in facts.signatures
    )
    return Table(
        ("#", "key id (as the envelope names it)", "signature", "verified by trusted key"),
        rows,
        caption="Signatures and signers",
        table_id="signatures-table",
    )


def _environment_table(i: Integrity, facts: BundleFacts) -> Table:
    """Each component at seal and in this replay (amber where they differ)."""
    env_rows = tuple(
        (
            cell(k),
            cell(str(facts.environment.get(k, "-"))),
            cell(
                i.environment_now.get(k, "-"),
                "warn"
                if k in i.environment_now
                and facts.environment.get(k) not in (None, i.environment_now[k])
                else "",
            ),
        )
        for k in sorted(facts.environment)
    )
    return Table(
        ("component", "at seal", "this replay"),
        env_rows,
        caption="Environment",
        detail=True,
        table_id="environment-table",
    )


def signatures_section(r: ReplayResult, facts: BundleFacts) -> Section:
    """The signatures and integrity section."""
    i = r.integrity
    by_rule = Counter[str]()
    for row in facts.scrubbed:
        by_rule[str(row.get("rule"))] += int(row.get("count", 0) or 0)
    trusted = i.trusted
    blocks: list[Block] = [
        Para(
            rich(
                f"Signature {i.signature_status}" + (" by " if i.verified_by else "") + "",
                *_join_code(i.verified_by),
                f". Format {i.format_version}; {i.members} members, each matching its SHA-256 "
                f"in the signed manifest; "
                + (
                    f"{i.external} external artifact(s) bound by hash in the signed statement."
                    if i.external
                    else "no external artifact bound."
                ),
            ),
            "good" if trusted else "bad",
        ),
        _signatures_table(facts),
        Para(
            rich(
                "The key id an envelope names is a hint anyone can write; a signer is established "
                "only by a valid signature under a key the reader trusts (--key / --trusted-keys)."
            ),
            "note",
        ),
        _environment_table(i, facts),
    ]
    if by_rule:
        blocks.append(
            Para(
                rich(
                    f"Sanitized at seal: {sum(by_rule.values())} value(s) scrubbed ("
                    + ", ".join(f"{k} {v}" for k, v in sorted(by_rule.items()))
                    + f"); {len(facts.unscrubbed)} finding(s) left unscrubbed in carried files."
                )
            )
        )
    return Section(
        "signatures",
        "Signatures and integrity",
        tuple(blocks),
        r.limits("integrity"),
        i.signature_status,
        "good" if trusted else "bad",
    )
