"""Federated data: ratings (or records) partitioned by user, split per user into train and test.

Each user is one client. A user's rows never leave its `ClientShard` (roles.py); the data
objects here are only the experimenter's way to build the clients. Item metadata (MovieLens
genres and release year) is PUBLIC: it is the catalogue, not a user's data, and is used
without protection (Krichene et al. 2023).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privlab.errors import InvalidInputError, option_name

MOVIELENS_RANGE = (0.5, 5.0)
_YEAR = re.compile(r"\((\d{4})\)\s*$")


@dataclass(frozen=True)
class Interactions:
    """CSR by user: user u's rows are items[indptr[u]:indptr[u+1]] with values alongside."""

    indptr: np.ndarray  # (n_users + 1,) int64
    items: np.ndarray  # (nnz,) int64 column (item) index
    values: np.ndarray  # (nnz,) float64 rating

    @property
    def n_users(self) -> int:
        return len(self.indptr) - 1

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    def counts(self) -> np.ndarray:
        return np.diff(self.indptr)

    def row_users(self) -> np.ndarray:
        """User (position) of every stored row."""
        return np.repeat(np.arange(self.n_users), self.counts())

    def select(self, users: np.ndarray) -> Interactions:
        """The rows of `users` (positions), in that order."""
        users = np.asarray(users, dtype=np.int64)
        starts, stops = self.indptr[users], self.indptr[users + 1]
        lengths = stops - starts
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        take = (np.repeat(starts - indptr[:-1], lengths) + np.arange(indptr[-1])).astype(np.int64)
        return Interactions(indptr, self.items[take], self.values[take])


@dataclass(frozen=True)
class RatingsData:
    """A ratings task: users x items, per-user train/test split, public item features."""

    user_ids: np.ndarray  # (n_users,) original ids, position = user index
    item_ids: np.ndarray  # (n_items,) original ids, position = item index
    item_features: np.ndarray  # (n_items, q) public features
    feature_names: tuple[str, ...]
    rating_range: tuple[float, float]
    train: Interactions
    test: Interactions

    @property
    def n_users(self) -> int:
        return len(self.user_ids)

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    def subset_users(self, users: np.ndarray) -> RatingsData:
        """Only the given users (positions), e.g. a small run for tests or one Flower node."""
        users = np.asarray(users, dtype=np.int64)
        return RatingsData(self.user_ids[users], self.item_ids, self.item_features,
                           self.feature_names, self.rating_range,
                           self.train.select(users), self.test.select(users))


def check_rating_range(rating_range: tuple[float, float]) -> tuple[float, float]:
    """The declared public rating range (LO < HI, both finite), named as the caller spells it."""
    from privlab.core.sensitivity import check_bounds

    return check_bounds(rating_range, option_name("rating_range", "--rating-range"))


def _have(frame: pd.DataFrame) -> str:
    return ", ".join(map(str, frame.columns[:20])) or "no columns"


def _show(value: object) -> str:
    """A cell for an error message: 7.0, not np.float64(7.0)."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def _first(values: np.ndarray, table: str) -> str:
    """' (first: VALUE)' for the PUBLIC movies catalogue; nothing for the private ratings (an
    error must not print a private value or count)."""
    return f" (first: {_show(values[0])})" if table == "movies" else ""


def _whole_numbers(column: pd.Series, field: str, table: str) -> tuple[np.ndarray, np.ndarray]:
    """Integer ids (0 where missing) and the missing mask; anything else is a one-line error.

    Ids are int64 throughout the federated code, so 3.0 is accepted and 3.5 or "abc" is not.
    """
    num = pd.to_numeric(column, errors="coerce")
    missing = num.isna().to_numpy()
    not_number = missing & ~column.isna().to_numpy()
    if not_number.any():
        raise InvalidInputError(f"{field}: a value in the {table} table is not a number"
                                f"{_first(column.to_numpy()[not_number], table)}; ids must be "
                                "integers")
    out = np.zeros(len(column), dtype=np.int64)
    present = num[~missing].to_numpy()
    if present.dtype.kind == "f":
        bad = ~np.isfinite(present) | (present != np.round(present))
        if bad.any():
            raise InvalidInputError(f"{field}: a value in the {table} table is not a whole "
                                    f"number{_first(present[bad], table)}; ids must be "
                                    "integers")
    out[~missing] = present.astype(np.int64)
    return out, missing


def movie_features(movies: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Public item features from movies.csv: genre indicators, release year (scaled), missing-year.

    The genre vocabulary comes from the public catalogue, not from anyone's ratings.
    """
    for col in ("movieId", "title", "genres"):
        if col not in movies.columns:
            raise InvalidInputError(f"movies table needs column {col!r} (movieId,title,genres); "
                                    f"it has: {_have(movies)}; rename or add the column")
    ids, missing = _whole_numbers(movies["movieId"], "movieId", "movies")
    if missing.any():
        raise InvalidInputError(f"movieId: {int(missing.sum())} catalogue row(s) without a "
                                "movieId; fill them in or drop those rows")
    if len(np.unique(ids)) != len(ids):
        raise InvalidInputError("movies.movieId must be unique; drop duplicate catalogue rows")
    genres = movies["genres"].fillna("").astype(str).str.split("|")
    vocab = sorted({g for gs in genres for g in gs if g})
    index = {g: k for k, g in enumerate(vocab)}
    feats = np.zeros((len(ids), len(vocab) + 2))
    for row, gs in enumerate(genres):
        for g in gs:
            if g:
                feats[row, index[g]] = 1.0
    years = movies["title"].fillna("").astype(str).str.extract(_YEAR, expand=False)
    year = pd.to_numeric(years, errors="coerce").to_numpy(dtype=float)
    missing = np.isnan(year)
    feats[:, len(vocab)] = np.where(missing, 0.0, (year - 1990.0) / 30.0)
    feats[:, len(vocab) + 1] = missing.astype(float)
    names = tuple(f"genre:{g}" for g in vocab) + ("year_scaled", "year_missing")
    return ids, feats, names


def split_per_user(indptr: np.ndarray, test_fraction: float, seed: int,
                   user_ids: np.ndarray | None = None) -> np.ndarray:
    """Boolean test mask: floor(test_fraction * n_u) random rows of every user go to test.

    User u's choice is drawn from its own generator, keyed by (seed, u's id) only
    (`keyed_generator`; `user_ids` default to the positions, for synthetic users), over its
    rows in their stored order, so adding or removing one user moves no other user's rows
    between train and test (one stream consumed user by user did: issue 29).
    """
    from privlab.core.rng import keyed_generator

    if not 0 <= test_fraction < 1:
        raise InvalidInputError(f"test_fraction must be in [0, 1), got {test_fraction!r}")
    counts = np.diff(indptr)
    ids = np.arange(len(counts)) if user_ids is None else np.asarray(user_ids)
    if len(ids) != len(counts):
        raise InvalidInputError(f"user_ids has {len(ids)} entries for {len(counts)} users")
    n_test = np.floor(test_fraction * counts).astype(np.int64)
    mask = np.zeros(int(indptr[-1]), dtype=bool)
    for u in np.flatnonzero(n_test):
        gen = keyed_generator(seed, "federated split", int(ids[u]))
        chosen = gen.permutation(int(counts[u]))[: n_test[u]]
        mask[indptr[u] + chosen] = True
    return mask


def ratings_from_frames(
    ratings: pd.DataFrame,
    movies: pd.DataFrame | None = None,
    *,
    rating_range: tuple[float, float] = MOVIELENS_RANGE,
    users: np.ndarray | list | None = None,
    test_fraction: float = 0.2,
    split_seed: int = 0,
) -> RatingsData:
    """Build a `RatingsData` from a ratings frame (userId, movieId, rating) and a catalogue.

    Users without ratings are enrolled as clients with no data (they contribute nothing but are
    counted): either through `users`, or through rows that carry a userId and neither a movieId
    nor a rating (what a users-left-join-ratings export produces). A row with only one of the
    two missing is an error. Ratings outside the declared `rating_range` are rejected, because
    the sensitivity analysis relies on the range. Other columns (e.g. timestamp) are ignored.
    """
    lo, hi = check_rating_range(rating_range)
    for col in ("userId", "movieId", "rating"):
        if col not in ratings.columns:
            raise InvalidInputError(f"ratings table needs column {col!r} "
                                    f"(userId,movieId,rating[,timestamp]); it has: "
                                    f"{_have(ratings)}; rename or add the column")
    uid, no_user = _whole_numbers(ratings["userId"], "userId", "ratings")
    if no_user.any():
        raise InvalidInputError("userId: a row without a userId; every rating needs its user: "
                                "fill them in or drop those rows")
    mid, no_movie = _whole_numbers(ratings["movieId"], "movieId", "ratings")
    raw = ratings["rating"]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    no_rating = raw.isna().to_numpy()
    enrol = no_movie & no_rating  # a user listed without any rating
    half = (no_movie | no_rating) & ~enrol
    if half.any():
        row = int(np.flatnonzero(half)[0])
        field, other, kind = (("movieId", "rating", no_movie) if no_movie[row]
                              else ("rating", "movieId", no_rating))
        raise InvalidInputError(
            f"{field}: a row with a {other} but no {field}; fill them in or drop those rows "
            "(a user without ratings is a row with neither)")
    rated = ~enrol
    text = rated & np.isnan(values)
    if text.any():
        raise InvalidInputError("rating: a value is not a number; ratings must be numeric")
    bad = rated & (~np.isfinite(values) | (values < lo) | (values > hi))
    if bad.any():
        raise InvalidInputError(
            f"rating: a value outside the declared range [{lo:g}, {hi:g}]; fix or drop such "
            "values, declare the right range, or pass --on-invalid coerce"
        )
    if not rated.any():
        raise InvalidInputError("rating: the table has no ratings (only users without any); "
                                "pass a ratings table with at least one rating")
    listed = np.unique(uid[enrol])
    uid, mid, values = uid[rated], mid[rated], values[rated]
    if movies is not None:
        item_ids, feats, names = movie_features(movies)
    else:  # no public catalogue: the items are those rated, with no features
        item_ids = np.unique(mid)
        feats, names = np.zeros((len(item_ids), 0)), ()
    item_pos = pd.Index(item_ids)
    items = item_pos.get_indexer(mid)
    if (items < 0).any():
        raise InvalidInputError(
            "movieId: a rating refers to a movie missing from the catalogue; add it to "
            "movies.csv, drop such ratings, or pass --on-invalid coerce"
        )
    rated_users = uid
    if users is None:
        user_ids = np.union1d(rated_users, listed)
    else:
        user_ids = np.union1d(np.asarray(users, dtype=np.int64), listed)
        unknown = ~np.isin(rated_users, user_ids)
        if unknown.any():
            raise InvalidInputError(
                "userId: a user has ratings but is not in `users`; enrol them or drop their "
                "ratings"
            )
    upos = np.searchsorted(user_ids, rated_users)
    key = pd.DataFrame({"u": upos, "i": items})
    if key.duplicated().any():
        raise InvalidInputError("ratings: a user rated the same movie twice; keep one rating "
                                "per (userId, movieId)")
    order = np.lexsort((items, upos))
    upos, items, values = upos[order], items[order], values[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(upos, minlength=len(user_ids)))])
    test_mask = split_per_user(indptr, test_fraction, split_seed, user_ids)

    def part(mask: np.ndarray) -> Interactions:
        ptr = np.concatenate([[0], np.cumsum(np.bincount(upos[mask], minlength=len(user_ids)))])
        return Interactions(ptr.astype(np.int64), items[mask].astype(np.int64), values[mask])

    return RatingsData(user_ids, item_ids, feats, names, (lo, hi), part(~test_mask),
                       part(test_mask))


def ratings_schema(schema: str | None = None,
                   rating_range: tuple[float, float] | None = None) -> tuple[Any, tuple]:
    """The declared public schema of a ratings file and its rating range.

    Default: the bundled `movielens-ratings` schema (privacy unit userId, ratings in
    [0.5, 5]). A declared `rating_range` (--rating-range) replaces the schema's rating bounds.
    """
    from dataclasses import replace

    from privlab.schema import Schema, load_schema

    sch = load_schema(schema or "movielens-ratings")
    for name in ("userId", "movieId", "rating"):
        sch.column(name)
    if sch.privacy_unit not in ("userId", "row"):
        # one person spanning several userIds would be several "users" to the accountant
        raise InvalidInputError(
            f"schema {sch.name!r}: privacy_unit {sch.privacy_unit!r}: federated training "
            "protects one user = every rating with the same userId; declare privacy_unit: "
            "userId")
    col = sch.column("rating")
    if not col.is_numeric:
        raise InvalidInputError(f"schema {sch.name!r}: column 'rating' must be numeric with "
                                "public bounds")
    if rating_range is None:
        return sch, (float(col.bounds[0]), float(col.bounds[1]))  # type: ignore[index]
    lo, hi = check_rating_range(rating_range)
    cols = tuple(replace(c, bounds=(lo, hi)) if c.name == "rating" else c for c in sch.columns)
    return Schema(cols, name=sch.name, description=sch.description,
                  privacy_unit=sch.privacy_unit, max_rows_per_unit=sch.max_rows_per_unit,
                  public_size=sch.public_size, source=sch.source), (lo, hi)


_RATING_COLUMNS = ["userId", "movieId", "rating"]


def conform_ratings(frame: pd.DataFrame, schema: Any, policy: str) -> pd.DataFrame:
    """The ratings rows fitted to the declared schema (only the columns the task uses).

    "refuse": the rows are returned as they are; `ratings_from_frames` refuses anything
    outside the declared range and `check_ratings_schema` the rest. "coerce": ratings and
    movie ids are clamped to the schema's bounds (and rounded where integer), rows with no
    place (missing user, unparseable rating, a movie without a rating) are dropped, and a
    second rating of the same movie by the same user is dropped (the first one is kept).
    Rows with a userId and neither movieId nor rating (users enrolled without ratings) stay.
    """
    from privlab.schema import check_policy, conform

    policy = check_policy(policy)
    if any(c not in frame.columns for c in _RATING_COLUMNS):
        return frame  # ratings_from_frames names the missing column
    sub = frame[_RATING_COLUMNS]
    if policy == "refuse":
        return sub
    enrol = (sub["movieId"].isna() & sub["rating"].isna()).to_numpy()
    rated = conform(sub.loc[~enrol], schema, "coerce", columns=_RATING_COLUMNS)
    rated = rated.drop_duplicates(subset=["userId", "movieId"], keep="first")
    listed = sub.loc[enrol].astype(object)
    return pd.concat([rated, listed], ignore_index=True)


def check_ratings_schema(frame: pd.DataFrame, schema: Any) -> None:
    """Refuse mode: every rated row must fit the schema (movie ids within their bounds...)."""
    from privlab.schema import conform

    sub = frame[_RATING_COLUMNS]
    enrol = (sub["movieId"].isna() & sub["rating"].isna()).to_numpy()
    conform(sub.loc[~enrol], schema, "refuse", columns=_RATING_COLUMNS)


def pad_users(data: RatingsData, declared: int | None) -> RatingsData:
    """Enrol users without data up to the declared public number of users.

    The number of enrolled users sizes the sampling plan and is printed; it must not come
    from the file. Users beyond the declared number are refused (the declaration is wrong).
    The padded users get negative ids, which are never released.
    """
    if declared is None:
        return data
    if isinstance(declared, bool) or not isinstance(declared, int) or declared < 1:
        raise InvalidInputError(f"--users must be a whole number >= 1, got {declared!r}")
    if data.n_users > declared:
        raise InvalidInputError(f"--users {declared}: the ratings file has more users than "
                                "declared; declare the public number of enrolled users")
    extra = declared - data.n_users
    if extra == 0:
        return data

    def grow(part: Interactions) -> Interactions:
        ptr = np.concatenate([part.indptr, np.full(extra, part.indptr[-1], dtype=np.int64)])
        return Interactions(ptr, part.items, part.values)

    ids = np.concatenate([data.user_ids, -np.arange(1, extra + 1, dtype=np.int64)])
    return RatingsData(ids, data.item_ids, data.item_features, data.feature_names,
                       data.rating_range, grow(data.train), grow(data.test))


def keyed_user_selection(user_ids: np.ndarray, max_users: int, population: int,
                         split_seed: int = 0) -> np.ndarray:
    """Which users keep their data under `--max-users N`: user u is kept iff
    HMAC-SHA256(key, str(u)) read as a 64-bit fraction is below N / population, where the key
    is public (derived from `split_seed`) and `population` is the PUBLIC number of enrolled
    users. Each user's fate depends on its own id alone: adding or removing one user changes
    no other user's selection (bottom-N by hash would let one added user evict another), so
    one-user neighbours stay one-user neighbours. The expected number kept is N."""
    if isinstance(max_users, bool) or not isinstance(max_users, (int, np.integer)) \
            or max_users < 1:
        raise InvalidInputError(
            f"{option_name('max_users', '--max-users')} must be >= 1, got {max_users}")
    if population < 1:
        raise InvalidInputError("the public number of users must be >= 1")
    threshold = min(1 << 64, (int(max_users) << 64) // int(population))
    key = f"privlab federated --max-users, split seed {int(split_seed)}".encode()
    digests = [int.from_bytes(hmac.new(key, str(int(u)).encode(), hashlib.sha256).digest()[:8],
                              "big") for u in np.asarray(user_ids)]
    return np.asarray([d < threshold for d in digests], dtype=bool)


def _emptied(indptr: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(new indptr, row mask) with the rows of users not in `keep` removed (users stay)."""
    counts = np.diff(indptr)
    rows = np.repeat(keep, counts)
    ptr = np.concatenate([[0], np.cumsum(np.where(keep, counts, 0))]).astype(np.int64)
    return ptr, rows


def _keep_data_of(data: Any, keep: np.ndarray) -> Any:
    """The same enrolled users; those not in `keep` hold no data (clients without ratings)."""
    if isinstance(data, RatingsData):
        def part(x: Interactions) -> Interactions:
            ptr, rows = _emptied(x.indptr, keep)
            return Interactions(ptr, x.items[rows], x.values[rows])

        return RatingsData(data.user_ids, data.item_ids, data.item_features, data.feature_names,
                           data.rating_range, part(data.train), part(data.test))
    tr_ptr, tr_rows = _emptied(data.train_indptr, keep)
    te_ptr, te_rows = _emptied(data.test_indptr, keep)
    return TabularData(data.x_train[tr_rows], data.y_train[tr_rows], tr_ptr,
                       data.x_test[te_rows], data.y_test[te_rows], te_ptr, data.feature_names)


def select_users(data: Any, max_users: int | None, split_seed: int = 0) -> Any:
    """`--max-users N` (short runs): every enrolled user stays enrolled (the user count, which
    sizes the sampling plan, stays the public population), and each keeps its data with
    probability N / population by `keyed_user_selection`; the others become clients without
    data. `data.n_users` must already be public (bundled, or padded to `--users`)."""
    if max_users is None:
        return data
    ids = data.user_ids if isinstance(data, RatingsData) else np.arange(data.n_users)
    keep = keyed_user_selection(ids, max_users, data.n_users, split_seed)
    return _keep_data_of(data, keep)


def load_ratings_files(ratings: str | Path, movies: str | Path | None = None, *,
                       rating_range: tuple[float, float] = MOVIELENS_RANGE,
                       test_fraction: float = 0.2, split_seed: int = 0,
                       max_users: int | None = None, schema: str | None = None,
                       on_invalid: str = "refuse",
                       declared_users: int | None = None) -> RatingsData:
    """A ratings task from the user's files (CSV/Parquet, MovieLens columns), split per user.

    `movies` (movieId,title,genres) is the PUBLIC catalogue and its features; without it the
    catalogue is the set of rated movie ids and no public features are used. The rows are
    fitted to the declared `schema` (default: movielens-ratings, with `rating_range` as the
    rating bounds) under `on_invalid` (refuse | coerce); `declared_users` is the public number
    of enrolled users (see `pad_users`).
    """
    from privlab.data.io import read_table

    if max_users is not None and declared_users is None:  # options only: before any file
        raise InvalidInputError(
            f"{option_name('max_users', '--max-users')} with --ratings needs --users U (the "
            "public number of enrolled users): each user is kept with probability N / U")

    def read(path: str | Path, option: str) -> pd.DataFrame:
        try:
            return read_table(path)
        except InvalidInputError as exc:
            raise InvalidInputError(f"{option}: {exc}") from None

    sch, rating_range = ratings_schema(schema, rating_range)
    frame = conform_ratings(read(ratings, "--ratings"), sch, on_invalid)
    catalogue = None if movies is None else read(movies, "--movies")
    if on_invalid == "coerce" and catalogue is not None and "movieId" in catalogue.columns:
        # a rating of a movie outside the public catalogue has no place: dropped
        known = pd.to_numeric(catalogue["movieId"], errors="coerce")
        ids = pd.to_numeric(frame["movieId"], errors="coerce")
        frame = frame.loc[ids.isna() | ids.isin(known)]
    data = ratings_from_frames(frame, catalogue, rating_range=rating_range,
                               test_fraction=test_fraction, split_seed=split_seed)
    if on_invalid == "refuse":
        check_ratings_schema(frame, sch)
    return select_users(pad_users(data, declared_users), max_users, split_seed)


def load_movielens_task(test_fraction: float = 0.2, split_seed: int = 0,
                        max_users: int | None = None) -> RatingsData:
    """MovieLens ml-latest-small (610 users, public per its README), split per user;
    `max_users`: each user keeps its data with probability max_users / 610 (a keyed hash of
    its id, `select_users`), for short runs."""
    from privlab.data.datasets import load_movielens

    data = ratings_from_frames(load_movielens("ratings"), load_movielens("movies"),
                               rating_range=MOVIELENS_RANGE, test_fraction=test_fraction,
                               split_seed=split_seed)
    return select_users(data, max_users, split_seed)


# --------------------------------------------------------------------------------------------
# tabular task: Adult split into synthetic users
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TabularData:
    """Records grouped by user: x (n, p) features, y (n,) 0/1 labels, CSR user pointers."""

    x_train: np.ndarray
    y_train: np.ndarray
    train_indptr: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    test_indptr: np.ndarray
    feature_names: tuple[str, ...]

    @property
    def n_users(self) -> int:
        return len(self.train_indptr) - 1

    @property
    def n_features(self) -> int:
        return self.x_train.shape[1]

    def subset_users(self, users: np.ndarray) -> TabularData:
        users = np.asarray(users, dtype=np.int64)

        def take(ptr: np.ndarray, *arrays: np.ndarray) -> tuple:
            sel = Interactions(ptr, np.arange(ptr[-1]), np.zeros(ptr[-1])).select(users)
            return (sel.indptr, *(a[sel.items] for a in arrays))

        tr_ptr, xtr, ytr = take(self.train_indptr, self.x_train, self.y_train)
        te_ptr, xte, yte = take(self.test_indptr, self.x_test, self.y_test)
        return TabularData(xtr, ytr, tr_ptr, xte, yte, te_ptr, self.feature_names)


#: Which Adult columns are features (a modelling choice of the task); their ranges, scales
#: and category lists come from the bundled public schema (`privlab schema show adult`).
_ADULT_FEATURES = ("age", "education-num", "hours-per-week", "capital-gain", "capital-loss",
                   "workclass", "marital-status", "occupation", "relationship", "race", "sex")


def adult_features(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Adult -> features scaled to [0, 1] by the schema's PUBLIC upper bounds (value / HI, or
    log1p(value) / log1p(HI) for columns the schema declares `scale: log`; values clipped to
    [LO, HI]), never by data statistics, and one-hot categories over
    the schema's declared categories (one rare row cannot add or remove a feature)."""
    from privlab.schema import bundled_schema

    schema = bundled_schema("adult")
    cols: list[np.ndarray] = []
    names: list[str] = []
    for col in _ADULT_FEATURES:
        spec = schema.column(col)
        if spec.type == "categorical":
            values = frame[col].astype(str).to_numpy()
            for level in sorted(spec.categories):
                cols.append((values == level).astype(float))
                names.append(f"{col}={level}")
            continue
        lo, hi = (float(v) for v in spec.bounds)  # type: ignore[union-attr]
        val = np.clip(frame[col].to_numpy(dtype=float), lo, hi)  # Adult's bounds are >= 0
        cols.append(np.log1p(val) / math.log1p(hi) if spec.scale == "log" else val / hi)
        names.append(col)
    y = frame["salary"].astype(str).str.strip().str.startswith(">50K").to_numpy(dtype=float)
    return np.column_stack(cols), y, tuple(names)


def load_adult_task(n_users: int = 600, test_fraction: float = 0.2, split_seed: int = 0,
                    max_users: int | None = None) -> TabularData:
    """UCI Adult (30,162 complete rows) dealt at random to `n_users` synthetic users."""
    from privlab.data.datasets import load_adult

    if n_users < 1:
        raise InvalidInputError(f"n_users must be >= 1, got {n_users}")
    frame = load_adult(drop_missing=True)
    x, y, names = adult_features(frame)
    rng = np.random.default_rng(split_seed)
    owner = rng.integers(0, n_users, size=len(y))
    order = np.argsort(owner, kind="stable")
    x, y, owner = x[order], y[order], owner[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=n_users))])
    test = split_per_user(indptr, test_fraction, split_seed + 1)
    tr_ptr = np.concatenate([[0], np.cumsum(np.bincount(owner[~test], minlength=n_users))])
    te_ptr = np.concatenate([[0], np.cumsum(np.bincount(owner[test], minlength=n_users))])
    data = TabularData(x[~test], y[~test], tr_ptr.astype(np.int64), x[test], y[test],
                       te_ptr.astype(np.int64), names)
    return select_users(data, max_users, split_seed)
