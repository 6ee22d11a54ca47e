import numpy as np
import pytest

from privlab.errors import InvalidInputError
from privlab.risk import adaptive_search, decide, fit_curves, make_policy, star_distribution
from privlab.risk.simulate import simulator

GRID = [0.1, 0.2, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256]


@pytest.mark.parametrize("risk_mid,acc_mid", [(1.5, 0.0), (0.0, 1.0), (3.0, -1.0), (2.0, 2.0)])
@pytest.mark.parametrize("policy", ["medical", "finance", "recommender"])
def test_adaptive_reaches_full_grid_choice_with_half_the_runs(risk_mid, acc_mid, policy):
    ev = simulator(risk_mid=risk_mid, acc_mid=acc_mid, seed=7)
    pol = make_policy(policy)
    full = decide(fit_curves([ev(e) for e in GRID], level=pol.level, seed=0), pol)
    calls = []

    def counted(e):
        calls.append(e)
        return ev(e)

    res = adaptive_search(GRID, counted, pol, budget=len(GRID) // 2, n_draws=300)
    assert len(calls) == len(res.order) <= len(GRID) // 2
    assert len(set(calls)) == len(calls)
    a, f = res.decision.chosen_epsilon, full.chosen_epsilon
    if f is None:
        assert a is None
    else:
        assert a is not None
        assert abs(GRID.index(a) - GRID.index(f)) <= 1


def test_star_distribution_is_a_distribution():
    ev = simulator()
    p = star_distribution([ev(e) for e in (0.1, 4, 256)], np.array(GRID), make_policy("finance"),
                          n_draws=200)
    assert p.shape == (len(GRID),) and p.sum() == pytest.approx(1.0)


def test_adaptive_bad_input():
    ev = simulator()
    with pytest.raises(InvalidInputError, match="budget"):
        adaptive_search(GRID, ev, make_policy("medical"), budget=1)
    with pytest.raises(InvalidInputError, match="epsilons"):
        adaptive_search([0, 1, 2], ev, make_policy("medical"), budget=3)


def test_monotone_fill_stays_in_envelope_and_monotone():
    from privlab.risk.adaptive import monotone_fill

    grid = np.array(GRID, dtype=float)
    x = grid[[0, 4, 11]]
    vals = np.sort(np.random.default_rng(0).random((50, 3)), axis=1)
    out = monotone_fill(x, vals, grid, np.random.default_rng(1))
    assert out.shape == (50, len(GRID))
    assert np.all(np.diff(out, axis=1) >= 0)
    np.testing.assert_array_equal(out[:, [0, 4, 11]], vals)
    assert np.all((out[:, 1:4] >= vals[:, :1]) & (out[:, 1:4] <= vals[:, 1:2]))


def test_envelope_fill_also_reaches_the_answer():
    ev = simulator(seed=7)
    pol = make_policy("finance")
    full = decide(fit_curves([ev(e) for e in GRID], level=pol.level), pol).chosen_epsilon
    res = adaptive_search(GRID, ev, pol, budget=6, n_draws=300, fill="envelope")
    assert abs(GRID.index(res.decision.chosen_epsilon) - GRID.index(full)) <= 1
    with pytest.raises(InvalidInputError, match="fill"):
        adaptive_search(GRID, ev, pol, budget=6, fill="cubic")
