"""Fixtures shared by the CLI tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def adult_csv(tmp_path_factory) -> Path:
    """The first 200 rows of the bundled Adult table as a CSV file (a user's own DATA)."""
    from privlab.data.datasets import load_dataset

    path = tmp_path_factory.mktemp("data") / "adult.csv"
    load_dataset("adult").head(200).to_csv(path, index=False)
    return path
