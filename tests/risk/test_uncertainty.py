"""The uncertainty of the epsilon choice: P(best), one-standard-error rule, interval."""

from __future__ import annotations

import numpy as np
import pytest

from privlab.risk import Evaluation, fit_curves, make_policy
from privlab.risk.uncertainty import accuracy_se, choice_uncertainty

GRID = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0]


def _evs(acc: dict[float, list[float]], k: int = 1000, n: int = 2000) -> list[Evaluation]:
    # attacks at chance: k successes out of n = 2k guesses at every epsilon
    return [Evaluation(e, {"loss": (k, n)}, acc[e]) for e in GRID]


def _run(acc: dict[float, list[float]], seed: int = 0, policy: str = "finance"):
    pol = make_policy(policy)
    evs = _evs(acc)
    curves = fit_curves(evs, level=pol.level)
    return choice_uncertainty(curves, [acc[e] for e in GRID], pol, seed=seed, n_draws=2000)


def test_clear_accuracy_gain_is_followed():
    # accuracy climbs by 0.1 per step with a tiny spread: the largest epsilon is clearly best
    # (a loss gain of 0.3 * 0.1 per step against risk noise of about 0.7 * 0.02 at chance)
    acc = {e: [0.4 + 0.1 * i + d for d in (-0.001, 0.0, 0.001)] for i, e in enumerate(GRID)}
    u = _run(acc)
    assert u.recommended == 16.0
    assert u.prob_best[-1] > 0.95
    assert u.prob_best.sum() == pytest.approx(1.0)


def test_flat_curve_recommends_the_most_private_indistinguishable_epsilon():
    # eps 0.5 and 1 clearly worse; 2..16 equal up to seed noise (sd 0.01, 4 seeds): the argmin
    # among 2..16 is a coin toss, the recommendation is 2 and the interval reaches 16
    g = np.random.default_rng(5)
    acc = {0.5: list(0.70 + 0.002 * g.standard_normal(4)),
           1.0: list(0.75 + 0.002 * g.standard_normal(4))}
    acc.update({e: list(0.82 + 0.01 * g.standard_normal(4)) for e in GRID[2:]})
    u = _run(acc)
    assert u.recommended == 2.0
    assert u.interval[0] == 2.0 and u.interval[1] >= 8.0
    assert u.prob_best[:2].sum() < 0.01
    assert max(u.prob_best[2:]) < 0.8  # no candidate among 2..16 is clearly best


def test_recommendation_is_stable_over_repeated_measurements():
    # 20 independent noisy measurements of the same flat truth (accuracy 0.82 from eps 2 on,
    # seed noise 0.01): the one-standard-error recommendation is the same every time, and
    # the interval always reaches into the plateau
    recs = set()
    for s in range(20):
        g = np.random.default_rng(100 + s)
        acc = {0.5: list(0.70 + 0.004 * g.standard_normal(6)),
               1.0: list(0.75 + 0.004 * g.standard_normal(6))}
        acc.update({e: list(0.82 + 0.01 * g.standard_normal(6)) for e in GRID[2:]})
        u = _run(acc, seed=s)
        recs.add(u.recommended)
        assert u.interval[0] == 2.0 and u.interval[1] >= 4.0
    assert recs == {2.0}


def test_accuracy_standard_error_is_shrunk_to_the_pooled_variance():
    se = accuracy_se([[0.5, 0.5], [0.4, 0.6], [0.7]])
    pooled = (0.0 + 0.02) / 2
    assert se[0] == pytest.approx(np.sqrt(0.5 * (0.0 + pooled) / 2))
    assert se[2] == pytest.approx(np.sqrt(pooled / 1))


def test_nothing_feasible_gives_no_recommendation():
    pol = make_policy("medical", max_risk=0.0)
    acc = {e: [0.8, 0.81] for e in GRID}
    evs = [Evaluation(e, {"loss": (1800, 2000)}, acc[e]) for e in GRID]
    u = choice_uncertainty(fit_curves(evs, level=pol.level), [acc[e] for e in GRID], pol,
                           n_draws=500)
    assert u.recommended is None and u.interval is None
    assert "constraints" in u.reason


def test_paired_bootstrap_widens_the_noise():
    pol = make_policy("finance")
    acc = {e: [0.80, 0.80] for e in GRID}
    # 200,000 guesses per epsilon: the risk posterior is narrow, accuracy noise dominates
    curves = fit_curves(_evs(acc, 100_000, 200_000), level=pol.level)
    g = np.random.default_rng(0)
    correct = [(g.random(400) < 0.8).astype(float) for _ in GRID]
    plain = choice_uncertainty(curves, [acc[e] for e in GRID], pol, n_draws=1000)
    boot = choice_uncertainty(curves, [acc[e] for e in GRID], pol, n_draws=1000,
                              correct=correct)
    # independent correctness vectors of 400 records: test-set noise of the loss gap is about
    # w_util * sqrt(2 * 0.16 / 400) = 0.3 * 0.028 ~ 0.008, far above the risk-only noise
    assert boot.loss_se.max() > 2 * plain.loss_se.max()
