"""Metrics and empirical epsilon: exact values on small cases, validity of the bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privlab.audit.epsilon import (
    bayesian_interval,
    clopper_pearson_interval,
    empirical_epsilon,
    epsilon_from_rates,
    max_attainable,
)
from privlab.audit.metrics import (
    advantage,
    auc,
    balanced_accuracy,
    best_threshold,
    check_fprs,
    decision_counts,
    roc_curve,
    summarise,
    tpr_at_fpr,
)
from privlab.errors import InvalidInputError


def test_auc_matches_pairwise_definition_with_ties():
    a = np.array([3.0, 2.0, 2.0, 1.0])
    b = np.array([2.0, 0.0, 1.0])
    pairs = [(x > y) + 0.5 * (x == y) for x in a for y in b]
    assert auc(a, b) == pytest.approx(np.mean(pairs))


def test_roc_and_advantage_and_tpr():
    a = np.array([5.0, 4.0, 3.0, 0.5])
    b = np.array([2.0, 1.0, 0.0, -1.0])
    roc = roc_curve(a, b)
    assert roc.fpr[0] == 0 and roc.tpr[0] == 0 and roc.fpr[-1] == 1 and roc.tpr[-1] == 1
    assert advantage(roc) == pytest.approx(0.75)  # threshold 3: TPR 3/4, FPR 0
    assert auc(a, b) == pytest.approx(0.875)
    with pytest.raises(InvalidInputError, match="non-members"):
        tpr_at_fpr(roc, 0.01)  # 4 non-members cannot support FPR 1%
    assert tpr_at_fpr(roc, 0.25) == pytest.approx(0.75)  # 0.5 lies below two non-members
    assert tpr_at_fpr(roc, 0.5) == pytest.approx(1.0)


def test_tpr_at_fpr_is_max_tpr_with_fpr_below():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1, 1, 3000), rng.normal(0, 1, 2000)
    roc = roc_curve(a, b)
    for f in (0.001, 0.01, 0.1):
        t = tpr_at_fpr(roc, f)
        thr = np.sort(b)[::-1][int(math.floor(f * b.size))]  # FPR <= f needs score > thr
        assert t == pytest.approx((a > thr).mean(), abs=1e-9)


def test_decision_counts_and_threshold_choice():
    a, b = np.array([0.9, 0.8, 0.3]), np.array([0.1, 0.4, 0.5])
    thr = best_threshold(a, b)
    assert thr == pytest.approx(0.8)
    c = decision_counts(a, b, thr)
    assert c == {"tp": 2, "fp": 0, "tn": 3, "fn": 1, "successes": 5, "trials": 6}
    assert balanced_accuracy(a, b, thr) == pytest.approx((2 / 3 + 1) / 2)


def test_summary_drops_unsupported_default_fprs_and_refuses_explicit():
    rng = np.random.default_rng(1)
    s = summarise(rng.normal(1, 1, 200), rng.normal(0, 1, 200))
    assert s["tpr_at_fpr"]["0.001"] is None and s["tpr_at_fpr"]["0.1"] is not None
    assert "notes" in s
    with pytest.raises(InvalidInputError, match="FPR 0.001 needs at least 1000"):
        check_fprs([0.001], 200, explicit=True)
    with pytest.raises(InvalidInputError):
        summarise([], [1.0])
    with pytest.raises(InvalidInputError, match="NaN"):
        auc([np.nan], [1.0])


def test_epsilon_from_rates_formula():
    assert epsilon_from_rates(0.1, 0.2, 0.0) == pytest.approx(math.log(0.8 / 0.1))
    assert epsilon_from_rates(0.5, 0.5, 0.0) == 0.0
    assert epsilon_from_rates(0.0, 0.3, 0.0) == math.inf
    # the larger of the two forms: ln((1-d-FPR)/FNR) = ln(7.99) beats ln((1-d-FNR)/FPR)
    assert epsilon_from_rates(0.2, 0.1, 1e-3) == pytest.approx(math.log((1 - 1e-3 - 0.2) / 0.1))


def test_bayesian_interval_matches_monte_carlo():
    fp, n_out, fn, n_in, d = 20, 500, 150, 500, 1e-5
    lo, hi, mean = bayesian_interval(fp, n_out, fn, n_in, d, 0.9)
    g = np.random.default_rng(0)
    e = epsilon_from_rates(g.beta(0.5 + fp, 0.5 + n_out - fp, 200_000),
                           g.beta(0.5 + fn, 0.5 + n_in - fn, 200_000), d)
    q = np.quantile(e, [0.05, 0.95])
    assert lo == pytest.approx(q[0], abs=0.01) and hi == pytest.approx(q[1], abs=0.01)
    assert mean == pytest.approx(e.mean(), abs=0.01)


def test_clopper_pearson_lower_end_covers_true_epsilon():
    """Coverage: simulate a test with true FPR/FNR on the (eps, 0) boundary; the CP lower
    end must exceed the true epsilon in at most (1 - level) / 2 of repetitions."""
    eps = 1.0
    fpr = 0.1
    fnr = 1 - math.exp(eps) * fpr  # on the DP boundary FPR e^eps + FNR = 1
    g = np.random.default_rng(3)
    n, reps, level = 400, 400, 0.9
    bad = 0
    for _ in range(reps):
        fp, fn = g.binomial(n, fpr), g.binomial(n, fnr)
        lo, _ = clopper_pearson_interval(fp, n, fn, n, 0.0, level)
        bad += lo > eps
    # allowed: 5% (one end); binomial tolerance at 4 sigma
    p = (1 - level) / 2
    assert bad <= reps * p + 4 * math.sqrt(reps * p * (1 - p))


def test_holdout_empirical_epsilon_on_random_scores_is_small():
    g = np.random.default_rng(5)
    e = empirical_epsilon(g.normal(size=2000), g.normal(size=2000), 1e-5, level=0.95)
    assert e.lower == 0.0  # no evidence at all
    assert e.point < 0.5
    assert e.counts["n_members"] == 1000 and e.counts["n_nonmembers"] == 1000


def test_separable_scores_give_large_but_saturating_bound():
    e = empirical_epsilon(np.arange(1000) + 2000.0, np.arange(1000) * 1.0, 1e-5)
    cap = max_attainable(500, 500, 0.95, 1e-5)
    assert e.lower == pytest.approx(cap)
    assert e.lower > 4.0
    assert e.bayesian[0] > e.lower  # Bayesian with Jeffreys prior is tighter than CP here


def test_bonferroni_method_and_bad_args():
    g = np.random.default_rng(6)
    a, b = g.normal(2, 1, 1000), g.normal(0, 1, 1000)
    e = empirical_epsilon(a, b, 0.0, method="bonferroni", n_thresholds=50)
    assert e.method == "bonferroni" and 0 < e.lower < e.point
    # Gaussian shift 2: the optimal test's epsilon at delta=0 is unbounded, finite data bounds it
    with pytest.raises(InvalidInputError, match="method"):
        empirical_epsilon(a, b, method="max")
    with pytest.raises(InvalidInputError, match="delta"):
        empirical_epsilon(a, b, delta=1.5)
    with pytest.raises(InvalidInputError, match="at least 4"):
        empirical_epsilon([1.0, 2.0], [0.0, 1.0])


def test_gaussian_dp_scores_respect_epsilon():
    """Scores distributed like the output of a Gaussian mechanism (mu-GDP with mu = 1):
    its tight (eps, delta) curve bounds every test, so the CP lower end stays below it."""
    mu, delta = 1.0, 1e-5

    def gdp_delta(eps: float) -> float:
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu
                                                                                   - mu / 2)

    from scipy.optimize import brentq

    true_eps = brentq(lambda e: gdp_delta(e) - delta, 0, 50)
    g = np.random.default_rng(11)
    for _ in range(5):
        e = empirical_epsilon(g.normal(mu, 1, 5000), g.normal(0, 1, 5000), delta)
        assert e.lower <= true_eps
