"""Canary audits of DP-SGD: white-box Dirac canary, black-box canary, one-run audit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privlab.audit.canary import (
    dirac_canary_audit,
    dirac_llr,
    make_canaries,
    one_run_epsilon,
    one_run_from_scores,
    one_run_p_value,
    strongest,
)
from privlab.errors import InvalidInputError


def test_dirac_llr_is_the_mixture_likelihood_ratio():
    q, s, y = 0.1, 1.3, np.array([-0.5, 0.2, 1.7])
    want = np.log((1 - q) + q * stats.norm.pdf(y, 1, s) / stats.norm.pdf(y, 0, s))
    assert np.allclose(dirac_llr(y, q, s), want)


def test_white_box_bound_is_below_the_accounted_epsilon_and_not_trivial():
    pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")
    # one Gaussian step without subsampling: mu = 1/sigma GDP; for sigma = 1 the exact
    # epsilon at delta = 1e-5 is ~4.4, and the audit with 40k trials must stay below it
    a = dirac_canary_audit(1.0, 1.0, 1, trials=40_000, delta=1e-5, seed=1)
    assert 0.8 < a.lower_bound < 4.4
    # a non-private run (no noise): any observation reveals the canary -> near the largest
    # bound these trials can give (ln(n) scale), far above any useful epsilon
    b = dirac_canary_audit(0.0, 1.0, 1, trials=20_000, seed=1)
    assert b.lower_bound > 7.0


def test_white_box_bound_grows_with_less_noise():
    pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")
    lo = dirac_canary_audit(4.0, 0.5, 4, trials=20_000, seed=2).lower_bound
    hi = dirac_canary_audit(0.7, 0.5, 4, trials=20_000, seed=2).lower_bound
    assert hi > lo + 0.5


def test_one_run_p_value_without_delta_is_a_binomial_tail():
    p = one_run_p_value(1000, 100, 70, 0.5, 0.0)
    assert p == pytest.approx(stats.binom.sf(69, 100, 1 / (1 + math.exp(-0.5))))
    assert one_run_p_value(1000, 100, 70, 0.5, 1e-5) >= p


def test_one_run_epsilon_is_the_confidence_boundary():
    eps = one_run_epsilon(1000, 100, 90, 0.0, 0.05)
    assert eps > 0.5
    assert one_run_p_value(1000, 100, 90, eps - 1e-3) < 0.05 <= \
        one_run_p_value(1000, 100, 90, eps + 1e-3)
    assert one_run_epsilon(1000, 100, 50, 0.0, 0.05) == 0.0  # coin-flip guesses: no evidence


def test_one_run_from_scores_perfect_and_random():
    g = np.random.default_rng(0)
    inc = g.random(2000) < 0.5
    perfect = one_run_from_scores(inc.astype(float) + 0.01 * g.random(2000), inc)
    assert perfect["best"]["epsilon"] > 3.0
    random = one_run_from_scores(g.random(2000), inc)
    assert random["best"]["epsilon"] < 0.5
    with pytest.raises(InvalidInputError, match="one score"):
        one_run_from_scores(np.zeros(3), np.zeros(4, bool))


def test_make_canaries_are_mislabelled():
    x = np.arange(20, dtype=float).reshape(10, 2)
    y = np.arange(10) % 3
    cx, cy = make_canaries(x, y, 5, 3, seed=0)
    rows = [int(r[0] // 2) for r in cx]
    assert all(cy[i] != y[r] for i, r in enumerate(rows))


def test_strongest_says_when_everything_was_at_chance():
    class A:  # minimal stand-in of a CanaryAudit
        def __init__(self, v, k):
            self.lower_bound, self.kind = v, k

    s = strongest([A(0.0, "one-run"), A(0.0, "black-box")])
    assert s["lower_bound"] == 0 and "at chance" in s["plain"]
    s = strongest([A(0.0, "one-run"), A(2.5, "white-box")])
    assert s["source"] == "white-box" and "2.5" in s["plain"]


def test_blackbox_and_one_run_on_tiny_models():
    pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")
    from privlab.audit.canary import blackbox_canary_audit, one_run_audit
    from privlab.learn.dpsgd import TrainConfig
    from privlab.learn.models import LogisticModel

    g = np.random.default_rng(0)
    x = g.normal(size=(80, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    canary = (np.full((1, 4), 6.0, np.float32), np.array([0]))  # far out, wrong side
    plain = TrainConfig(method="none", epochs=30, batch_size=16, lr=0.1)
    a = blackbox_canary_audit(lambda: LogisticModel(4, 2), x, y, plain, canary, models=16)
    assert a.trials == 16 and a.lower_bound >= 0
    dp = TrainConfig(epsilon=1.0, delta=1e-3, epochs=2, batch_size=16, lr=0.05)
    b = blackbox_canary_audit(lambda: LogisticModel(4, 2), x, y, dp, canary, models=16)
    assert b.lower_bound < 1.0 and b.accounted_epsilon <= 1.0 + 1e-9
    cx, cy = make_canaries(g.normal(size=(40, 4)).astype(np.float32),
                           (g.random(40) < 0.5).astype(np.int64), 40, 2)
    c = one_run_audit(lambda: LogisticModel(4, 2), x, y, dp, (cx, cy))
    assert c.lower_bound < 1.0 and c.trials == 40
