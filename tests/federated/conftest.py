"""Shared fixtures: a small MovieLens task (the first 40 users of the bundled, public data,
chosen by the test: `--max-users` would keep a keyed-hash sample of all 610) loaded once."""

from __future__ import annotations

import numpy as np
import pytest

from privlab.federated.tasks import load_task


@pytest.fixture(scope="session")
def small_movielens():
    return load_task("movielens", split_seed=0).subset_users(np.arange(40))
