"""One sealed base bundle and one campaign per test session: the fuzz cases derive from them."""

from __future__ import annotations

import pytest

from tests.fuzz.strategies import Base, CampaignFiles, base_campaign_files, make_base


@pytest.fixture(scope="session")
def base() -> Base:
    """The mini campaign sealed with the fixed author key."""
    return make_base()


@pytest.fixture(scope="session")
def campaign_files() -> CampaignFiles:
    """The mini campaign's files."""
    return base_campaign_files()
