import math

import numpy as np
import pytest
from scipy import integrate, stats

from privlab.errors import InvalidInputError
from privlab.risk import BetaPosterior, parse_prior, risk_from_auc


def test_closed_form_uniform_prior_thesis_example():
    # Beta(1,1), N=10, k=3 -> Beta(4, 8), mean 4/12 = 1/3 (Kobylianska's Table 1.4 says 0.375)
    p = BetaPosterior.from_counts(3, 10)
    assert (p.alpha, p.beta) == (4.0, 8.0)
    assert p.mean == pytest.approx(1 / 3, abs=1e-15)
    assert p.var == pytest.approx(4 * 8 / (12**2 * 13), rel=1e-14)
    assert p.mean != pytest.approx(0.375)


@pytest.mark.parametrize("prior,k,n", [("uniform", 0, 0), ("jeffreys", 7, 7), ((2.0, 5.0), 40, 100),
                                       ("chance", 1200, 2000)])
def test_conjugate_update_matches_formula(prior, k, n):
    a, b = parse_prior(prior)
    p = BetaPosterior.from_counts(k, n, prior=prior)
    assert p.mean == pytest.approx((a + k) / (a + b + n), rel=1e-14)
    assert p.quantile(0.9) == pytest.approx(stats.beta.ppf(0.9, a + k, b + n - k), rel=1e-12)


@pytest.mark.parametrize("k,n", [(3, 10), (5, 10), (620, 1000), (1500, 2000), (0, 0)])
def test_risk_mean_equals_numerical_integral(k, n):
    p = BetaPosterior.from_counts(k, n)
    f = stats.beta(p.alpha, p.beta)
    val, _ = integrate.quad(lambda t: (2 * t - 1) * f.pdf(t), 0.5, 1.0, limit=200)
    assert p.risk_mean == pytest.approx(val, abs=1e-9)


def test_risk_quantile_maps_theta_quantile_and_matches_sampling():
    p = BetaPosterior.from_counts(560, 1000)
    assert p.risk_quantile(0.95) == pytest.approx(2 * p.quantile(0.95) - 1)
    draws = p.sample_risk(200_000, np.random.default_rng(1))
    # MC standard error of the mean is sd/sqrt(n) < 0.02/450; 5 sigma
    assert draws.mean() == pytest.approx(p.risk_mean, abs=5 * draws.std() / math.sqrt(draws.size))
    assert 0.0 <= p.risk_quantile(0.01) <= p.risk_mean <= p.risk_quantile(0.99) <= 1.0


def test_summary_and_auc_risk():
    s = BetaPosterior.from_counts(3, 10).summary(0.9)
    assert s["success_lower"] < s["success_mean"] < s["success_upper"]
    assert s["risk_lower"] == 0.0  # below guessing maps to zero risk
    assert risk_from_auc(0.7309) == pytest.approx(0.4618)
    assert risk_from_auc(0.4) == 0.0


@pytest.mark.parametrize("k,n", [(11, 10), (-1, 5), (2.5, 10), (True, 3)])
def test_bad_counts(k, n):
    with pytest.raises(InvalidInputError, match="counts"):
        BetaPosterior.from_counts(k, n)


@pytest.mark.parametrize("prior", ["flat", (0, 1), (1, -2), (float("nan"), 1), "x"])
def test_bad_prior(prior):
    with pytest.raises(InvalidInputError, match="prior"):
        BetaPosterior.from_counts(1, 2, prior=prior)
    with pytest.raises(InvalidInputError):
        risk_from_auc(1.5)
