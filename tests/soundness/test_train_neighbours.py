"""Neighbouring-dataset harness for `privlab train` (tiny model, one epoch).

On a small Adult sample with the bundled schema, the command runs on D and on every one-row
edit D' with the same --seed: either both succeed and everything outside the noised values is
identical (keys, feature count, classes, the guarantee, every non-noised value), or D' is
refused (exit 2, a one-line error naming the column) before anything is written. With
--on-invalid coerce every edit must succeed with the same structure.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from neighbours import OUTSIDE, assert_same_structure, edits_for_policy, one_row_edits

pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")

from privlab.cli.main import main  # noqa: E402
from privlab.data.datasets import load_adult  # noqa: E402
from privlab.schema import bundled_schema  # noqa: E402

HOLAND = "Holand-Netherlands"


@pytest.fixture(scope="module")
def sample() -> pd.DataFrame:
    """160 Adult rows (some with missing values) plus the one Holand-Netherlands row."""
    frame = load_adult()
    rows = frame.sample(160, random_state=4)
    rows = pd.concat([frame[frame["native-country"] == HOLAND], rows])
    return rows.reset_index(drop=True)


def _train(capsys, frame: pd.DataFrame, folder, *extra: str) -> tuple[int, dict | None, str]:
    """Run `privlab train` on `frame` written to the SAME path each time (the path is echoed)."""
    data, model = folder / "data.csv", folder / "model.pkl"
    frame.to_csv(data, index=False)
    model.unlink(missing_ok=True)
    code = main(["train", str(data), "--schema", "adult", "--target", "salary",
                 "--delimiter", ",", "--epsilon", "2", "--delta", "1e-4", "--epochs", "1",
                 "--batch-size", "32", "--seed", "11", "--save", str(model), "--json",
                 *extra])
    out = capsys.readouterr()
    if code != 0:
        assert not model.exists(), "a refused run wrote its output file"
        return code, None, out.err
    assert model.exists()
    return code, json.loads(out.out), out.err


def test_feature_count_does_not_depend_on_the_rows(sample, tmp_path, capsys):
    """Regression: removing the one Holand-Netherlands row changed 104 -> 103 features."""
    code, a, err = _train(capsys, sample, tmp_path)
    assert code == 0, err
    without = sample[sample["native-country"] != HOLAND]
    code, b, err = _train(capsys, without, tmp_path)
    assert code == 0, err
    # 6 scaled integers + 99 declared categories + 3 missing indicators (workclass,
    # occupation, native-country declare missing values)
    assert a["features"] == b["features"] == 108
    assert a["classes"] == b["classes"] == [">50K", "<=50K"]
    assert a["guarantee"] == b["guarantee"] and a["guarantee"]["is_dp"]
    assert_same_structure(a, b, noised=a["noised"])


def test_counts_and_accuracies_are_noisy_and_covered(sample, tmp_path, capsys):
    """Regression: rows, train_rows, test_rows and the accuracies were exact and unlabelled."""
    fields = ["rows", "train_rows", "test_rows", "train_accuracy", "test_accuracy"]
    seen = []
    for seed in ("1", "2", "3"):
        code, doc, err = _train(capsys, sample, tmp_path, "--seed", seed, "--sample-rate",
                                "0.2")
        assert code == 0, err
        assert set(fields) <= set(doc["noised"])
        assert any(c.startswith("rows, train_rows, test_rows, train_accuracy")
                   for c in doc["guarantee"]["covers"])
        assert doc["train_rows"] + doc["test_rows"] == doc["rows"]
        seen.append(doc["rows"])
    # geometric noise of scale 2 / 0.2 = 10: P(noise = 0) ~ 0.05 per run
    assert any(r != len(sample) for r in seen)
    # a public sample rate: the model's own plan and guarantee are then not noised at all
    assert "sample_rate" not in doc["noised"] and "model_guarantee" not in doc["noised"]
    assert doc["sample_rate"] == 0.2


@pytest.mark.parametrize("policy", ["refuse", "coerce"])
def test_every_one_row_edit(sample, tmp_path, capsys, policy):
    schema = bundled_schema("adult")
    code, base, err = _train(capsys, sample, tmp_path, "--on-invalid", policy)
    assert code == 0, err
    refused = []
    for name, edited in edits_for_policy(sample, policy, schema).items():
        code, doc, err = _train(capsys, edited, tmp_path, "--on-invalid", policy)
        if code != 0:
            assert policy == "refuse", f"{name}: coerce must not refuse ({err})"
            assert code == 2, f"{name}: exit {code}"
            lines = err.strip().splitlines()
            assert len(lines) == 1 and "column '" in lines[0], f"{name}: {err}"
            refused.append(name)
            continue
        assert_same_structure(base, doc, noised=base["noised"])
    if policy == "refuse":
        # values outside the schema are refused, in-schema edits are not
        assert set(refused) >= OUTSIDE
        assert not {"add", "remove", "duplicate_person", "rare_category",
                    "missing_categorical"} & set(refused)


def test_public_sample_rate_keeps_the_model_plan_identical(sample, tmp_path, capsys):
    """With --sample-rate the whole DP-SGD plan (sigma, steps, the model's own guarantee) is
    the same on D and D' = D minus one row: only the counts and accuracies are noised."""
    code, a, err = _train(capsys, sample, tmp_path, "--sample-rate", "0.2")
    assert code == 0, err
    code, b, err = _train(capsys, sample.iloc[1:], tmp_path, "--sample-rate", "0.2")
    assert code == 0, err
    assert set(a["noised"]) == {"rows", "train_rows", "test_rows", "train_accuracy",
                                "test_accuracy", "baseline"}
    assert_same_structure(a, b, noised=a["noised"])
    assert a["model_guarantee"] == b["model_guarantee"]


def test_objective_perturbation_under_replace_one_edits(sample, tmp_path, capsys):
    """logreg by objective perturbation claims replace-one DP: on every edit that replaces a
    row inside the schema, only the noisy accuracies may move (n and the parts are public)."""
    args = ("--model", "logreg", "--delta", "0")
    code, base, err = _train(capsys, sample, tmp_path, *args)
    assert code == 0, err
    assert base["guarantee"]["neighbouring"] == "replace_record" and base["guarantee"]["is_dp"]
    replaced = {k: v for k, v in one_row_edits(sample, bundled_schema("adult")).items()
                if k in ("rare_category", "missing_categorical")}
    assert len(replaced) == 2
    for name, edited in replaced.items():
        code, doc, err = _train(capsys, edited, tmp_path, *args)
        assert code == 0, f"{name}: {err}"
        assert_same_structure(base, doc, noised=base["noised"])
