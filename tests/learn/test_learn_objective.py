"""Objective / output perturbation: the privacy split, the noise law, the conditions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privlab.errors import InvalidInputError
from privlab.learn import objective as op


def test_gaussian_noise_scale_solves_the_privacy_loss_bound():
    for eps_b, delta in [(0.5, 1e-5), (2.0, 1e-6), (8.0, 1e-3)]:
        s = op._gaussian_objective_sigma(eps_b, delta)
        t = 1 / s
        loss = 2 * t * math.sqrt(2 * math.log(1 / delta)) + 2 * t * t
        assert loss == pytest.approx(eps_b, rel=1e-12)


@pytest.mark.parametrize("epsilon,l2", [(1.0, 1e-2), (0.1, 1e-4)])
def test_budget_split_adds_up(blobs, epsilon, l2):
    x, y = blobs
    model = op.logistic_objective_perturbation(x, y, epsilon, 0.0, l2=l2, data_norm=3.0, rng=0,
                                               classes=[0, 1])
    d = model.details
    n = len(y)
    # eps_J is the Chaudhuri et al. Jacobian bound at the regularisation actually used
    assert d["eps_jacobian"] == pytest.approx(2 * math.log1p(0.25 / (n * (l2 + d["Delta"]))))
    assert d["eps_jacobian"] + d["eps_noise"] <= epsilon * (1 + 1e-12)
    if d["Delta"] > 0:      # the extra-regularisation branch splits the budget in halves
        assert d["eps_noise"] == pytest.approx(epsilon / 2)
        assert d["eps_jacobian"] == pytest.approx(epsilon / 2)
    assert model.guarantee.neighbouring == "replace_record"
    assert "Lambda" in " ".join(model.guarantee.notes)


def test_pure_noise_norm_follows_gamma_law():
    gen = np.random.default_rng(0)
    x = gen.normal(size=(30, 2))
    y = (x[:, 0] > 0).astype(int)
    norms, eps_b = [], None
    for seed in range(300):
        m = op.logistic_objective_perturbation(x, y, 2.0, 0.0, l2=0.5, data_norm=2.0, rng=seed,
                                               classes=[0, 1])
        norms.append(m.details["noise_norms"][0])
        eps_b = m.details["eps_noise"]
    d = 3  # two features + intercept
    mean, sd = d * 2 / eps_b, math.sqrt(d) * 2 / eps_b   # Gamma(d, 2/eps_b)
    assert abs(np.mean(norms) - mean) < 5 * sd / math.sqrt(300)


def test_rows_meet_the_norm_condition():
    gen = np.random.default_rng(1)
    x = gen.normal(size=(50, 4)) * 10
    for intercept in (True, False):
        z = op._unit_rows(x, 2.5, intercept)
        assert np.linalg.norm(z, axis=1).max() <= 1.0


def test_minimiser_is_exact():
    gen = np.random.default_rng(2)
    z = op._unit_rows(gen.normal(size=(200, 3)), 2.0, True)
    s = np.where(gen.random(200) > 0.5, 1.0, -1.0)
    b = gen.normal(size=4) * 5
    w = op._fit(z, s, 0.01, b)
    m = s * (z @ w)
    grad = -(z.T @ (s / (1 + np.exp(m)))) / 200 + 0.01 * w + b / 200
    assert np.linalg.norm(grad) < 1e-9


def test_high_epsilon_is_close_to_plain(blobs):
    x, y = blobs
    plain = op.logistic_plain(x, y, l2=1e-3, data_norm=4.0)
    for fn in (op.logistic_objective_perturbation, op.logistic_output_perturbation):
        priv = fn(x, y, 1e4, 1e-5, l2=1e-3, data_norm=4.0, rng=0, classes=[0, 1])
        agree = (priv.predict_proba(x).argmax(1) == plain.predict_proba(x).argmax(1)).mean()
        assert agree > 0.95
    assert not plain.guarantee.is_dp


def test_output_perturbation_states_sensitivity(blobs):
    x, y = blobs
    m = op.logistic_output_perturbation(x, y, 1.0, 1e-5, l2=0.1, data_norm=3.0, rng=0,
                                        classes=[0, 1])
    assert m.details["sensitivity_l2"] == pytest.approx(2 / (300 * 0.1))
    assert m.guarantee.neighbouring == "replace_record" and m.guarantee.delta == 1e-5


def test_multiclass_one_vs_rest_composes():
    gen = np.random.default_rng(3)
    x = gen.normal(size=(120, 3))
    y = np.argmax(x, axis=1)
    m = op.logistic_objective_perturbation(x, y, 3.0, 0.0, l2=1e-2, data_norm=3.0, rng=0,
                                           classes=[0, 1, 2])
    assert m.coef.shape == (3, 3)
    assert "one-vs-rest" in " ".join(m.guarantee.notes)
    assert m.predict_proba(x).shape == (120, 3)


@pytest.mark.parametrize("kwargs,match", [(dict(l2=0.0), "regularisation"),
                                          (dict(data_norm=-1.0), "data_norm")])
def test_conditions_are_checked(blobs, kwargs, match):
    x, y = blobs
    with pytest.raises(InvalidInputError, match=match):
        op.logistic_objective_perturbation(x, y, 1.0, classes=[0, 1], **kwargs)


@pytest.mark.parametrize("fn", [op.logistic_objective_perturbation,
                                op.logistic_output_perturbation])
def test_classes_are_required(blobs, fn):
    """Regression: classes=None read the class list from y (a replaced label added a class)."""
    x, y = blobs
    with pytest.raises(InvalidInputError, match="^classes: "):
        fn(x, y, 1.0, 1e-5)
