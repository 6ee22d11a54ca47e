"""Light helpers shared by the simulation and the Flower client processes.

Kept free of privlab.core and dp-accounting imports so a device process starts quickly: a
client needs its data, the model math and nothing about accounting.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privlab.errors import InvalidInputError
from privlab.federated.data import (
    MOVIELENS_RANGE,
    RatingsData,
    TabularData,
    check_rating_range,
    load_adult_task,
    load_movielens_task,
    load_ratings_files,
)
from privlab.federated.factorized import FactorizedConfig, FactorizedModel, RatingsBatch
from privlab.federated.mlp import MLPConfig, MLPModel, TabularBatch

DATASETS = ("movielens", "adult")


def check_data_options(dataset: str, ratings: str | None, movies: str | None,
                       rating_range: tuple[float, float], schema: str | None = None,
                       declared_users: int | None = None) -> tuple[float, float]:
    """The file options only make sense together and for the ratings task; returns the range."""
    rating_range = check_rating_range(rating_range)
    if ratings is None and (schema is not None or declared_users is not None):
        raise InvalidInputError("--schema/--users describe a --ratings file; the bundled "
                                "datasets have their own (public) schema and user count")
    if dataset != "movielens" and (ratings is not None or movies is not None):
        raise InvalidInputError("--ratings/--movies give MovieLens-format ratings; use them with "
                                "--dataset movielens")
    if ratings is None and movies is not None:
        raise InvalidInputError("--movies is the catalogue of a --ratings file; pass --ratings "
                                "too (the bundled MovieLens has its own catalogue)")
    if ratings is None and rating_range != MOVIELENS_RANGE:
        raise InvalidInputError("--rating-range declares the range of a --ratings file; the "
                                "bundled MovieLens range is 0.5,5")
    return rating_range


def load_task(dataset: str, split_seed: int = 0, max_users: int | None = None,
              adult_users: int = 600, *, ratings: str | None = None, movies: str | None = None,
              rating_range: tuple[float, float] = MOVIELENS_RANGE, schema: str | None = None,
              on_invalid: str = "refuse", declared_users: int | None = None
              ) -> RatingsData | TabularData:
    """The task's per-user data: bundled MovieLens ratings, or a ratings file in the MovieLens
    format (`ratings`, optional public catalogue `movies`, declared `rating_range`), or Adult
    dealt to synthetic users."""
    rating_range = check_data_options(dataset, ratings, movies, rating_range, schema,
                                      declared_users)
    if ratings is not None:
        return load_ratings_files(ratings, movies, rating_range=rating_range,
                                  split_seed=split_seed, max_users=max_users, schema=schema,
                                  on_invalid=on_invalid, declared_users=declared_users)
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
