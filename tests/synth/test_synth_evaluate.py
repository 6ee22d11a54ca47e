"""Evaluation metrics: each one moves the way it should on known cases."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from privlab.synth.evaluate import (
    assess_synthetic,
    evaluate,
    fidelity,
    ml_utility,
    privacy,
)


def _frame(n: int, seed: int) -> pd.DataFrame:
    gen = np.random.default_rng(seed)
    x = gen.normal(0, 1, n)
    g = np.where(x + gen.normal(0, 0.5, n) > 0, "hi", "lo")
    return pd.DataFrame({"x": x, "y": 2 * x + gen.normal(0, 0.3, n), "g": g,
                         "k": gen.choice(["a", "b", "c"], n)})


def test_fidelity_is_zero_on_itself_and_large_on_a_shuffle() -> None:
    real = _frame(3000, 0)
    same = fidelity(real, real)
    assert same["tvd_1way_max"] == 0 and same["tvd_2way_max"] == 0
    assert same["pearson_abs_diff_max"] == 0 and same["cramers_v_abs_diff_max"] == 0
    shuffled = real.copy()
    shuffled["y"] = np.random.default_rng(1).permutation(shuffled["y"].to_numpy())
    f = fidelity(real, shuffled)
    assert f["tvd_1way_max"] == 0  # same 1-way marginals
    assert f["tvd_2way_max"] > 0.5  # x-y dependence destroyed
    assert f["pearson_abs_diff_max"] > 0.9
    other = real.assign(k="a")
    assert fidelity(real, other)["tvd_1way"]["k"] == pytest.approx(
        1 - (real["k"] == "a").mean())


def test_ml_utility_train_on_real_beats_train_on_noise() -> None:
    train, test = _frame(2000, 2), _frame(1000, 3)
    noise = train.assign(g=np.random.default_rng(4).permutation(train["g"].to_numpy()))
    r = ml_utility(train, test, noise, "g")
    assert r["train_real_accuracy"] > 0.8
    assert r["train_synthetic_accuracy"] < r["train_real_accuracy"] - 0.15
    # the real training rows' majority scored on the test rows (not the test rows' own
    # majority share, which would peek at the test labels)
    assert r["majority_class_accuracy"] == pytest.approx(
        (test["g"] == train["g"].value_counts().idxmax()).mean())
    one_class = train.assign(g="hi")
    assert ml_utility(train, test, one_class, "g")["train_synthetic_accuracy"] == \
        pytest.approx((test["g"] == "hi").mean())


def test_ml_utility_beside_the_majority_baseline() -> None:
    """Issue 23: train-on-synthetic accuracy sits beside the majority-class baseline (the
    real training rows' majority, scored on the same test rows), and a model trained on
    synthetic rows that carry no signal is called "no better than always predicting ..."."""
    train, test = _frame(2000, 2), _frame(1000, 3)
    train = train.assign(g=np.where(train["x"] > -0.7, "hi", "lo"))  # 'hi' ~76%
    test = test.assign(g=np.where(test["x"] > -0.7, "hi", "lo"))
    noise = train.assign(g=np.random.default_rng(4).permutation(train["g"].to_numpy()))
    r = ml_utility(train, test, noise, "g")
    assert r["majority_class"] == "hi"
    assert r["majority_class_accuracy"] == pytest.approx((test["g"] == "hi").mean())
    assert r["train_real_better_than_baseline"] is True
    assert r["train_real_verdict"] == "better than always predicting 'hi'"
    assert r["train_synthetic_better_than_baseline"] is False
    assert r["train_synthetic_verdict"] == "no better than always predicting 'hi'"


def test_privacy_checks_catch_a_copying_synthesizer() -> None:
    train, holdout = _frame(1500, 5), _frame(500, 6)
    copier = privacy(train, holdout, train, max_queries=400)  # releases the training rows
    assert copier["membership_inference"]["auc"] > 0.95
    assert copier["dcr_synthetic_to_train"]["zero_share"] == 1.0
    assert copier["rare_copies"]["copies_exceed_baseline"]
    fresh = privacy(train, holdout, _frame(800, 7), max_queries=400)
    assert abs(fresh["membership_inference"]["auc"] - 0.5) < 0.1
    assert fresh["dcr_synthetic_to_train"]["zero_share"] == 0.0
    assert not fresh["rare_copies"]["copies_exceed_baseline"]


def test_evaluate_without_holdout_skips_privacy_and_is_labelled_not_private() -> None:
    real = _frame(500, 8)
    ev = evaluate(real, _frame(500, 9), run_assess=False)
    assert ev["guarantee"]["is_dp"] is False and "skipped" in ev
    assert "privacy" not in ev and "ml_utility" not in ev


def test_assess_runs_on_the_synthetic_table() -> None:
    a = assess_synthetic(_frame(400, 10))
    assert {r["name"] for r in a["attributes"]} == {"x", "y", "g", "k"}


def _xor(n: int, seed: int) -> pd.DataFrame:
    """Pairwise independent, 3-way dependent (c = a XOR b): only 3-way TVD sees a model that
    keeps the pairs and loses the triple."""
    gen = np.random.default_rng(seed)
    a, b = gen.integers(0, 2, n), gen.integers(0, 2, n)
    return pd.DataFrame({"a": a.astype(str), "b": b.astype(str), "c": (a ^ b).astype(str)})


def test_three_way_tvd_sees_what_two_way_cannot() -> None:
    real = _xor(4000, 0)
    gen = np.random.default_rng(1)
    flat = pd.DataFrame({k: gen.integers(0, 2, 4000).astype(str) for k in "abc"})
    f = fidelity(real, flat)
    # every pair is uniform in both: 2-way TVD is sampling noise (~0.02); the triple has
    # half its cells empty in the real table: TVD 0.5
    assert f["tvd_2way_max"] < 0.05
    assert f["tvd_3way_mean"] == pytest.approx(0.5, abs=0.03) and f["tvd_3way_triples"] == 1


def test_evaluate_with_holdout_reports_holdout_tvd_floor_and_ceiling() -> None:
    train, holdout = _xor(3000, 2), _xor(1000, 3)
    # every (a, b, c) equally often: c carries no information about (a, b) at all
    flat = pd.DataFrame(list(itertools.product("01", repeat=3)) * 375, columns=list("abc"))
    ev = evaluate(train, flat, holdout=holdout, target="c", run_assess=False)
    assert ev["floor"]["tvd_3way_mean"] == pytest.approx(
        fidelity(holdout, train)["tvd_3way_mean"])
    assert ev["floor"]["tvd_3way_mean"] < 0.05 < 0.4 < ev["fidelity_holdout"]["tvd_3way_mean"]
    ml = ev["ml_utility"]
    assert ml["train_real_auc"] > 0.99 and ml["train_synthetic_auc"] == pytest.approx(0.5)
