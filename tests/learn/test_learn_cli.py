"""`privlab train`: JSON with everything needed to recompute epsilon; one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from privlab.cli.main import main
from privlab.core import accounting


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


def _run(capsys, args):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_dpsgd_json_lets_anyone_recompute_epsilon(table, capsys):
    code, out, err = _run(capsys, ["train", str(table), "--target", "label", "--model", "mlp",
                                   "--epsilon", "2", "--delta", "1e-4", "--epochs", "2",
                                   "--batch-size", "32", "--one-hot", "--seed", "1",
                                   "--bounds", "age=0:100,hours=0:100", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    for key in ("test_accuracy", "guarantee", "noise_multiplier", "sample_rate", "steps"):
        assert key in doc
    g = doc["guarantee"]
    assert g["is_dp"] and "PLD" in g["accountant"] and g["neighbouring"] == "add_remove_record"
    again = accounting.dpsgd_epsilon(doc["noise_multiplier"], doc["sample_rate"], doc["steps"],
                                     doc["delta"])
    assert again == pytest.approx(g["epsilon"], rel=1e-6)
    assert doc["epsilon_rdp"] > doc["epsilon_pld"]
    # categories of 'city' were read from the data: said in the guarantee
    assert doc["preprocessing"]["data_dependent"] == ["categories of 'city' read from the data"]
    assert any("NOT covered" in note for note in g["notes"])


def test_objective_logreg_and_save(table, capsys, tmp_path):
    model = tmp_path / "m.pkl"
    code, out, err = _run(capsys, ["train", str(table), "--target", "label", "--model",
                                   "logreg", "--epsilon", "1", "--delta", "0", "--one-hot",
                                   "--save", str(model), "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["method"] == "objective" and doc["guarantee"]["delta"] == 0
    assert doc["guarantee"]["neighbouring"] == "replace_record"
    assert model.exists()


def test_plain_baseline_is_labelled(table, capsys):
    code, out, err = _run(capsys, ["train", str(table), "--target", "label", "--method", "none",
                                   "--one-hot", "--epochs", "1", "--batch-size", "32", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["guarantee"]["is_dp"] is False and doc["warnings"]


@pytest.mark.parametrize("extra,needle", [
    (["--target", "nope", "--epsilon", "1"], "unknown target column 'nope'"),
    (["--target", "city", "--epsilon", "1"], "is not numeric"),   # label ok, city not
    (["--target", "label", "--epsilon", "1"], "'city' is not numeric"),
    (["--target", "label", "--epsilon", "1", "--one-hot", "--batch-size", "1000"],
     "larger than the training set"),
    (["--target", "label", "--epsilon", "1e-6", "--one-hot", "--epochs", "5",
      "--batch-size", "16"], "too small for useful training"),
    (["--target", "label", "--one-hot"], "--epsilon is required"),
    (["--target", "label", "--model", "mlp", "--method", "objective", "--epsilon", "1"],
     "does not apply"),
])
def test_bad_input_is_one_line(table, capsys, extra, needle):
    code, out, err = _run(capsys, ["train", str(table), *extra])
    assert code == 2
    assert needle in err and len(err.strip().splitlines()) == 1


def test_constant_target(tmp_path, capsys):
    path = tmp_path / "c.csv"
    pd.DataFrame({"a": range(20), "y": ["x"] * 20}).to_csv(path, index=False)
    code, _, err = _run(capsys, ["train", str(path), "--target", "y", "--epsilon", "1"])
    assert code == 2 and "constant" in err
