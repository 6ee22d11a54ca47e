"""Mechanisms: grid-valued outputs, the grid accounting, CSPRNG default, seeded notes,
exponential-mechanism distributions, randomized response, confidence intervals, errors.
(Privacy loss itself: test_privacy_loss.py.)"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from privlab.core.calibration import rho_for_target
from privlab.core.guarantee import PrivacyGuarantee
from privlab.core.mechanisms import (
    exponential_mechanism,
    gaussian_mechanism,
    geometric_mechanism,
    laplace_mechanism,
    randomized_response,
    report_noisy_max,
)
from privlab.core.release import Release
from privlab.core.rng import SEEDED_NOTE, is_seeded, make_rng, secure_generator
from privlab.core.samplers import round_to_grid
from privlab.errors import InvalidInputError

FAST = settings(max_examples=60, deadline=None)
finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
sens_st = st.floats(min_value=1e-3, max_value=1e4, allow_nan=False)
eps_st = st.floats(min_value=0.01, max_value=20.0)


def on_grid(value, g: float) -> bool:
    """Exact check: g is a power of two, so value / g is computed without rounding."""
    assert math.frexp(g)[0] == 0.5, f"granularity {g} is not a power of two"
    ratio = np.asarray(value, dtype=np.float64) / g
    return bool(np.all(ratio == np.rint(ratio)))


# ------------------------------------------------------------------------------ grids


@FAST
@given(st.lists(finite, min_size=1, max_size=8), sens_st, eps_st, st.integers(0, 2**32))
def test_laplace_values_lie_on_the_grid(values, sens, eps, seed) -> None:
    rel = laplace_mechanism(values, sens, eps, rng=seed)
    assert on_grid(rel.value, rel.granularity)
    scalar = laplace_mechanism(values[0], sens, eps, rng=seed)
    assert isinstance(scalar.value, float) and on_grid(scalar.value, scalar.granularity)


@FAST
@given(st.lists(finite, min_size=1, max_size=8), sens_st, eps_st,
       st.floats(min_value=1e-6, max_value=0.5), st.integers(0, 2**32))
def test_gaussian_values_lie_on_the_grid(values, sens, eps, delta, seed) -> None:
    rel = gaussian_mechanism(values, sens, eps, delta, rng=seed)
    assert on_grid(rel.value, rel.granularity)
    scalar = gaussian_mechanism(values[0], sens, eps, delta, rng=seed)
    assert on_grid(scalar.value, scalar.granularity)


@FAST
@given(st.lists(st.integers(-10**6, 10**6), min_size=1, max_size=8),
       st.integers(1, 1000), eps_st, st.integers(0, 2**32))
def test_geometric_values_are_integers(values, sens, eps, seed) -> None:
    rel = geometric_mechanism(values, sens, eps, rng=seed)
    assert rel.granularity == 1.0
    assert np.asarray(rel.value).dtype == np.int64


@FAST
@given(st.lists(finite, min_size=1, max_size=8), sens_st, eps_st,
       st.integers(-12, 12), st.integers(0, 2**32))
def test_explicit_power_of_two_granularity(values, sens, eps, k, seed) -> None:
    g = math.ldexp(1.0, k)
    try:
        rel = laplace_mechanism(values, sens, eps, rng=seed, granularity=g)
    except InvalidInputError as exc:  # only when the grid is far too fine for the noise
        assert "coarser granularity" in str(exc)
        return
    assert rel.granularity == g and on_grid(rel.value, g)


# ------------------------------------------------------------------ grid accounting


@FAST
@given(finite, st.floats(min_value=0, max_value=1), sens_st, st.integers(-12, 6),
       st.booleans())
def test_grid_sensitivity_covers_rounding(x, frac, sens, k, use_default) -> None:
    """|round(x) - round(y)| for |x - y| <= D never exceeds the sensitivity the noise is
    calibrated to (noise scale * eps / g grid steps)."""
    y = x + frac * sens
    g = None if use_default else math.ldexp(1.0, k)
    try:
        rel = laplace_mechanism(x, sens, 1.0, rng=0, granularity=g)
    except InvalidInputError:
        return
    steps = int(abs(round_to_grid(x, rel.granularity) - round_to_grid(y, rel.granularity)))
    calibrated = rel.noise["scale"] / rel.granularity  # eps = 1
    assert steps <= calibrated + 1e-9
    if use_default:  # default grid: rounding costs at most ~0.1% more noise
        assert calibrated * rel.granularity <= sens * (1 + 1 / 1024) * (1 + 1e-12)


def test_integer_grid_sensitivity_covers_rounding() -> None:
    """Integer values on an integer grid g = 2^k: 1 and 3 round to 0 and 4 on 2Z, so the
    grid sensitivity must be floor(D/g) + 1, not ceil(D/g) (a bug found in review).
    Exhaustive over small cases, where the ties that break ceil(D/g) live."""
    for k in range(0, 4):
        g = float(2**k)
        for d in range(1, 7):
            rel = laplace_mechanism(0, d, 1.0, rng=0, integer_valued=True, granularity=g)
            calibrated = rel.noise["scale"] / g
            worst = max(int(abs(round_to_grid(x, g) - round_to_grid(x + s, g)))
                        for x in range(-16, 17) for s in range(d + 1))
            assert worst <= calibrated


def test_integer_values_on_unit_grid_pay_exactly_d() -> None:
    rel = geometric_mechanism(7, 3, 0.5, rng=0)
    assert rel.noise["scale"] == pytest.approx(3 / 0.5)
    rel = laplace_mechanism(3.0, 2, 1.0, rng=0, integer_valued=True, granularity=2.0)
    assert rel.noise["scale"] == pytest.approx(2 * 2.0)  # floor(2/2) + 1 = 2 steps of 2


def test_integer_valued_needs_integers() -> None:
    # 0.5 and 1.5 differ by 1 but round to 0 and 2: charging D = 1 would be wrong
    for mech in (lambda v: laplace_mechanism(v, 1, 1.0, integer_valued=True),
                 lambda v: gaussian_mechanism(v, 1, 1.0, 1e-6, integer_valued=True)):
        with pytest.raises(InvalidInputError, match="not an integer"):
            mech([1.0, 0.5])
        mech([1.0, 2.0])


def test_vector_grid_pays_one_step_per_changed_coordinate() -> None:
    rel = laplace_mechanism(np.zeros(4), 1.0, 1.0, rng=0)
    assert rel.granularity == 2.0**-12  # 2^floor(log2(1 / (1024 * 4)))
    assert rel.noise["scale"] == pytest.approx((4096 + 4) * 2.0**-12)
    one = laplace_mechanism(np.zeros(4), 1.0, 1.0, rng=0, changed_coordinates=1)
    assert one.granularity == 2.0**-10
    assert one.noise["scale"] == pytest.approx(1025 * 2.0**-10)
    with pytest.raises(InvalidInputError, match="changed_coordinates"):
        laplace_mechanism(np.zeros(4), 1.0, 1.0, rng=0, changed_coordinates=0)


def test_multivariate_gaussian_meets_its_zcdp_budget() -> None:
    eps, delta = 1.0, 1e-6
    rel = gaussian_mechanism(np.zeros(5), 2.0, eps, delta, rng=0)
    g = rel.granularity
    sigma_steps = rel.noise["scale"] / g
    l2_steps = 2.0 / g + math.sqrt(5)
    rho = l2_steps**2 / (2 * sigma_steps**2)
    assert rho <= rho_for_target(eps, delta) * (1 + 1e-12)
    assert "zCDP" in rel.guarantee.accountant


def test_multivariate_gaussian_refines_the_grid_when_noise_is_small() -> None:
    # integer counts, L2 sensitivity 1, 3 cells: sigma ~ 4.5 < 16 unit steps, so the grid is
    # refined (integers stay exactly on it) instead of failing
    rel = gaussian_mechanism([3, 5, 8], 1, 1.0, 1e-6, integer_valued=True, rng=1)
    g = rel.granularity
    assert g < 1 and on_grid(rel.value, g)
    sigma_steps = rel.noise["scale"] / g
    assert sigma_steps >= 16
    assert (1 / g) ** 2 / (2 * sigma_steps**2) <= rho_for_target(1.0, 1e-6) * (1 + 1e-12)
    with pytest.raises(InvalidInputError, match="granularity too coarse"):
        gaussian_mechanism([3, 5, 8], 1, 1.0, 1e-6, granularity=1.0)


def test_values_too_far_from_zero_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="coarser granularity"):
        laplace_mechanism(1e300, 1.0, 1.0, rng=0)


# ------------------------------------------------------------------- rng and notes


def test_default_rng_is_chacha20_csprng() -> None:
    from randomgen import ChaCha

    gen = make_rng(None)
    assert isinstance(gen.bit_generator, ChaCha)
    assert gen.bit_generator.state["state"]["rounds"] == 20
    # keyed from the OS: two generators do not agree
    assert not np.array_equal(make_rng(None).integers(0, 2**63, 4),
                              secure_generator().integers(0, 2**63, 4))
    assert not is_seeded(None)


def test_seeded_rng_is_reproducible_pcg64() -> None:
    a, b = make_rng(7), make_rng(7)
    assert isinstance(a.bit_generator, np.random.PCG64)
    assert a.integers(0, 100, 5).tolist() == b.integers(0, 100, 5).tolist()
    g = np.random.default_rng(1)
    assert make_rng(g) is g
    for bad in (-1, 1.5, "x", True):
        with pytest.raises(InvalidInputError):
            make_rng(bad)


RELEASES = {
    "laplace": lambda rng: laplace_mechanism(1.0, 1.0, 1.0, rng=rng),
    "gaussian": lambda rng: gaussian_mechanism(1.0, 1.0, 1.0, 1e-6, rng=rng),
    "geometric": lambda rng: geometric_mechanism(3, 1, 1.0, rng=rng),
    "exponential": lambda rng: exponential_mechanism(["a", "b"], [1, 2], 1, 1.0, rng=rng),
    "noisy_max": lambda rng: report_noisy_max([1, 2], 1, 1.0, rng=rng),
    "rr": lambda rng: randomized_response(["a"], ["a", "b"], 1.0, rng=rng),
}


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_seeded_releases_say_so_and_secure_ones_do_not(name: str) -> None:
    seeded = RELEASES[name](5)
    assert SEEDED_NOTE in seeded.guarantee.notes
    secure = RELEASES[name](None)
    assert SEEDED_NOTE not in secure.guarantee.notes
    assert secure.guarantee.is_dp and secure.guarantee.epsilon == 1.0


def test_release_to_dict_is_complete() -> None:
    d = laplace_mechanism([1.0, 2.0], 1.0, 0.5, rng=1).to_dict()
    assert set(d) >= {"value", "granularity", "noise", "confidence_interval_95", "guarantee"}
    assert isinstance(d["value"], list)
    assert d["guarantee"]["epsilon"] == 0.5 and d["guarantee"]["mechanism"].startswith("laplace")


# --------------------------------------------------------------- confidence intervals


@pytest.mark.parametrize("make", [
    lambda: laplace_mechanism(np.zeros(100_000), 1.0, 0.7, rng=3, changed_coordinates=1),
    lambda: geometric_mechanism(np.zeros(100_000, dtype=int), 1, 0.3, rng=3,
                                changed_coordinates=1),
    lambda: gaussian_mechanism(np.zeros(100_000), 1.0, 0.5, 1e-6, rng=3,
                               changed_coordinates=1),
])
def test_confidence_interval_covers_95_percent(make) -> None:
    rel: Release = make()
    w = rel.confidence_interval(0.95)
    inside = float(np.mean(np.abs(rel.value) <= w))
    assert inside >= 0.95 - 4 * math.sqrt(0.05 * 0.95 / 100_000)
    assert inside <= 0.975  # and it is not uselessly wide


def test_confidence_interval_for_huge_epsilon() -> None:
    rel = geometric_mechanism(3, 1, 2000.0, rng=0)  # exp(-2000) underflows
    assert rel.value == 3 and rel.confidence_interval() == 0.0
    assert rel.to_dict()["confidence_interval_95"] == 0.0


# ---------------------------------------------------------------- exponential mechanism


def test_gumbel_exponential_mechanism_samples_the_softmax() -> None:
    u = np.array([0.0, 1.0, 2.5, 3.0])
    eps = 1.2
    gen = np.random.default_rng(11)
    n = 6000
    picks = [exponential_mechanism(range(4), u, 1.0, eps, method="gumbel", rng=gen).value
             for _ in range(n)]
    w = np.exp(eps * u / 2)
    counts = np.bincount(picks, minlength=4)
    assert stats.chisquare(counts, n * w / w.sum()).pvalue > 1e-4


def test_permute_and_flip_distribution() -> None:
    # Two candidates: PF returns the best unless the worse one comes first and is accepted.
    u = np.array([0.0, 1.0])
    eps = 1.0
    p_worse = 0.5 * math.exp(eps * (0 - 1) / 2)
    gen = np.random.default_rng(12)
    n = 6000
    picks = [exponential_mechanism([0, 1], u, 1.0, eps, rng=gen).value for _ in range(n)]
    k = sum(1 for p in picks if p == 0)
    assert stats.binomtest(k, n, p_worse).pvalue > 1e-4


def test_exponential_mechanism_picks_the_best_at_high_epsilon() -> None:
    for method in ("permute_and_flip", "gumbel"):
        rel = exponential_mechanism(["x", "y", "z"], [1, 50, 3], 1, 5.0, method=method, rng=1)
        assert rel.value == "y" and rel.details["index"] == 1


@pytest.mark.parametrize("kwargs", [dict(scores=[]), dict(scores=[1, 2, 3]),
                                    dict(scores=[1, math.nan]), dict(method="nope")])
def test_exponential_mechanism_rejects_bad_input(kwargs) -> None:
    args = dict(candidates=["a", "b"], scores=[1, 2], sensitivity=1, epsilon=1.0, rng=0)
    args.update(kwargs)
    with pytest.raises(InvalidInputError):
        exponential_mechanism(**args)


def test_report_noisy_max_picks_the_best_at_high_epsilon() -> None:
    assert report_noisy_max([3.0, 10.0, 5.0], 1.0, 50.0, rng=0).value == 1
    with pytest.raises(InvalidInputError):
        report_noisy_max([], 1.0, 1.0)


# ---------------------------------------------------------------- randomized response


def test_randomized_response_rates_and_estimate() -> None:
    cats = ["a", "b", "c"]
    eps = 1.0
    truth = ["a"] * 60_000 + ["b"] * 30_000 + ["c"] * 10_000
    rel = randomized_response(truth, cats, eps, rng=4)
    p_keep = math.e / (math.e + 2)
    assert rel.details["p_keep"] == pytest.approx(p_keep)
    reported_a = sum(1 for v in rel.value if v == "a") / len(truth)
    expected_a = 0.6 * p_keep + 0.4 * (1 - p_keep) / 2
    assert reported_a == pytest.approx(expected_a, abs=4 * math.sqrt(0.25 / len(truth)))
    est = rel.details["estimated_frequencies"]
    assert est["a"] == pytest.approx(0.6, abs=0.02) and est["c"] == pytest.approx(0.1, abs=0.02)
    assert rel.guarantee.model == "local" and rel.guarantee.neighbouring == "replace_record"


def test_randomized_response_large_epsilon_does_not_overflow() -> None:
    rel = randomized_response(["a", "b"], ["a", "b"], 1000.0, rng=0)
    assert rel.value == ["a", "b"] and rel.details["p_keep"] == 1.0


def test_randomized_response_rejects_bad_input() -> None:
    with pytest.raises(InvalidInputError, match="categories"):
        randomized_response(["a"], ["a"], 1.0)
    with pytest.raises(InvalidInputError, match="not among"):
        randomized_response(["z"], ["a", "b"], 1.0)


# ------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("eps", [0.0, -1.0, math.nan, math.inf, "x", None])
def test_mechanisms_reject_bad_epsilon(eps) -> None:
    with pytest.raises(InvalidInputError, match="epsilon"):
        laplace_mechanism(1.0, 1.0, eps)


@pytest.mark.parametrize("delta", [0.0, -0.1, 1.0, math.nan])
def test_gaussian_rejects_bad_delta(delta) -> None:
    with pytest.raises(InvalidInputError, match="delta"):
        gaussian_mechanism(1.0, 1.0, 1.0, delta)


@pytest.mark.parametrize("sens", [0.0, -2.0, math.nan, math.inf, "x"])
def test_mechanisms_reject_bad_sensitivity(sens) -> None:
    with pytest.raises(InvalidInputError, match="sensitivity"):
        laplace_mechanism(1.0, sens, 1.0)


def test_geometric_rejects_fractions() -> None:
    with pytest.raises(InvalidInputError, match="integer sensitivity"):
        geometric_mechanism(3, 1.5, 1.0)
    with pytest.raises(InvalidInputError, match="integral"):
        geometric_mechanism([1.5], 1, 1.0)
    with pytest.raises(InvalidInputError, match="sensitivity"):
        geometric_mechanism(3, math.nan, 1.0)


def test_non_private_guarantee_is_labelled() -> None:
    g = PrivacyGuarantee.not_private("raw count", "no noise added")
    assert not g.is_dp and g.to_dict()["epsilon"] is None
    assert "NOT differentially private" in g.describe()
    with pytest.raises(InvalidInputError):
        PrivacyGuarantee(epsilon=1.0, neighbouring="none")


def test_gaussian_calibration_is_computed_once_per_parameters(monkeypatch) -> None:
    """The sigma root search runs once per (sensitivity, epsilon, delta, ...), not per draw:
    the gateway asks for the same calibration on every query."""
    import privlab.core.mechanisms as mech

    calls: list[tuple[int, float, float]] = []
    real = mech.discrete_gaussian_sigma

    def counting(sensitivity: int, epsilon: float, delta: float) -> float:
        calls.append((sensitivity, epsilon, delta))
        return real(sensitivity, epsilon, delta)

    monkeypatch.setattr(mech, "discrete_gaussian_sigma", counting)
    first = mech.gaussian_mechanism(3.0, 1.0, 0.8123, 1e-6, rng=1)
    second = mech.gaussian_mechanism(3.0, 1.0, 0.8123, 1e-6, rng=2)
    assert len(calls) == 1
    assert first.noise == second.noise  # the same calibration, stated the same way
    mech.gaussian_mechanism(3.0, 1.0, 0.8124, 1e-6, rng=1)  # other parameters: calibrated
    assert len(calls) == 2
    with pytest.raises(InvalidInputError):  # an unhashable argument is still refused clearly
        mech.gaussian_plan(1.0, [0.5], 1e-6)
