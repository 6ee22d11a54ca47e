"""Issue 23: `privlab assess --schema`: the declaration decides each column's treatment.

Identifier / text columns are direct identifiers (flagged, not assessed, refused in a role),
`--bin-numeric` cuts over the declared bounds (so the bins do not move with the data's max),
values outside the schema follow `--on-invalid`, and the JSON records the schema.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from privlab.cli.main import main

SCHEMA = {
    "name": "survey",
    "columns": {
        "pid": {"type": "identifier", "missing": False},
        "note": {"type": "text"},
        "age": {"type": "integer", "bounds": [0, 99], "missing": False},
        "score": {"type": "integer", "bounds": [1, 5], "missing": False},
        "sex": {"type": "categorical", "categories": ["F", "M"], "missing": False},
    },
}


def _frame(n: int = 200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(20, 60, n)
    age[0] = 60  # the data's max: one row
    return pd.DataFrame({"pid": [f"P{i:04d}" for i in range(n)],
                         "note": [f"called on day {i}" for i in range(n)],
                         "age": age, "score": rng.integers(1, 6, n),
                         "sex": rng.choice(["F", "M"], n)})


@pytest.fixture()
def files(tmp_path) -> dict[str, Path]:
    schema = tmp_path / "survey.yaml"
    schema.write_text(yaml.safe_dump(SCHEMA, sort_keys=False))
    data = tmp_path / "survey.csv"
    _frame().to_csv(data, index=False)
    return {"schema": schema, "data": data, "dir": tmp_path}


def _json(capsys, argv: list[str]) -> dict:
    code = main([*argv, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def _one_line_error(capsys, argv: list[str]) -> str:
    code = main(argv)
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("error:")
    return err[0]


def test_identifier_and_text_are_flagged_not_assessed(capsys, files, tmp_path):
    report = tmp_path / "r.html"
    doc = _json(capsys, ["assess", str(files["data"]), "--schema", str(files["schema"]),
                         "--report", str(report)])
    assert [a["name"] for a in doc["attributes"]] == ["age", "score", "sex"]
    sch = doc["schema"]
    assert sch["name"] == "survey" and len(sch["fingerprint"]) == 16
    assert sch["on_invalid"] == "refuse" and sch["rows_read"] == 200 == doc["rows_in"]
    assert [(d["name"], d["type"]) for d in sch["direct_identifiers"]] == [
        ("pid", "identifier"), ("note", "text")]
    drops = {r["target"][0] for r in doc["recommendations"] if r["action"] == "drop"}
    assert {"pid", "note"} <= drops
    html = report.read_text()
    assert "pid (identifier, DO NOT PUBLISH)" in html and "note (text" in html
    # without --schema the same file assesses pid like any column (today's behaviour)
    plain = _json(capsys, ["assess", str(files["data"])])
    assert "pid" in [a["name"] for a in plain["attributes"]] and "schema" not in plain


@pytest.mark.parametrize("option", ["--quasi-identifiers", "--attributes", "--sensitive"])
def test_identifier_in_a_role_is_refused(capsys, files, option):
    argv = ["assess", str(files["data"]), "--schema", str(files["schema"]), option, "pid"]
    if option == "--sensitive":
        argv += ["-q", "age"]
    line = _one_line_error(capsys, argv)
    assert f"{option}: column 'pid' is declared identifier" in line


def _age(doc: dict) -> dict:
    return next(a for a in doc["attributes"] if a["name"] == "age")


def test_bins_follow_declared_bounds_not_the_data_max(capsys, files):
    """The same report on the data and on the data with its max row changed (60 -> 64):
    with --schema the edges come from the declared [0, 99]; without, from min/max."""
    moved = files["dir"] / "moved.csv"
    frame = _frame()
    frame.loc[0, "age"] = 64
    frame.to_csv(moved, index=False)
    runs = {}
    for name, path in (("data", files["data"]), ("moved", moved)):
        runs[name, "schema"] = _json(capsys, ["assess", str(path), "--schema",
                                             str(files["schema"]), "--bin-numeric", "10"])
        runs[name, "plain"] = _json(capsys, ["assess", str(path), "--attributes", "age,sex",
                                            "--bin-numeric", "4"])
    a, b = _age(runs["data", "schema"]), _age(runs["moved", "schema"])
    assert a["declared_bins"] == [f"{lo}-{lo + 9}" for lo in range(0, 100, 10)]
    assert a == b
    # the contrast: data-driven edges move with the max, so the attribute reads differently
    assert _age(runs["data", "plain"]) != _age(runs["moved", "plain"])


def test_small_integer_range_keeps_one_value_per_bin(capsys, files):
    doc = _json(capsys, ["assess", str(files["data"]), "--schema", str(files["schema"]),
                         "--bin-numeric", "10"])
    score = next(a for a in doc["attributes"] if a["name"] == "score")
    assert score["binned"] is False and score["distinct"] == 5
    assert "declared_bins" not in score


def test_on_invalid_refuse_and_coerce(capsys, files):
    bad = files["dir"] / "bad.csv"
    frame = _frame()
    frame.loc[3, "sex"] = "male"  # outside the declared categories, missing: false
    frame.to_csv(bad, index=False)
    line = _one_line_error(capsys, ["assess", str(bad), "--schema", str(files["schema"])])
    assert "column 'sex'" in line and "--on-invalid coerce" in line
    line = _one_line_error(capsys, ["assess", str(bad), "--schema", str(files["schema"]),
                                    "--on-invalid", "clip"])
    assert "--on-invalid must be one of refuse, coerce" in line
    doc = _json(capsys, ["assess", str(bad), "--schema", str(files["schema"]),
                         "--on-invalid", "coerce"])
    assert doc["schema"]["rows_dropped"] == 1 and doc["rows_in"] == 199


def test_schema_engine_and_declaration_errors(capsys, files):
    # --schema works on every engine now; DuckDB still reads Parquet only, with or without it
    line = _one_line_error(capsys, ["assess", str(files["data"]), "--schema",
                                    str(files["schema"]), "--engine", "duckdb"])
    assert "Parquet" in line and "--schema" not in line
    line = _one_line_error(capsys, ["assess", str(files["data"]), "--schema", "adult"])
    assert "not in schema 'adult'" in line


def test_bundled_schema_name_on_bundled_adult(capsys, tmp_path, adult_raw):
    path = tmp_path / "adult.csv"
    adult_raw.iloc[:2000].to_csv(path, index=False, na_rep="?")
    doc = _json(capsys, ["assess", str(path), "--schema", "adult", "-q", "age,sex,race",
                         "--bin-numeric", "8"])
    assert doc["schema"]["name"] == "adult" and doc["schema"]["direct_identifiers"] == []
    age = _age(doc)
    assert age["declared_bins"][0] == "17-26" and age["declared_bins"][-1] == "87-90"
    edu = next(a for a in doc["attributes"] if a["name"] == "education-num")
    assert edu["binned"] is True and len(edu["declared_bins"]) == 8  # 16 values, 8 bins
    assert doc["privacy_models"]["quasi_identifiers"] == ["age", "sex", "race"]


def test_an_extract_and_its_population_are_conformed(capsys, files):
    """A file with some of the declared columns works; --population is conformed too (its
    integer ages compare with the sample's as numbers, its bad value is refused by name)."""
    frame = _frame()
    sample, pop = files["dir"] / "sample.csv", files["dir"] / "pop.csv"
    frame[["age", "sex"]].iloc[:50].to_csv(sample, index=False)
    frame[["age", "sex"]].to_csv(pop, index=False)
    doc = _json(capsys, ["assess", str(sample), "--schema", str(files["schema"]),
                         "-q", "age,sex", "--population", str(pop)])
    assert doc["schema"]["direct_identifiers"] == []
    delta = doc["privacy_models"]["delta_presence"]
    assert 0 <= delta["delta_min"] <= delta["delta_max"] <= 1
    bad = frame[["age", "sex"]].copy()
    bad.loc[9, "age"] = 150
    bad.to_csv(pop, index=False)
    line = _one_line_error(capsys, ["assess", str(sample), "--schema", str(files["schema"]),
                                    "-q", "age,sex", "--population", str(pop)])
    assert line.startswith("error: --population: column 'age'")
