"""Domain: declarations, binning, private estimation of categories and bounds, bad input."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from synth_schemas import types_schema

from privlab.errors import InvalidInputError
from privlab.schema import bundled_schema, load_schema
from privlab.synth import MSTSynthesizer
from privlab.synth.domain import (
    OTHER,
    ColumnSpec,
    declaration_from_schema,
    discrete_gaussian_tail,
    estimate_bounds,
    make_edges,
    threshold_for,
)
from privlab.synth.legacy import parse_domain_json


def test_adult_domain_covers_every_adult_value(adult: pd.DataFrame) -> None:
    decl = declaration_from_schema(bundled_schema("adult"))
    assert set(decl.columns) == set(adult.columns)
    for name, d in decl.columns.items():
        if d.categories is not None:
            assert set(adult[name].dropna().astype(str)) <= set(d.categories), name
        else:
            lo, hi = d.bounds
            assert adult[name].min() >= lo and adult[name].max() <= hi, name


@pytest.mark.parametrize("spec, match", [
    ({"columns": {"a": {"bounds": [3, 1]}}}, "must be below HI"),
    ({"columns": {"a": {"categories": ["x", "x"]}}}, "distinct"),
    ({"columns": {"a": {"colour": "red"}}}, "unknown keys"),
    ({"columns": {"a": {"type": "categorical", "bounds": [0, 1]}}}, "not bounds"),
    ({"columns": {"a": {"bins": 0}}}, "bins"),
    ({"columns": {"a": {"edges": [1, 1]}}}, "increasing"),
    ({"colums": {}}, "unknown keys"),
])
def test_bad_declarations_are_refused(spec: dict, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        parse_domain_json(spec)


def test_integer_edges_unit_bins_and_zero_bin() -> None:
    e = make_edges(17, 90, 32, integer=True)
    assert e[0] == 17 and e[-1] == 91 and np.all(np.diff(e) == 1)  # one bin per age
    big = make_edges(0, 99999, 32, integer=True, scale="log")
    assert big[0] == 0 and big[1] == 1  # zero has its own bin
    assert big[-1] == 100000 and np.all(np.diff(big) > 0)
    lin = make_edges(-50, 5000, 16, integer=True)
    assert 0 in lin and 1 in lin
    f = make_edges(0.0, 1.0, 4, integer=False)
    assert np.allclose(f, [0, 0.25, 0.5, 0.75, 1.0])


def test_encode_decode_round_trip_and_clamping() -> None:
    gen = np.random.default_rng(0)
    num = ColumnSpec("x", "numeric", edges=tuple(make_edges(0, 9, 32, True)), integer=True)
    s = pd.Series([0, 5, 9, 12, -3, None], dtype="Int64")
    codes = num.encode(s)
    assert codes.tolist() == [0, 5, 9, 9, 0, num.missing_code]
    back = num.decode(codes, gen)
    assert back.iloc[:5].tolist() == [0, 5, 9, 9, 0] and back.isna().iloc[5]
    cat = ColumnSpec("c", "categorical", ("a", "b"), other=False)
    with pytest.raises(InvalidInputError, match="outside its declared categories"):
        cat.encode(pd.Series(["a", "z"]))
    other = ColumnSpec("c", "categorical", ("a", "b"), other=True)
    assert other.decode(other.encode(pd.Series(["a", "z", None])), gen).tolist()[:2] == \
        ["a", OTHER]


def test_threshold_bounds_the_probability_a_singleton_label_survives() -> None:
    for sigma, delta in ((3.0, 1e-6), (40.0, 1e-8), (0.7, 1e-3)):
        tau = threshold_for(sigma, delta)
        # a label held by one record has noisy count 1 + Z; it survives iff 1 + Z >= tau
        assert discrete_gaussian_tail(sigma, tau - 1) <= delta
        assert discrete_gaussian_tail(sigma, tau - 2) > delta  # smallest such threshold
    # symmetry: P[Z >= 1] + P[Z >= 0] = 1 (together they count every integer once)
    assert math.isclose(discrete_gaussian_tail(5.0, 1) + discrete_gaussian_tail(5.0, 0), 1.0,
                        rel_tol=1e-12)


def test_estimated_bounds_bracket_the_bulk() -> None:
    gen = np.random.default_rng(1)
    x = gen.normal(40, 10, 20000).round()
    lo, hi = estimate_bounds(x, sigma=5.0, integer=True, gen=gen)
    assert lo <= np.quantile(x, 0.01) and hi >= np.quantile(x, 0.99)
    assert lo >= 0 and hi <= 128  # 25%-resolution grid, not the whole real line
    assert estimate_bounds(np.array([3.0]), sigma=50.0, integer=True, gen=gen) is None


def test_columns_without_a_declared_type_are_refused(adult_small: pd.DataFrame) -> None:
    """Kinds are never read from the data: an untyped column is refused by name (whatever
    its values), and identifiers are dropped by declaration, not detected."""
    frame = adult_small.head(500).copy()
    frame.insert(0, "customer_id", [f"C{i:06d}" for i in range(len(frame))])
    with pytest.raises(InvalidInputError, match="privlab schema draft"):
        MSTSynthesizer(rng=0).fit(frame, 1.0)
    with pytest.raises(InvalidInputError, match="'customer_id' is not in schema 'adult'"):
        MSTSynthesizer(schema="adult", rng=0).fit(frame, 1.0)
    s = MSTSynthesizer(schema="adult", drop=["customer_id"], rng=0).fit(frame, 8.0)
    assert "customer_id" not in s.sample(10).columns
    spec = bundled_schema("adult").to_dict()
    spec["columns"]["customer_id"] = {"type": "identifier"}
    s = MSTSynthesizer(schema=spec, rng=0).fit(frame, 8.0)
    assert s.domain.names == bundled_schema("adult").names
    assert "customer_id" not in s.sample(10).columns


def test_constant_column_and_missing_values(adult_small: pd.DataFrame) -> None:
    frame = adult_small[["age", "sex", "salary"]].copy()
    frame["country"] = "TR"
    frame["hours"] = 40
    frame.loc[frame.index[:600], "sex"] = None  # 20% missing
    types = types_schema({"age": "integer", "sex": "categorical", "salary": "categorical",
                          "country": "categorical", "hours": "integer"})
    s = MSTSynthesizer(schema=types, estimate_domain="all", rng=3).fit(frame, 4.0)
    out = s.sample(3000)
    assert set(out["country"].dropna()) <= {"TR", OTHER}
    assert (out["country"] == "TR").mean() > 0.95
    assert any("single category" in w for w in s.warnings)
    assert out["hours"].dropna().between(40, 50).all()
    assert abs(out["sex"].isna().mean() - 0.2) < 0.05  # missing is a value of its own
    dropped = MSTSynthesizer(schema=types, estimate_domain="all", rng=3,
                             missing="drop").fit(frame, 4.0).sample(500)
    assert dropped["sex"].notna().all()


def test_kinds_and_dtypes_come_from_the_declaration_not_the_data() -> None:
    frame = pd.DataFrame({"flag": [True, False] * 400, "n": np.arange(800) % 50})
    schema = {"columns": {"flag": {"type": "categorical", "categories": ["False", "True"],
                                   "missing": False},
                          "n": {"type": "numeric", "bounds": [0, 49], "missing": False}}}
    s = MSTSynthesizer(schema=schema, rng=0).fit(frame, 2.0)
    out = s.sample(200)
    # int64 data, but integer was not declared: a float column; bools as declared labels
    assert [str(t) for t in out.dtypes] == ["str", "float64"]
    assert set(out["flag"]) <= {"False", "True"} and not s.domain.columns[1].integer
    assert s.domain.columns[0].source == "declared"


def test_declared_columns_must_exist_and_drop_must_name_columns(adult_small) -> None:
    with pytest.raises(InvalidInputError, match="data has no column 'nope'"):
        MSTSynthesizer(schema={"columns": {"nope": {"type": "categorical",
                                                    "categories": ["a"]}}}).fit(
            adult_small, 1.0)
    with pytest.raises(InvalidInputError, match="--exclude"):
        MSTSynthesizer(drop=["nope"]).fit(adult_small, 1.0)


def test_schema_translation_and_what_synth_refuses_to_synthesize() -> None:
    from privlab.synth.domain import declaration_from_schema

    spec = {"name": "t", "privacy_unit": "row", "columns": {
        "id": {"type": "identifier"}, "memo": {"type": "text"},
        "n": {"type": "integer", "bounds": [0, 10], "scale": "log", "bins": 4},
        "x": {"type": "numeric", "bounds": [-1.5, 2.5], "missing": False},
        "c": {"type": "categorical", "categories": ["a", "b"], "other": True},
        "when": {"type": "datetime", "bounds": ["2020-01-01", "2021-01-01"]}}}
    with pytest.raises(InvalidInputError, match="does not synthesize it; --exclude when"):
        declaration_from_schema(load_schema(spec))
    decl = declaration_from_schema(load_schema(spec), drop=["when"])
    assert decl.drop == ["id", "memo", "when"]
    n, x, c = decl.columns["n"], decl.columns["x"], decl.columns["c"]
    assert (n.kind, n.integer, n.bounds, n.scale, n.bins, n.missing) == \
        ("numeric", True, (0.0, 10.0), "log", 4, True)
    assert (x.kind, x.integer, x.bounds, x.missing) == ("numeric", False, (-1.5, 2.5), False)
    assert (c.kind, c.categories, c.other) == ("categorical", ["a", "b"], True)
    spec["privacy_unit"] = "id"
    with pytest.raises(InvalidInputError, match="privacy unit 'id'"):
        declaration_from_schema(load_schema(spec), drop=["when"])


def test_coerce_and_refuse_policies_in_the_library(adult_small: pd.DataFrame) -> None:
    frame = adult_small.head(400).copy()
    frame["age"] = frame["age"].astype(object)
    frame.at[0, "age"] = "unknown"
    with pytest.raises(InvalidInputError, match="column 'age': a value that is not a number"):
        MSTSynthesizer(schema="adult", on_invalid="refuse", rng=0).fit(frame, 8.0)
    # coerce (the library default): "unknown" has no place (age: missing false): row dropped
    s = MSTSynthesizer(schema="adult", rng=0).fit(frame, 8.0)
    assert len(s.conform(frame)) == len(frame) - 1
    assert str(s.sample(20)["age"].dtype) == "int64"


def test_an_estimated_domain_is_published_as_a_schema(adult_small) -> None:
    """DP-estimated categories and bounds come out as a `Schema` (the one declaration
    format): the synthetic rows conform to it under `refuse`, estimated columns keep their
    DP values, and a domain read without noise is refused as a schema."""
    from privlab.schema import conform

    s = MSTSynthesizer(schema="adult", estimate_domain="all", rng=1).fit(adult_small, 2.0,
                                                                          1e-6)
    schema = s.domain.to_schema("adult-synthetic")
    spec = {c.name: c for c in s.domain.columns}
    assert [c.name for c in schema.columns] == s.domain.names
    for col in schema.columns:
        assert col.missing == spec[col.name].missing
        if col.type == "categorical":
            assert col.categories == spec[col.name].categories and col.other
        else:
            assert col.type == "integer"
            assert col.bounds == (spec[col.name].edges[0], spec[col.name].edges[-1] - 1)
    assert "estimated" in schema.source and schema.privacy_unit == "row"
    out = s.sample(400)
    assert conform(out, schema, "refuse").shape == out.shape
    baseline = MSTSynthesizer(schema="adult", estimate_domain="all", rng=1).fit(adult_small,
                                                                                 None)
    with pytest.raises(InvalidInputError, match="without noise"):
        baseline.domain.to_schema()
