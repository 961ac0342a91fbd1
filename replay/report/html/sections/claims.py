"""The claims section: every claim of the bundle, its status, claimed and recomputed values.

Each value is recomputed exactly by :mod:`replay.sections.claims` and only shown here;
a contradicted claim prints both values side by side, an unverifiable one
the reason (what is missing).
"""

from __future__ import annotations

from replay.report.html.sections.claim_notes import _with_unit
from replay.report.html.sections.common import _STATUS_STYLE, _status_span
from replay.report.html.view import Para, Rich, Section, Span, Table, cell, rich
from replay.result import ReplayResult
from replay.sections.claims import CONFIRMED, CONTRADICTED, UNVERIFIABLE, ClaimCheck

__all__ = ["claims_section"]


def claims_section(r: ReplayResult) -> Section:
    """The claims section: one row per claim, in the bundle's order."""
    rows = []
    styles = []
    for c in r.claims.checks:
        params = ", ".join(f"{k}={v}" for k, v in sorted(c.params.items()))
        rows.append(
            (
                cell(_status_span(c.status)),
                cell(Span(c.claim_id, "code")),
                cell(c.statistic + (f" ({params})" if params else "")),
                cell(_with_unit(c.claimed, c.unit, c.statistic), num=True),
                cell("-" if c.recomputed is None else c.recomputed, num=True),
                cell("-" if c.exact is None else c.exact, num=True),
                cell(_claim_detail(c)),
            )
        )
        styles.append(_STATUS_STYLE.get(c.status, ""))
    cr = r.claims
    n_ok, n_bad, n_unk = cr.count(CONFIRMED), cr.count(CONTRADICTED), cr.count(UNVERIFIABLE)
    all_ok = n_ok == len(cr.checks) > 0
    return Section(
        "claims",
        "Claims",
        (
            Para(
                rich(
                    f"{n_ok} confirmed, {n_bad} contradicted (claimed and recomputed shown side "
                    f"by side), {n_unk} unverifiable (the reason says what is missing). Each value "
                    "is recomputed exactly and rounded half to even at the claim's precision."
                )
            ),
            Table(
                (
                    "status",
                    "claim",
                    "statistic",
                    "claimed",
                    "recomputed",
                    "exact",
                    "derivation and explanation",
                ),
                tuple(rows),
                row_styles=tuple(styles),
                caption="Every claim: claimed, recomputed, and how",
                table_id="claims-table",
            ),
        ),
        r.limits("claims"),
        "confirmed"
        if all_ok
        else "no claims"
        if not cr.checks
        else f"{n_bad} contradicted, {n_unk} unverifiable",
        "good" if all_ok else "bad" if n_bad else "warn",
    )


def _claim_detail(c: ClaimCheck) -> Rich:
    out: list[str | Span] = []
    if c.derivation:
        out.append(c.derivation)
    if c.explanation:
        out += ["; " if out else "", Span(c.explanation, _STATUS_STYLE.get(c.status, ""))]
    if c.text:
        out += [" — author's text: “", c.text, "”"]
    return rich(*out)
