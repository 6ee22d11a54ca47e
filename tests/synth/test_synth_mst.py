"""MST: accounting of every release, utility with a known structure, bad input, copies."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from synth_schemas import adult_any_missing, types_schema

from privlab.core.calibration import rho_for_target, zcdp_to_approx_dp
from privlab.core.samplers import sampler_delta
from privlab.errors import InvalidInputError
from privlab.schema import Schema
from privlab.synth import NOT_AVAILABLE, MSTSynthesizer, make_synthesizer
from privlab.synth.budget import ZCDPAccount, reserve_for
from privlab.synth.evaluate import fidelity, rare_copies


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
def test_guarantee_accounts_every_step_including_domain(adult_small, epsilon) -> None:
    delta = 1e-6
    # column types declared, categories and bounds estimated privately
    s = MSTSynthesizer(schema="adult", estimate_domain="all", rng=1).fit(adult_small, epsilon,
                                                                          delta)
    g = s.guarantee
    steps = {b["step"].split(" ")[0] for b in s.budget_lines()}
    assert {"numeric", "categories", "1-way", "spanning-tree", "2-way"} <= steps
    rho = sum(b["rho"] for b in s.budget_lines())
    delta_thr = sum(b["delta"] for b in s.budget_lines())
    assert delta_thr == pytest.approx(0.1 * delta)
    # the whole budget is used and not exceeded: rho matches the target conversion
    # the sampler's reserve comes out of delta before the zCDP conversion (synth/budget.py)
    delta_z = delta - delta_thr - s.account.sampler.delta
    assert rho == pytest.approx(rho_for_target(epsilon, delta_z), rel=1e-9)
    assert g.epsilon == pytest.approx(zcdp_to_approx_dp(rho, delta_z), rel=1e-9)
    assert g.epsilon <= epsilon and g.epsilon > 0.999 * epsilon
    assert g.delta == pytest.approx(delta) and g.is_dp
    assert any("seeded" in n for n in g.notes)


def test_noise_scales_follow_the_budget_split(adult_small) -> None:
    s = MSTSynthesizer(schema=adult_any_missing(), rng=2).fit(adult_small, 1.0, 1e-6)
    d = len(s.domain)
    # declared domain: nothing spent before MST (the sampler's reserve comes out of delta)
    rho = rho_for_target(1.0, 1e-6 - s.account.sampler.delta)
    assert [b["step"].split(" ")[0] for b in s.budget_lines()] == [
        "1-way", "spanning-tree", "2-way"]
    assert s.sigmas["one_way"] == pytest.approx(math.sqrt(d / (2 * rho / 3)))
    assert s.sigmas["two_way"] == pytest.approx(math.sqrt((d - 1) / (2 * rho / 3)))
    assert len(s.edges) == d - 1


def test_guarantee_charges_the_planned_reserve_and_refuses_to_overrun_it() -> None:
    """The guarantee charges the reserve planned from public facts (never the draws a run
    happened to make), states the planned rho's epsilon, and a fit that spent more than it
    planned is a bug (RuntimeError), not a larger delta."""
    cap = rho_for_target(1.0, 1e-6)
    acct = ZCDPAccount(sampler=reserve_for(1.0, 1e-6, 10), rho_cap=cap)
    acct.spend("counts", 0.3 * cap, vectors=4)
    acct.spend("selection", 0.3 * cap, vectors=0)
    acct.spend("more counts", 0.3 * cap, delta=1e-7, vectors=6)
    g = acct.guarantee(1e-6, "test")
    reserve = sampler_delta(1.0, 10)
    assert acct.sampler.delta == reserve and acct.shifted == 10
    assert g.delta == math.fsum([1e-6, 1e-7, reserve])
    assert g.epsilon == zcdp_to_approx_dp(cap, 1e-6)  # the planned rho, not the 0.9 x spent
    assert any(f"{reserve:.3g}" in n and "sampler" in n and "x 10," in n for n in g.notes)
    acct.spend("one vector too many", 0.0, vectors=1)
    with pytest.raises(RuntimeError, match="above its plan"):
        acct.guarantee(1e-6, "test")


def test_a_person_shifts_one_draw_per_vector_per_row() -> None:
    """With M rows per person a step's shifted draws are M x its vectors, as its rho is
    M^2 x the per-row rho."""
    acct = ZCDPAccount(group=3)
    acct.spend("marginals", 0.01, vectors=5)
    assert acct.shifted == 15 and acct.rho == pytest.approx(0.09)


def test_mst_bound_counts_its_vectors_and_stays_within_the_requested_delta(adult_small) -> None:
    s = MSTSynthesizer(schema=adult_any_missing(), rng=2).fit(adult_small, 1.0, 1e-6)
    d = len(s.domain)
    # d 1-way marginals and d - 1 tree edges; the bound is known before any row is read
    assert s.account.shifted == s.account.sampler.bound == 2 * d - 1
    assert s.sampler_bound(s.public_plans()) == 2 * d - 1
    assert s.account.sampler.delta == sampler_delta(1.0, 2 * d - 1)
    assert s.guarantee.delta <= 1e-6 and s.guarantee.delta == pytest.approx(1e-6, rel=1e-12)


def _structured(n: int, seed: int) -> pd.DataFrame:
    """a -> b is a noisy copy (90%), c independent: MST must find the a-b edge."""
    gen = np.random.default_rng(seed)
    a = gen.integers(0, 4, n)
    b = np.where(gen.random(n) < 0.9, a, gen.integers(0, 4, n))
    c = gen.integers(0, 3, n)
    return pd.DataFrame({"a": [f"a{v}" for v in a], "b": [f"b{v}" for v in b],
                         "c": [f"c{v}" for v in c]})


def test_mst_recovers_a_strong_pairwise_dependence() -> None:
    frame = _structured(5000, 0)
    schema = {"columns": {k: {"type": "categorical", "categories": sorted(frame[k].unique())}
                          for k in frame}}
    s = MSTSynthesizer(schema=schema, rng=5).fit(frame, 2.0, 1e-6)
    assert ("a", "b") in s.edges or ("b", "a") in s.edges
    out = s.sample(20000)
    f = fidelity(frame, out)
    # 5000 rows, sigma ~ 7 per cell on 16 pair cells (noise TVD ~ 0.02) plus sampling error
    assert f["tvd_2way_max"] < 0.06
    agree = (out["a"].str[1] == out["b"].str[1]).mean()
    assert abs(agree - (frame["a"].str[1] == frame["b"].str[1]).mean()) < 0.03


def test_non_private_baseline_is_labelled_and_warns(adult_small) -> None:
    s = MSTSynthesizer(schema=adult_any_missing(), rng=0).fit(adult_small, None)
    assert not s.guarantee.is_dp and s.guarantee.epsilon == math.inf
    assert any("NOT differentially private" in w for w in s.warnings)
    assert s.budget_lines() == []


def test_epsilon_too_small_for_the_marginals_is_refused(adult_small) -> None:
    with pytest.raises(InvalidInputError, match="epsilon is too small") as err:
        MSTSynthesizer(schema=adult_any_missing(), rng=0).fit(adult_small.head(300), 0.05)
    assert "raise --epsilon to about" in str(err.value)
    assert "\n" not in str(err.value)


def test_bad_parameters() -> None:
    frame = _structured(100, 1)
    types = types_schema(dict.fromkeys(frame, "categorical"))
    with pytest.raises(InvalidInputError, match="delta must be > 0"):
        MSTSynthesizer(schema=types, estimate_domain="all").fit(frame, 1.0, 0.0)
    with pytest.raises(InvalidInputError, match="epsilon"):
        MSTSynthesizer(schema=types, estimate_domain="all").fit(frame, -1.0)
    with pytest.raises(InvalidInputError, match="fit"):
        MSTSynthesizer(schema=types, estimate_domain="all").sample(10)
    with pytest.raises(InvalidInputError, match="no rows"):
        MSTSynthesizer(schema=types, estimate_domain="all").fit(frame.head(0), 1.0)
    with pytest.raises(InvalidInputError, match="privlab schema draft"):
        MSTSynthesizer().fit(frame, 1.0)
    with pytest.raises(InvalidInputError, match="--estimate-domain names"):
        MSTSynthesizer(schema=types, estimate_domain="a,nope")
    with pytest.raises(InvalidInputError, match="--on-invalid"):
        MSTSynthesizer(schema=types, on_invalid="ignore")
    s = MSTSynthesizer(schema=types, estimate_domain="all", rng=0).fit(frame, 8.0)
    with pytest.raises(InvalidInputError, match="rows"):
        s.sample(0)
    with pytest.raises(InvalidInputError, match="--method must be one of aim, mst"):
        make_synthesizer("gan")
    for method, reason in NOT_AVAILABLE.items():
        with pytest.raises(InvalidInputError, match="not available"):
            make_synthesizer(method)
        assert "use --method" in reason


def test_single_column_table() -> None:
    frame = pd.DataFrame({"x": ["u", "v", "v", "w"] * 500})
    s = MSTSynthesizer(schema={"columns": {"x": {"type": "categorical",
                                                 "categories": ["u", "v", "w"]}}},
                       rng=0).fit(frame, 1.0)
    assert s.edges == [] and [b["step"].split(" ")[0] for b in s.budget_lines()] == ["1-way"]
    share = (s.sample(4000)["x"] == "v").mean()
    assert abs(share - 0.5) < 0.05


def _adult_no_weight(adult: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, Schema]:
    frame = adult.drop(columns=["fnlwgt"]).sample(4000, random_state=1).reset_index(drop=True)
    domain = adult_any_missing(drop=("fnlwgt",))
    return frame.iloc[:3000].reset_index(drop=True), frame.iloc[3000:].reset_index(drop=True), \
        domain


def test_mst_does_not_copy_rare_records_more_than_the_holdout(adult) -> None:
    """Rows unique in the training set: synthetic rows must not reproduce them more often
    than independent real rows (the holdout) do; a copying "synthesizer" is caught."""
    train, holdout, domain = _adult_no_weight(adult)
    for eps in (1.0, 4.0):
        out = MSTSynthesizer(schema=domain, rng=11).fit(train, eps).sample(len(holdout))
        r = rare_copies(train, holdout, out)
        assert r["holdout_matches_of_unique"] > 5  # the baseline is not vacuous
        assert not r["copies_exceed_baseline"], r
    copier = rare_copies(train, holdout, train.sample(len(holdout), random_state=0))
    assert copier["copies_exceed_baseline"]


