"""User-level accounting: checked against independent dp-accounting computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import (
    GaussianDpEvent,
    PoissonSampledDpEvent,
    SelfComposedDpEvent,
    SingleEpochTreeAggregationDpEvent,
)
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
from dp_accounting.privacy_accountant import NeighboringRelation
from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant
from scipy.optimize import brentq
from scipy.stats import norm

from privlab.federated.accounting import Plan, calibrate, ftrl_epochs, tree_depth
from privlab.federated.simulation import RunConfig, train
from privlab.federated.tree import TreeAggregator


def _pld_eps(event, delta):
    acc = PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(event)
    return acc.get_epsilon(delta)


def _exact_gaussian_eps(mu, delta):
    """Exact epsilon of the Gaussian mechanism with sensitivity/std = mu (Balle & Wang)."""
    def d(eps):
        return norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * norm.cdf(-mu / 2 - eps / mu) - delta
    return brentq(d, 0, 100)


def test_tree_depth_equals_the_nodes_a_leaf_reaches():
    for steps in range(1, 41):
        tree = TreeAggregator({"x": 0.0}, np.random.default_rng(0))
        for t in range(steps):
            prefix = tree.add({"x": np.array([float(t + 1)])})
            assert prefix["x"][0] == pytest.approx((t + 1) * (t + 2) / 2)  # exact with no noise
        reach = [sum(1 for lvl, idx in tree.nodes_used if idx == leaf >> lvl)
                 for leaf in range(steps)]
        assert max(reach) == tree_depth(steps) == math.ceil(math.log2(steps + 1))


def test_tree_prefix_noise_uses_popcount_nodes():
    tree = TreeAggregator({"x": 1.0}, np.random.default_rng(1))
    for t in range(1, 17):
        tree.add({"x": np.zeros(1)})
        assert len(tree._stack) == bin(t).count("1")


def test_dpam_epsilon_matches_dp_accounting_and_the_exact_gaussian():
    plan = Plan("dpam", rounds=7, n_users=610, noise_multiplier=5.0, n_parts=2)
    from privlab.federated.accounting import RunAccountant

    acc = RunAccountant(plan, 1e-5)
    for _ in range(7):
        acc.charge(plan.round_event(), "round")
    ours = acc.guarantee("dpam").epsilon
    independent = _pld_eps(SelfComposedDpEvent(GaussianDpEvent(5.0 / math.sqrt(2)), 7), 1e-5)
    exact = _exact_gaussian_eps(math.sqrt(2 * 7) / 5.0, 1e-5)
    assert ours == pytest.approx(independent, rel=2e-3)
    assert exact <= ours <= exact * 1.002


def test_dpfedavg_epsilon_matches_dp_accounting():
    out = train(RunConfig(algorithm="dpfedavg", epsilon=3.0, rounds=6, seed=0,
                          clients_per_round=8, max_users=40), baselines=False)
    g = out["guarantee"]
    # --max-users keeps data by a keyed hash; the plan samples from all 610 enrolled users
    assert out["n_users"] == 610
    sigma, q = out["noise_multiplier"], 8 / 610
    independent = _pld_eps(SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)),
                                               6), 1e-5)
    assert g["epsilon"] == pytest.approx(independent, rel=5e-3)
    assert g["epsilon"] <= 3.0 and g["neighbouring"] == "user"
    assert out["releases_charged"] == 6


def test_dpftrl_matches_dp_accounting_tree_aggregation_event():
    epochs = ftrl_epochs(n_users=100, clients_per_round=10, rounds=25)
    assert epochs == [10, 10, 5]
    plan = Plan("dpftrl", rounds=25, n_users=100, noise_multiplier=3.0, clients_per_round=10)
    orders = [1.5, 2, 3, 4, 8, 16, 32, 64]
    ours = RdpAccountant(orders, NeighboringRelation.REPLACE_SPECIAL)
    ours.compose(plan.full_event())
    theirs = RdpAccountant(orders, NeighboringRelation.REPLACE_SPECIAL)
    theirs.compose(SelfComposedDpEvent(SingleEpochTreeAggregationDpEvent(3.0, 10), 2))
    theirs.compose(SingleEpochTreeAggregationDpEvent(3.0, 5))
    # same Renyi divergence at every order: our depth reduction is dp-accounting's tree RDP
    assert ours.get_epsilon(1e-5) == pytest.approx(theirs.get_epsilon(1e-5), rel=1e-12)
    # the PLD accountant we report is at least as tight as RDP
    pld = _pld_eps(plan.full_event(), 1e-5)
    assert pld <= theirs.get_epsilon(1e-5)
    sigma_eff = 3.0 / math.sqrt(2 * tree_depth(10) + tree_depth(5))
    assert pld == pytest.approx(_exact_gaussian_eps(1 / sigma_eff, 1e-5), rel=2e-3)


@pytest.mark.parametrize("algorithm", ["dpam", "dpftrl", "dpfedavg"])
def test_calibration_meets_the_target_tightly(algorithm):
    plan = Plan(algorithm, rounds=12, n_users=200, noise_multiplier=0.0,
                n_parts=2 if algorithm == "dpam" else 1, clients_per_round=20)
    sigma = calibrate(plan, 2.0, 1e-6)
    from dataclasses import replace

    from privlab.core.accounting import epsilon_for

    eps = epsilon_for(replace(plan, noise_multiplier=sigma).full_event(), 1e-6, "pld",
                      neighbouring="user")
    assert 0.99 * 2.0 <= eps <= 2.0
    eps_less = epsilon_for(replace(plan, noise_multiplier=sigma * 0.99).full_event(), 1e-6,
                           "pld", neighbouring="user")
    assert eps_less > 2.0
