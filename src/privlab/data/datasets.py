"""Bundled datasets: real data shipped inside the package (no network), plus generators.

Each entry has a loader; `list_datasets()` describes them for `privlab datasets list`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pandas as pd

from privlab.data.bundled import bundled_path  # re-exported: its import path before issue 31
from privlab.errors import InvalidInputError

ADULT_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
    "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
    "hours-per-week", "native-country", "salary",
]


def _bundled(path: Any, schema: str, columns: list[str] | None = None) -> pd.DataFrame:
    """A fresh copy of `_read_bundled` (read once per process: reading by the declaration
    costs about 0.4 s of CPU for adult and 2 s for geolife, pandas' guess 0.05 s)."""
    return _read_bundled(str(path), schema, tuple(columns) if columns else None).copy()


@lru_cache(maxsize=8)
def _read_bundled(path: str, schema: str, columns: tuple[str, ...] | None) -> pd.DataFrame:
    """A bundled file read as its bundled schema declares (`read_declared`: each cell as text,
    converted by its column's declared type, no type guessed from the rows), then given the
    loader's fixed column types: integer columns (and movielens' numeric user ids) int64,
    numbers float64, text the default string type, times datetime64 (the types the loaders
    have always returned). A cell outside the schema is refused."""
    from privlab.data.io import read_table
    from privlab.schema import bundled_schema
    from privlab.schema.read import read_declared

    raw = read_table(path)
    if columns is not None:
        raw.columns = list(columns)
    sch = bundled_schema(schema)
    frame = read_declared(raw, sch)
    for col in sch.columns:
        if col.type == "integer" and not col.missing or col.name == "userId":
            frame[col.name] = frame[col.name].astype("int64")
        elif col.type in ("integer", "numeric"):
            frame[col.name] = frame[col.name].astype("float64")
        elif col.type == "datetime":
            frame[col.name] = frame[col.name].astype("datetime64[us]")
        else:
            frame[col.name] = frame[col.name].astype("str")
    return frame


def load_adult(drop_missing: bool = False) -> pd.DataFrame:
    """UCI Adult (32,561 rows). `?` is missing; `drop_missing=True` keeps complete rows (30,162)."""
    frame = _bundled(bundled_path("adult", "adult.csv.gz"), "adult", ADULT_COLUMNS)
    if drop_missing:
        frame = frame.dropna().reset_index(drop=True)
    return frame


def load_geolife() -> pd.DataFrame:
    """GeoLife GPS sample as shipped by scikit-mobility: lat, lng, datetime, uid (217,653 rows)."""
    return _bundled(bundled_path("geolife", "geolife_sample.txt.gz"), "geolife")


def load_movielens(table: str = "ratings") -> pd.DataFrame:
    """MovieLens ml-latest-small (GroupLens licence, see its README): ratings or movies."""
    if table not in ("ratings", "movies"):
        raise InvalidInputError("movielens table must be 'ratings' or 'movies'")
    return _bundled(bundled_path("movielens", f"{table}.csv.gz"), f"movielens-{table}")


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
