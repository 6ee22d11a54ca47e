"""`privlab train`: schema-declared encoding, JSON with everything needed to recompute the
model's epsilon, noisy counts composed into one guarantee, one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from privlab.cli.main import main
from privlab.core import accounting
from privlab.learn.estimators import load_model

SCHEMA = {
    "name": "people", "privacy_unit": "row",
    "columns": {
        "age": {"type": "integer", "bounds": [0, 100], "missing": False},
        "hours": {"type": "integer", "bounds": [0, 100], "missing": False},
        "city": {"type": "categorical", "categories": ["Ankara", "Izmir", "Kyiv", "Lviv"],
                 "missing": False},
        "label": {"type": "categorical", "categories": ["high", "low"], "missing": False},
    },
}


@pytest.fixture
def table(tmp_path):
    gen = np.random.default_rng(0)
    n = 240
    frame = pd.DataFrame({"age": gen.integers(18, 80, n), "hours": gen.integers(1, 80, n),
                          "city": gen.choice(["Ankara", "Izmir", "Kyiv"], n)})
    frame["label"] = np.where(frame["age"] + gen.normal(0, 5, n) > 45, "high", "low")
    path = tmp_path / "people.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.fixture
def schema(tmp_path):
    path = tmp_path / "people.yaml"
    path.write_text(yaml.safe_dump(SCHEMA))
    return path


def _run(capsys, args):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_dpsgd_json_lets_anyone_recompute_epsilon(table, schema, capsys, tmp_path):
    model = tmp_path / "m.pkl"
    code, out, err = _run(capsys, ["train", str(table), "--schema", str(schema), "--target",
                                   "label", "--model", "mlp", "--epsilon", "2", "--delta",
                                   "1e-4", "--epochs", "2", "--batch-size", "32",
                                   "--sample-rate", "0.15", "--seed", "1", "--save",
                                   str(model), "--json"])
    assert code == 0, err
    doc = json.loads(out)
    for key in ("test_accuracy", "guarantee", "noise_multiplier", "sample_rate", "steps"):
        assert key in doc
    g = doc["guarantee"]
    assert g["is_dp"] and g["not_covered"] == [] and g["neighbouring"] == "add_remove_record"
    assert doc["headline"] == g["headline"] == "(2, delta=0.0001)-DP"
    # the model's own accountant: sample rate is the public --sample-rate, steps ceil(1/q)
    assert doc["sample_rate"] == 0.15 and doc["steps"] == 2 * 7
    again = accounting.dpsgd_epsilon(doc["noise_multiplier"], doc["sample_rate"], doc["steps"],
                                     doc["delta"])
    assert again == pytest.approx(doc["model_guarantee"]["epsilon"], rel=1e-6)
    assert again <= doc["epsilon_split"]["model"] * 1.001
    # the total: model + counts = the requested epsilon (sequential composition)
    split = doc["epsilon_split"]
    assert split["model"] + split["metrics"] + split["training_rows_estimate"] == \
        pytest.approx(2.0)
    assert split["metrics"] == pytest.approx(0.2) and split["training_rows_estimate"] == 0
    # features from the schema: 2 integers + 4 declared cities (one never occurs in the rows)
    assert doc["features"] == 6 and doc["classes"] == ["high", "low"]
    assert doc["preprocessing"]["data_dependent"] == []
    assert {"rows", "train_rows", "test_rows", "train_accuracy", "test_accuracy"} <= \
        set(doc["noised"])
    # the saved model holds no exact per-epoch statistics of the private rows
    saved = load_model(model)
    assert saved["estimator"].training_.history == []
    assert saved["preprocessor"].n_features == 6


def test_sample_rate_from_a_dp_estimate_when_nothing_public(table, schema, capsys):
    code, out, err = _run(capsys, ["train", str(table), "--schema", str(schema), "--target",
                                   "label", "--epsilon", "4", "--delta", "1e-4", "--epochs",
                                   "1", "--batch-size", "32", "--seed", "3", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["guarantee"]["is_dp"] and doc["guarantee"]["epsilon"] == 4
    assert "geometric-noise estimate" in doc["sample_rate_source"]
    assert doc["sample_rate"] == pytest.approx(32 / doc["training_rows_estimate"])
    assert doc["epsilon_split"]["training_rows_estimate"] == pytest.approx(0.2)
    assert "sample_rate" in doc["noised"]


def test_no_schema_refuses_or_says_not_dp(table, capsys):
    code, _, err = _run(capsys, ["train", str(table), "--target", "label", "--epsilon", "1"])
    assert code == 2 and "privlab schema draft" in err and len(err.strip().splitlines()) == 1
    code, out, err = _run(capsys, ["train", str(table), "--target", "label", "--epsilon", "2",
                                   "--delta", "1e-4", "--unsafe-encoding", "--one-hot",
                                   "--bounds", "age=0:100,hours=0:100", "--epochs", "1",
                                   "--batch-size", "32", "--seed", "1", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    g = doc["guarantee"]
    assert g["is_dp"] is False and g["headline"].startswith("NOT differentially private")
    assert any("categories of 'city' read from the data" in c for c in g["not_covered"])
    assert doc["preprocessing"]["data_dependent"] == ["categories of 'city' read from the data"]


def test_objective_logreg_and_save(table, schema, capsys, tmp_path):
    model = tmp_path / "m.pkl"
    code, out, err = _run(capsys, ["train", str(table), "--schema", str(schema), "--target",
                                   "label", "--model", "logreg", "--epsilon", "1", "--delta",
                                   "0", "--save", str(model), "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["method"] == "objective" and doc["guarantee"]["delta"] == 0
    assert doc["guarantee"]["neighbouring"] == "replace_record" and doc["guarantee"]["is_dp"]
    # n is public under replace-one: exact counts, noisy accuracies
    assert doc["rows"] == 240 and doc["train_rows"] == 192 and doc["test_rows"] == 48
    assert "test_accuracy" in doc["noised"] and "rows" not in doc["noised"]
    assert "noise_norms" not in load_model(model)["estimator"].linear_.details


def test_plain_baseline_is_labelled(table, schema, capsys):
    code, out, err = _run(capsys, ["train", str(table), "--schema", str(schema), "--target",
                                   "label", "--method", "none", "--epochs", "1",
                                   "--batch-size", "32", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    g = doc["guarantee"]
    assert g["is_dp"] is False and doc["warnings"]
    assert {"rows", "train_accuracy", "test_accuracy"} <= set(g["not_covered"])


def test_console_prints_the_headline_first(table, schema, capsys):
    code, out, err = _run(capsys, ["train", str(table), "--schema", str(schema), "--target",
                                   "label", "--epsilon", "2", "--delta", "1e-4", "--epochs",
                                   "1", "--batch-size", "32", "--sample-rate", "0.15"])
    assert code == 0, err
    assert out.splitlines()[0] == "(2, delta=0.0001)-DP"


@pytest.mark.parametrize("extra,needle", [
    (["--target", "nope", "--epsilon", "1"], "--target 'nope' is not a column of"),
    (["--target", "age", "--epsilon", "1"], "needs a categorical target"),
    (["--target", "label", "--epsilon", "1", "--model", "mlp", "--method", "none",
      "--batch-size", "1000"], "larger than the training set"),
    (["--target", "label", "--epsilon", "1e-6", "--epochs", "5", "--batch-size", "16",
      "--sample-rate", "0.1"], "too small for useful training"),
    (["--target", "label", "--sample-rate", "0.1", "--epsilon", "1"], "needs --batch-size"),
    (["--target", "label"], "--epsilon is required"),
    (["--target", "label", "--model", "mlp", "--method", "objective", "--epsilon", "1"],
     "does not apply"),
    (["--target", "label", "--epsilon", "1", "--one-hot"], "already declares the encoding"),
])
def test_bad_input_is_one_line(table, schema, capsys, extra, needle):
    code, out, err = _run(capsys, ["train", str(table), "--schema", str(schema), *extra])
    assert code == 2
    assert needle in err and len(err.strip().splitlines()) == 1


def test_value_outside_the_schema_refused_or_coerced(tmp_path, schema, capsys):
    gen = np.random.default_rng(1)
    frame = pd.DataFrame({"age": gen.integers(18, 80, 200), "hours": 40,
                          "city": gen.choice(["Ankara", "Izmir"], 200),
                          "label": gen.choice(["high", "low"], 200)})
    frame.loc[3, "city"] = "Atlantis"
    path = tmp_path / "odd.csv"
    frame.to_csv(path, index=False)
    base = ["train", str(path), "--schema", str(schema), "--target", "label", "--epsilon", "2",
            "--delta", "1e-4", "--epochs", "1", "--batch-size", "32", "--sample-rate", "0.2",
            "--seed", "0", "--json"]
    code, _, err = _run(capsys, base)
    assert code == 2 and "column 'city'" in err and "--on-invalid coerce" in err
    code, out, err = _run(capsys, base + ["--on-invalid", "coerce"])
    assert code == 0, err
    assert json.loads(out)["features"] == 6
