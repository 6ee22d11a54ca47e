"""Attacks on scikit-learn models and callables: correctness, attacker-side thresholds, errors."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.linear_model import LogisticRegression
from sklearn.svm import SVC

from privlab.audit import (
    RecordStats,
    SklearnTrainer,
    TargetModel,
    as_target,
    lira,
    reference_calibration,
    shadow_attack,
    threshold_attack,
)
from privlab.audit.attacks import SCORES, lira_scores, stratified_subset
from privlab.audit.metrics import best_threshold
from privlab.errors import InvalidInputError


def _data(n: int = 900, d: int = 100, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    w = g.normal(size=d) * 3 / np.sqrt(d)
    x = g.normal(size=(n, d))
    y = (g.random(n) < 1 / (1 + np.exp(-x @ w))).astype(np.int64)
    return x, y


@pytest.fixture(scope="module")
def setup():
    x, y = _data()
    mem, non, pool = (x[:150], y[:150]), (x[150:300], y[150:300]), (x[300:], y[300:])
    est = LogisticRegression(C=100.0, max_iter=300).fit(*mem)
    trainer = SklearnTrainer(LogisticRegression(C=100.0, max_iter=300), n_classes=2)
    return est, mem, non, pool, trainer


def test_record_stats_are_exact_for_confident_logits():
    # p_y = 1 - 1e-30: float32 cross-entropy would round the loss to 0
    logits = np.array([[0.0, 69.0776]])  # log(1e30) ~ 69.08
    t = TargetModel.from_logits(lambda x: logits)
    st = t.stats(np.zeros((1, 1)), np.array([1]))
    assert st.loss[0] == pytest.approx(1e-30, rel=1e-3)
    assert st.phi[0] == pytest.approx(69.0776, rel=1e-6)
    # modified entropy of a confident correct prediction is ~ 0, of a confident wrong one large
    wrong = t.stats(np.zeros((1, 1)), np.array([0]))
    assert st.modified_entropy[0] < 1e-20 < wrong.modified_entropy[0]


def test_target_wrappers_and_errors():
    est = SVC().fit(*_data(60, 3))
    with pytest.raises(InvalidInputError, match="no predict_proba"):
        as_target(est)
    with pytest.raises(InvalidInputError, match="does not return probabilities"):
        as_target(lambda x: np.full((len(x), 2), 3.0)).log_proba(np.zeros((2, 1)))
    with pytest.raises(InvalidInputError, match="one number per record"):
        as_target(lambda x: np.zeros(len(x))).log_proba(np.zeros((2, 1)))
    lp = as_target(lambda x: np.tile([0.25, 0.75], (len(x), 1))).log_proba(np.zeros((2, 1)))
    assert np.allclose(np.exp(lp), [[0.25, 0.75]] * 2)
    with pytest.raises(InvalidInputError, match="labels outside"):
        RecordStats.from_log_proba(lp, np.array([0, 2]))


def test_overlap_is_refused(setup):
    est, mem, non, _, _ = setup
    bad_non = (np.r_[non[0], mem[0][:3]], np.r_[non[1], mem[1][:3]])
    with pytest.raises(InvalidInputError, match="overlap \\(3 identical rows"):
        threshold_attack("loss", est, mem, bad_non)


def test_threshold_attacks_with_attacker_side_threshold(setup):
    est, mem, non, pool, trainer = setup
    cal = reference_calibration(trainer, pool, size=150, rng=0)
    for kind in ("loss", "confidence", "entropy", "mentr"):
        res = threshold_attack(kind, est, mem, non, calibration=cal)
        d = res.to_dict(fprs=(0.01, 0.1), delta=1e-5)
        # label-aware scores beat chance on this overfit model; label-free ones need not
        assert (0.5 < d["auc"] <= 1.0) if kind in ("loss", "mentr") else (0 <= d["auc"] <= 1)
        assert d["counts"]["trials"] == 300
        assert d["counts"]["successes"] == d["counts"]["tp"] + d["counts"]["tn"]
        # the threshold comes from the reference model, not from the audited records
        assert res.threshold == pytest.approx(
            best_threshold(SCORES[kind](cal.stats_in), SCORES[kind](cal.stats_out)))
    res = threshold_attack("loss", est, mem, non)
    assert res.threshold is None and "balanced_accuracy" not in res.summary((0.1,))


def test_shadow_attack_runs_and_checks_classes(setup):
    est, mem, non, pool, trainer = setup
    res = shadow_attack(est, mem, non, pool, trainer, n_shadow=2, shadow_size=150,
                        n_estimators=30, rng=0)
    s = res.summary((0.1,))
    assert 0.45 < s["auc"] <= 1.0 and res.details["attack_train_rows"] == 2 * 2 * 150
    assert res.calibration is not None
    lab = shadow_attack(est, mem, non, pool, trainer, n_shadow=2, shadow_size=150,
                        n_estimators=30, features="label", per_class=True, rng=0)
    assert lab.name == "shadow_label"
    x, y = pool
    one_class = (x[y == 0], y[y == 0])
    with pytest.raises(InvalidInputError, match="missing from the shadow pool"):
        shadow_attack(est, mem, non, one_class, trainer, n_shadow=1)


def test_lira_scores_equal_the_gaussian_likelihood_ratio():
    g = np.random.default_rng(2)
    m, n = 200, 3
    in_mask = np.zeros((m, n), bool)
    in_mask[::2] = True
    phi = np.where(in_mask, g.normal(2.0, 1.0, (m, n)), g.normal(0.0, 1.0, (m, n)))
    target = np.array([2.0, 0.0, 1.0])
    s = lira_scores(target, phi, in_mask, online=True, fixed_variance=False)
    mu_in, mu_out = phi[::2].mean(0), phi[1::2].mean(0)
    sd_in, sd_out = phi[::2].std(0, ddof=1), phi[1::2].std(0, ddof=1)
    want = stats.norm.logpdf(target, mu_in, sd_in) - stats.norm.logpdf(target, mu_out, sd_out)
    assert np.allclose(s, want)
    off = lira_scores(target, phi, in_mask, online=False, fixed_variance=False)
    assert np.allclose(off, (target - mu_out) / sd_out)
    assert s[0] > 0 > s[1]


def test_lira_online_and_offline_on_sklearn(setup):
    est, mem, non, pool, trainer = setup
    on = lira(est, mem, non, trainer, n_shadow=4, pool=pool, rng=0)
    assert on.details["shadow_train_size"] == 150 and on.details["fixed_variance"]
    assert on.summary((0.1,))["auc"] > 0.5
    assert on.threshold is not None  # leave-one-out on shadow model 0
    off = lira(est, mem, non, trainer, n_shadow=3, pool=pool, online=False, rng=0)
    assert off.name == "lira_offline" and off.summary((0.1,))["auc"] > 0.5
    with pytest.raises(InvalidInputError, match="even number"):
        lira(est, mem, non, trainer, n_shadow=3, pool=pool)
    with pytest.raises(InvalidInputError, match="offline LiRA needs an attacker pool"):
        lira(est, mem, non, trainer, n_shadow=2, online=False)


def test_stratified_subset_keeps_proportions():
    y = np.r_[np.zeros(90, int), np.ones(10, int)]
    ins, outs = stratified_subset(y, 50, np.random.default_rng(0))
    assert ins.size == 50 and (y[ins] == 1).sum() == 5
    assert np.intersect1d(ins, outs).size == 0 and ins.size + outs.size == 100


def test_rmia_finds_members_of_an_overfit_model_and_nothing_in_a_random_split(setup):
    from privlab.audit.attacks import rmia
    from privlab.audit.metrics import auc

    est, mem, non, pool, trainer = setup
    res = rmia(est, mem, non, trainer, n_ref=1, pool=pool, population=300)
    assert res.name == "rmia" and res.details["reference_models"] == 1
    assert np.all((res.scores_in >= 0) & (res.scores_in <= 1))
    assert auc(res.scores_in, res.scores_out) > 0.6  # C=100 logistic regression on 100 dims
    # a target trained on neither half: 'members' are no members at all -> chance (AUC 0.5
    # within 3 standard errors of the Mann-Whitney statistic for 150 vs 150)
    x, y = _data(seed=9)
    other = LogisticRegression(C=100.0, max_iter=300).fit(x[:150], y[:150])
    res0 = rmia(other, mem, non, trainer, n_ref=2, pool=pool, population=300)
    assert abs(auc(res0.scores_in, res0.scores_out) - 0.5) < 3 * np.sqrt(301 / (12 * 150 * 150))
    with pytest.raises(InvalidInputError, match="at least 1 reference"):
        rmia(est, mem, non, trainer, n_ref=0, pool=pool)


def test_offline_lira_accepts_one_reference_model(setup):
    est, mem, non, pool, trainer = setup
    res = lira(est, mem, non, trainer, n_shadow=1, pool=pool, online=False)
    assert res.details["shadow_models"] == 1 and np.all(np.isfinite(res.scores_in))
    with pytest.raises(InvalidInputError, match="online LiRA needs at least 2"):
        lira(est, mem, non, trainer, n_shadow=1, pool=pool)
