"""Light helpers shared by the simulation and the Flower client processes.

Kept free of privlab.core and dp-accounting imports so a device process starts quickly: a
client needs its data, the model math and nothing about accounting.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privlab.errors import InvalidInputError
from privlab.federated.data import RatingsData, TabularData, load_adult_task, load_movielens_task
from privlab.federated.factorized import FactorizedConfig, FactorizedModel, RatingsBatch
from privlab.federated.mlp import MLPConfig, MLPModel, TabularBatch

DATASETS = ("movielens", "adult")


def load_task(dataset: str, split_seed: int = 0, max_users: int | None = None,
              adult_users: int = 600) -> RatingsData | TabularData:
    """The task's per-user data (bundled MovieLens ratings or Adult dealt to users)."""
    if dataset == "movielens":
        return load_movielens_task(split_seed=split_seed, max_users=max_users)
    if dataset == "adult":
        return load_adult_task(n_users=adult_users, split_seed=split_seed, max_users=max_users)
    raise InvalidInputError(f"dataset must be one of {', '.join(DATASETS)}, got {dataset!r}")


def make_model(data: RatingsData | TabularData, factorized: FactorizedConfig | None = None,
               mlp: MLPConfig | None = None) -> Any:
    if isinstance(data, RatingsData):
        return FactorizedModel(data.n_items, data.item_features, data.rating_range, factorized)
    return MLPModel(data.n_features, mlp)


def make_batch(data: RatingsData | TabularData, users: np.ndarray | None = None) -> Any:
    if isinstance(data, RatingsData):
        return RatingsBatch.from_data(data, users)
    return TabularBatch.from_data(data, users)


def client_kind(algorithm: str) -> str:
    return "stats" if algorithm == "dpam" else "update"
