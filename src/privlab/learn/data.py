"""Training data for privlab.learn: input checks, preprocessing and the experiment datasets.

Preprocessing is part of the privacy story: a scaler or an encoder fitted on the training data
releases facts about it (a column's maximum, the existence of a rare category) outside the DP
guarantee. So the Adult pipeline here is data-independent (category lists from the public UCI
documentation, value ranges from the public census coding), and `TablePreprocessor` says in
`leaks` which statistics it took from the data when the caller gives no public bounds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from privlab.data.io import require_columns
from privlab.errors import InvalidInputError, in_cli, option_name
from privlab.schema.model import OTHER as OTHER_LABEL
from privlab.schema.model import Schema

# --------------------------------------------------------------------------- input checks


def split_target(frame: pd.DataFrame, target: str) -> tuple[pd.DataFrame, pd.Series]:
    """Separate features from the target column, with one-line errors for the usual mistakes."""
    if not isinstance(frame, pd.DataFrame):
        raise InvalidInputError("expected a table (pandas DataFrame) of features and target")
    require_columns(frame, [target], "target column")
    y = frame[target]
    missing = int(y.isna().sum())
    if missing:
        raise InvalidInputError(f"target column {target!r} has {missing} missing values; drop "
                                "those rows or fill them before training")
    classes = pd.unique(y)
    if len(classes) < 2:
        only = classes[0] if len(classes) else "nothing"
        raise InvalidInputError(f"target column {target!r} is constant ({only!r}); a classifier "
                                "needs at least two classes")
    features = frame.drop(columns=[target])
    if features.shape[1] == 0:
        raise InvalidInputError(f"the table has no feature columns besides {target!r}")
    return features, y


def encode_labels(y: Sequence[Any] | np.ndarray | pd.Series,
                  classes: Sequence[Any] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Map labels to 0..k-1; returns (codes, classes).

    With `classes` (a declared, public list: e.g. a schema's categories) the class list and
    the model's output size come from that list alone, even when some class has no row;
    without it they are read from `y` (the caller must treat them as public or say not).
    """
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise InvalidInputError(f"y must be one-dimensional, got shape {arr.shape}")
    if classes is not None:
        declared = np.asarray(list(classes), dtype=object)
        if len(declared) < 2 or len(set(declared.tolist())) != len(declared):
            raise InvalidInputError(f"classes must be at least two distinct labels, got "
                                    f"{list(classes)!r}")
        lookup = {c: i for i, c in enumerate(declared.tolist())}
        try:
            codes = np.fromiter((lookup[v] for v in arr.tolist()), dtype=np.int64,
                                count=arr.size)
        except (KeyError, TypeError):
            raise InvalidInputError(f"y has a label outside the declared classes "
                                    f"{declared.tolist()}") from None
        return codes, declared
    if arr.size == 0:
        raise InvalidInputError("y is empty: training needs at least one row per class")
    if arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
        raise InvalidInputError("y has missing or infinite values; drop those rows first")
    classes, codes = np.unique(arr, return_inverse=True)
    if len(classes) < 2:
        raise InvalidInputError(f"y is constant ({classes[0]!r}); a classifier needs at least "
                                "two classes")
    return codes.astype(np.int64), classes


def as_feature_matrix(x: Any, field_name: str = "X") -> np.ndarray:
    """A float32 matrix (n, d) or image batch from X, refusing text, NaN and infinities."""
    if isinstance(x, pd.DataFrame):
        bad = [c for c in x.columns if not pd.api.types.is_numeric_dtype(x[c])]
        if bad:
            how = ("pass --one-hot" if in_cli() else "e.g. one-hot with "
                   "privlab.learn.data.TablePreprocessor(one_hot=True), or --one-hot in the CLI")
            raise InvalidInputError(
                f"feature column {bad[0]!r} is not numeric; encode it first ({how})")
        x = x.to_numpy()
    try:
        arr = np.asarray(x, dtype=np.float32)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{field_name} has non-numeric values; encode text features "
                                "first (one-hot)") from None
    if arr.ndim < 2:
        raise InvalidInputError(f"{field_name} must be 2-D (rows x features), got shape "
                                f"{arr.shape}; reshape a single feature with X.reshape(-1, 1)")
    if arr.shape[0] == 0:
        raise InvalidInputError(f"{field_name} has no rows")
    if not np.all(np.isfinite(arr)):
        raise InvalidInputError(f"{field_name} has missing or infinite values; impute or drop "
                                "them before training")
    return arr


def check_batch_size(batch_size: int, n: int, field_name: str | None = None) -> int:
    """Batch size must be a positive integer no larger than the training set.

    The error names `field_name`, by default "--batch-size" under the CLI and "batch_size"
    when the library is called directly.
    """
    field_name = field_name or option_name("batch_size", "--batch-size")
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)):
        raise InvalidInputError(f"{field_name} must be a positive integer, got {batch_size!r}")
    if batch_size < 1:
        raise InvalidInputError(f"{field_name} must be >= 1, got {batch_size}")
    if batch_size > n:
        shown = (f"{field_name} {batch_size}" if field_name.startswith("--")
                 else f"{field_name}={batch_size}")
        raise InvalidInputError(f"{shown} is larger than the training set "
                                f"({n} rows); use at most {n}")
    return int(batch_size)


# --------------------------------------------------------------------------- preprocessing


@dataclass
class TablePreprocessor:
    """Numeric columns scaled to [0, 1] (clipped), text columns one-hot encoded.

    `bounds` maps a numeric column to its public range (lo, hi); `categories` maps a text
    column to its public category list. Anything not given is read from the data at `fit`
    and recorded in `leaks` (those statistics are not covered by the training guarantee).
    """

    one_hot: bool = False
    bounds: Mapping[str, tuple[float, float]] | None = None
    categories: Mapping[str, Sequence[Any]] | None = None
    numeric_: list[str] = field(default_factory=list, init=False)
    categorical_: list[str] = field(default_factory=list, init=False)
    ranges_: dict[str, tuple[float, float]] = field(default_factory=dict, init=False)
    levels_: dict[str, list[Any]] = field(default_factory=dict, init=False)
    leaks: list[str] = field(default_factory=list, init=False)

    def fit(self, frame: pd.DataFrame) -> TablePreprocessor:
        bounds = dict(self.bounds or {})
        cats = dict(self.categories or {})
        for col in list(bounds) + list(cats):
            require_columns(frame, [col], "bounds/categories column")
        self.numeric_, self.categorical_, self.ranges_, self.levels_ = [], [], {}, {}
        self.leaks = []
        for col in frame.columns:
            series = frame[col]
            if pd.api.types.is_bool_dtype(series) or pd.api.types.is_numeric_dtype(series):
                values = series.to_numpy(dtype=np.float64)
                if not np.all(np.isfinite(values)):
                    raise InvalidInputError(f"feature column {col!r} has missing or infinite "
                                            "values; impute or drop them before training")
                if col in bounds:
                    lo, hi = (float(v) for v in bounds[col])
                else:
                    lo, hi = float(values.min()), float(values.max())
                    self.leaks.append(f"range of {col!r} read from the data")
                if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
                    raise InvalidInputError(f"bounds for {col!r} must be finite LO <= HI, "
                                            f"got {lo}, {hi}")
                self.numeric_.append(col)
                self.ranges_[col] = (lo, hi)
            else:
                if not self.one_hot and col not in cats:
                    how = "--one-hot" if in_cli() else "one_hot=True (CLI: --one-hot)"
                    raise InvalidInputError(
                        f"feature column {col!r} is not numeric; encode it first or pass {how}")
                if series.isna().any():
                    raise InvalidInputError(f"feature column {col!r} has missing values; fill "
                                            "or drop them before training")
                if col in cats:
                    levels = list(cats[col])
                else:
                    levels = sorted(pd.unique(series).tolist(), key=str)
                    self.leaks.append(f"categories of {col!r} read from the data")
                self.categorical_.append(col)
                self.levels_[col] = levels
        return self

    @property
    def n_features(self) -> int:
        return len(self.numeric_) + sum(len(v) for v in self.levels_.values())

    def transform(self, frame: pd.DataFrame) -> np.ndarray:
        if not self.numeric_ and not self.categorical_:
            raise InvalidInputError("TablePreprocessor.transform called before fit")
        require_columns(frame, self.numeric_ + self.categorical_, "feature column")
        parts = []
        for col in self.numeric_:
            lo, hi = self.ranges_[col]
            values = pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=np.float64)
            if not np.all(np.isfinite(values)):
                raise InvalidInputError(f"feature column {col!r} has missing or non-numeric "
                                        "values")
            span = hi - lo if hi > lo else 1.0
            parts.append(np.clip((values - lo) / span, 0.0, 1.0)[:, None])
        for col in self.categorical_:
            levels = self.levels_[col]
            codes = pd.Categorical(frame[col], categories=levels).codes
            block = np.zeros((len(frame), len(levels)))
            rows = np.flatnonzero(codes >= 0)
            block[rows, codes[rows]] = 1.0  # unknown categories: all zeros
            parts.append(block)
        return np.hstack(parts).astype(np.float32)

    def fit_transform(self, frame: pd.DataFrame) -> np.ndarray:
        return self.fit(frame).transform(frame)


# --------------------------------------------------------------------------- schema encoding

#: Column types a model can take as features (identifier and text columns never are).
FEATURE_TYPES = ("categorical", "integer", "numeric", "datetime")
MISSING = "<missing>"


@dataclass(frozen=True)
class SchemaEncoder:
    """Feature encoding from a declared public schema alone: the feature count, the feature
    names and the scaling never depend on the rows.

    - categorical: one-hot over the declared categories, then `<other>` when the schema
      declares an other bucket, then `<missing>` when missing values are allowed;
    - integer / numeric / datetime: (x - LO) / (HI - LO) with the declared bounds, clamped to
      [0, 1] (`scale: log` maps through log1p first); a `<missing>` indicator follows when
      missing values are allowed (a missing value encodes as 0 plus the indicator).

    Each column adds at most 1 to a row's squared L2 norm, so sqrt(#columns) is a public norm
    bound. Input must be `privlab.schema.conform`ed first (values inside the schema).
    """

    schema: Schema
    columns: tuple[str, ...]

    @classmethod
    def for_target(cls, schema: Schema, target: str,
                   exclude: Sequence[str] = ()) -> SchemaEncoder:
        """Every declared feature-type column except the target and `exclude`."""
        schema.column(target)
        for name in exclude:
            schema.column(name)
        cols = tuple(c.name for c in schema.columns
                     if c.name != target and c.name not in exclude and c.type in FEATURE_TYPES)
        if not cols:
            raise InvalidInputError(f"schema {schema.name!r} declares no feature column besides "
                                    f"{target!r} (categorical, integer, numeric or datetime)")
        return cls(schema, cols)

    def _blocks(self) -> list[tuple[Any, list[str]]]:
        out = []
        for name in self.columns:
            col = self.schema.column(name)
            if col.type == "categorical":
                levels = list(col.categories) + ([OTHER_LABEL] if col.other else [])
                names = [f"{name}={v}" for v in levels]
            else:
                names = [name]
            if col.missing:
                names.append(f"{name}={MISSING}")
            out.append((col, names))
        return out

    @property
    def feature_names(self) -> list[str]:
        return [n for _, names in self._blocks() for n in names]

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @property
    def row_norm_bound(self) -> float:
        return math.sqrt(len(self.columns))

    def transform(self, frame: pd.DataFrame) -> np.ndarray:
        """The (n, n_features) float32 matrix of conformed rows."""
        require_columns(frame, list(self.columns), "feature column")
        parts = []
        for col, _names in self._blocks():
            series = frame[col.name]
            missing = series.isna().to_numpy()
            if col.type == "categorical":
                levels = list(col.categories) + ([OTHER_LABEL] if col.other else [])
                codes = pd.Categorical(series, categories=levels).codes
                block = np.zeros((len(frame), len(levels)))
                rows = np.flatnonzero(codes >= 0)
                block[rows, codes[rows]] = 1.0
            else:
                block = _scaled(series, col)[:, None]
            if col.missing:
                block = np.hstack([block, missing[:, None].astype(np.float64)])
            parts.append(block)
        return np.hstack(parts).astype(np.float32)

    def describe(self) -> dict[str, Any]:
        return {"schema": self.schema.name, "fingerprint": self.schema.fingerprint(),
                "columns": list(self.columns), "features": self.n_features,
                "row_norm_bound": self.row_norm_bound}


def _scaled(series: pd.Series, col: Any) -> np.ndarray:
    lo, hi = col.bounds
    if col.type == "datetime":
        values = pd.to_datetime(series).astype("int64").to_numpy(dtype=np.float64)
        values[series.isna().to_numpy()] = np.nan
        lo, hi = float(pd.Timestamp(lo).value), float(pd.Timestamp(hi).value)
    else:
        values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64)
        lo, hi = float(lo), float(hi)
    values = np.clip(values, lo, hi)
    if col.scale == "log":
        out = (np.log1p(values) - math.log1p(lo)) / (math.log1p(hi) - math.log1p(lo))
    else:
        out = (values - lo) / (hi - lo)
    return np.nan_to_num(np.clip(out, 0.0, 1.0), nan=0.0)


def schema_classes(schema: Schema, target: str) -> list[str]:
    """The target's classes as the schema declares them (a categorical column), read through
    `PublicFacts` (the one accessor for public facts)."""
    from privlab.schema.facts import PublicFacts

    return [str(c) for c in PublicFacts.from_schema(schema, target).classes(
        f"schema {schema.name!r} declares no classes for {target!r}")]


_MASK64 = (1 << 64) - 1


def _mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijective avalanche mix of 64-bit words."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def row_test_mask(frame: pd.DataFrame, test_size: float, key: int) -> np.ndarray:
    """Which rows are held out: a keyed hash of each row's OWN values, compared with
    `test_size`.

    Why not a permutation of n: a seeded permutation of n rows reshuffles every row when one
    row is added or removed, so the training sets of two neighbouring tables would differ in
    many rows and DP-SGD's add/remove guarantee would not apply to the table. Here a row's side
    depends on that row alone, so a neighbour changes one training row or one test row.
    """
    if not (0 < test_size < 1):
        raise InvalidInputError(f"test_size must be in (0, 1), got {test_size}")
    hashed = pd.util.hash_pandas_object(frame, index=False).to_numpy(dtype=np.uint64)
    mixed = _mix64(hashed ^ np.uint64(int(key) & _MASK64))
    uniform = (mixed >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    return uniform < test_size


def _adult_schema() -> Schema:
    from privlab.schema.bundled import bundled_schema

    return bundled_schema("adult")


#: Features of the Adult pipeline: the bundled public schema's categorical and numeric
#: columns, less fnlwgt (a sampling weight) and the target.
_ADULT_CATEGORICAL = ("workclass", "education", "marital-status", "occupation",
                      "relationship", "race", "sex", "native-country")
_ADULT_NUMERIC = ("age", "education-num", "capital-gain", "capital-loss", "hours-per-week")
_ADULT_LOG = ("capital-gain", "capital-loss")


def _adult_bounds(schema: Schema) -> dict[str, tuple[float, float]]:
    """Public value ranges from the bundled schema; the capital columns are scaled after
    log1p over [0, log1p(capital-gain's top-code 99,999)], one scale for both (as measured in
    docs/learn.md; capital-loss's declared bound 10,000 lies inside it)."""
    top = float(schema.column("capital-gain").bounds[1])  # type: ignore[index]
    out: dict[str, tuple[float, float]] = {}
    for name in _ADULT_NUMERIC:
        if name in _ADULT_LOG:
            out[name] = (0.0, math.log1p(top))
        else:
            lo, hi = schema.column(name).bounds  # type: ignore[misc]
            out[name] = (float(lo), float(hi))
    return out


# Public category lists and value ranges of UCI Adult, read from the bundled schema
# (`privlab schema show adult`: adult.names and the survey's public top-codes).
ADULT_CATEGORIES: dict[str, list[str]] = {
    name: [str(v) for v in _adult_schema().column(name).categories]
    for name in _ADULT_CATEGORICAL}
ADULT_BOUNDS: dict[str, tuple[float, float]] = _adult_bounds(_adult_schema())


def adult_preprocessor() -> TablePreprocessor:
    """The data-independent Adult pipeline: log1p on capital columns, min-max with public
    ranges, one-hot with the public category lists (104 features)."""
    return TablePreprocessor(one_hot=True, bounds=ADULT_BOUNDS, categories=ADULT_CATEGORIES)


def adult_features(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.drop(columns=["fnlwgt", "salary"], errors="ignore").copy()
    for col in ("capital-gain", "capital-loss"):
        out[col] = np.log1p(out[col].astype(np.float64))
    return out


@dataclass
class Split:
    """Named arrays of one experiment: X_train, y_train, X_test, y_test and optional extras."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


def adult_split(test_size: float = 0.2, seed: int = 0, n: int | None = None) -> Split:
    """Adult with rows that have missing values removed (30,162), a seeded train/test split
    and the public pipeline. `n` subsamples (for quick runs)."""
    from privlab.data.datasets import load_adult

    frame = load_adult(drop_missing=True)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(frame))
    if n is not None:
        order = order[: int(n)]
    frame = frame.iloc[order].reset_index(drop=True)
    y = (frame["salary"].astype(str).str.strip().str.rstrip(".") == ">50K").to_numpy(np.int64)
    x = adult_preprocessor().fit_transform(adult_features(frame))
    cut = int(round(len(frame) * (1 - test_size)))
    return Split(x[:cut], y[:cut], x[cut:], y[cut:],
                 info={"dataset": "adult", "rows": len(frame), "features": x.shape[1],
                       "test_size": test_size, "seed": seed,
                       "preprocessing": "public categories and ranges (data-independent)"})


def classification_benchmark_split(setting: str = "loss", random_state: int = 42,
                                   split_seed: int = 0) -> Split:
    """Kobylianska's (2025) make_classification setup (100 features, 20 informative, 10 redundant,
    5 repeated, 2 classes, 3 clusters per class).

    setting "loss": 6,100 rows -> train 1,000 / val 2,100 / test 3,000.
    setting "shadow": 15,000 rows -> target train 2,000 / target val 3,250 / test 4,500 /
    shadow pool 5,250 (attacker only).
    """
    from privlab.data.datasets import load_classification

    sizes = {"loss": (1000, 2100, 3000), "shadow": (2000, 3250, 4500, 5250)}
    if setting not in sizes:
        raise InvalidInputError(f"setting must be 'loss' or 'shadow', got {setting!r}")
    parts = sizes[setting]
    frame = load_classification(n_samples=sum(parts), random_state=random_state)
    x = frame.drop(columns=["target"]).to_numpy(np.float32)
    y = frame["target"].to_numpy(np.int64)
    order = np.random.default_rng(split_seed).permutation(len(y))
    bounds = np.cumsum((0,) + parts)
    idx = [order[bounds[i]:bounds[i + 1]] for i in range(len(parts))]
    extra = {"X_val": x[idx[1]], "y_val": y[idx[1]]}
    if setting == "shadow":
        extra.update(X_shadow=x[idx[3]], y_shadow=y[idx[3]])
    return Split(x[idx[0]], y[idx[0]], x[idx[2]], y[idx[2]], extra=extra,
                 info={"dataset": "classification-benchmark-" + setting, "sizes": parts,
                       "random_state": random_state, "split_seed": split_seed})


def digits_split(test_size: float = 0.25, seed: int = 0) -> Split:
    """scikit-learn digits as 1x8x8 images scaled by the public pixel range [0, 16]."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = (bunch.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = bunch.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    cut = int(round(len(y) * (1 - test_size)))
    tr, te = order[:cut], order[cut:]
    return Split(x[tr], y[tr], x[te], y[te],
                 info={"dataset": "digits", "rows": len(y), "shape": [1, 8, 8],
                       "preprocessing": "pixels / 16 (public range)"})
