"""`privlab synth`: JSON output (mst), files written, bad input as one-line errors
(including DP-VAE inputs with a one-value column and missing values), schemas (identifier
columns dropped by declaration, values outside the schema refused or coerced)."""

from __future__ import annotations

import importlib.util
import json

import pandas as pd
import pytest
from synth_schemas import types_schema

from privlab.cli.main import main
from privlab.cli.synth import EVAL_NOT_COVERED
from privlab.schema import bundled_schema


@pytest.fixture()
def adult_csv(tmp_path, adult_small):
    path = tmp_path / "adult.csv"
    adult_small.head(2000).to_csv(path, index=False)
    return path


def test_synth_mst_json_with_evaluation(tmp_path, adult_csv, capsys) -> None:
    out = tmp_path / "synthetic.csv"
    code = main(["synth", str(adult_csv), "--method", "mst", "--epsilon", "2", "--rows", "700",
                 "--out", str(out), "--schema", "adult", "--holdout", "0.2", "--target",
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
    ml = ev["ml_utility"]
    assert ml["majority_class"] == "<=50K" and isinstance(ml["train_real_better_than_baseline"],
                                                         bool)


def test_synth_console_shows_the_majority_baseline(tmp_path, adult_csv, capsys) -> None:
    report = tmp_path / "r.html"
    code = main(["synth", str(adult_csv), "--method", "mst", "--epsilon", "2", "--rows", "500",
                 "--out", str(tmp_path / "s.csv"), "--schema", "adult", "--holdout", "0.2",
                 "--target", "salary", "--evaluate", "--seed", "1", "--report", str(report)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    text = " ".join(captured.out.split())
    assert "majority-class baseline" in text and "(always '<=50K')" in text
    page = " ".join(report.read_text().split())
    assert "majority-class baseline" in page
    assert "than always predicting &#39;&lt;=50K&#39;" in page


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
    (["--method", "aim", "--workload", "nope.json", "--schema", "adult"],
     "--workload 'nope.json' is neither"),
    (["--method", "mst", "--workload", "2way"], "--workload applies to --method aim"),
    (["--method", "aim", "--epochs", "3"], "--epochs applies to dpvae"),
    (["--method", "gan"], "--method must be one of"),
    (["--method", "mst", "--epochs", "3"], "--epochs applies to dpvae"),
    (["--method", "dpvae", "--epochs", "0"], "epochs must be an integer >= 1"),
    (["--method", "dpgan"], "--method dpgan is not available: retired"),
    # seeded: the refusal reads the noisy row count (a DP value), so it is itself random
    pytest.param(["--method", "dpvae", "--epsilon", "0.01", "--seed", "0", "--schema", "adult"],
                 "too small for --method dpvae", marks=NEEDS_TORCH),
    pytest.param(["--method", "dpvae", "--epsilon", "0.01", "--seed", "0", "--schema",
                  "adult", "--estimate-domain", "all"], "could not bound column",
                 marks=NEEDS_TORCH),
    (["--method", "mst"], "privlab schema draft"),
    (["--method", "mst", "--schema", "adult", "--estimate-domain", "age,nope"],
     "--estimate-domain names ['nope']"),
    (["--method", "mst", "--schema", "adult", "--estimate-domain", ","],
     "--estimate-domain needs 'all' or column names"),
    (["--method", "mst", "--schema", "nope"], "neither a file nor a bundled schema"),
    (["--method", "mst", "--schema", "adult", "--on-invalid", "clamp"], "--on-invalid"),
    (["--method", "mst", "--epsilon", "0"], "epsilon"),
    (["--method", "mst", "--holdout", "0.7"], "--holdout"),
    (["--method", "mst", "--target", "salary"], "--target needs --holdout"),
    # issue 23: a column-naming option naming no column was accepted silently
    (["--method", "mst", "--schema", "adult", "--exclude", "foo"],
     "--exclude 'foo' is not a column of"),
    (["--method", "mst", "--schema", "adult", "--holdout", "0.2", "--target", "salary",
      "--exclude", "salary"], "also in --exclude"),
])
def test_bad_input_one_line_exit_2(tmp_path, adult_csv, capsys, args, message) -> None:
    base = ["synth", str(adult_csv), "--rows", "10", "--out", str(tmp_path / "o.csv"),
            "--epsilon", "1"]
    code = main(base + args)
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


GAPS_TYPES = types_schema({"age": "integer", "sex": "categorical", "workclass": "categorical",
                           "salary": "categorical", "country": "categorical"})


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
    # only the types are read: the placeholder categories / bounds are not used
    code = main(["synth", str(gaps_csv), "--method", "dpvae", "--epsilon", "4", "--rows", "2000",
                 "--out", str(out), "--missing", missing, "--epochs", "3", "--seed", "1",
                 "--schema", str(types), "--estimate-domain", "all", "--json"])
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
    decl = tmp_path / "schema.json"
    spec = json.loads(json.dumps(GAPS_TYPES))
    spec["columns"]["workclass"] = {
        "type": "categorical", "missing": False,
        "categories": list(bundled_schema("adult").column("workclass").categories)}
    decl.write_text(json.dumps(spec))
    out = tmp_path / "o.csv"
    code = main(["synth", str(gaps_csv), "--method", "dpvae", "--epsilon", "4", "--rows", "10",
                 "--out", str(out), "--schema", str(decl), "--seed", "1",
                 "--estimate-domain", "age,sex,salary,country"])
    err = capsys.readouterr().err
    assert code == 2 and "'workclass': a missing value" in err and err.count("\n") == 1
    assert not out.exists()


def test_identifier_columns_are_dropped_by_declaration(tmp_path, adult_small, capsys) -> None:
    """Identifiers are declared in the schema (never detected by reading the data): the
    declared one is never synthesized; an undeclared column is refused by name."""
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
    assert main(base + ["--schema", "adult", "--exclude", "tckno"]) == 0


def test_synth_report_opens_with_plain_words_and_no_generalising(tmp_path, adult_csv,
                                                                 capsys) -> None:
    """Issue 23: the synth report had no "In plain words" section and advised generalising
    columns of a table that is already DP."""
    import re

    report = tmp_path / "r.html"
    code = main(["synth", str(adult_csv), "--method", "mst", "--epsilon", "1", "--rows", "300",
                 "--out", str(tmp_path / "s.csv"), "--report", str(report), "--seed", "2",
                 "--schema", "adult", "--holdout", "0.2", "--target", "salary"])
    assert code == 0, capsys.readouterr().err
    html = report.read_text()
    headings = re.findall(r"<h2>(.*?)</h2>", html)
    assert headings[0] == "In plain words", headings
    first = " ".join(html[html.index("<h2>In plain words</h2>"):
                          html.index(f"<h2>{headings[1]}</h2>")].split())
    for words in ("What was released", "What an attacker could learn", "How useful it is",
                  "How sure we are", "epsilon = 1 (strong)", "always predicting"):
        assert words in first, words
    assert "Assessment of the synthetic table" in html
    assert not re.search(r"<li>\s*generalize ", html)
    assert "No generalisation is advised" in html


def test_weak_delta_refused_like_release(tmp_path, adult_csv, capsys) -> None:
    """Issue 23: `release --delta 0.5` refused (exit 4) while `synth --delta 0.5` warned and
    wrote its table. One policy: refused (exit 4, nothing written) unless --allow-weak."""
    out = tmp_path / "o.csv"
    base = ["synth", str(adult_csv), "--method", "mst", "--schema", "adult", "--rows", "50",
            "--out", str(out), "--epsilon", "1", "--seed", "1"]
    code = main(base + ["--delta", "0.5"])
    err = capsys.readouterr().err
    assert code == 4 and "--delta 0.5 is too weak" in err and "--allow-weak" in err
    assert not out.exists()
    code = main(base + ["--delta", "0.01", "--allow-weak"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "accepted with --allow-weak" in captured.err and out.exists()
    code = main(["release", "count", str(adult_csv), "--column", "age", "--epsilon", "1",
                 "--delta", "0.5", "--mechanism", "gaussian"])
    assert code == 4  # the same policy as release


def test_drop_is_a_deprecated_alias_of_exclude(tmp_path, capsys) -> None:
    """Issue 23: one spelling (`--exclude`); `--drop` still works, with one warning line."""
    from privlab.cli.main import main as cli

    data = tmp_path / "d.csv"
    data.write_text("a,b\n" + "".join(f"x{i % 2},y{i % 3}\n" for i in range(40)))
    out = tmp_path / "s.csv"
    args = ["synth", str(data), "--method", "mst", "--epsilon", "1", "--rows", "5",
            "--schema", "nope.yaml", "--out", str(out)]
    assert cli(args + ["--exclude", "zzz", "--drop", "zzz"]) == 2
    assert "pass only --exclude" in capsys.readouterr().err
    assert cli(args + ["--drop", "zzz"]) == 2  # still parsed (then refused on the schema)
    err = capsys.readouterr().err
    assert err.count("--drop is deprecated: use --exclude") == 1


@pytest.mark.parametrize("neighbouring, unit", [("add_remove_record", "about one row"),
                                                ("user", "about one person")])
def test_plain_words_name_delta_and_the_privacy_unit(neighbouring, unit) -> None:
    """Regression: the plain text promised the factor e^epsilon with no delta and no unit."""
    from types import SimpleNamespace

    from privlab.core.guarantee import PrivacyGuarantee
    from privlab.synth.report import plain_section

    g = PrivacyGuarantee(epsilon=1.0, delta=1e-6, neighbouring=neighbouring, model="central",
                         mechanism="MST", accountant="zCDP")
    section = plain_section(SimpleNamespace(method="mst"), g, rows=10, evaluation=None)
    (learn,) = [p for p in section.paragraphs if p.startswith("What an attacker could learn")]
    assert "except with probability delta = 1e-06" in learn and unit in learn, learn
