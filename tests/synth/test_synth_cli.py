"""`privlab synth`: JSON output (mst), files written, bad input as one-line errors
(including DP-VAE inputs with a one-value column and missing values), schemas (identifier
columns dropped by declaration, values outside the schema refused or coerced)."""

from __future__ import annotations

import importlib.util
import json

import pandas as pd
import pytest

from privlab.cli.main import main
from privlab.cli.synth import EVAL_NOT_COVERED
from privlab.synth.domain import ADULT_DOMAIN


@pytest.fixture()
def adult_csv(tmp_path, adult_small):
    path = tmp_path / "adult.csv"
    adult_small.head(2000).to_csv(path, index=False)
    return path


def test_synth_mst_json_with_evaluation(tmp_path, adult_csv, capsys) -> None:
    out = tmp_path / "synthetic.csv"
    code = main(["synth", str(adult_csv), "--method", "mst", "--epsilon", "2", "--rows", "700",
                 "--out", str(out), "--domain", "adult", "--holdout", "0.2", "--target",
                 "salary", "--evaluate", "--seed", "1", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    payload = json.loads(captured.out)
    g = payload["guarantee"]
    # the synthetic table is (2, 1e-6)-DP, but the printed evaluation is exact: not covered
    assert g["epsilon"] <= 2 and not g["is_dp"] and "rows_fitted" not in payload
    assert g["not_covered"] == [EVAL_NOT_COVERED] and "synthetic rows" in g["covers"][0]
    table = pd.read_csv(out)
    assert len(table) == 700 and list(table.columns) == list(pd.read_csv(adult_csv).columns)
    ev = payload["evaluation"]
    assert ev["guarantee"]["is_dp"] is False
    assert 0 <= ev["ml_utility"]["train_synthetic_accuracy"] <= 1
    assert any("NOT differentially private" in w for w in payload["warnings"])


def test_synth_report(tmp_path, adult_csv, capsys) -> None:
    report = tmp_path / "r.html"
    code = main(["synth", str(adult_csv), "--method", "mst", "--epsilon", "1", "--rows", "100",
                 "--out", str(tmp_path / "s.csv"), "--report", str(report), "--seed", "2",
                 "--schema", "adult"])
    assert code == 0, capsys.readouterr().err
    html = report.read_text()
    assert "Privacy budget" in html and "spanning-tree selection" in html


NEEDS_TORCH = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="needs the ml extra: pip install -e '.[ml]'")


@pytest.mark.parametrize("args, message", [
    (["--method", "aim", "--workload", "nope.json", "--domain", "adult"],
     "--workload 'nope.json' is neither"),
    (["--method", "mst", "--workload", "2way"], "--workload applies to --method aim"),
    (["--method", "aim", "--epochs", "3"], "--epochs applies to dpvae"),
    (["--method", "gan"], "--method must be one of"),
    (["--method", "mst", "--epochs", "3"], "--epochs applies to dpvae"),
    (["--method", "dpvae", "--epochs", "0"], "epochs must be an integer >= 1"),
    (["--method", "dpgan"], "--method dpgan is not available: retired"),
    # seeded: the refusal reads the noisy row count (a DP value), so it is itself random
    pytest.param(["--method", "dpvae", "--epsilon", "0.01", "--seed", "0", "--domain", "adult"],
                 "too small for --method dpvae", marks=NEEDS_TORCH),
    pytest.param(["--method", "dpvae", "--epsilon", "0.01", "--seed", "0", "--domain",
                  "adult-types"], "could not bound column", marks=NEEDS_TORCH),
    (["--method", "mst"], "privlab schema draft"),
    (["--method", "mst", "--schema", "adult", "--domain", "adult"], "alternatives"),
    (["--method", "mst", "--schema", "nope"], "neither a file nor a bundled schema"),
    (["--method", "mst", "--schema", "adult", "--on-invalid", "clamp"], "--on-invalid"),
    (["--method", "mst", "--epsilon", "0"], "epsilon"),
    (["--method", "mst", "--holdout", "0.7"], "--holdout"),
    (["--method", "mst", "--target", "salary"], "--target needs --holdout"),
    (["--method", "mst", "--domain", "nope.json"], "neither a built-in"),
])
def test_bad_input_one_line_exit_2(tmp_path, adult_csv, capsys, args, message) -> None:
    base = ["synth", str(adult_csv), "--rows", "10", "--out", str(tmp_path / "o.csv"),
            "--epsilon", "1"]
    code = main(base + args)
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


GAPS_TYPES = {"columns": {"age": {"type": "numeric", "integer": True},
                          **{c: {"type": "categorical"}
                             for c in ("sex", "workclass", "salary", "country")}}}


@pytest.fixture()
def gaps_csv(tmp_path, adult_small):
    """A constant column, 20% missing workclass."""
    frame = adult_small[["age", "sex", "workclass", "salary"]].head(2000).assign(country="US")
    frame.loc[frame.sample(frac=0.2, random_state=0).index, "workclass"] = None
    path = tmp_path / "gaps.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("missing", ["value", "drop"])
def test_dpvae_one_value_column_and_missing_values(tmp_path, gaps_csv, capsys, missing) -> None:
    pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")
    out = tmp_path / "vae.csv"
    types = tmp_path / "types.json"  # types declared, categories and bounds estimated
    types.write_text(json.dumps(GAPS_TYPES))
    code = main(["synth", str(gaps_csv), "--method", "dpvae", "--epsilon", "4", "--rows", "2000",
                 "--out", str(out), "--missing", missing, "--epochs", "3", "--seed", "1",
                 "--domain", str(types), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    payload = json.loads(captured.out)
    assert any("'country': a single category" in w for w in payload["warnings"])
    assert any("estimated under DP" in n for n in payload["guarantee"]["notes"])
    table = pd.read_csv(out)
    assert table["country"].dropna().isin(["US", "<other>"]).all()
    if missing == "drop":  # no missing code in the domain: nothing missing in the output
        assert not table.isna().any().any()
        assert all(not c["missing_code"] for c in payload["domain"]["columns"])
    else:  # missingness is a value of its own and is synthesized
        assert table["workclass"].isna().any()


def test_declared_column_without_missing_refuses_missing_values(tmp_path, gaps_csv,
                                                                capsys) -> None:
    decl = tmp_path / "domain.json"
    spec = json.loads(json.dumps(GAPS_TYPES))
    spec["columns"]["workclass"] = {
        "categories": ADULT_DOMAIN["columns"]["workclass"]["categories"], "missing": False}
    decl.write_text(json.dumps(spec))
    out = tmp_path / "o.csv"
    code = main(["synth", str(gaps_csv), "--method", "dpvae", "--epsilon", "4", "--rows", "10",
                 "--out", str(out), "--domain", str(decl), "--seed", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "'workclass': a missing value" in err and err.count("\n") == 1
    assert not out.exists()


def test_identifier_columns_are_dropped_by_declaration(tmp_path, adult_small, capsys) -> None:
    """Identifiers are declared in the schema (never detected by reading the data): the
    declared one is never synthesized; an undeclared column is refused by name."""
    from privlab.schema import bundled_schema

    frame = adult_small.head(300).copy()
    frame["tckno"] = [f"{10000000000 + 7 * i}" for i in range(len(frame))]
    path = tmp_path / "people.csv"
    frame.to_csv(path, index=False)
    spec = bundled_schema("adult").to_dict()
    spec["columns"]["tckno"] = {"type": "identifier", "missing": False}
    schema = tmp_path / "people.json"
    schema.write_text(json.dumps(spec))
    out = tmp_path / "o.parquet"
    base = ["synth", str(path), "--method", "mst", "--epsilon", "4", "--rows", "10", "--out",
            str(out)]
    assert main(base + ["--schema", str(schema)]) == 0, capsys.readouterr().err
    table = pd.read_parquet(out)
    assert list(table.columns) == bundled_schema("adult").names  # schema order, no tckno
    assert str(table["age"].dtype) == "int64" and str(table["workclass"].dtype) == "str"
    capsys.readouterr()
    out.unlink()
    assert main(base + ["--schema", "adult"]) == 2
    err = capsys.readouterr().err
    assert "column 'tckno' is not in schema 'adult'" in err and not out.exists()
    assert main(base + ["--schema", "adult", "--drop", "tckno"]) == 0
