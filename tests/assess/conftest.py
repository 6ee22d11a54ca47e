"""Shared, read-only Adult frames (loading costs ~0.3 s; tests must not mutate them)."""

from __future__ import annotations

import pandas as pd
import pytest

from privlab.data.datasets import load_dataset


@pytest.fixture(scope="session")
def adult_complete() -> pd.DataFrame:
    return load_dataset("adult", drop_missing=True)


@pytest.fixture(scope="session")
def adult_raw() -> pd.DataFrame:
    return load_dataset("adult")
