"""Shared DP-SGD machinery: the refusal of runs whose noise drowns any possible signal."""

from __future__ import annotations

import math

import pytest

from privlab.core.accounting import dpsgd_epsilon
from privlab.errors import InvalidInputError
from privlab.synth.dpsgd import PrePlan, check_feasible


def _plan(n_hat: float, eps_sgd: float) -> PrePlan:
    return PrePlan(n_hat=n_hat, pre=None, eps_sgd=eps_sgd, delta_sgd=1e-6, sigma_count=1.0)


def test_refused_exactly_when_sigma_would_exceed_sqrt_steps_times_batch() -> None:
    # 50 rows, full batches (q = 1), 4 steps: sigma* = sqrt(4) x 50 = 100
    at_star = dpsgd_epsilon(100.0, 1.0, 4, 1e-6)
    check_feasible("dpvae", 1.0, _plan(50, at_star * 1.01), 1.0, 4, "pld")  # sigma < 100
    with pytest.raises(InvalidInputError, match="exceed sqrt\\(steps\\) x expected batch = 100"
                       ) as err:
        check_feasible("dpvae", 1.0, _plan(50, at_star * 0.99), 1.0, 4, "pld")
    # the suggested epsilon is the one that reaches sigma*, scaled by the DP-SGD share
    share = at_star * 0.99
    assert f"{at_star / share:.2g}" in str(err.value) and "\n" not in str(err.value)


def test_subsampled_run_uses_the_expected_batch() -> None:
    q, steps, n_hat = 0.01, 400, 10_000.0  # expected batch 100, sigma* = 20 x 100 = 2000
    eps = dpsgd_epsilon(2000.0, q, steps, 1e-6)
    assert math.isfinite(eps)
    check_feasible("dpvae", 1.0, _plan(n_hat, eps * 1.01), q, steps, "pld")
    with pytest.raises(InvalidInputError, match="--method dpvae"):
        check_feasible("dpvae", 1.0, _plan(n_hat, eps * 0.99), q, steps, "pld")
