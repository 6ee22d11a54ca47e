"""Measurements as data: stated before any row is read, and what they state is what they
draw; relations as stability steps; the same value as `privlab release` on the same seed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from privlab.cli.main import main
from privlab.core.release import ratio_half_width
from privlab.errors import InvalidInputError
from privlab.measure import AddRemove, Person, Replace, measurement
from privlab.schema import load_schema, parse_schema

CASES = [
    ("count", "age", None, 0.0),
    ("count", "age", "gaussian", 1e-6),
    ("sum", "age", None, 0.0),
    ("sum", "age", "geometric", 0.0),
    ("sum", "hours-per-week", "gaussian", 1e-6),
    ("mean", "age", None, 0.0),
    ("mean", "age", "gaussian", 1e-6),
    ("histogram", "education", None, 0.0),
    ("histogram", "education", "gaussian", 1e-6),
    ("histogram", "age", None, 0.0),
    ("quantile", "age", None, 0.0),
]


@pytest.fixture(scope="module")
def adult() -> pd.DataFrame:
    from privlab.data.datasets import load_dataset

    return load_dataset("adult").head(300)


@pytest.mark.parametrize(("stat", "column", "mech", "delta"), CASES)
def test_stated_noise_is_drawn_noise(adult: pd.DataFrame, stat: str, column: str,
                                     mech: str | None, delta: float) -> None:
    m = measurement("adult", stat, column, epsilon=0.7, delta=delta, mechanism=mech)
    stated_hw, stated_g = m.half_width(), m.guarantee
    out = m(adult, rng=5)  # raises if the drawn scale differs from the stated one
    assert out.guarantee.epsilon == stated_g.epsilon == 0.7
    assert out.guarantee.delta == stated_g.delta == delta
    assert out.guarantee.mechanism == stated_g.mechanism
    if stat in ("count", "sum", "histogram"):
        assert stated_hw == out.confidence_interval(0.95) and stated_hw > 0
        assert out.granularity == m.noise[0].granularity
    if stat == "histogram":
        assert len(out.value) == len(m.domain.labels)


def test_same_value_as_release_cli(adult: pd.DataFrame, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "adult.csv"
    adult.to_csv(path, index=False)
    for stat, column in [("mean", "age"), ("histogram", "education"), ("quantile", "age")]:
        assert main(["release", stat, str(path), "--column", column, "--epsilon", "0.5",
                     "--schema", "adult", "--seed", "11", "--json"]) == 0
        cli = json.loads(capsys.readouterr().out)
        got = measurement("adult", stat, column, epsilon=0.5)(path, rng=11)
        value = got.value.tolist() if hasattr(got.value, "tolist") else got.value
        assert value == cli["value"]
        assert got.guarantee.to_dict()["epsilon"] == cli["guarantee"]["epsilon"]


def test_mean_half_width_at_public_size() -> None:
    sch = load_schema("adult")
    none = measurement(sch, "mean", "age", epsilon=1.0)
    assert none.half_width() is None  # no public size declared: no figure invented
    sized = parse_schema({**_spec(sch), "public_size": 1000}, "adult-sized")
    m = measurement(sized, "mean", "age", epsilon=1.0)
    s, c = m.noise
    expected = ratio_half_width({"sum_scale": s.scale, "count_scale": c.scale},
                                {"clamped_to": [17.0, 90.0], "noisy_count": 1000}, False)
    assert m.half_width() == expected["mean"]
    assert s.scale > 0 and c.scale > 0


def _spec(sch) -> dict:
    import yaml

    from privlab.schema.draft import draft_yaml

    return yaml.safe_load(draft_yaml(sch))


PERSONS = {"name": "ratings", "privacy_unit": "userId", "max_rows_per_unit": 3,
           "columns": {"userId": {"type": "identifier"},
                       "rating": {"type": "numeric", "bounds": [0.5, 5.0]}}}


def _ratings(users: int) -> pd.DataFrame:
    rows = [(f"u{u}", 0.5 + (u * 7 + k) % 10 / 2) for u in range(users) for k in range(5)]
    return pd.DataFrame(rows, columns=["userId", "rating"])


def test_person_is_a_stability_step() -> None:
    sch = parse_schema(PERSONS, "ratings")
    m = measurement(sch, "sum", "rating", epsilon=0.9)
    assert m.relation == Person(column="userId", bound=3)
    assert m.row_epsilon == pytest.approx(0.3) and m.row_epsilon * 3 <= 0.9
    eps, delta = m.privacy_map(1)
    assert eps <= 0.9 and eps == pytest.approx(0.9) and delta == 0
    assert m.privacy_map(2)[0] == pytest.approx(1.8)  # two persons: twice
    assert m.guarantee.neighbouring == "user"
    assert "group privacy over 3 rows" in m.guarantee.accountant
    # the noise is calibrated at epsilon / 3: three times the row-level scale
    row = measurement(parse_schema({**PERSONS, "privacy_unit": "row",
                                    "max_rows_per_unit": None}, "r"), "sum", "rating",
                      epsilon=0.3)
    assert m.noise[0].scale == row.noise[0].scale


def test_person_neighbours_differ_only_in_the_value() -> None:
    """D and D' (one person's rows removed), same seed: only the noised value differs."""
    sch = parse_schema(PERSONS, "ratings")
    m = measurement(sch, "mean", "rating", epsilon=1.0)
    d = _ratings(40)
    d_prime = d[d["userId"] != "u7"]
    a, b = m(d, rng=3), m(d_prime, rng=3)
    assert a.guarantee == b.guarantee and a.noise == b.noise and a.granularity == b.granularity
    assert a.details["noisy_count"] != b.details["noisy_count"] or a.value != b.value


def test_replace_and_gaussian_group_privacy() -> None:
    m = measurement("adult", "count", "age", epsilon=1.0, delta=1e-6, mechanism="gaussian",
                    relation=Replace())
    eps, delta = m.privacy_map(1)
    assert eps <= 1.0 and delta <= 1e-6
    assert m.row_epsilon == 0.5
    assert m.row_delta == pytest.approx(1e-6 / (2 * math.exp(0.5)))
    assert m.guarantee.neighbouring == "replace_record"
    plain = measurement("adult", "count", "age", epsilon=1.0, relation=AddRemove())
    assert plain.privacy_map(1) == (1.0, 0.0)
    # a person with M = 4 rows and the gaussian: delta shrinks by 4 e^(3 eps/4)
    p = measurement(parse_schema(PERSONS, "r"), "sum", "rating", epsilon=2.0, delta=1e-5,
                    mechanism="gaussian", max_rows_per_unit=4)
    eps, delta = p.privacy_map(1)
    assert eps <= 2.0 and delta <= 1e-5 and delta == pytest.approx(1e-5)


@pytest.mark.parametrize(("args", "needle"), [
    (dict(statistic="sum", column="education"), "needs an integer or numeric column"),
    (dict(statistic="count", column="age", mechanism="gaussian"), "needs delta > 0"),
    (dict(statistic="quantile", column="age", mechanism="geometric"), "exponential"),
    (dict(statistic="median", column="age"), "statistic must be one of"),
    (dict(statistic="sum", column="age", delta=1e-6), "only used by the gaussian"),
    (dict(statistic="count", column="nope"), "nope"),
])
def test_refusals_before_data(args: dict, needle: str) -> None:
    with pytest.raises(InvalidInputError, match=needle):
        measurement("adult", epsilon=1.0, **args)


def test_person_schema_needs_a_bound() -> None:
    spec = {**PERSONS, "max_rows_per_unit": None}
    with pytest.raises(InvalidInputError, match="max_rows_per_unit"):
        measurement(parse_schema(spec, "r"), "count", "rating", epsilon=1.0)
    with pytest.raises(InvalidInputError, match="replace"):
        from privlab.measure import relation_of

        relation_of(parse_schema(PERSONS, "r"), replace=True)
