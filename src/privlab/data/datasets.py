"""Bundled datasets: real data shipped inside the package (no network), plus generators.

Each entry has a loader; `list_datasets()` describes them for `privlab datasets list`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from privlab.data.bundled import bundled_path  # re-exported: its import path before issue 31
from privlab.errors import InvalidInputError

ADULT_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
    "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
    "hours-per-week", "native-country", "salary",
]


def load_adult(drop_missing: bool = False) -> pd.DataFrame:
    """UCI Adult (32,561 rows). `?` is missing; `drop_missing=True` keeps complete rows (30,162)."""
    frame = pd.read_csv(bundled_path("adult", "adult.csv.gz"), skipinitialspace=True,
                        na_values=["?"], header=0)
    frame.columns = ADULT_COLUMNS
    if drop_missing:
        frame = frame.dropna().reset_index(drop=True)
    return frame


def load_geolife() -> pd.DataFrame:
    """GeoLife GPS sample as shipped by scikit-mobility: lat, lng, datetime, uid (217,653 rows)."""
    frame = pd.read_csv(bundled_path("geolife", "geolife_sample.txt.gz"),
                        dtype={"uid": str}, parse_dates=["datetime"])
    return frame


def load_movielens(table: str = "ratings") -> pd.DataFrame:
    """MovieLens ml-latest-small (GroupLens licence, see its README): ratings or movies."""
    if table not in ("ratings", "movies"):
        raise InvalidInputError("movielens table must be 'ratings' or 'movies'")
    return pd.read_csv(bundled_path("movielens", f"{table}.csv.gz"))


def load_digits() -> pd.DataFrame:
    """scikit-learn's 8x8 digits as a table: pixel_0..pixel_63 and target."""
    from sklearn.datasets import load_digits as sk_digits

    bunch = sk_digits()
    frame = pd.DataFrame(bunch.data, columns=[f"pixel_{i}" for i in range(64)])
    frame["target"] = bunch.target
    return frame


def load_classification(n_samples: int = 6100, n_features: int = 100, random_state: int = 42,
                        **kwargs: Any) -> pd.DataFrame:
    """scikit-learn make_classification with Kobylianska's defaults (100 features, 20 informative,
    10 redundant, 5 repeated, 2 classes, 3 clusters per class)."""
    from sklearn.datasets import make_classification

    params = dict(n_informative=20, n_redundant=10, n_repeated=5, n_classes=2,
                  n_clusters_per_class=3)
    params.update(kwargs)
    x, y = make_classification(n_samples=n_samples, n_features=n_features,
                               random_state=random_state, **params)
    frame = pd.DataFrame(x, columns=[f"x{i}" for i in range(n_features)])
    frame["target"] = y
    return frame


def load_census(n: int = 300, seed: int = 1) -> pd.DataFrame:
    """Synthetic Turkish census (the PIA article Tables 3-4); see `privlab.data.census`."""
    from privlab.data.census import generate_census

    return generate_census(n=n, seed=seed)


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    description: str
    loader: Callable[..., pd.DataFrame]
    source: str
    licence: str


DATASETS: dict[str, DatasetInfo] = {
    d.name: d
    for d in [
        DatasetInfo("adult", "UCI Adult census income, 32,561 rows x 15 (options: drop_missing)",
                    load_adult, "UCI ML repository", "CC BY 4.0"),
        DatasetInfo("geolife", "GeoLife GPS sample, 217,653 points (lat, lng, datetime, uid)",
                    load_geolife, "Microsoft Research GeoLife via scikit-mobility",
                    "Microsoft Research licence"),
        DatasetInfo("movielens", "MovieLens ml-latest-small, 100,836 ratings by 610 users "
                    "(options: table=ratings|movies)", load_movielens, "GroupLens",
                    "GroupLens research licence (non-commercial; README bundled)"),
        DatasetInfo("digits", "scikit-learn 8x8 digits, 1,797 images", load_digits,
                    "scikit-learn", "BSD-3"),
        DatasetInfo("classification", "make_classification as in Kobylianska 2025 (options: "
                    "n_samples, random_state)", load_classification, "generated", "n/a"),
        DatasetInfo("census", "synthetic Turkish census of the PIA article (options: n, seed)",
                    load_census, "generated", "n/a"),
    ]
}


def list_datasets() -> list[dict[str, str]]:
    return [{"name": d.name, "description": d.description, "source": d.source,
             "licence": d.licence} for d in DATASETS.values()]


def load_dataset(name: str, **options: Any) -> pd.DataFrame:
    """Load a bundled or generated dataset by name."""
    if name not in DATASETS:
        raise InvalidInputError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
    try:
        return DATASETS[name].loader(**options)
    except TypeError as exc:
        raise InvalidInputError(f"bad option for dataset {name!r}: {exc}") from None
