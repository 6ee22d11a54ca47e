"""Tests of privlab.core.accounting: composition, event accounting, DP-SGD calibration.

Reference values come from dp-accounting itself (PLDAccountant / RdpAccountant) computed
independently of privlab's fast paths, or from closed forms.
"""

from __future__ import annotations

import itertools
import math

import dp_accounting
import pytest
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant

from privlab.core import accounting as acc
from privlab.core.guarantee import PrivacyGuarantee
from privlab.errors import InvalidInputError

DELTA = 1e-5


def _g(eps: float, delta: float = 0.0, name: str = "m", **kw) -> PrivacyGuarantee:
    return PrivacyGuarantee(epsilon=eps, delta=delta, mechanism=name, **kw)


# ------------------------------------------------------------------ composition of guarantees


def test_sequential_sums_epsilon_and_delta():
    out = acc.sequential([_g(0.5, 1e-6, "a"), _g(1.25, 0.0, "b"), _g(0.25, 2e-6, "c")])
    assert out.epsilon == pytest.approx(2.0, abs=1e-15)
    assert out.delta == pytest.approx(3e-6, abs=1e-20)
    assert out.accountant.startswith("sequential composition")
    assert out.mechanism == "sequential(a, b, c)"


def test_parallel_takes_max_for_add_remove_and_two_largest_for_replace():
    parts = [_g(0.5, 1e-7), _g(2.0, 1e-6), _g(1.0, 0.0)]
    out = acc.parallel(parts)
    assert (out.epsilon, out.delta) == (2.0, 1e-6)
    replace = [_g(e, d, neighbouring="replace_record") for e, d in [(0.5, 1e-7), (2.0, 1e-6),
                                                                       (1.0, 0.0)]]
    out = acc.parallel(replace)
    assert out.epsilon == pytest.approx(3.0)
    assert out.delta == pytest.approx(1.1e-6)


def test_composition_propagates_non_private_parts():
    bad = PrivacyGuarantee.not_private("raw count", "no noise")
    out = acc.sequential([_g(1.0), bad])
    assert not out.is_dp and math.isinf(out.epsilon)
    assert any("NOT differentially private" in n for n in out.notes)
    assert not acc.parallel([bad, _g(1.0)]).is_dp


@pytest.mark.parametrize(
    "items, fragment",
    [
        ([], "at least one"),
        ([_g(1.0), _g(1.0, neighbouring="replace_record")], "neighbouring"),
        ([_g(1.0), _g(1.0, model="local", neighbouring="location_event")], "central and local"),
        ([_g(1.0), 3.0], "PrivacyGuarantee"),
    ],
)
def test_composition_rejects_mixed_inputs(items, fragment):
    with pytest.raises(InvalidInputError, match=fragment):
        acc.sequential(items)


def test_advanced_composition_formula():
    eps, delta, k, dp = 0.1, 1e-7, 100, 1e-6
    out = acc.advanced_composition(eps, delta, k, dp)
    expected = math.sqrt(2 * k * math.log(1 / dp)) * eps + k * eps * (math.exp(eps) - 1)
    assert out.epsilon == pytest.approx(expected, rel=1e-12)
    assert out.delta == pytest.approx(k * delta + dp, rel=1e-12)
    assert "Dwork-Rothblum-Vadhan" in out.accountant


def _brute_force_delta(eps: float, delta: float, k: int, eps_prime: float) -> float:
    """Hockey-stick divergence of the k-fold 4-outcome dominating pair, by enumeration."""
    e = math.exp(eps)
    p = [delta, (1 - delta) * e / (1 + e), (1 - delta) / (1 + e), 0.0]
    q = [0.0, (1 - delta) / (1 + e), (1 - delta) * e / (1 + e), delta]
    total = 0.0
    for outcome in itertools.product(range(4), repeat=k):
        pp = math.prod(p[i] for i in outcome)
        qq = math.prod(q[i] for i in outcome)
        total += max(pp - math.exp(eps_prime) * qq, 0.0)
    return total


@pytest.mark.parametrize("eps, delta, k", [(0.5, 0.0, 3), (1.0, 1e-3, 4), (0.3, 1e-4, 5)])
def test_optimal_composition_matches_enumeration(eps, delta, k):
    dp = 1e-3
    out = acc.optimal_homogeneous_composition(eps, delta, k, dp)
    target = k * delta + dp
    # valid at the returned epsilon, violated just below it: it is the smallest
    assert _brute_force_delta(eps, delta, k, out.epsilon) <= target * (1 + 1e-9)
    assert _brute_force_delta(eps, delta, k, out.epsilon * (1 - 1e-6)) > target
    assert out.delta == pytest.approx(target)


def test_optimal_composition_beats_advanced_and_basic():
    for eps, k in [(0.01, 1000), (0.1, 100), (1.0, 10)]:
        opt = acc.optimal_homogeneous_composition(eps, 0.0, k, 1e-6)
        adv = acc.advanced_composition(eps, 0.0, k, 1e-6)
        assert opt.epsilon <= min(adv.epsilon, k * eps) + 1e-12


def test_optimal_composition_single_step_closed_form():
    eps, dp = 1.0, 1e-3
    out = acc.optimal_homogeneous_composition(eps, 0.0, 1, dp)
    # delta_RR(e') = (e^eps - e^e') / (1 + e^eps)  =>  e' = log(e^eps - dp (1 + e^eps))
    assert out.epsilon == pytest.approx(math.log(math.exp(eps) - dp * (1 + math.exp(eps))),
                                        rel=1e-9)


@pytest.mark.parametrize(
    "args, fragment",
    [
        ((0.0, 0.0, 10, 1e-6), "epsilon"),
        ((float("nan"), 0.0, 10, 1e-6), "epsilon"),
        ((1.0, 1.0, 10, 1e-6), "delta"),
        ((1.0, 0.0, 0, 1e-6), "k must be"),
        ((1.0, 0.0, 2.5, 1e-6), "k must be"),
        ((1.0, 0.0, 10, 0.0), "delta_prime"),
        ((1.0, 0.2, 10, 1e-6), "k\\*delta"),
    ],
)
def test_homogeneous_composition_rejects_bad_input(args, fragment):
    for fn in (acc.advanced_composition, acc.optimal_homogeneous_composition):
        with pytest.raises(InvalidInputError, match=fragment):
            fn(*args)


# ------------------------------------------------------------------ fast paths == dp-accounting


@pytest.mark.parametrize("sigma, q, steps, interval", [(1.0, 0.01, 3000, 1e-3),
                                                       (0.7, 0.2, 50, 2e-3), (2.0, 1.0, 5, 1e-3)])
def test_fast_pld_matches_pld_accountant(sigma, q, steps, interval):
    event = acc.dpsgd_event(sigma, q, steps)
    ref = PLDAccountant(value_discretization_interval=interval)
    ref.compose(event)
    mine = acc.epsilon_for(event, DELTA, value_discretization_interval=interval)
    assert mine == pytest.approx(ref.get_epsilon(DELTA), rel=1e-8)
    d = acc.delta_for(event, 1.0, value_discretization_interval=interval)
    assert d == pytest.approx(ref.get_delta(1.0), rel=1e-8)


# ------------------------------------------------------------------ event accounting


def test_pld_agrees_with_fine_dp_accounting():
    sigma, q, steps = 1.1, 0.02, 1000
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)
    ref = PLDAccountant(value_discretization_interval=1e-4)
    ref.compose(event)
    fine = ref.get_epsilon(DELTA)
    ours = acc.dpsgd_epsilon(sigma, q, steps, DELTA)
    assert abs(ours - fine) / fine < 0.01
    assert ours >= fine * (1 - 1e-3)  # a coarser pessimistic grid does not undercut


def test_rdp_matches_dp_accounting_and_pld_is_tighter():
    for sigma, q, steps in [(1.0, 0.01, 10000), (0.8, 0.05, 500), (3.0, 1.0, 20)]:
        event = acc.dpsgd_event(sigma, q, steps)
        rdp_ref = RdpAccountant()
        rdp_ref.compose(event)
        rdp = acc.epsilon_for(event, DELTA, "rdp")
        assert rdp == pytest.approx(rdp_ref.get_epsilon(DELTA), rel=1e-12)
        assert acc.epsilon_for(event, DELTA, "pld") <= rdp


def test_epsilon_monotone_in_steps_and_sigma():
    by_steps = [acc.dpsgd_epsilon(1.0, 0.01, t, DELTA) for t in (100, 1000, 5000)]
    assert by_steps == sorted(by_steps) and len(set(by_steps)) == 3
    by_sigma = [acc.dpsgd_epsilon(s, 0.01, 1000, DELTA) for s in (0.8, 1.0, 1.5, 3.0)]
    assert by_sigma == sorted(by_sigma, reverse=True) and len(set(by_sigma)) == 4


def test_composed_event_of_laplace_and_gaussian():
    lap = dp_accounting.LaplaceDpEvent(1.0)  # scale 1, sensitivity 1: (1, 0)-DP
    two = dp_accounting.ComposedDpEvent([lap, lap])
    assert acc.epsilon_for(two, 0.0) == pytest.approx(2.0, rel=1e-3)
    both = dp_accounting.ComposedDpEvent([lap, dp_accounting.GaussianDpEvent(2.0)])
    e_both = acc.epsilon_for(both, DELTA)
    assert acc.epsilon_for(dp_accounting.GaussianDpEvent(2.0), DELTA) < e_both < 1.0 + 2.5
    assert acc.delta_for(both, e_both) <= DELTA * 1.01


def test_non_private_event_has_infinite_epsilon():
    event = dp_accounting.ComposedDpEvent([dp_accounting.NonPrivateDpEvent(),
                                           dp_accounting.GaussianDpEvent(1.0)])
    assert math.isinf(acc.epsilon_for(event, DELTA))


def test_unsupported_event_is_invalid_input():
    with pytest.raises(InvalidInputError, match="cannot account UnsupportedDpEvent"):
        acc.epsilon_for(dp_accounting.UnsupportedDpEvent(), DELTA)


# ------------------------------------------------------------------ DP-SGD calibration


def test_calibration_round_trip_default_grid():
    q, steps, target = 0.01, 10000, 3.0
    cal = acc.calibrate_dpsgd(target, DELTA, q, steps)
    sigma = cal.noise_multiplier
    assert sigma == acc.calibrate_noise_multiplier(target, DELTA, q, steps)
    assert acc.dpsgd_epsilon(sigma, q, steps, DELTA) <= target
    assert acc.dpsgd_epsilon(sigma * (1 - cal.rel_tol), q, steps, DELTA) > target
    on_grid = acc.dpsgd_epsilon(sigma * (1 - cal.rel_tol), q, steps, DELTA,
                                value_discretization_interval=cal.value_discretization_interval)
    assert on_grid > target
    assert cal.epsilon <= target


@pytest.mark.parametrize("accountant, interval", [("pld", 2e-3), ("rdp", None)])
def test_calibration_round_trip_fixed_accountant(accountant, interval):
    q, steps, target = 0.05, 300, 2.0
    cal = acc.calibrate_dpsgd(target, DELTA, q, steps, accountant,
                              value_discretization_interval=interval)
    kw = {"value_discretization_interval": interval} if interval else {}
    sigma = cal.noise_multiplier
    assert acc.dpsgd_epsilon(sigma, q, steps, DELTA, accountant, **kw) <= target
    assert acc.dpsgd_epsilon(sigma * (1 - cal.rel_tol), q, steps, DELTA, accountant, **kw) > target


def test_rdp_calibration_needs_more_noise_than_pld():
    pld = acc.calibrate_noise_multiplier(2.0, DELTA, 0.05, 300)
    rdp = acc.calibrate_noise_multiplier(2.0, DELTA, 0.05, 300, "rdp")
    assert rdp > pld


def test_guarantee_for_dpsgd_names_the_accountant():
    g = acc.guarantee_for_dpsgd(1.0, 0.01, 1000, DELTA)
    assert g.is_dp and g.neighbouring == "add_remove_record" and g.delta == DELTA
    assert g.accountant.startswith("PLD (dp-accounting")
    assert "value_discretization_interval=" in g.accountant
    assert g.epsilon == acc.dpsgd_epsilon(1.0, 0.01, 1000, DELTA)
    r = acc.guarantee_for_dpsgd(1.0, 0.01, 1000, DELTA, "rdp")
    assert r.accountant.startswith("RDP") and r.epsilon >= g.epsilon


def test_replace_one_neighbouring_uses_library_path():
    add = acc.dpsgd_epsilon(1.5, 0.1, 20, DELTA, value_discretization_interval=1e-3)
    rep = acc.dpsgd_epsilon(1.5, 0.1, 20, DELTA, neighbouring="replace_record",
                            value_discretization_interval=1e-3)
    ref = PLDAccountant(dp_accounting.NeighboringRelation.REPLACE_ONE, 1e-3)
    ref.compose(acc.dpsgd_event(1.5, 0.1, 20))
    assert rep == pytest.approx(ref.get_epsilon(DELTA), rel=1e-12)
    assert rep > add


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"target_epsilon": 0.0}, "target_epsilon"),
        ({"target_epsilon": float("nan")}, "target_epsilon"),
        ({"delta": 1.0}, "delta must be in"),
        ({"delta": -1e-5}, "delta must be in"),
        ({"delta": 0.0}, "delta must be > 0"),
        ({"sample_rate": 0.0}, "sample_rate"),
        ({"sample_rate": 1.5}, "sample_rate"),
        ({"sample_rate": float("nan")}, "sample_rate"),
        ({"steps": 0}, "steps"),
        ({"steps": 10.5}, "steps"),
        ({"accountant": "moments"}, "accountant"),
        ({"neighbouring": "user_day"}, "neighbouring"),
    ],
)
def test_calibration_rejects_bad_input(kwargs, fragment):
    args = {"target_epsilon": 1.0, "delta": DELTA, "sample_rate": 0.01, "steps": 100} | kwargs
    with pytest.raises(InvalidInputError, match=fragment) as info:
        acc.calibrate_noise_multiplier(**args)
    assert "\n" not in str(info.value)


def test_unreachable_target_is_invalid_input():
    with pytest.raises(InvalidInputError, match="unreachable"):
        acc.calibrate_noise_multiplier(1e-4, DELTA, 1.0, 1_000_000)


@pytest.mark.parametrize(
    "call, fragment",
    [
        (lambda: acc.dpsgd_event(0.0, 0.01, 10), "noise_multiplier"),
        (lambda: acc.dpsgd_event(float("inf"), 0.01, 10), "noise_multiplier"),
        (lambda: acc.dpsgd_event(1.0, 0.01, 0), "steps"),
        (lambda: acc.dpsgd_event(1.0, -0.1, 10), "sample_rate"),
        (lambda: acc.dpsgd_epsilon(1.0, 0.01, 10, 1.5), "delta"),
        (lambda: acc.dpsgd_epsilon(1.0, 0.01, 10, float("nan")), "delta"),
        (lambda: acc.delta_for(acc.dpsgd_event(1.0, 0.01, 10), -1.0), "epsilon"),
        (lambda: acc.epsilon_for("not an event", DELTA), "DpEvent"),
        (lambda: acc.epsilon_for(acc.dpsgd_event(1.0, 0.01, 10), DELTA,
                                 value_discretization_interval=0.0), "value_discretization"),
        (lambda: acc.guarantee_for_dpsgd(1.0, 0.01, 10, 0.0), "delta must be > 0"),
    ],
)
def test_event_functions_reject_bad_input(call, fragment):
    with pytest.raises(InvalidInputError, match=fragment):
        call()
