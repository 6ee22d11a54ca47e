"""Every accuracy sits beside the majority-class baseline (issue 23): `privlab train` on a
table whose features carry no signal must say the model is no better than always predicting
the majority label, in the JSON and on the console, with the DP baseline taken from the same
noisy counts (and the guarantee saying so)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from privlab.cli.main import main
from privlab.learn.baseline import (
    abs_sum_pmf,
    beats_exact,
    difference_halfwidth,
    majority_class,
    majority_from_counts,
    mcnemar_p,
    no_better_text,
)

SCHEMA = {
    "name": "noise", "privacy_unit": "row",
    "columns": {
        "a": {"type": "integer", "bounds": [0, 100], "missing": False},
        "b": {"type": "integer", "bounds": [0, 100], "missing": False},
        "label": {"type": "categorical", "categories": ["high", "low"], "missing": False},
    },
}


@pytest.fixture
def noise_table(tmp_path):
    """Features independent of the label; 'low' is 75% of the rows."""
    gen = np.random.default_rng(3)
    n = 400
    frame = pd.DataFrame({"a": gen.integers(0, 100, n), "b": gen.integers(0, 100, n),
                          "label": np.where(gen.random(n) < 0.75, "low", "high")})
    path = tmp_path / "noise.csv"
    frame.to_csv(path, index=False)
    schema = tmp_path / "noise.yaml"
    schema.write_text(yaml.safe_dump(SCHEMA))
    return path, schema


def test_majority_helpers():
    assert majority_class(["x", "y", "y"]) == "y"
    assert majority_class(["b", "a"]) == "a"  # ties: the smallest label, stable
    assert majority_from_counts({"p": 3, "q": 7}) == "q"
    assert no_better_text("<=50K") == "no better than always predicting '<=50K'"
    base = np.array([1, 1, 1, 0, 0] * 40, dtype=bool)
    assert mcnemar_p(base, base) == 1.0 and not beats_exact(base, base)
    # right on 3 more of 200 records: not shown to beat the baseline
    few = base.copy()
    few[[3, 4, 8]] = True
    assert not beats_exact(few, base)
    # right on every record the baseline misses: p = 0.5^80
    assert beats_exact(np.ones(200, dtype=bool), base)
    assert mcnemar_p(np.ones(200, dtype=bool), base) == pytest.approx(0.5 ** 80)


def _train(capsys, path, schema, *extra):
    code = main(["train", str(path), "--schema", str(schema), "--target", "label",
                 "--model", "logreg", "--seed", "4", *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_plain_training_beside_exact_baseline(noise_table, capsys):
    path, schema = noise_table
    code, out, err = _train(capsys, path, schema, "--method", "none", "--epochs", "3",
                            "--json")
    assert code == 0, err
    doc = json.loads(out)
    base = doc["baseline"]
    assert base["majority_class"] == "low"
    assert base["test_accuracy"] == pytest.approx(0.75, abs=0.1)
    assert doc["test_accuracy"] <= base["test_accuracy"]
    assert base["better_than_baseline"] is False
    assert base["verdict"] == "no better than always predicting 'low'"
    assert any(c.startswith("baseline") for c in doc["guarantee"]["not_covered"])


def test_dp_baseline_from_the_same_noisy_counts(noise_table, capsys):
    path, schema = noise_table
    code, out, err = _train(capsys, path, schema, "--epsilon", "4", "--delta", "0",
                            "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert "baseline" in doc["noised"]
    assert any(c.startswith("baseline: the majority class and its share from the same noisy")
               for c in doc["guarantee"]["covers"])
    base = doc["baseline"]
    assert base["majority_class"] == "low"
    assert base["better_than_baseline"] is (doc["test_accuracy"] > base["test_accuracy"])
    code, out, err = _train(capsys, path, schema, "--epsilon", "4", "--delta", "0")
    assert code == 0, err
    out = " ".join(out.split())
    assert "majority-class baseline" in out and "by always predicting 'low'" in out


def test_console_says_no_better(noise_table, capsys):
    path, schema = noise_table
    code, out, err = _train(capsys, path, schema, "--method", "none", "--epochs", "3")
    assert code == 0, err
    assert "no better than always predicting 'low'" in " ".join(out.split())


def test_dp_verdict_carries_its_interval_and_noise_cannot_make_it_better(noise_table, capsys):
    """Regression (issue 29): at epsilon 1 the noisy counts of seed 7 put the model's test
    accuracy (1.0) above the noisy baseline (0.64), and the old verdict said "better than
    always predicting 'low'" for a model of features that carry no signal. The verdict now
    carries the difference's 95% noise interval and says "better" only when it excludes 0."""
    path, schema = noise_table
    code, out, err = _train(capsys, path, schema, "--epsilon", "1", "--delta", "0", "--json",
                            "--seed", "7")
    assert code == 0, err
    doc = json.loads(out)
    base = doc["baseline"]
    assert doc["test_accuracy"] > base["test_accuracy"]  # the noise points to "better"
    lo, hi = base["difference_interval_95"]
    assert lo <= 0 <= hi and lo >= -1 and hi <= 1
    assert base["better_than_baseline"] is False
    assert base["verdict"].startswith("no better than always predicting 'low' (")
    assert "95% noise interval" in base["verdict"] and "includes 0" in base["verdict"]
    code, out, err = _train(capsys, path, schema, "--epsilon", "1", "--delta", "0",
                            "--seed", "7")
    assert code == 0 and "95% noise interval" in " ".join(out.split())


def test_dp_better_only_with_an_interval_above_zero(tmp_path, capsys):
    """A label the features determine, at epsilon 8: the interval lies above 0 and the
    verdict says "better", with its interval, in the JSON and on the console."""
    gen = np.random.default_rng(5)
    n = 2000
    a = gen.integers(0, 100, n)
    frame = pd.DataFrame({"a": a, "b": gen.integers(0, 100, n),
                          "label": np.where(a < 70, "low", "high")})
    path = tmp_path / "signal.csv"
    frame.to_csv(path, index=False)
    schema = tmp_path / "s.yaml"
    schema.write_text(yaml.safe_dump(SCHEMA))
    code, out, err = _train(capsys, path, schema, "--epsilon", "8", "--delta", "0", "--json")
    assert code == 0, err
    base = json.loads(out)["baseline"]
    assert base["better_than_baseline"] is True and base["difference_interval_95"][0] > 0
    assert base["verdict"].startswith("better than always predicting 'low' (")
    code, out, err = _train(capsys, path, schema, "--epsilon", "8", "--delta", "0")
    assert "is better than always predicting 'low'" in " ".join(out.split())


def test_noise_interval_is_exact_for_two_clamped_laplace_counts():
    """P(|Z1| + |Z2| = s) = 4 c^2 s a^s sums to 1 and the half-width is the smallest with
    95% coverage (checked against the pmf, not a simulation)."""
    for scale in (0.5, 3.0, 40.0):
        assert sum(abs_sum_pmf(scale, s) for s in range(int(200 * scale) + 50)) == \
            pytest.approx(1.0, abs=1e-12)
        h = difference_halfwidth(scale)
        below = sum(abs_sum_pmf(scale, s) for s in range(h))
        assert below < 0.95 <= below + abs_sum_pmf(scale, h)
