"""The synthetic Turkish census reproduces the PIA article Table 6 and is a well-formed register."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privlab.data.census import (
    COLUMNS,
    MARITAL_STATUSES,
    MAX_ROWS,
    SEXES,
    census_tables,
    generate_census,
)
from privlab.data.datasets import load_dataset
from privlab.errors import InvalidInputError

# The attribute-based PIA article, Table 6 (300 records) and section 4.3.2 (the pair).
TABLE6 = {"tckno": 0.996, "name": 0.980, "surname": 0.984, "age": 0.970, "sex": 0.499,
          "hometown": 0.963, "marital_status": 0.503}


def richness(values: pd.Series) -> float:
    """Gini richness K = 1 - sum_j p_j^2 over the distinct values."""
    p = values.value_counts(normalize=True).to_numpy()
    return float(1.0 - np.sum(p**2))


@pytest.fixture(scope="module")
def census() -> pd.DataFrame:
    return generate_census()


def test_columns_and_size(census: pd.DataFrame) -> None:
    assert list(census.columns) == COLUMNS
    assert len(census) == 300
    assert census.notna().all().all()


@pytest.mark.parametrize("column", list(TABLE6))
def test_richness_matches_table6(census: pd.DataFrame, column: str) -> None:
    assert richness(census[column]) == pytest.approx(TABLE6[column], abs=0.02)


def test_pair_marital_sex_escalates(census: pd.DataFrame) -> None:
    pair = richness(census["marital_status"] + "|" + census["sex"])
    assert pair == pytest.approx(0.750, abs=0.02)
    assert pair > richness(census["marital_status"]) + 0.2
    assert pair > richness(census["sex"]) + 0.2


def test_richness_holds_for_other_seeds() -> None:
    # Tuned tables, not a lucky seed: a few other seeds land within the same tolerance.
    for seed in (2, 7, 13):
        frame = generate_census(seed=seed)
        for column, target in TABLE6.items():
            assert richness(frame[column]) == pytest.approx(target, abs=0.02), (seed, column)


def _tckno_check_digit(first9: str) -> int:
    d = [int(c) for c in first9]
    return ((d[0] + d[2] + d[4] + d[6] + d[8]) * 7 - (d[1] + d[3] + d[5] + d[7])) % 10


def test_tckno_format_and_uniqueness(census: pd.DataFrame) -> None:
    ids = census["tckno"]
    assert ids.is_unique
    assert ids.str.fullmatch(r"[1-9][0-9]{9}").all()
    assert all(int(t[9]) == _tckno_check_digit(t[:9]) for t in ids)


def test_tckno_check_digit_matches_known_number() -> None:
    # 10000000146 is the well-known valid test TCKNO: its 10th digit is 4.
    assert _tckno_check_digit("100000001") == 4


def test_tckno_unique_for_large_tables() -> None:
    frame = generate_census(n=50_000, seed=5)
    assert frame["tckno"].is_unique


def test_values_come_from_the_tables(census: pd.DataFrame) -> None:
    tables = census_tables()
    assert set(census["sex"]) == set(SEXES)
    assert set(census["marital_status"]) <= set(MARITAL_STATUSES)
    assert set(census["hometown"]) <= set(tables["provinces"]["province"])
    assert census["age"].between(18, 64).all()
    first = tables["first_names"]
    for sex in SEXES:
        allowed = set(first.loc[first["sex"] == sex, "name"])
        assert set(census.loc[census["sex"] == sex, "name"]) <= allowed
    assert set(census["surname"]) <= set(tables["surnames"]["surname"])


def test_tables_are_complete() -> None:
    t = census_tables()
    provinces = t["provinces"]
    assert len(provinces) == 81
    assert provinces["province"].is_unique
    assert sorted(provinces["plate"]) == list(range(1, 82))
    assert (provinces["population_thousands"] > 0).all()
    first = t["first_names"]
    assert len(first) >= 100
    assert not first.duplicated(["sex", "name"]).any()
    assert not set(first.loc[first["sex"] == "Erkek", "name"]) & set(
        first.loc[first["sex"] == "Kadın", "name"])
    assert len(t["surnames"]) >= 150
    assert t["surnames"]["surname"].is_unique
    shares = t["marital"][list(MARITAL_STATUSES)].sum(axis=1)
    assert np.allclose(shares, 1.0)
    ages = t["ages"]
    assert (ages["age_from"].iloc[1:].to_numpy() == ages["age_to"].iloc[:-1].to_numpy() + 1).all()


def test_deterministic_for_a_seed() -> None:
    pd.testing.assert_frame_equal(generate_census(seed=3), generate_census(seed=3))
    pd.testing.assert_frame_equal(load_dataset("census"), generate_census())


def test_different_seeds_differ() -> None:
    a, b = generate_census(seed=1), generate_census(seed=2)
    assert not a.equals(b)
    assert (a["tckno"] != b["tckno"]).any()
    assert (a["name"] != b["name"]).any()


def test_unseeded_draw_is_valid() -> None:
    frame = generate_census(n=20, seed=None)
    assert len(frame) == 20 and frame["tckno"].is_unique


@pytest.mark.parametrize("n", [0, -1, MAX_ROWS + 1, True, 2.5, "300", None])
def test_bad_n(n: object) -> None:
    with pytest.raises(InvalidInputError, match="census n"):
        generate_census(n=n)  # type: ignore[arg-type]


def test_bad_seed() -> None:
    with pytest.raises(InvalidInputError):
        generate_census(seed=-1)


@pytest.mark.parametrize("n", [1, 2, 7])
def test_tiny_tables(n: int) -> None:
    frame = generate_census(n=n, seed=4)
    assert len(frame) == n and frame["tckno"].is_unique
    assert list(frame.columns) == COLUMNS


def test_representative_sample_marginals() -> None:
    # Sex, age band and marital status are quota-sampled: counts within one unit per cell
    # of the table-implied expectation, so sex is within 1 of n * male share.
    n = 10_000
    frame = generate_census(n=n, seed=9)
    ages = census_tables()["ages"]
    male_share = ages["male_thousands"].sum() / (
        ages["male_thousands"].sum() + ages["female_thousands"].sum())
    assert abs((frame["sex"] == "Erkek").sum() - n * male_share) <= 1
    band_count = ((frame["age"] >= 18) & (frame["age"] <= 19)).sum()
    expected = n * (ages.iloc[0, 2] + ages.iloc[0, 3]) / (
        ages["male_thousands"].sum() + ages["female_thousands"].sum())
    assert abs(band_count - expected) <= 2


def test_marital_status_follows_age() -> None:
    frame = generate_census(n=5_000, seed=11)
    young = frame[frame["age"] < 25]
    old_women = frame[(frame["age"] >= 55) & (frame["sex"] == "Kadın")]
    assert (young["marital_status"] == "Bekâr").mean() > 0.7
    assert (old_women["marital_status"] == "Dul").mean() > 0.15
    assert (young["marital_status"] == "Dul").mean() < 0.03
