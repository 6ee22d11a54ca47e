"""Issue 23: `privlab anonymize --schema`: declared types, direct identifiers, --on-invalid,
and a generalisation cut over the declared domain (it does not reveal the data's min/max)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from privlab.anonymize import mondrian
from privlab.assess import k_anonymity, l_diversity
from privlab.cli.main import main
from privlab.schema import parse_schema

SPEC = {
    "name": "clinic",
    "columns": {
        "pid": {"type": "identifier", "missing": False},
        "note": {"type": "text"},
        "age": {"type": "integer", "bounds": [0, 99], "missing": False},
        "weight": {"type": "numeric", "bounds": [0.0, 250.0], "missing": False},
        "zone": {"type": "categorical", "categories": ["a", "b", "c", "d", "e"],
                 "missing": False},
        "dx": {"type": "categorical", "categories": ["x", "y", "z"], "missing": False},
    },
}


def _frame(n: int = 120, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(20, 60, n)
    age[0] = 60  # the data's max, held by one row
    return pd.DataFrame({"pid": [f"P{i:04d}" for i in range(n)],
                         "note": ["seen"] * n, "age": age,
                         "weight": np.round(rng.uniform(50, 110, n), 1),
                         "zone": rng.choice(["a", "b", "d", "e"], n),  # no 'c' in the rows
                         "dx": rng.choice(["x", "y", "z"], n)})


@pytest.fixture()
def files(tmp_path) -> dict[str, Path]:
    schema = tmp_path / "clinic.yaml"
    schema.write_text(yaml.safe_dump(SPEC, sort_keys=False))
    data = tmp_path / "clinic.csv"
    _frame().to_csv(data, index=False)
    return {"schema": schema, "data": data, "dir": tmp_path}


def _interval(text: str) -> tuple[float, float]:
    m = re.fullmatch(r"[\[(](-?[\d.]+), (-?[\d.]+)\]", text)
    return (float(m.group(1)), float(m.group(2))) if m else (float(text), float(text))


def test_identifier_as_qi_is_refused_and_nothing_written(capsys, files):
    out = files["dir"] / "out.csv"
    for option, extra in (("-q", []), ("--sensitive", ["--l", "2"])):
        argv = ["anonymize", str(files["data"]), "--schema", str(files["schema"]),
                "--k", "5", "-o", str(out), *extra]
        argv += ["-q", "pid"] if option == "-q" else ["-q", "age", "--sensitive", "pid"]
        code = main(argv)
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert code == 2 and len(err) == 1, err
        assert "column 'pid' is declared identifier in schema 'clinic'" in err[0]
    assert not out.exists()


def test_direct_identifiers_dropped_and_schema_recorded(capsys, files):
    out = files["dir"] / "out.csv"
    code = main(["anonymize", str(files["data"]), "--schema", str(files["schema"]),
                 "-q", "age,zone", "--k", "5", "-o", str(out), "--json"])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    doc = json.loads(cap.out)
    assert doc["schema"]["name"] == "clinic" and doc["schema"]["dropped"] == ["pid", "note"]
    assert len(doc["schema"]["fingerprint"]) == 16
    written = pd.read_csv(out, dtype=str)
    assert "pid" not in written.columns and "note" not in written.columns
    assert k_anonymity(written, ["age", "zone"]) >= 5


def test_intervals_tile_the_declared_range_not_the_data(files):
    schema = parse_schema(SPEC)
    frame = _frame()
    moved = frame.copy()
    moved.loc[0, "age"] = 64  # change the data's max
    res = mondrian(frame, ["age"], 5, schema=schema)
    again = mondrian(moved, ["age"], 5, schema=schema)
    spans = sorted({_interval(t) for t in res.frame["age"]})
    assert spans[0][0] == 0 and spans[-1][1] == 99  # declared bounds, not 20 / 60
    for (_, hi), (lo, _) in zip(spans, spans[1:], strict=False):
        assert lo == hi + 1  # integer classes tile [0, 99] without gaps
    for value, text in zip(frame["age"], res.frame["age"], strict=True):
        lo, hi = _interval(text)
        assert lo <= value <= hi
    assert res.frame.equals(again.frame)
    # the contrast: without a schema the top class publishes the data's max
    plain, plain_moved = mondrian(frame, ["age"], 5), mondrian(moved, ["age"], 5)
    assert not plain.frame.equals(plain_moved.frame)
    assert max(_interval(t)[1] for t in plain.frame["age"]) == 60


def test_numeric_regions_and_declared_categories(files):
    schema = parse_schema(SPEC)
    frame = _frame()
    res = mondrian(frame, ["weight", "zone"], 6, l_div=2, sensitive="dx", schema=schema)
    assert k_anonymity(res.frame, ["weight", "zone"]) >= 6
    assert l_diversity(res.frame, ["weight", "zone"], "dx") >= 2
    bounds = [_interval(t) for t in res.frame["weight"]]
    assert min(lo for lo, _ in bounds) == 0 and max(hi for _, hi in bounds) == 250
    for value, text in zip(frame["weight"], res.frame["weight"], strict=True):
        lo, hi = _interval(text)
        assert (lo < value if text.startswith("(") else lo <= value) and value <= hi
    for text, value in zip(res.frame["zone"], frame["zone"], strict=True):
        assert value in (text[1:-1].split(", ") if text.startswith("{") else [text])
    assert 0 < res.ncp_by_attribute["weight"] <= 1


def test_category_sets_hold_present_values_with_ncp_over_the_declared_domain():
    """A class publishes the categories it holds (not its whole code range: that would list
    every declared category for a class never split on the QI), and its NCP counts the
    declared domain: 5 categories declared, 4 present ('c' absent) -> 3/4 of the plain NCP."""
    frame = _frame()
    declared = mondrian(frame, ["zone"], 40, schema=parse_schema(SPEC))
    plain = mondrian(frame, ["zone"], 40)
    assert declared.frame["zone"].tolist() == plain.frame["zone"].tolist()
    assert any(t.startswith("{") for t in plain.frame["zone"])
    assert declared.ncp_by_attribute["zone"] == pytest.approx(
        plain.ncp_by_attribute["zone"] * 3 / 4, rel=1e-12)


def test_on_invalid_refuse_and_coerce(capsys, files):
    bad = files["dir"] / "bad.csv"
    frame = _frame()
    frame.loc[4, "age"] = 130  # outside the declared [0, 99]
    frame.to_csv(bad, index=False)
    out = files["dir"] / "out.csv"
    argv = ["anonymize", str(bad), "--schema", str(files["schema"]), "-q", "age,zone",
            "--k", "5", "-o", str(out)]
    code = main(argv)
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(err) == 1 and "column 'age'" in err[0], err
    assert not out.exists()
    code = main([*argv, "--on-invalid", "coerce", "--json"])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    doc = json.loads(cap.out)
    assert doc["schema"]["on_invalid"] == "coerce" and doc["rows_in"] == 120
    assert max(_interval(t)[1] for t in pd.read_csv(out, dtype=str)["age"]) == 99


def test_bundled_schema_name_on_bundled_adult(capsys, tmp_path):
    from privlab.data.datasets import load_dataset

    src = tmp_path / "adult.csv"
    load_dataset("adult").iloc[:1500].to_csv(src, index=False, na_rep="?")
    out = tmp_path / "out.csv"
    code = main(["anonymize", str(src), "--schema", "adult", "-q", "age,sex,education",
                 "--k", "10", "-o", str(out), "--json"])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    doc = json.loads(cap.out)
    assert doc["schema"]["name"] == "adult" and doc["achieved"]["k"] >= 10
    ages = [_interval(t) for t in pd.read_csv(out, dtype=str)["age"]]
    assert min(lo for lo, _ in ages) == 17 and max(hi for _, hi in ages) == 90


def test_datetime_qi_is_cut_over_its_declared_bounds():
    schema = parse_schema({"name": "visits", "columns": {
        "day": {"type": "datetime", "bounds": ["2020-01-01", "2021-01-01"], "missing": False},
        "n": {"type": "integer", "bounds": [0, 9], "missing": False}}})
    frame = pd.DataFrame({"day": pd.date_range("2020-02-01", periods=40, freq="D").astype(str),
                          "n": np.arange(40) % 10})
    res = mondrian(frame, ["day"], 8, schema=schema)
    texts = set(res.frame["day"])
    assert any(t.startswith("[2020-01-01, ") for t in texts)  # declared, not 2020-02-01
    assert any(t.endswith(", 2021-01-01]") for t in texts)  # declared, not 2020-03-11
    for day, text in zip(pd.to_datetime(frame["day"]), res.frame["day"], strict=True):
        lo, hi = (pd.Timestamp(t) for t in text[1:-1].split(", "))
        assert (lo < day if text.startswith("(") else lo <= day) and day <= hi
    assert k_anonymity(res.frame, ["day"]) >= 8
