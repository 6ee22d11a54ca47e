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


#: Commands that exit 5 (missing extra) on a core-only install before any other check.
NEEDS_ML = ("audit", "choose-epsilon", "train")


@pytest.fixture
def skip_without_ml():
    """`skip_without_ml(command)`: skip, with the install command, where `command` needs the
    [ml] extra (torch) and it is not installed (the core-only CI run)."""

    def check(command: str) -> None:
        if command.split()[0] in NEEDS_ML:
            pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")

    return check
