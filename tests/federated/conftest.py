"""Shared fixtures: a small MovieLens task (first 40 users) loaded once per session."""

from __future__ import annotations

import pytest

from privlab.federated.tasks import load_task


@pytest.fixture(scope="session")
def small_movielens():
    return load_task("movielens", split_seed=0, max_users=40)
