"""Shared fixtures for the privlab.learn tests: tiny data, one torch thread."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")
torch.set_num_threads(1)


@pytest.fixture
def blobs() -> tuple[np.ndarray, np.ndarray]:
    """300 rows, 6 features, two well separated classes (a linear rule plus noise)."""
    gen = np.random.default_rng(7)
    x = gen.normal(size=(300, 6)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] + 0.1 * gen.normal(size=300) > 0).astype(np.int64)
    return x, y
