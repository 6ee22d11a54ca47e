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
    """A fresh copy of `_read_bundled` (read once per process)."""
    return _read_bundled(str(path), schema, tuple(columns) if columns else None).copy()


@lru_cache(maxsize=8)
def _read_bundled(path: str, schema: str, columns: tuple[str, ...] | None) -> pd.DataFrame:
    """A bundled file read as its bundled schema (bundled/schemas/<schema>.yaml) declares:
    every cell as text (`read_table`), each column converted by its declared type with one
    fixed rule (integers int64, numbers float64, ISO 8601 times to naive UTC, the rest text;
    movielens' numeric user ids int64, the type the loader has always returned); no type is
    guessed from the rows. A cell that does not fit fails in one line: the package is broken.
    (The bundled files are public and trusted: the schema's bounds and categories are the
    job of `privlab.schema.read_declared` on private rows; `privlab.schema` imports this
    package, so this reads the YAML itself.)"""
    import yaml

    from privlab.data.io import read_table

    frame = read_table(path)
    if columns is not None:
        frame.columns = list(columns)
    declared = yaml.safe_load(bundled_path("schemas", f"{schema}.yaml").read_text())
    for name, spec in declared["columns"].items():
        kind = "identifier-int" if name == "userId" else spec["type"]
        frame[name] = _as_declared(frame[name], kind, spec.get("missing", True), path)
    return frame


def _as_declared(cells: pd.Series, kind: str, missing: bool, path: str) -> pd.Series:
    try:
        if kind in ("integer", "identifier-int"):
            numbers = pd.to_numeric(cells, errors="raise")
            return numbers.astype("int64" if not missing or kind != "integer" else "float64")
        if kind == "numeric":
            return pd.to_numeric(cells, errors="raise").astype("float64")
        if kind == "datetime":
            stamps = pd.to_datetime(cells, format="ISO8601", utc=True)
            return stamps.dt.tz_convert(None).astype("datetime64[us]")
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(f"bundled file {path}: column {cells.name!r} is not "
                                f"{kind} as its bundled schema declares ({exc})") from None
    return cells.astype("str")


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
