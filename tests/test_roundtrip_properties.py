"""Property tests: any valid receipts an author writes come back exactly after seal and verify."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundler.format.trust import Trust
from bundler.seal import seal_campaign
from bundler.verify import check_bundle, open_bundle
from tests.campaign_builder import receipts, write_campaign

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))

finite = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)
ns_fraction = st.integers(min_value=0, max_value=999_999_999)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    e2e=st.lists(finite, min_size=20, max_size=20),
    fractions=st.lists(ns_fraction, min_size=20, max_size=20),
    note=st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=30),
)
def test_values_round_trip_exactly(e2e: list[float], fractions: list[int], note: str) -> None:
    rows = receipts()
    for r, v, f in zip(rows, e2e, fractions, strict=True):
        r["e2e_s"] = v
        r["start"] = f"2026-03-01T10:00:00.{f:09d}Z"
        r["end"] = "2026-03-01T11:00:00Z"
        r["note"] = note
    with tempfile.TemporaryDirectory() as d:
        camp = write_campaign(Path(d) / "c", **{"receipts.jsonl": rows})
        out = Path(d) / "x.bundle"
        seal_campaign(camp, out, keys=[KEY])
        assert check_bundle(out, trust=Trust.keys([KEY.public_key()])).ok
        t = open_bundle(out, trust=Trust.keys([KEY.public_key()])).table("receipts")
    assert t.column("e2e_s").to_pylist() == e2e
    base = 1772359200 * 10**9  # 2026-03-01T10:00:00Z (date -u -d ... +%s)
    assert t.column("start").cast(pa.int64()).to_pylist() == [base + f for f in fractions]
