"""Bundled datasets load offline with the documented shapes; bad names and options fail cleanly."""

from __future__ import annotations

import pytest

from privlab.data.datasets import ADULT_COLUMNS, DATASETS, list_datasets, load_dataset
from privlab.errors import InvalidInputError


def test_adult_shape_and_columns() -> None:
    frame = load_dataset("adult")
    assert frame.shape == (32_561, 15)
    assert list(frame.columns) == ADULT_COLUMNS
    assert frame["workclass"].isna().sum() > 0  # '?' became missing
    assert not frame["sex"].str.startswith(" ").any()  # the raw file has ", Male"
    assert set(frame["salary"]) == {"<=50K", ">50K"}


def test_adult_drop_missing() -> None:
    frame = load_dataset("adult", drop_missing=True)
    assert frame.shape == (30_162, 15)
    assert not frame.isna().any().any()
    assert frame.index.tolist() == list(range(len(frame)))


def test_geolife() -> None:
    frame = load_dataset("geolife")
    assert len(frame) == 217_653
    assert list(frame.columns) == ["lat", "lng", "datetime", "uid"]
    assert str(frame["datetime"].dtype).startswith("datetime64")
    assert frame["lat"].between(-90, 90).all() and frame["lng"].between(-180, 180).all()


def test_movielens() -> None:
    ratings = load_dataset("movielens")
    assert len(ratings) == 100_836
    assert ratings["userId"].nunique() == 610
    assert ratings["rating"].between(0.5, 5.0).all()
    movies = load_dataset("movielens", table="movies")
    assert {"movieId", "title", "genres"} <= set(movies.columns)
    assert set(ratings["movieId"]) <= set(movies["movieId"])


def test_movielens_bad_table() -> None:
    with pytest.raises(InvalidInputError, match="ratings' or 'movies"):
        load_dataset("movielens", table="tags")


def test_digits() -> None:
    frame = load_dataset("digits")
    assert frame.shape == (1_797, 65)
    assert set(frame["target"]) == set(range(10))


def test_classification_defaults_and_options() -> None:
    frame = load_dataset("classification")
    assert frame.shape == (6_100, 101)
    assert set(frame["target"]) == {0, 1}
    small = load_dataset("classification", n_samples=200, random_state=3)
    assert small.shape == (200, 101)
    assert small.equals(load_dataset("classification", n_samples=200, random_state=3))


def test_census_through_registry() -> None:
    frame = load_dataset("census", n=50, seed=2)
    assert len(frame) == 50 and "tckno" in frame.columns


def test_unknown_dataset() -> None:
    with pytest.raises(InvalidInputError, match="unknown dataset 'iris'; choose one of adult"):
        load_dataset("iris")


def test_bad_option() -> None:
    with pytest.raises(InvalidInputError, match="bad option for dataset 'adult'"):
        load_dataset("adult", n=3)


def test_list_describes_every_dataset() -> None:
    rows = list_datasets()
    assert [r["name"] for r in rows] == list(DATASETS)
    assert {"adult", "geolife", "movielens", "digits", "classification", "census"} <= set(DATASETS)
    for row in rows:
        assert row["description"] and row["source"] and row["licence"]


def test_bundled_files_are_read_as_their_schemas_declare(tmp_path, monkeypatch) -> None:
    """Issue 29: the loaders read each cell by the bundled schema, never by pandas' guess from
    the other rows. A copy of the geolife sample whose first time is written with a Z (the
    same instant) and whose user ids are digits with leading zeros loads with the same times
    and the ids as written (pandas took the time format from the first row and read the ids
    as numbers); a cell outside the schema is refused in one line."""
    import pandas as pd

    import privlab.data.datasets as datasets

    rows = ["lat,lng,datetime,uid", "39.98,116.31,2008-10-23T02:53:04Z,007",
            "39.98,116.31,2008-10-23 02:53:10,007", "39.97,116.32,2008-10-23 02:53:15,010"]
    path = tmp_path / "geolife.csv"
    path.write_text("\n".join(rows) + "\n")
    real = datasets.bundled_path
    monkeypatch.setattr(datasets, "bundled_path",
                        lambda *parts: path if parts[0] == "geolife" else real(*parts))
    datasets._read_bundled.cache_clear()
    frame = datasets.load_geolife()
    assert frame["datetime"].tolist() == [pd.Timestamp("2008-10-23 02:53:04"),
                                          pd.Timestamp("2008-10-23 02:53:10"),
                                          pd.Timestamp("2008-10-23 02:53:15")]
    assert frame["uid"].tolist() == ["007", "007", "010"]
    path.write_text("\n".join([*rows, "39.97,116.32,23/10/2008 02:53,010"]) + "\n")
    datasets._read_bundled.cache_clear()
    with pytest.raises(InvalidInputError, match="column 'datetime' is not datetime"):
        datasets.load_geolife()
    datasets._read_bundled.cache_clear()
