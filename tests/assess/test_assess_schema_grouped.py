"""Issue 23: `privlab assess --schema` on the grouped path (DuckDB over Parquet): the rows are
conformed in SQL with the semantics of the pandas path, so the same table written as CSV
(pandas) and as Parquet (`--engine duckdb`, `--engine auto`) gives the same JSON; a value
outside the declaration gets the same one-line refusal. Also: a declared datetime column is
cut into equal-width bins over its declared range with `--bin-numeric` on both paths.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from privlab.cli.main import main

SCHEMA = {
    "name": "visits",
    "columns": {
        "pid": {"type": "identifier", "missing": False},
        "note": {"type": "text"},
        "age": {"type": "integer", "bounds": [0, 99], "missing": False},
        "score": {"type": "integer", "bounds": [1, 5]},
        "income": {"type": "numeric", "bounds": [0, 100000]},
        "sex": {"type": "categorical", "categories": ["F", "M"], "missing": False},
        "region": {"type": "categorical", "categories": ["north", "south"], "other": True},
        "day": {"type": "datetime", "bounds": ["2020-01-01", "2020-12-31"]},
    },
}


def _frame(n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    income = np.round(rng.uniform(0, 90000, n), 2)
    income[::17] = np.nan
    score = rng.integers(1, 6, n).astype(float)
    score[::13] = np.nan
    return pd.DataFrame({
        "pid": [f"P{i:04d}" for i in range(n)],
        "note": [f"called on day {i}" for i in range(n)],
        "age": rng.integers(18, 80, n),
        "score": score,
        "income": income,
        "sex": rng.choice(["F", "M"], n),
        "region": rng.choice(["north", "south", "east"], n),
        "day": pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 365, n), unit="D"),
    })


def _invalid(frame: pd.DataFrame) -> pd.DataFrame:
    """Every coercion of `conform`: clamped and half-to-even rounded ages, an undeclared
    category with and without `<other>` (the latter dropped: sex is missing: false), a
    missing value where none is allowed (dropped), clamped incomes and dates."""
    out = frame.copy()
    out["age"] = out["age"].astype(float)
    out.loc[0, "age"], out.loc[1, "age"], out.loc[2, "age"] = 150, -3, 32.5
    out.loc[3, "age"], out.loc[4, "age"] = 33.5, np.nan
    out.loc[5, "sex"] = "male"
    out.loc[6, "income"], out.loc[7, "income"] = -10.0, 1e9
    out.loc[8, "day"] = pd.Timestamp("2021-06-01")
    out.loc[9, "score"] = 7
    return out


def _write(frame: pd.DataFrame, folder: Path, name: str) -> tuple[Path, Path]:
    csv, parquet = folder / f"{name}.csv", folder / f"{name}.parquet"
    frame.to_csv(csv, index=False)
    frame.to_parquet(parquet, index=False)
    return csv, parquet


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("schema-grouped")
    schema = folder / "visits.yaml"
    schema.write_text(yaml.safe_dump(SCHEMA, sort_keys=False))
    return {"schema": schema, "clean": _write(_frame(), folder, "clean"),
            "invalid": _write(_invalid(_frame()), folder, "invalid"), "dir": folder}


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    code, out, err = _run(capsys, [*argv, "--json"])
    assert code == 0, err
    doc = json.loads(out)
    doc.pop("source")
    return doc


def assert_close(a: Any, b: Any, where: str = "") -> None:
    """Equal JSON, floats to 1e-9."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (where, a, b)
        for k in a:
            assert_close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), (where, a, b)
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_close(x, y, f"{where}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (where, a, b)
    else:
        assert a == b, (where, a, b)


@pytest.mark.parametrize("table,policy,bins,extra", [
    ("clean", "refuse", None, []), ("clean", "refuse", "4", []), ("clean", "coerce", "4", []),
    ("invalid", "coerce", None, []), ("invalid", "coerce", "3", []),
    ("invalid", "coerce", "3", ["--drop-missing"])])
def test_duckdb_equals_pandas(capsys, tables, table, policy, bins, extra):
    csv, parquet = tables[table]
    opts = ["--schema", str(tables["schema"]), "--on-invalid", policy,
            "-q", "age,sex,region", "-s", "income", "--max-combination-size", "3", *extra]
    if bins is not None:
        opts += ["--bin-numeric", bins]
    pandas_doc = _json(capsys, ["assess", str(csv), *opts])
    duck = _json(capsys, ["assess", str(parquet), "--engine", "duckdb", *opts])
    auto = _json(capsys, ["assess", str(parquet), *opts])  # auto: DuckDB for Parquet
    assert_close(pandas_doc, duck)
    assert_close(pandas_doc, auto)
    assert [a["name"] for a in duck["attributes"]] == ["age", "score", "income", "sex",
                                                       "region", "day"]
    assert [d["name"] for d in duck["schema"]["direct_identifiers"]] == ["pid", "note"]
    assert duck["schema"]["rows_read"] == 300
    if table == "invalid":  # 'male' (sex, missing: false) and the missing age are dropped
        assert duck["schema"]["rows_dropped"] == 2 and duck["rows_in"] == 298


def test_report_text_is_the_same(capsys, monkeypatch, tables):
    """The console report (schema line, direct identifiers, tables) reads the same.

    The two file names differ in length, so the report is compared unwrapped (soft wrap):
    Rich would otherwise break the line naming the file at a place that depends on the
    length of the temp folder, and the replaced texts would differ by their layout only."""
    from privlab.cli import common

    monkeypatch.setattr(common.console, "soft_wrap", True)
    csv, parquet = tables["invalid"]
    opts = ["--schema", str(tables["schema"]), "--on-invalid", "coerce", "--bin-numeric", "3",
            "-q", "age,sex"]
    outs = []
    for path, engine in ((csv, "pandas"), (parquet, "duckdb")):
        code, out, err = _run(capsys, ["assess", str(path), "--engine", engine, *opts])
        assert code == 0, err
        outs.append((out.replace(path.name, "FILE"), err))
    assert outs[0] == outs[1]
    text = " ".join(outs[1][0].split())
    assert "direct identifiers" in text and "pid (identifier), note (text)" in text
    assert "2 of 300 rows dropped by the schema" in text


def test_coerced_rows_equal_conform(tables):
    """The conformed view's rows are `conform_rows`' rows, cell for cell: clamped ages, ages
    rounded half to even (32.5 -> 32, 33.5 -> 34), `<other>`, dropped rows, clamped dates."""
    from privlab.assess.declared import conform_rows
    from privlab.assess.declared_sql import ConformedSource
    from privlab.assess.grouped import DuckDBSource
    from privlab.schema import load_schema

    schema = load_schema(str(tables["schema"]))
    csv, parquet = tables["invalid"]
    view = ConformedSource(DuckDBSource(parquet), schema, "coerce")
    got = view.frame("SELECT * FROM __data ORDER BY pid")
    want = conform_rows(pd.read_csv(csv), schema, "coerce").sort_values("pid")
    want = want.reset_index(drop=True)
    assert (view.rows_read, view.rows_kept) == (300, 298)
    assert list(got.columns) == list(want.columns)
    assert got["age"].tolist() == want["age"].tolist()
    assert want["age"].iloc[:4].tolist() == [99, 0, 32, 34]
    for c in ("score", "income"):
        assert np.allclose(got[c].to_numpy(float), want[c].to_numpy(float), equal_nan=True)
    for c in ("pid", "note", "sex", "region"):
        assert got[c].fillna("<NA>").tolist() == want[c].fillna("<NA>").tolist()
    assert (pd.to_datetime(got["day"]) == want["day"]).all()
    assert (got["region"] == "<other>").sum() > 0


@pytest.mark.parametrize("column,value", [
    ("sex", "male"), ("sex", None), ("age", 150), ("age", 33.5), ("age", None),
    ("income", "a lot"), ("day", "2019-05-01"), ("day", "someday"), ("pid", None)])
def test_refusals_match(capsys, tables, column, value):
    frame = _frame()
    if value is not None and not isinstance(value, (int, float)) or column == "day":
        frame[column] = frame[column].astype(str) if column != "day" \
            else frame[column].dt.strftime("%Y-%m-%d")
        frame[column] = frame[column].astype(object)
    elif isinstance(value, float) or value is None:
        frame[column] = frame[column].astype(object if column in ("sex", "pid") else float)
    frame.loc[11, column] = value
    csv, parquet = _write(frame, tables["dir"], f"bad-{column}")
    lines = []
    for path, engine in ((csv, "pandas"), (parquet, "duckdb")):
        code, _, err = _run(capsys, ["assess", str(path), "--schema", str(tables["schema"]),
                                     "--engine", engine])
        errs = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2 and len(errs) == 1, errs
        lines.append(errs[0])
    assert lines[0] == lines[1]
    assert lines[1].startswith(f"error: DATA: column '{column}'")


def test_undeclared_column_and_population(capsys, tables):
    csv, parquet = tables["clean"]
    frame = _frame()
    frame["extra"] = 1
    _, extra = _write(frame, tables["dir"], "extra")
    code, _, err = _run(capsys, ["assess", str(extra), "--schema", str(tables["schema"]),
                                 "--engine", "duckdb"])
    assert code == 2 and "column 'extra' is not in schema 'visits'" in err
    pop = pd.concat([_frame(), _invalid(_frame(300, seed=1))], ignore_index=True)
    pop_csv, pop_parquet = _write(pop, tables["dir"], "pop")
    opts = ["--schema", str(tables["schema"]), "-q", "age,sex"]
    code, _, err = _run(capsys, ["assess", str(parquet), *opts, "--population",
                                 str(pop_parquet)])
    assert code == 2 and err.startswith("error: --population: column 'age'")
    docs = [_json(capsys, ["assess", str(d), *opts, "--on-invalid", "coerce",
                           "--population", str(p), "--engine", e])
            for d, p, e in ((csv, pop_csv, "pandas"), (parquet, pop_parquet, "duckdb"))]
    assert_close(docs[0], docs[1])
    assert "delta_presence" in docs[1]["privacy_models"]


def test_dates_binned_over_the_declared_range(capsys, tables):
    """--bin-numeric 4 cuts `day` into four equal spans of 2020-01-01..2020-12-31 (365
    days: edges every 91.25 days), labelled by ISO dates, on both paths."""
    csv, parquet = tables["clean"]
    opts = ["--schema", str(tables["schema"]), "--bin-numeric", "4", "--attributes", "day,sex"]
    docs = [_json(capsys, ["assess", str(p), "--engine", e, *opts])
            for p, e in ((csv, "pandas"), (parquet, "duckdb"))]
    assert_close(docs[0], docs[1])
    day = next(a for a in docs[1]["attributes"] if a["name"] == "day")
    assert day["binned"] is True and day["distinct"] == 4
    assert day["declared_bins"] == [
        "[2020-01-01T00:00:00, 2020-04-01T06:00:00)",
        "[2020-04-01T06:00:00, 2020-07-01T12:00:00)",
        "[2020-07-01T12:00:00, 2020-09-30T18:00:00)",
        "[2020-09-30T18:00:00, 2020-12-31T00:00:00]"]
    frame = _frame()
    edges = pd.to_datetime(["2020-04-01 06:00", "2020-07-01 12:00", "2020-09-30 18:00"])
    per_bin = np.bincount(np.searchsorted(edges, frame["day"], side="right"), minlength=4)
    assert day["k"] == per_bin.min()
    plain = _json(capsys, ["assess", str(csv), "--schema", str(tables["schema"]),
                           "--attributes", "day"])
    assert plain["attributes"][0]["binned"] is False
    assert plain["attributes"][0]["distinct"] == frame["day"].nunique()


def test_datetime_bin_edges_and_labels():
    """Midnight edges read as dates; a range shorter than N microseconds is refused."""
    from privlab.assess.declared import declared_bins
    from privlab.errors import InvalidInputError
    from privlab.schema import load_schema

    schema = load_schema({"name": "d", "columns": {
        "day": {"type": "datetime", "bounds": ["2020-01-01", "2021-01-01"]},
        "tick": {"type": "datetime", "bounds": ["2020-01-01 00:00:00",
                                                "2020-01-01 00:00:00.000003"]}}})
    bins = declared_bins(schema, "day", 2)
    assert bins is not None and bins.datetime
    assert bins.labels() == ["[2020-01-01, 2020-07-02)", "[2020-07-02, 2021-01-01]"]
    with pytest.raises(InvalidInputError, match="ask for fewer bins"):
        declared_bins(schema, "tick", 4)


def test_a_column_named_like_the_relation(capsys, tmp_path):
    """Review: the grouped path rewrote every `__data` in its SQL to the view's name, column
    names included, so a declared column `my__data` made every query fail. Only the relation
    after FROM is rewritten now; DuckDB equals pandas on such a table."""
    spec = {"name": "odd", "columns": {
        "my__data": {"type": "categorical", "categories": ["a", "b"], "missing": False},
        "age": {"type": "integer", "bounds": [0, 99], "missing": False}}}
    schema = tmp_path / "odd.yaml"
    schema.write_text(yaml.safe_dump(spec, sort_keys=False))
    frame = pd.DataFrame({"my__data": ["a", "b", "a"] * 40, "age": list(range(20, 140, 1))[:120]})
    frame["age"] = frame["age"].clip(upper=99)
    csv, parquet = _write(frame, tmp_path, "odd")
    opts = ["--schema", str(schema), "-q", "my__data,age"]
    assert_close(_json(capsys, ["assess", str(csv), *opts]),
                 _json(capsys, ["assess", str(parquet), "--engine", "duckdb", *opts]))


def test_text_cells_in_parquet_follow_the_reading_rule_in_sql(tmp_path):
    """Issue 29: DuckDB reads a text cell as `privlab.schema.values` does: a time with Z or an
    offset converted to UTC, a day-first time invalid (or read by a declared format), a
    number only when the cell is one ("inf", "1,5" are not) - each cell on its own."""
    from privlab.assess.declared_sql import ConformedSource
    from privlab.assess.grouped import DuckDBSource
    from privlab.schema import read_declared, schema_from_columns

    frame = pd.DataFrame({"k": ["a", "b", "c", "d"],
                          "day": ["2020-06-01T10:00:00+02:00", "2020-06-01T08:00:00Z",
                                  "13/01/2020", "2020-06-01 08:00"],
                          "dmy": ["13/01/2020", "01/02/2020", "2020-01-01", "05/01/2020"],
                          "x": ["1.5", "inf", "1,5", " 2 "]})
    path = tmp_path / "t.parquet"
    frame.to_parquet(path, index=False)
    schema = schema_from_columns("t", {
        "k": {"type": "identifier"},
        "day": {"type": "datetime", "bounds": ["2020-01-01", "2020-12-31"]},
        "dmy": {"type": "datetime", "format": "%d/%m/%Y", "bounds": ["2020-01-01",
                                                                    "2020-12-31"]},
        "x": {"type": "numeric", "bounds": [0, 10]}})
    got = ConformedSource(DuckDBSource(path), schema, "coerce").frame(
        "SELECT * FROM __data ORDER BY k")
    want = read_declared(path, schema, "coerce")
    eight = pd.Timestamp("2020-06-01 08:00")
    assert pd.to_datetime(got["day"]).tolist()[:2] == [eight, eight]
    for c in ("day", "dmy"):
        assert pd.to_datetime(got[c]).isna().tolist() == want[c].isna().tolist(), c
        assert (pd.to_datetime(got[c]).dropna() == want[c].dropna()).all(), c
    assert np.allclose(got["x"].to_numpy(float), want["x"].to_numpy(float), equal_nan=True)
    assert want["x"].isna().tolist() == [False, True, True, False]
