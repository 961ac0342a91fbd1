"""Fuzzed campaigns: seal either seals a bundle that verifies or refuses with located errors.

Issue 12, "fuzzing as a standing check" (campaign inputs): malformed and oddly
typed JSON documents, receipt and attempt rows, raw byte damage, stray files.
500 derandomized cases (profile ``fuzz-ci``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.profiles import FUZZ_CI
from tests.fuzz.properties import check_seal
from tests.fuzz.strategies import Base, CampaignFiles, campaign_mutants

SEAL_CASES = 500


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Each case seals in a fresh folder under here."""
    return tmp_path_factory.mktemp("fuzz-seal")


@pytest.fixture(scope="module")
def outcomes() -> Counter[bool]:
    """How many cases sealed (True) and how many were refused (False)."""
    return Counter()


@settings(FUZZ_CI, max_examples=SEAL_CASES)
@given(data=st.data())
def test_seal_seals_or_refuses_with_located_errors(
    data: st.DataObject,
    base: Base,
    campaign_files: CampaignFiles,
    workdir: Path,
    outcomes: Counter[bool],
) -> None:
    mutant = data.draw(campaign_mutants(campaign_files))
    out = check_seal(base, mutant, workdir)
    outcomes[out.accepted] += 1
    assert out.traceback is None, out.traceback
    assert out.unlocated is None, out.unlocated


def test_both_outcomes_occurred(outcomes: Counter[bool]) -> None:
    """The mutations are neither all fatal nor all harmless (the strategy is not degenerate)."""
    if not outcomes:
        pytest.skip("run with the property test above")
    assert outcomes[True] > 0
    assert outcomes[False] > SEAL_CASES // 2
