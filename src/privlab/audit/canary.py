"""Canary audits of DP-SGD: empirical lower bounds on epsilon that can actually be large.

A membership attack on ordinary records is a lower bound on what the training leaks, and on a
model that barely overfits it sits at chance and bounds nothing. An audit instead plants the
records (canaries) that leak most and measures how well an attacker tells "canary in" from
"canary out"; by the hypothesis-testing view of DP (Kairouz, Oh and Viswanath, "The
Composition Theorem for Differential Privacy", ICML 2015) any such test's error rates give a
lower bound on epsilon (`privlab.audit.epsilon`). Three audits, from strongest threat model to
weakest:

- `dirac_canary_audit` (white-box, worst case): the attacker adds a gradient canary, a "Dirac"
  gradient of norm `clip` on one parameter coordinate no other example touches, and sees every
  noisy gradient (Nasr, Song, Thakurta, Papernot and Carlini, "Adversary Instantiation: Lower
  Bounds for Differentially Private Machine Learning", IEEE S&P 2021; Nasr, Hayes, Steinke,
  Balle, Tramer, Jagielski, Carlini and Terzis, "Tight Auditing of Differentially Private
  Machine Learning", USENIX Security 2023). A white-box attacker knows every other example's
  clipped gradient, so after subtracting them what it sees in that coordinate at step t is
  b_t + sigma z_t (in units of the clip), b_t ~ Bernoulli(q) when the canary is in the data
  and 0 when it is out, z_t the DP-SGD noise. That observation is simulated for many
  independent trials with the run's own sigma, q and steps (from `plan_dpsgd`, the same
  calibration training uses) and noise drawn by every training loop's own `flat_noise` (the
  DP-SGD core, `privlab.core.dpsgd`, which needs no torch); the
  test statistic is the exact log-likelihood ratio, the most powerful test (Neyman-Pearson).
- `blackbox_canary_audit` (black-box, many runs): a mislabelled outlier record is put into the
  training set of half of M models (trained all at once by `train_many`); the attacker sees
  only each final model's loss on the canary.
- `one_run_audit` (black-box, ONE run): m canaries, each included independently with
  probability 1/2, one model; the attacker guesses "in" for the k lowest losses and "out" for
  the k highest and the bound comes from the number of correct guesses (Steinke, Nasr and
  Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023, with their
  (epsilon, delta) p-value). The guess counts are fixed in advance; when several are tried the
  confidence is split between them (Bonferroni), so the reported bound keeps its level.

Every bound is at 95% confidence by default and is a LOWER bound: an accounted epsilon below it
would mean the implementation or the accounting is wrong.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from privlab.audit.epsilon import EmpiricalEpsilon, empirical_epsilon
from privlab.errors import InvalidInputError


@dataclass
class CanaryAudit:
    """One audit's result: the empirical lower bound beside the accounted epsilon."""

    kind: str                  # "white-box dirac", "black-box canary", "one-run"
    accounted_epsilon: float | None
    delta: float
    lower_bound: float         # the empirical epsilon lower bound at `level`
    level: float
    trials: int
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _check_level(level: float) -> None:
    if not 0.5 <= level < 1:
        raise InvalidInputError(f"level must be in [0.5, 1), got {level!r}")


def _check_trials(trials: int, least: int = 8) -> None:
    if isinstance(trials, bool) or not isinstance(trials, int | np.integer) or trials < least:
        raise InvalidInputError(f"trials must be a whole number >= {least}, got {trials!r}")


# --------------------------------------------------------------------------- white-box
def dirac_llr(obs: np.ndarray, q: float, sigma: float) -> np.ndarray:
    """Per-step log-likelihood ratio of 'canary in' (mixture (1-q) N(0, s^2) + q N(1, s^2))
    against 'canary out' (N(0, s^2)) for observations in units of the clip."""
    if sigma <= 0:   # no noise: any nonzero observation is the canary
        return np.where(np.abs(obs) > 0.5, np.inf, math.log1p(-q) if q < 1 else -np.inf)
    return np.logaddexp(math.log1p(-q) if q < 1 else -np.inf,
                        math.log(q) + (2.0 * obs - 1.0) / (2.0 * sigma * sigma))


def dirac_canary_audit(noise_multiplier: float, sample_rate: float, steps: int, *,
                       trials: int = 200_000, delta: float = 0.0, level: float = 0.95,
                       accounted_epsilon: float | None = None, seed: int | None = 0,
                       chunk: int = 100_000) -> CanaryAudit:
    """White-box gradient-canary audit of DP-SGD with these privacy parameters.

    `trials` in-trials and as many out-trials; `noise_multiplier` 0 audits a non-private run.
    The bound uses the hold-out Clopper-Pearson procedure of `empirical_epsilon`."""
    from privlab.core.dpsgd import flat_noise
    from privlab.core.rng import make_rng

    _check_trials(trials)
    _check_level(level)
    if not (noise_multiplier >= 0 and math.isfinite(noise_multiplier)):
        raise InvalidInputError(f"noise_multiplier must be finite and >= 0, got "
                                f"{noise_multiplier!r}")
    if not 0 < sample_rate <= 1:
        raise InvalidInputError(f"sample_rate must be in (0, 1], got {sample_rate!r}")
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 1:
        raise InvalidInputError(f"steps must be a whole number >= 1, got {steps!r}")
    gen = make_rng(seed)
    sigma, q = float(noise_multiplier), float(sample_rate)
    scores = {True: np.zeros(trials), False: np.zeros(trials)}
    for lo in range(0, trials, chunk):
        hi = min(trials, lo + chunk)
        for inside, acc in scores.items():
            part = np.zeros(hi - lo)
            for _ in range(int(steps)):
                obs = sigma * flat_noise(gen, hi - lo).astype(np.float64)
                if inside:
                    obs += gen.random(hi - lo) < q
                part += dirac_llr(obs, q, sigma)
            acc[lo:hi] = part
    # +inf scores (no noise) are ranked above everything else: map them to a large finite value
    big = max(1.0, float(np.nanmax(np.abs(np.r_[scores[True], scores[False]][
        np.isfinite(np.r_[scores[True], scores[False]])]), initial=1.0))) * 10
    s_in = np.nan_to_num(scores[True], posinf=big, neginf=-big)
    s_out = np.nan_to_num(scores[False], posinf=big, neginf=-big)
    emp = empirical_epsilon(s_in, s_out, delta, level=level, rng=0 if seed is None else seed)
    return CanaryAudit("white-box dirac gradient canary", accounted_epsilon, delta, emp.lower,
                       level, 2 * trials,
                       {"noise_multiplier": sigma, "sample_rate": q, "steps": int(steps),
                        "empirical": emp.to_dict(),
                        "threat_model": "attacker inserts a gradient of norm clip on one "
                                        "coordinate and sees every noisy gradient"})


def dirac_audit_for(n: int, config: Any, **kw: Any) -> CanaryAudit:
    """`dirac_canary_audit` with the sigma, sampling rate and steps DP-SGD would use to train
    `n` rows under `config` (a TrainConfig); config.method 'none' audits a non-private run."""
    from privlab.learn.dpsgd import plan_dpsgd

    if config.method == "none":
        q = min(1.0, config.batch_size / n)
        steps = int(config.epochs) * max(1, round(n / config.batch_size))
        return dirac_canary_audit(0.0, q, steps, delta=config.delta, **kw)
    config = config.sized_by(n)  # the audit's own hypothetical run of n rows
    plan = plan_dpsgd(n, config)
    return dirac_canary_audit(plan.noise_multiplier, plan.sample_rate, plan.steps,
                              delta=plan.delta, accounted_epsilon=plan.epsilon_pld, **kw)


# --------------------------------------------------------------------------- black-box canaries
def make_canaries(x_pool: np.ndarray, y_pool: np.ndarray, count: int, n_classes: int,
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """`count` mislabelled records: pool rows whose label is changed to another class.

    A record whose label disagrees with everything similar to it is what a model memorises
    first (the usual input-space canary for tabular data and images alike)."""
    if count < 1 or count > len(y_pool):
        raise InvalidInputError(f"canaries: need 1..{len(y_pool)} pool rows, asked for {count}")
    if n_classes < 2:
        raise InvalidInputError("canaries need at least 2 classes to mislabel a record")
    gen = np.random.default_rng(seed)
    idx = gen.choice(len(y_pool), size=count, replace=False)
    shift = gen.integers(1, n_classes, size=count)
    return x_pool[idx].copy(), ((y_pool[idx] + shift) % n_classes).astype(y_pool.dtype)


def _canary_losses(models: list[Any], x: np.ndarray, y: np.ndarray) -> np.ndarray:
    from privlab.audit.target import as_target

    return np.stack([as_target(m).stats(x, y).loss for m in models])


def blackbox_canary_audit(model_fn: Any, x: np.ndarray, y: np.ndarray, config: Any,
                          canary: tuple[np.ndarray, np.ndarray], *, models: int = 64,
                          level: float = 0.95, seed: int | None = 0) -> CanaryAudit:
    """Train `models` models (half with the canary, half without, all at once per half) and
    test 'canary in' by its loss in the final model only (black-box)."""
    from privlab.learn.multi import train_many

    _check_trials(models, 8)
    _check_level(level)
    cx, cy = np.asarray(canary[0], np.float32).reshape(1, -1), np.asarray(canary[1]).reshape(1)
    xa = np.concatenate([np.asarray(x, np.float32), cx])
    ya = np.r_[np.asarray(y), cy].astype(np.asarray(y).dtype)
    n = len(y)
    # the audit's own runs: the same public rate with and without the canary (n rows
    # without it), as DP-SGD's neighbouring datasets assume
    config = config.sized_by(n)
    half = models // 2
    base_seed = None if seed is None else int(seed) * 10_000
    res_in = train_many(model_fn, xa, ya, config=config, subsets=[np.arange(n + 1)] * half,
                        seeds=[None if base_seed is None else base_seed + i for i in range(half)])
    res_out = train_many(model_fn, xa, ya, config=config, subsets=[np.arange(n)] * half,
                         seeds=[None if base_seed is None else base_seed + half + i
                                for i in range(half)])
    s_in = -_canary_losses(res_in.models, cx, cy)[:, 0]
    s_out = -_canary_losses(res_out.models, cx, cy)[:, 0]
    emp = empirical_epsilon(s_in, s_out, config.delta if config.method != "none" else 0.0,
                            level=level, rng=0 if seed is None else seed)
    g = res_in.guarantees[0]
    acc = g.epsilon if g.is_dp else None
    return CanaryAudit("black-box canary", acc, config.delta, emp.lower, level, 2 * half,
                       {"models": 2 * half, "empirical": emp.to_dict(),
                        "statistic": "minus the final model's loss on the canary",
                        "canary": "a mislabelled pool record",
                        "threat_model": "attacker plants one record and sees only the final "
                                        "model's output on it"})


# --------------------------------------------------------------------------- one run
def one_run_p_value(m: int, r: int, v: int, epsilon: float, delta: float = 0.0) -> float:
    """P(>= v correct out of r guesses) under (epsilon, delta)-DP with m canaries each in with
    probability 1/2 (Steinke, Nasr and Jagielski 2023: the count is dominated by
    Binomial(r, e^eps / (1 + e^eps)), plus a delta term that grows with m)."""
    if not (0 <= v <= r <= m):
        raise InvalidInputError(f"need 0 <= correct <= guesses <= canaries, got {v}, {r}, {m}")
    q = 1.0 / (1.0 + math.exp(-epsilon))
    beta = float(stats.binom.sf(v - 1, r, q))
    alpha = 0.0
    if delta > 0 and v > 0:
        i = np.arange(1, v + 1)
        # P(v - i <= Binomial(r, q) < v) / i, maximised over i
        part = (stats.binom.cdf(v - 1, r, q) - stats.binom.cdf(v - i - 1, r, q)) / i
        alpha = float(np.max(part))
    return min(1.0, beta + alpha * delta * 2 * m)


def one_run_epsilon(m: int, r: int, v: int, delta: float = 0.0, alpha: float = 0.05) -> float:
    """The largest epsilon whose p-value for (m, r, v) is below `alpha`: with confidence
    1 - alpha the run is not (epsilon, delta)-DP for any smaller epsilon (0: no evidence)."""
    if one_run_p_value(m, r, v, 0.0, delta) >= alpha:
        return 0.0
    lo, hi = 0.0, 1.0
    while one_run_p_value(m, r, v, hi, delta) < alpha:
        lo, hi = hi, hi * 2
        if hi > 200:
            return lo
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if one_run_p_value(m, r, v, mid, delta) < alpha:
            lo = mid
        else:
            hi = mid
    return lo


def one_run_from_scores(scores: np.ndarray, included: np.ndarray, *, delta: float = 0.0,
                        level: float = 0.95,
                        guess_fractions: tuple[float, ...] = (0.05, 0.1, 0.2, 0.5)
                        ) -> dict[str, Any]:
    """Guess 'in' for the k highest scores and 'out' for the k lowest, for each pre-set
    k = fraction * m / 2; the bound is the best over the fractions at level
    1 - (1 - level) / len(fractions) each (Bonferroni)."""
    s = np.asarray(scores, dtype=float)
    inc = np.asarray(included, dtype=bool)
    if s.shape != inc.shape or s.ndim != 1 or s.size < 4:
        raise InvalidInputError("one-run audit: need one score and one in/out flag per canary "
                                "(at least 4 canaries)")
    _check_level(level)
    m = s.size
    alpha = (1.0 - level) / len(guess_fractions)
    order = np.argsort(-s, kind="stable")
    best: dict[str, Any] = {"epsilon": 0.0, "guesses": 0, "correct": 0}
    rows = []
    for f in guess_fractions:
        k = max(1, int(round(f * m / 2)))
        top, bottom = order[:k], order[m - k:]
        correct = int(inc[top].sum() + (~inc[bottom]).sum())
        eps = one_run_epsilon(m, 2 * k, correct, delta, alpha)
        rows.append({"fraction": f, "guesses": 2 * k, "correct": correct, "epsilon": eps})
        if eps > best["epsilon"] or best["guesses"] == 0:
            best = {"epsilon": eps, "guesses": 2 * k, "correct": correct}
    return {"canaries": m, "best": best, "per_fraction": rows,
            "level_each": 1.0 - alpha}


def one_run_audit(model_fn: Any, x: np.ndarray, y: np.ndarray, config: Any,
                  canaries: tuple[np.ndarray, np.ndarray], *, level: float = 0.95,
                  seed: int | None = 0) -> CanaryAudit:
    """Train ONE model on the data plus a random half of the canaries and bound epsilon from
    the canaries' losses (Steinke, Nasr and Jagielski 2023)."""
    from privlab.learn.multi import train_many

    _check_level(level)
    cx, cy = np.asarray(canaries[0], np.float32), np.asarray(canaries[1])
    m = len(cy)
    if m < 4:
        raise InvalidInputError(f"one-run audit: need at least 4 canaries, got {m}")
    gen = np.random.default_rng(seed)
    inc = gen.random(m) < 0.5
    xa = np.concatenate([np.asarray(x, np.float32), cx[inc]])
    ya = np.r_[np.asarray(y), cy[inc]].astype(np.asarray(y).dtype)
    # the audit's own run: the rate of the data without canaries, whichever were inserted
    config = config.sized_by(len(y))
    res = train_many(model_fn, xa, ya, config=config, seeds=[seed])
    scores = -_canary_losses(res.models, cx, cy)[0]
    delta = config.delta if config.method != "none" else 0.0
    out = one_run_from_scores(scores, inc, delta=delta, level=level)
    g = res.guarantees[0]
    return CanaryAudit("one-run canaries", g.epsilon if g.is_dp else None, delta,
                       out["best"]["epsilon"], level, m,
                       {**out, "included": int(inc.sum()),
                        "statistic": "minus the model's loss on each canary",
                        "canary": "mislabelled pool records"})


def strongest(audits: list[CanaryAudit], attacks: dict[str, EmpiricalEpsilon] | None = None
              ) -> dict[str, Any]:
    """The largest lower bound among audits (and attack-based bounds), with plain words."""
    cands = [(a.lower_bound, a.kind) for a in audits]
    cands += [(e.lower, f"membership attack {k}") for k, e in (attacks or {}).items()]
    if not cands:
        raise InvalidInputError("no audit results to compare")
    value, kind = max(cands)
    if value <= 0:
        words = ("every audit and attack was at chance: none could tell records in the "
                 "training data from records outside it, so they give no lower bound on "
                 "epsilon (which does not prove the training private: only the accountant does)")
    else:
        words = (f"the strongest evidence, the {kind}, shows with 95% confidence that this "
                 f"training is not private for any epsilon below {value:.2g}")
    return {"lower_bound": value, "source": kind, "plain": words}
