"""How sure is the epsilon choice? Posterior draws of the whole loss curve, and a stable pick.

The point rules in `model.py` take the argmin of a loss curve estimated from a few trained
models and a few thousand membership guesses. When the curve is flat (attacks at chance,
accuracy on a plateau) that argmin follows training noise: different seeds pick different
epsilons. This module carries the noise through:

- accuracy at each epsilon, two sources of noise: (1) training (initialisation, sampling, DP
  noise): the mean over the seeds' models, with a standard error from their spread (the
  per-epsilon variance is shrunk towards the variance pooled over the grid, so two or three
  seeds do not give a spuriously tiny error), drawn Normal; (2) the finite test set: a paired
  bootstrap over test records (one resampling of the records per draw, shared by every
  epsilon, so differences between epsilons keep their pairing);
- risk: draws of every attack's Beta posterior (`posterior.py`), weighted like the point
  rule;
- each draw of both curves is smoothed monotonically (isotonic, as the point fit is) and turned
  into a loss curve L = w_risk R + w_util U, with the policy's constraints applied per draw.

From the draws: P(eps is best) for every candidate, the expected loss and its standard error,
and the recommendation: the SMALLEST feasible epsilon whose expected loss is within one
standard error (of its difference to the best) of the best expected loss. This is the
one-standard-error rule of Hastie, Tibshirani and Friedman, "The Elements of Statistical
Learning" (2nd ed., Springer 2009, section 7.10), applied to privacy: among choices the data
cannot tell apart, take the most private one.

The interval answers "would a re-run recommend the same?": each draw, widened by a re-run's
own fresh noise, is put through the same rule, which gives P(a re-run recommends eps); the
interval is the central 95% of that distribution. (The candidates within two standard errors
of the best are reported too, as `plausible_best`.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privlab.risk.model import Policy, RiskCurves, UtilityConfig, isotonic_rows, utility_loss

#: A candidate is "within the noise" of the best when its expected loss exceeds the best's by
#: at most this many standard errors of the difference (1: Hastie et al.'s one-SE rule).
SE_RULE = 1.0
#: ... and it stays in the interval of plausible choices up to this many standard errors.
INTERVAL_SE = 2.0


@dataclass
class ChoiceUncertainty:
    """The stable recommendation and what the draws say about every candidate."""

    epsilons: np.ndarray
    recommended: float | None
    interval: tuple[float, float] | None
    prob_best: np.ndarray
    expected_loss: np.ndarray
    loss_se: np.ndarray            # standard error of L(eps) - L(best)
    feasible_prob: np.ndarray      # share of draws in which eps meets the policy's constraints
    accuracy_se: np.ndarray
    draws: int
    reason: str
    prob_recommended: np.ndarray | None = None  # P(a re-run recommends eps)
    plausible_best: tuple[float, float] | None = None  # within two standard errors of the best

    def to_dict(self) -> dict[str, Any]:
        return {
            "recommended_epsilon": self.recommended,
            "interval": list(self.interval) if self.interval else None,
            "interval_meaning": "where a re-run with new random seeds would put "
                                "the recommendation: the central 95% of its predictive "
                                "distribution",
            "plausible_best": list(self.plausible_best) if self.plausible_best else None,
            "rule": f"smallest epsilon whose expected loss is within {SE_RULE:g} standard "
                    "error of the best (one-standard-error rule)",
            "reason": self.reason,
            "draws": self.draws,
            "prob_none_feasible": max(0.0, float(1.0 - self.prob_best.sum())),
            "candidates": [
                {"epsilon": float(e), "prob_best": float(p), "expected_loss": float(m),
                 "loss_gap_se": float(s), "feasible_prob": float(f), "accuracy_se": float(a),
                 "prob_recommended": None if r is None else float(r)}
                for e, p, m, s, f, a, r in zip(
                    self.epsilons, self.prob_best, self.expected_loss, self.loss_se,
                    self.feasible_prob, self.accuracy_se,
                    self.prob_recommended if self.prob_recommended is not None
                    else [None] * len(self.epsilons), strict=True)],
        }


def accuracy_se(accuracy_seeds: Sequence[Sequence[float]]) -> np.ndarray:
    """Standard error of each epsilon's mean accuracy, variance shrunk to the pooled one.

    With one seed per epsilon there is no spread to measure: the pooled variance is then 0 and
    the caller's draws carry only the risk noise (the report says so)."""
    var = np.array([np.var(a, ddof=1) if len(a) > 1 else np.nan for a in accuracy_seeds])
    n = np.array([len(a) for a in accuracy_seeds], dtype=float)
    pooled = float(np.nanmean(var)) if np.any(np.isfinite(var)) else 0.0
    shrunk = np.where(np.isfinite(var), 0.5 * (var + pooled), pooled)
    return np.sqrt(shrunk / n)


def choice_uncertainty(curves: RiskCurves, accuracy_seeds: Sequence[Sequence[float]],
                       policy: Policy, utility_config: UtilityConfig = UtilityConfig(), *,
                       n_draws: int = 4000, seed: int = 0,
                       correct: Sequence[np.ndarray] | None = None) -> ChoiceUncertainty:
    """Draw loss curves from the posterior of risk and accuracy; pick the stable epsilon.

    `correct[i]`: per test record, the share of epsilon i's models that got it right (the
    paired bootstrap's input); None leaves the test-set noise out."""
    eps = curves.epsilons
    k = eps.size
    rng = np.random.default_rng(seed)
    risk = np.zeros((n_draws, k))
    for a in curves.attacks:
        w = curves.attack_weights[a]
        risk += w * np.stack([p.sample_risk(n_draws, rng) for p in curves.posteriors[a]], axis=1)
    acc_mean = np.array([np.mean(a) for a in accuracy_seeds], dtype=float)
    se = accuracy_se(accuracy_seeds)
    noise = se * rng.standard_normal((n_draws, k))
    if correct is not None:
        hits = np.stack([np.asarray(c, dtype=np.float64) for c in correct])  # (k, n_test)
        n_test = hits.shape[1]
        boot = np.empty((n_draws, k))
        for lo in range(0, n_draws, 500):  # bounded memory: 500 resamplings at a time
            hi = min(n_draws, lo + 500)
            w = rng.multinomial(n_test, np.full(n_test, 1.0 / n_test), size=hi - lo)
            boot[lo:hi] = (w @ hits.T) / n_test
        noise += boot - hits.mean(axis=1)
    acc = np.clip(acc_mean + noise, 0.0, 1.0)
    risk, acc = isotonic_rows(risk), isotonic_rows(acc)
    util = np.stack([utility_loss(acc[i], curves.accuracy_std, curves.train_seconds,
                                  utility_config) for i in range(n_draws)])
    loss = policy.w_risk * risk + policy.w_util * util
    feasible = np.ones_like(loss, dtype=bool)
    if policy.max_risk is not None:
        feasible &= risk <= policy.max_risk
    if policy.min_accuracy is not None:
        feasible &= acc >= policy.min_accuracy
    masked = np.where(feasible, loss, np.inf)
    any_ok = np.isfinite(masked).any(axis=1)
    best_idx = np.argmin(masked[any_ok], axis=1)
    prob_best = np.bincount(best_idx, minlength=k) / max(1, n_draws)
    feas_p = feasible.mean(axis=0)
    exp_loss = loss.mean(axis=0)
    # The policy's constraints at its credible level: a candidate is acceptable when it meets
    # them in at least that share of the draws (the risk-averse reading of the cap).
    ok = feas_p >= policy.level if (policy.max_risk is not None
                                    or policy.min_accuracy is not None) else np.ones(k, bool)
    gap_se = np.zeros(k)
    if not ok.any():
        return ChoiceUncertainty(eps, None, None, prob_best, exp_loss, gap_se, feas_p, se,
                                 n_draws, "no epsilon meets the policy's constraints in "
                                 f"{policy.level:.0%} of the posterior draws")
    best = int(np.flatnonzero(ok)[np.argmin(exp_loss[ok])])
    diff = loss - loss[:, [best]]
    gap_se = diff.std(axis=0)
    gap = exp_loss - exp_loss[best]
    within = ok & (gap <= SE_RULE * gap_se + 1e-12)
    rec = int(np.flatnonzero(within)[0])
    plausible = np.flatnonzero(ok & (gap <= INTERVAL_SE * gap_se + 1e-12))
    prob_rec = rerun_distribution(loss, exp_loss, gap_se, ok)
    interval = _central_range(eps, prob_rec, rec)
    if rec == best:
        reason = (f"epsilon {eps[rec]:g} has the lowest expected loss, and no smaller epsilon "
                  "comes within one standard error of it")
    else:
        reason = (f"epsilon {eps[best]:g} has the lowest expected loss, but epsilon "
                  f"{eps[rec]:g} is within one standard error of it "
                  f"(gap {gap[rec]:.4f}, standard error {gap_se[rec]:.4f}): the evidence cannot "
                  "tell them apart, so the more private one is recommended")
    return ChoiceUncertainty(eps, float(eps[rec]), interval, prob_best, exp_loss, gap_se,
                             feas_p, se, n_draws, reason, prob_rec,
                             (float(eps[plausible.min()]), float(eps[plausible.max()])))


def rerun_distribution(loss: np.ndarray, exp_loss: np.ndarray, gap_se: np.ndarray,
                       ok: np.ndarray) -> np.ndarray:
    """P(a re-run recommends eps) for each candidate: the predictive distribution of the rule.

    A re-run measures the true curve with fresh noise; a posterior draw is a plausible true
    curve, so a re-run's measured curve is the mean plus sqrt(2) times a draw's deviation
    (truth's uncertainty plus the new measurement's noise, equal and independent). The
    one-standard-error rule is applied to each such replicate."""
    rep = exp_loss + math.sqrt(2.0) * (loss - exp_loss)
    masked = np.where(ok, rep, np.inf)
    best = masked.min(axis=1, keepdims=True)
    within = ok & (rep - best <= SE_RULE * gap_se + 1e-12)
    first = np.argmax(within, axis=1)  # the smallest epsilon within one standard error
    return np.bincount(first, minlength=loss.shape[1]) / loss.shape[0]


def _central_range(eps: np.ndarray, prob: np.ndarray, rec: int,
                   mass: float = 0.95) -> tuple[float, float]:
    """Smallest and largest candidate after trimming (1 - mass) / 2 of the probability from
    each end; always contains the recommendation."""
    cum = np.cumsum(prob)
    tail = (1.0 - mass) / 2.0
    lo = int(np.searchsorted(cum, tail, side="right"))
    hi = int(np.searchsorted(cum, 1.0 - tail, side="left"))
    lo, hi = min(lo, rec), max(min(hi, eps.size - 1), rec)
    return float(eps[lo]), float(eps[hi])
