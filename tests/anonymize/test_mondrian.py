"""Mondrian: output verified by the assess checker, generalizations cover the originals."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from privlab.anonymize import mondrian
from privlab.assess import evaluate_privacy, k_anonymity, l_diversity
from privlab.cli.main import main
from privlab.data.datasets import load_dataset
from privlab.errors import InvalidInputError

QIS = ["age", "education", "marital-status", "race", "sex", "native-country"]


@pytest.fixture(scope="module")
def adult() -> pd.DataFrame:
    return load_dataset("adult", drop_missing=True)


def covers(original: pd.Series, published: pd.Series, numeric: bool) -> bool:
    for o, p in zip(original, published, strict=True):
        if numeric:
            m = re.fullmatch(r"\[(-?[\d.e+]+), (-?[\d.e+]+)\]", p)
            ok = (float(m.group(1)) <= o <= float(m.group(2))) if m else float(p) == o
        else:
            ok = p == str(o) or (p.startswith("{") and str(o) in p[1:-1].split(", "))
        if not ok:
            return False
    return True


@pytest.fixture(scope="module")
def results(adult):
    return {k: mondrian(adult, QIS, k) for k in (2, 5, 10, 50)}


@pytest.mark.parametrize("k", [2, 5, 10, 50])
def test_adult_k_anonymous_by_the_checker(adult, results, k):
    res = results[k]
    assert res.rows_out == len(adult) and res.suppressed == 0
    assert k_anonymity(res.frame, QIS) >= k  # independent re-check of the published table
    assert res.achieved["k"] >= k
    assert 0 <= res.ncp <= 1 and res.discernibility >= len(adult) * k
    assert res.avg_class_size_ratio >= 1
    assert set(res.ncp_by_attribute) == set(QIS)
    # non-QI columns untouched, rows in the same order
    assert res.frame["occupation"].tolist() == adult["occupation"].tolist()
    assert covers(adult["age"], res.frame["age"], numeric=True)
    assert covers(adult["native-country"], res.frame["native-country"], numeric=False)


def test_information_loss_grows_with_k(results):
    ncp = [results[k].ncp for k in (2, 5, 10, 50)]
    assert ncp == sorted(ncp) and ncp[0] < ncp[-1]
    assert results[50].classes < results[2].classes


def test_l_diversity(adult):
    res = mondrian(adult, QIS[:4], 10, l_div=3, sensitive="occupation")
    assert k_anonymity(res.frame, QIS[:4]) >= 10
    assert l_diversity(res.frame, QIS[:4], "occupation") >= 3
    assert res.achieved["l"] >= 3
    doc = res.to_dict()
    assert doc["requested"] == {"k": 10, "l": 3}
    assert doc["guarantee"]["is_dp"] is False


def test_missing_numeric_qi_block_and_suppression():
    rng = np.random.default_rng(0)
    n = 60
    frame = pd.DataFrame({"age": rng.integers(20, 60, n).astype(float),
                          "zip": rng.choice(["a", "b", "c"], n), "s": rng.choice(list("xyz"), n)})
    frame.loc[:9, "age"] = np.nan  # 10 rows: enough for their own block at k = 5
    frame.loc[10:11, "zip"] = None  # categorical missing is just a category
    res = mondrian(frame, ["age", "zip"], 5)
    assert res.suppressed == 0
    assert (res.frame.loc[:9, "age"] == "<missing>").all()
    assert evaluate_privacy(res.frame, ["age", "zip"]).k >= 5
    frame.loc[:56, "age"] = 30.0
    frame.loc[57:, "age"] = np.nan  # 3 rows with a missing age: fewer than k -> suppressed
    res = mondrian(frame, ["age", "zip"], 5)
    assert res.suppressed == 3 and res.rows_out == n - 3
    assert res.warnings and "suppressed 3" in res.warnings[0]
    assert res.ncp > 3 / n * 0.99  # suppressed records count as fully generalized


def test_drop_columns_and_negative_numbers():
    frame = pd.DataFrame({"id": range(8), "t": [-5, -3, -1, 0, 2, 4, 6, 8], "s": list("xyxyxyxy")})
    res = mondrian(frame, ["t"], 4, drop=["id"])
    assert "id" not in res.frame.columns
    assert set(res.frame["t"]) == {"[-5, 0]", "[2, 8]"}


@pytest.mark.parametrize("kwargs,match", [
    ({"k": 1}, "k must be an integer >= 2"),
    ({"k": 100}, "fewer than k"),
    ({"k": 2, "l_div": 2}, "--l needs --sensitive"),
    ({"k": 2, "l_div": 5, "sensitive": "s"}, "impossible"),
    ({"k": 2, "sensitive": "t"}, "both a quasi-identifier"),
])
def test_errors(kwargs, match):
    frame = pd.DataFrame({"t": range(10), "s": list("xyxyxyxyxy")})
    with pytest.raises(InvalidInputError, match=match):
        mondrian(frame, ["t"], **kwargs)


def test_cli_anonymize(capsys, tmp_path, adult):
    src = tmp_path / "in.csv"
    adult.iloc[:2000].to_csv(src, index=False)
    out = tmp_path / "out.csv"
    code = main(["anonymize", str(src), "--quasi-identifiers", "age,sex,race,education",
                 "--k", "5", "--l", "2", "--sensitive", "occupation", "--out", str(out),
                 "--json"])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    doc = json.loads(cap.out)
    assert doc["achieved"]["k"] >= 5 and doc["achieved"]["l"] >= 2
    assert {"ncp", "discernibility"} <= set(doc["information_loss"])
    written = pd.read_csv(out, dtype=str)
    assert len(written) == doc["rows_out"]
    assert k_anonymity(written, ["age", "sex", "race", "education"]) >= 5
    code = main(["anonymize", str(src), "-q", "nope", "--k", "5", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "--quasi-identifiers 'nope' is not a column of in.csv" in err[0]
    code = main(["anonymize", str(src), "-q", "age", "--k", "5", "--out", str(tmp_path / "x.xls")])
    assert code == 2


@pytest.mark.parametrize("seed", range(6))
def test_random_tables_meet_k_and_l(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 300))
    frame = pd.DataFrame({
        "x": rng.normal(50, 20, n).round(1),
        "c": rng.choice(["red", "green", "blue", "cyan"], n),
        "i": rng.integers(-3, 4, n),
        "s": rng.choice(list("abcde"), n),
    })
    k = int(rng.integers(2, 8))
    res = mondrian(frame, ["x", "c", "i"], k, l_div=2, sensitive="s")
    assert res.rows_out + res.suppressed == n
    assert k_anonymity(res.frame, ["x", "c", "i"]) >= k
    assert l_diversity(res.frame, ["x", "c", "i"], "s") >= 2
    assert covers(frame["x"], res.frame["x"], numeric=True)
    assert covers(frame["i"], res.frame["i"], numeric=True)
    assert covers(frame["c"], res.frame["c"], numeric=False)
