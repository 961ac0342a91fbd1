"""Seal one campaign on the column-wise path and on the per-row path (the reference), for
the tests that compare their bundles byte for byte."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bundler.campaign.columnar import PER_ROW_ENV
from bundler.campaign.stream import StreamLimits
from bundler.errors import CampaignError
from bundler.seal import seal_campaign

Outcome = bytes | list[Any]
"""A bundle's bytes, or the problems (file, record, field, message) if refused."""


@contextmanager
def per_row(on: bool) -> Iterator[None]:
    """``REPROBUNDLE_SEAL_PER_ROW`` set (or unset) for the block, restored after."""
    old = os.environ.get(PER_ROW_ENV)
    if on:
        os.environ[PER_ROW_ENV] = "1"
    else:
        os.environ.pop(PER_ROW_ENV, None)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(PER_ROW_ENV, None)
        else:
            os.environ[PER_ROW_ENV] = old


def seal(camp: Path, out: Path, on_rows: bool, stream: StreamLimits | None = None) -> Outcome:
    """Seal ``camp`` into ``out`` on one path; a refusal leaves no ``out``."""
    out.unlink(missing_ok=True)
    with per_row(on_rows):
        try:
            seal_campaign(camp, out, force=True, stream=stream)
        except CampaignError as exc:
            assert not out.exists()
            return [(p.where, p.record, p.field, p.message) for p in exc.problems]
    return out.read_bytes()


def both(camp: Path, stream: StreamLimits | None = None) -> tuple[Outcome, Outcome]:
    """(column-wise, per-row) outcomes of sealing ``camp``."""
    col = seal(camp, camp.parent / "col.bundle", on_rows=False, stream=stream)
    row = seal(camp, camp.parent / "row.bundle", on_rows=True, stream=stream)
    return col, row
