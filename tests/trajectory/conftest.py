"""Fixtures for the trajectory tests (helpers live in trajectory_helpers.py)."""

from __future__ import annotations

import pandas as pd
import pytest
from trajectory_helpers import make_trajectories


@pytest.fixture
def traj() -> pd.DataFrame:
    return make_trajectories()


@pytest.fixture
def traj_csv(tmp_path, traj) -> str:
    path = tmp_path / "traj.csv"
    traj.to_csv(path, index=False)
    return str(path)
