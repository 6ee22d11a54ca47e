import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from privlab.errors import InvalidInputError
from privlab.risk import (
    POLICIES,
    Evaluation,
    UtilityConfig,
    check_grid,
    decide,
    fit_curves,
    isotonic,
    make_policy,
    normalise_weights,
    pareto_front,
    prior_sensitivity,
    utility_loss,
)
from privlab.risk.model import isotonic_rows
from privlab.risk.simulate import simulator

GRID = [0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64]


def random_problem(seed: int, n_eps: int = 8) -> list[Evaluation]:
    """Noisy, not necessarily monotone measurements (what a real sweep gives)."""
    rng = np.random.default_rng(seed)
    eps = np.sort(rng.choice(np.geomspace(0.05, 500, 40), n_eps, replace=False))
    theta = np.sort(rng.uniform(0.48, 0.8, n_eps)) + rng.normal(0, 0.02, n_eps)
    acc = np.sort(rng.uniform(0.45, 0.9, n_eps)) + rng.normal(0, 0.02, n_eps)
    out = []
    for e, t, a in zip(eps, theta, acc, strict=True):
        n = int(rng.integers(50, 3000))
        k = int(rng.binomial(n, np.clip(t, 0, 1)))
        n2 = int(rng.integers(50, 3000))
        counts = {"loss": (k, n), "shadow": (int(rng.binomial(n2, np.clip(t - 0.05, 0, 1))), n2)}
        out.append(Evaluation(float(e), counts, list(np.clip(a + rng.normal(0, 0.01, 3), 0, 1))))
    return out


def test_isotonic_matches_sklearn():
    rng = np.random.default_rng(0)
    for _ in range(20):
        y, w = rng.normal(size=15), rng.uniform(0.1, 5, 15)
        ref = IsotonicRegression().fit(np.arange(15), y, sample_weight=w).predict(np.arange(15))
        np.testing.assert_allclose(isotonic(y, w), ref, atol=1e-10)
        np.testing.assert_allclose(isotonic(y, w, increasing=False),
                                   IsotonicRegression(increasing=False).fit(
                                       np.arange(15), y, sample_weight=w).predict(np.arange(15)),
                                   atol=1e-10)


def test_isotonic_rows_match_sklearn_row_by_row():
    y = np.random.default_rng(1).normal(size=(50, 9))
    ref = np.vstack([IsotonicRegression().fit_transform(np.arange(9), row) for row in y])
    np.testing.assert_allclose(isotonic_rows(y), ref, atol=1e-12)


def test_isotonic_zero_weight_points_do_not_move_the_fit():
    y, w = np.array([0.3, 0.1, 0.9, 0.5, 0.7]), np.array([1.0, 2.0, 0.0, 1.0, 3.0])
    keep = w > 0
    fit = isotonic(y, w)
    np.testing.assert_allclose(fit[keep], isotonic(y[keep], w[keep]), atol=1e-8)
    assert np.all(np.diff(fit) >= -1e-12)
    assert isotonic([], []).size == 0


def test_curves_are_monotone_and_bands_ordered():
    c = fit_curves(random_problem(3), n_draws=2000)
    assert np.all(np.diff(c.risk_mean) >= -1e-12)
    assert np.all(np.diff(c.risk_upper) >= -1e-12)
    assert np.all(np.diff(c.accuracy) >= -1e-12)
    assert np.all(c.risk_lower <= c.risk_mean + 1e-12)
    assert np.all(c.risk_mean <= c.risk_upper + 1e-12)
    assert np.all(np.diff(c.risk_upper - c.risk_mean) >= -1e-12)  # non-decreasing premium
    assert c.attack_weights == {"loss": 0.5, "shadow": 0.5}


def test_integral_risk_is_weighted_sum_of_attack_means():
    evs = random_problem(5)
    c = fit_curves(evs, attack_weights={"loss": 3, "shadow": 1}, smooth=False)
    np.testing.assert_allclose(c.risk_mean_raw,
                               0.75 * c.attack_risk_mean["loss"]
                               + 0.25 * c.attack_risk_mean["shadow"])


def test_single_attack_quantile_is_exact():
    evs = [Evaluation(e, {"loss": (int(500 + 20 * i), 1000)}, [0.6 + 0.02 * i])
           for i, e in enumerate(GRID)]
    c = fit_curves(evs, level=0.9, smooth=False)
    post = c.posteriors["loss"][4]
    assert c.risk_upper_raw[4] == pytest.approx(post.risk_quantile(0.95))


def test_w_risk_one_picks_smallest_eps_meeting_accuracy_floor():
    for seed in range(15):
        c = fit_curves(random_problem(seed), n_draws=500, seed=seed)
        floor = float(np.quantile(c.accuracy, 0.5))
        pol = make_policy(w_risk=1.0, min_accuracy=floor)
        d = decide(c, pol)
        expected = c.epsilons[np.flatnonzero(c.accuracy >= floor)[0]]
        assert d.mean_rule.epsilon == expected
        assert d.risk_averse.epsilon == expected


def test_w_util_one_picks_largest_eps():
    ev = simulator(acc_noise=0.0)  # strictly increasing accuracy
    c = fit_curves([ev(e) for e in GRID], n_draws=500)
    d = decide(c, make_policy(w_risk=0.0))
    assert d.mean_rule.epsilon == max(GRID) == d.risk_averse.epsilon
    # and nearly-1 weights behave the same
    assert decide(c, make_policy(w_risk=1e-9)).mean_rule.epsilon == max(GRID)


def test_tighter_caps_never_choose_larger_eps():
    caps = [1.0, 0.5, 0.3, 0.2, 0.15, 0.1, 0.05, 0.02, 0.0]
    for seed in range(15):
        c = fit_curves(random_problem(seed), n_draws=500, seed=seed)
        for w in (0.1, 0.5, 0.9):
            for rule in ("mean_rule", "risk_averse"):
                prev = np.inf
                for cap in caps:
                    e = getattr(decide(c, make_policy(w_risk=w, max_risk=cap)), rule).epsilon
                    e = -np.inf if e is None else e
                    assert e <= prev
                    prev = e


def test_risk_averse_never_larger_than_mean_rule():
    for seed in range(25):
        c = fit_curves(random_problem(seed), n_draws=500, seed=seed)
        for w in (0.05, 0.3, 0.5, 0.7, 0.95):
            for cap in (None, 0.3, 0.1):
                d = decide(c, make_policy(w_risk=w, max_risk=cap))
                if d.mean_rule.epsilon is None:
                    assert d.risk_averse.epsilon is None
                elif d.risk_averse.epsilon is not None:
                    assert d.risk_averse.epsilon <= d.mean_rule.epsilon


def test_no_acceptable_epsilon():
    ev = simulator()
    c = fit_curves([ev(e) for e in GRID], n_draws=500)
    d = decide(c, make_policy("medical", max_risk=0.001))
    assert d.chosen_epsilon is None
    assert "no epsilon on this grid is acceptable" in d.risk_averse.reason
    d = decide(c, make_policy("recommender", min_accuracy=0.99))
    assert d.mean_rule.epsilon is None and "accuracy floor" in d.mean_rule.reason
    # each constraint satisfiable alone, not together
    d = decide(c, make_policy(w_risk=0.5, max_risk=0.02, min_accuracy=0.8))
    assert d.mean_rule.epsilon is None


def test_policies_order_and_documented():
    ev = simulator()
    c = fit_curves([ev(e) for e in GRID], n_draws=1000)
    chosen = {p: decide(c, make_policy(p)).chosen_epsilon for p in POLICIES}
    assert chosen["medical"] <= chosen["finance"] <= chosen["recommender"]
    assert all(len(p.why) > 40 for p in POLICIES.values())


def test_pareto_front():
    r = np.array([0.0, 0.1, 0.1, 0.3, 0.2])
    u = np.array([0.5, 0.3, 0.4, 0.1, 0.2])
    assert list(pareto_front(r, u)) == [0, 1, 3, 4]


def test_utility_terms():
    acc = np.array([0.5, 0.7, 0.8])
    np.testing.assert_allclose(utility_loss(acc), [0.5, 0.3, 0.2])
    rel = utility_loss(acc, config=UtilityConfig(baseline_accuracy=0.8))
    np.testing.assert_allclose(rel, [0.375, 0.125, 0.0])
    u = utility_loss(acc, std=np.array([0.0, 0.05, 0.0]), seconds=np.array([1, 1, 2]),
                     config=UtilityConfig(w_stability=1.0, w_cost=1.0))
    np.testing.assert_allclose(u, [(0.5 + 0 + 0.5) / 3, (0.3 + 0.1 + 0.5) / 3, (0.2 + 1) / 3])


def test_prior_sensitivity_rows():
    ev = simulator(trials=200)
    rows = prior_sensitivity([ev(e) for e in GRID], make_policy("finance"), n_draws=500)
    assert [r["prior"] for r in rows] == ["uniform", "jeffreys", "chance", "pessimistic"]
    assert all(r["risk_averse_epsilon"] is None or r["risk_averse_epsilon"] in GRID for r in rows)


@pytest.mark.parametrize("grid", [[0.5, 0, 1], [-1, 2], [1, float("inf")], [], [1, 1]])
def test_bad_grid(grid):
    with pytest.raises(InvalidInputError, match="epsilons"):
        check_grid(grid)


def test_bad_weights_and_policy():
    with pytest.raises(InvalidInputError, match="positive"):
        normalise_weights({"a": 0, "b": 0}, "weights")
    with pytest.raises(InvalidInputError, match="weights"):
        make_policy(w_risk=0.0, w_util=0.0)
    with pytest.raises(InvalidInputError, match=r"--w-risk must be a weight in \[0, 1\]"):
        make_policy(w_risk=-1.0, w_util=2.0)
    with pytest.raises(InvalidInputError, match=r"--w-risk must be a weight in \[0, 1\]"):
        make_policy(w_risk=2.0)  # was silently clamped to w_util = 0
    with pytest.raises(InvalidInputError, match="policy"):
        make_policy("banking")
    with pytest.raises(InvalidInputError, match="level"):
        make_policy("medical", level=0.2)


def test_all_attacks_failed():
    evs = [Evaluation(1.0, {}, [0.7]), Evaluation(2.0, {"loss": (5, 10)}, [0.8])]
    with pytest.raises(InvalidInputError, match="attacks: no attack"):
        fit_curves(evs)
    c = fit_curves([Evaluation(1.0, {"loss": (5, 10), "lira": (6, 10)}, [0.7]),
                    Evaluation(2.0, {"loss": (6, 10)}, [0.8])])
    assert c.attacks == ["loss"] and c.dropped_attacks == ["lira"]
