"""Small, fixed samples of the bundled Adult table for the synth tests."""

from __future__ import annotations

import pandas as pd
import pytest

from privlab.data.datasets import load_dataset


@pytest.fixture(scope="session")
def adult() -> pd.DataFrame:
    return load_dataset("adult", drop_missing=True)


@pytest.fixture(scope="session")
def adult_small(adult: pd.DataFrame) -> pd.DataFrame:
    """3,000 rows (seeded sample)."""
    return adult.sample(3000, random_state=7).reset_index(drop=True)

