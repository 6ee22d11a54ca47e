"""The declared public schema: parsing, conforming, drafts, bundled schemas, CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privlab.cli.main import main
from privlab.data.datasets import load_adult, load_census, load_geolife, load_movielens
from privlab.errors import InvalidInputError
from privlab.schema import (
    OTHER,
    bundled_schema,
    conform,
    draft_schema,
    draft_yaml,
    load_schema,
    parse_schema,
    schema_from_columns,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "soundness"))
from neighbours import one_row_edits  # noqa: E402

SMALL = schema_from_columns("small", {
    "age": {"type": "integer", "bounds": [17, 90], "missing": False},
    "hours": {"type": "numeric", "bounds": [1, 99]},
    "job": {"type": "categorical", "categories": ["a", "b", "c"], "other": True},
    "sex": {"type": "categorical", "categories": ["F", "M"], "missing": False},
})


def small_frame() -> pd.DataFrame:
    return pd.DataFrame({"age": [20, 30, 40, 50], "hours": [40.0, 38.5, None, 60.0],
                         "job": ["a", "b", "c", "a"], "sex": ["F", "M", "M", "F"]})


def test_parse_rejects_bad_declarations_with_the_field_named():
    cases = [
        ({"columns": {"x": {"type": "float"}}}, "type must be one of"),
        ({"columns": {"x": {"type": "integer"}}}, "needs public \"bounds\""),
        ({"columns": {"x": {"type": "integer", "bounds": [1.5, 3]}}}, "whole-number bounds"),
        ({"columns": {"x": {"type": "numeric", "bounds": [3, 1]}}}, "LO < HI"),
        ({"columns": {"x": {"type": "categorical", "categories": []}}}, "non-empty"),
        ({"columns": {"x": {"type": "categorical", "categories": ["a", "a"]}}}, "distinct"),
        ({"columns": {"x": {"type": "categorical", "categories": [OTHER]}}}, "reserved"),
        ({"columns": {"x": {"type": "text", "bounds": [0, 1]}}}, "takes no bounds"),
        ({"columns": {"x": {"type": "integer", "bounds": [0, 1], "colour": 1}}}, "unknown keys"),
        ({"columns": {"x": {"type": "text"}}, "privacy_unit": "x"}, "type identifier"),
        ({"columns": {"x": {"type": "text"}}, "public_size": 0}, "positive integer"),
        ({"columns": {}}, "\"columns\""),
    ]
    for spec, message in cases:
        with pytest.raises(InvalidInputError, match=message) as info:
            parse_schema(spec, name="t")
        assert "\n" not in str(info.value)
        if spec["columns"]:
            assert "'x'" in str(info.value) or "schema 't'" in str(info.value)


def test_round_trip_yaml_and_json(tmp_path):
    for name in ("adult", "geolife", "movielens-ratings", "census"):
        s = bundled_schema(name)
        (tmp_path / "s.yaml").write_text(s.to_yaml())
        (tmp_path / "s.json").write_text(json.dumps(s.to_dict()))
        assert load_schema(tmp_path / "s.yaml").to_dict() == s.to_dict()
        assert load_schema(tmp_path / "s.json").fingerprint() == s.fingerprint()


def test_conform_gives_schema_dtypes_whatever_the_rows_hold():
    out = conform(small_frame(), SMALL)
    assert list(out.columns) == ["age", "hours", "job", "sex"]
    assert [str(t) for t in out.dtypes] == ["float64", "float64", "object", "object"]
    # text in the numeric column, an unknown job, a fractional age: the dtypes do not move
    odd = small_frame().astype(object)
    odd.loc[0, "hours"] = "unknown"
    odd.loc[1, "job"] = "zzz"
    odd.loc[2, "age"] = 40.5
    odd.loc[3, "age"] = 1e12
    coerced = conform(odd, SMALL, "coerce")
    assert [str(t) for t in coerced.dtypes] == [str(t) for t in out.dtypes]
    assert np.isnan(coerced.loc[0, "hours"])
    assert coerced.loc[1, "job"] == OTHER
    assert coerced.loc[2, "age"] == 40.0  # round half to even
    assert coerced.loc[3, "age"] == 90.0  # clamped to the declared bound


def test_refuse_names_the_column_and_the_fix():
    cases = [("hours", "unknown", "not a number"), ("age", 40.5, "non-integer"),
             ("age", 200, "outside its declared bounds"), ("sex", "X", "outside its declared"),
             ("sex", None, "missing")]
    for col, value, message in cases:
        frame = small_frame().astype(object)
        frame.loc[0, col] = value
        with pytest.raises(InvalidInputError, match=message) as info:
            conform(frame, SMALL, "refuse")
        assert f"column {col!r}" in str(info.value)
        assert "--on-invalid coerce" in str(info.value)


def test_coerce_drops_rows_that_have_no_place():
    frame = small_frame().astype(object)
    frame.loc[1, "sex"] = None  # missing: false and no other bucket
    frame.loc[2, "sex"] = "X"   # unknown, no other, missing not allowed
    out = conform(frame, SMALL, "coerce")
    assert len(out) == 2
    assert out["age"].tolist() == [20.0, 50.0]


def test_undeclared_or_absent_columns_refused():
    with pytest.raises(InvalidInputError, match="'extra' is not in schema"):
        conform(small_frame().assign(extra=1), SMALL)
    with pytest.raises(InvalidInputError, match="no column 'sex'"):
        conform(small_frame().drop(columns="sex"), SMALL)


def test_every_one_row_edit_keeps_columns_and_dtypes():
    base = conform(small_frame(), SMALL)
    for name, edited in one_row_edits(small_frame(), SMALL).items():
        out = conform(edited, SMALL, "coerce")
        assert list(out.columns) == list(base.columns), name
        assert [str(t) for t in out.dtypes] == [str(t) for t in base.dtypes], name
        assert abs(len(out) - len(base)) <= 1, name


def test_bundled_schemas_fit_the_bundled_data_without_coercion():
    assert conform(load_adult(), bundled_schema("adult"), "refuse").shape == (32561, 15)
    assert conform(load_movielens(), bundled_schema("movielens-ratings"), "refuse").shape[0] \
        == 100836
    assert conform(load_movielens("movies"), bundled_schema("movielens-movies"),
                   "refuse").shape[1] == 3
    geo = conform(load_geolife(), bundled_schema("geolife"), "refuse")
    assert str(geo["datetime"].dtype) == "datetime64[ns]"
    assert conform(load_census(200), bundled_schema("census"), "refuse").shape == (200, 7)


def test_adult_schema_keeps_rare_categories_declared():
    # the one Holand-Netherlands row must not decide whether the category exists
    s = bundled_schema("adult")
    assert "Holand-Netherlands" in s.column("native-country").categories
    without = load_adult()
    without = without[without["native-country"] != "Holand-Netherlands"]
    assert conform(without, s)["native-country"].dtype == object


def test_draft_is_refused_until_reviewed(tmp_path):
    draft = draft_schema(load_census(60), name="census-draft")
    assert draft.draft
    text = draft_yaml(draft)
    assert "DRAWN FROM THE DATA" in text
    path = tmp_path / "d.yaml"
    path.write_text(text)
    with pytest.raises(InvalidInputError, match="draft"):
        load_schema(path)
    with pytest.raises(InvalidInputError, match="draft"):
        conform(load_census(60), draft)
    path.write_text(text.replace("draft: true\n", ""))
    reviewed = load_schema(path)
    assert not reviewed.draft
    assert reviewed.column("tckno").type == "identifier"
    assert reviewed.column("age").type == "integer"


def test_draft_kinds():
    frame = pd.DataFrame({"i": [1, 2, 3], "f": [1.5, 2.0, None], "t": ["a", "b", "a"],
                          "b": [True, False, True],
                          "d": pd.to_datetime(["2020-01-01", "2020-02-01", "2020-03-01"])})
    d = draft_schema(frame)
    assert [d.column(c).type for c in "iftbd"] == ["integer", "numeric", "categorical",
                                                   "categorical", "datetime"]
    assert d.column("f").missing and not d.column("i").missing


def test_cli_draft_show_check(tmp_path, capsys):
    data = tmp_path / "c.csv"
    load_census(80).to_csv(data, index=False)
    assert main(["schema", "draft", str(data), "--out", str(tmp_path / "d.yaml")]) == 0
    err = capsys.readouterr().err
    assert "WARNING" in err and "private" in err
    assert main(["schema", "check", str(data), "--schema", str(tmp_path / "d.yaml")]) == 2
    assert "draft" in capsys.readouterr().err
    assert main(["schema", "check", str(data), "--schema", "census", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fits"] is True
    bad = load_census(80)
    bad.loc[0, "age"] = 300
    bad.to_csv(data, index=False)
    assert main(["schema", "check", str(data), "--schema", "census", "--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["fits"] is False and "'age'" in report["problems"][0]
    assert main(["schema", "show", "adult", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["columns"]["age"] == {"type": "integer", "bounds": [17, 90], "missing": False}
    assert main(["schema", "show", "nosuch"]) == 2
    assert "privlab schema draft" in capsys.readouterr().err


def test_older_adult_declarations_agree_with_the_bundled_schema():
    """The learn Adult preprocessor is read from the bundled schema; it must state its
    categories and no wider bounds (no drift, e.g. if someone writes a list back in by hand;
    tests/schema/test_adult_facts_in_schema.py refuses such lists anywhere in src)."""
    from privlab.learn.data import ADULT_BOUNDS, ADULT_CATEGORIES

    s = bundled_schema("adult")
    for name, cats in ADULT_CATEGORIES.items():
        assert set(cats) == set(s.column(name).categories), name
    for name, (lo, hi) in ADULT_BOUNDS.items():
        b = s.column(name).bounds
        assert b[0] <= lo and hi <= b[1], name


def test_select_keeps_the_privacy_unit_instead_of_turning_it_into_rows() -> None:
    """Selecting columns without the person column used to reset privacy_unit to "row": a
    synthesizer fitted on it gave a per-row guarantee and no per-person row limit."""
    schema = parse_schema({"privacy_unit": "pid", "max_rows_per_unit": 3, "columns": {
        "pid": {"type": "identifier"},
        "sex": {"type": "categorical", "categories": ["F", "M"]},
        "age": {"type": "integer", "bounds": [0, 99]}}}, name="visits")
    picked = schema.select(["age"])
    assert picked.privacy_unit == "pid" and picked.max_rows_per_unit == 3
    assert picked.names == ["age", "pid"] and picked.column("pid").type == "identifier"
    assert schema.select(["sex", "pid"]).names == ["sex", "pid"]
    rows = parse_schema({"columns": {"a": {"type": "integer", "bounds": [0, 1]},
                                     "b": {"type": "integer", "bounds": [0, 1]}}}, name="r")
    assert rows.select(["b"]).names == ["b"] and rows.select(["b"]).privacy_unit == "row"


def test_schema_check_of_a_person_schema_checks_each_column_alone(tmp_path, capsys):
    """`privlab schema check` conforms one column at a time: the person column is not
    reported missing from every other column's check."""
    (tmp_path / "v.csv").write_text("pid,age\np1,30\np1,31\np2,40\n", encoding="utf-8")
    (tmp_path / "v.yaml").write_text("name: v\nprivacy_unit: pid\ncolumns:\n"
                                     "  pid: {type: identifier}\n"
                                     "  age: {type: integer, bounds: [0, 99]}\n")
    assert main(["schema", "check", str(tmp_path / "v.csv"), "--schema",
                 str(tmp_path / "v.yaml"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["problems"] == []


@pytest.mark.parametrize("kind", ["integer", "numeric"])
@pytest.mark.parametrize("missing", [True, False])
def test_physical_numbers_read_as_cell_by_cell(kind, missing):
    """Issue 32: float/int NumPy columns (Parquet) take a vectorised path; it must give the
    values, dropped rows and refusals of the per-cell rules (the same cells as objects)."""
    from privlab.schema.conform import _physical_floats

    schema = schema_from_columns("p", {"x": {"type": kind, "bounds": [-3, 40],
                                             "missing": missing}})
    columns = [np.array([0.0, -3.0, 40.0, 7.0, 12.0]),
               np.array([2.5, -0.0, 39.999, 1e300, -7.25, np.inf, -np.inf, np.nan, 40.5]),
               np.array([1, 5, -10, 99, 40], dtype=np.int64),
               np.array([3.5, np.nan], dtype=np.float32)]
    for values in columns:
        fast, slow = pd.DataFrame({"x": values}), pd.DataFrame({"x": values.astype(object)})
        assert _physical_floats(fast["x"], (-3, 40)) is not None
        assert _physical_floats(slow["x"], (-3, 40)) is None
        for policy in ("coerce", "refuse"):
            try:
                want = conform(slow, schema, policy)
            except InvalidInputError as exc:
                with pytest.raises(InvalidInputError) as info:
                    conform(fast, schema, policy)
                assert str(info.value) == str(exc)
                continue
            got = conform(fast, schema, policy)
            pd.testing.assert_frame_equal(got, want)
    # beyond 2^53 an int64 cell is not a float: the per-cell rules read it
    big = pd.Series(np.array([2 ** 60], dtype=np.int64))
    assert _physical_floats(big, (-3, 40)) is None
