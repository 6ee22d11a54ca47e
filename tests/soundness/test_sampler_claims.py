"""The delta a release reports is the delta of the samplers it really runs.

Regression (issue 21, item 8): docs/guarantees.md said the float-based samplers give about
(epsilon + 1e-15, 1e-15)-DP while `release --json` reported delta 0 and "(1)-DP". Now the
discrete Laplace draws only uniform integers (exact: pure DP as reported), and the
Gaussian's float64 acceptance step is bounded and charged inside the reported delta.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from privlab.cli.main import main
from privlab.core.mechanisms import gaussian_mechanism, laplace_mechanism
from privlab.core.samplers import (
    GAUSSIAN_SAMPLER_TV,
    discrete_gaussian_delta,
    discrete_laplace,
    sampler_delta,
)


class IntegersOnly(np.random.Generator):
    """A generator that refuses every float draw: an exact sampler never asks for one."""

    def _float(self, *args, **kwargs):
        raise AssertionError("a float-valued draw was used")

    random = geometric = exponential = standard_exponential = laplace = gumbel = _float
    uniform = normal = standard_normal = _float


def test_discrete_laplace_draws_only_uniform_integers() -> None:
    for scale in (0.05, 0.7, 3.0, 1025.0, 2.0**40):
        x = discrete_laplace(scale, size=2000, rng=IntegersOnly(np.random.PCG64(1)))
        assert x.dtype == np.int64 and x.shape == (2000,)


def test_discrete_laplace_pmf_is_exact_in_distribution() -> None:
    """P[0] and P[1] for scale 0.7 on 200,000 draws: within 5 binomial standard errors."""
    n, a = 200_000, math.exp(-1 / 0.7)
    x = discrete_laplace(0.7, size=n, rng=5)
    for k in (0, 1, -1, 2):
        p = (1 - a) / (1 + a) * a ** abs(k)
        assert abs((x == k).mean() - p) < 5 * math.sqrt(p * (1 - p) / n), k


def test_pure_release_reports_delta_zero_and_runs_no_float_draw(tmp_path, capsys) -> None:
    path = tmp_path / "t.csv"
    path.write_text("age\n" + "".join(f"{20 + i % 60}\n" for i in range(50)))
    for argv in (["count"], ["sum", "--bounds", "0:100"], ["histogram", "--bounds", "0:100"]):
        assert main(["release", argv[0], str(path), "--column", "age", *argv[1:],
                     "--epsilon", "1", "--seed", "1", "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["guarantee"]["delta"] == 0 and doc["guarantee"]["headline"] == "(1)-DP"
        assert doc["noise"]["distribution"] == "discrete_laplace"
    rel = laplace_mechanism([3.0, 4.5], 1.0, 1.0, rng=IntegersOnly(np.random.PCG64(2)))
    assert rel.guarantee.delta == 0


def test_gaussian_charges_its_sampler_inside_the_reported_delta() -> None:
    rel = gaussian_mechanism(7, 1, 1.0, 1e-6, integer_valued=True, rng=3)
    slack = sampler_delta(1.0, 1)
    assert slack == pytest.approx((1 + math.e) * GAUSSIAN_SAMPLER_TV)
    assert rel.guarantee.delta == 1e-6
    assert any("float64 acceptance" in n for n in rel.guarantee.notes)
    sigma = rel.noise["scale"]  # integer data on the unit grid: sigma in steps
    assert discrete_gaussian_delta(sigma, 1, 1.0) + slack <= 1e-6
    with pytest.raises(Exception, match="too small"):
        gaussian_mechanism(np.zeros(10), 1, 1.0, 1e-13)
    # a huge epsilon is calibrated at a smaller one that leaves room for the sampler's share
    big = gaussian_mechanism(0, 1, 30.0, 1e-6, integer_valued=True, rng=3)
    assert big.guarantee.epsilon == 30.0 and big.guarantee.delta == 1e-6
    eps0 = math.log(1e-6 / (2 * GAUSSIAN_SAMPLER_TV) - 1)
    assert any(f"{eps0:.4g}" in n for n in big.guarantee.notes)
    assert discrete_gaussian_delta(big.noise["scale"], 1, eps0) + sampler_delta(eps0, 1) <= 1e-6
