"""The majority-class baseline that every reported accuracy sits beside.

An accuracy means nothing on its own: on a table where 74% of the rows carry one label, a
model that always predicts that label scores 0.74 and has learnt nothing. Every command that
reports an accuracy (train, audit, choose-epsilon, synth's train-on-synthetic) reports the
baseline measured the same way (same rows, same privacy treatment) and, when the model does
not beat it, says so in the same words: "no better than always predicting <majority>".

Two ways to decide "beats the baseline":

- exact evaluations (audit, choose-epsilon, synth evaluation: per-record correctness is at
  hand) use the one-sided exact McNemar test on the records where the model and the baseline
  disagree: the model beats the baseline when it is right on significantly more of them
  (level `ALPHA`); a model that is right on 3 more records out of 2,000 has not shown that it
  learnt anything;
- DP releases (train) only have noisy counts (post-processing, so no extra budget is
  spent): the difference "model's correct count minus the majority class's count" on the
  test part carries the noise of two independent discrete-Laplace draws (clamped at 0), so
  it comes with its 95% noise interval (`difference_halfwidth`); the model beats the baseline only
  when that interval lies above 0 (issue 29: five runs at epsilon 1 moved the noisy
  baseline from 0.03 to 0.83, and one said "better" below its own baseline).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import numpy as np

#: one-sided level of the exact McNemar test "the model is right more often than the baseline"
ALPHA = 0.05
#: coverage of the noise interval on a DP comparison with the baseline
LEVEL = 0.95


def abs_sum_pmf(scale: float, s: int) -> float:
    """P(|Z1| + |Z2| = s) for independent discrete Laplace Z1, Z2 (P[z] proportional to
    a^|z|, a = exp(-1 / scale), c = (1 - a) / (1 + a)): c^2 at 0, else 4 c^2 s a^s (one of
    them 0 and the other +-s, or both nonzero: 2 c a^k x 2 c a^(s-k) over k = 1 .. s-1)."""
    if s < 0:
        return 0.0
    a = math.exp(-1.0 / scale)
    c2 = (-math.expm1(-1.0 / scale) / (1 + a)) ** 2
    return c2 if s == 0 else 4 * c2 * s * a ** s


def difference_halfwidth(scale: float, level: float = LEVEL) -> int:
    """The smallest h with P(|Z1| + |Z2| <= h) >= level: a 95% noise interval for the
    difference of two counts each released with discrete-Laplace noise of `scale` and
    clamped at 0 (clamping moves a count towards its true value, so its error is at most
    |Z|, and the difference's at most |Z1| + |Z2|; exact, no normal approximation)."""
    if not (math.isfinite(scale) and scale > 0) or not 0 < level < 1:
        raise ValueError(f"bad scale {scale!r} or level {level!r}")
    h, cum = 0, abs_sum_pmf(scale, 0)
    while cum < level:
        h += 1
        cum += abs_sum_pmf(scale, h)
    return h


def majority_class(labels: Iterable[Hashable]) -> Any:
    """The most frequent label (ties: the smallest label as text, so the choice is stable)."""
    counts: dict[Any, int] = {}
    for v in labels:
        counts[v] = counts.get(v, 0) + 1
    if not counts:
        raise ValueError("no labels: the majority class is undefined")
    return majority_from_counts(counts)


def majority_from_counts(counts: Mapping[Any, float]) -> Any:
    """The label with the largest (possibly noisy) count; ties: the smallest label as text."""
    if not counts:
        raise ValueError("no counts: the majority class is undefined")
    best = max(counts.values())
    return min((k for k, v in counts.items() if v == best), key=str)


def no_better_text(majority: Any) -> str:
    """The one phrase every command uses for a model that learnt nothing."""
    return f"no better than always predicting {str(majority)!r}"


def mcnemar_p(model_correct: np.ndarray, base_correct: np.ndarray) -> float:
    """One-sided exact McNemar p-value of "the model is right more often than the baseline".

    `model_correct` may hold several models' correctness (rows = models):
    their discordant counts are averaged (rounded), not added: the models answer on the same
    records, so adding would claim more evidence than the records hold."""
    from scipy.stats import binom

    m = np.atleast_2d(np.asarray(model_correct, dtype=bool))
    b = np.asarray(base_correct, dtype=bool)
    wins = int(round(float(np.mean([np.sum(r & ~b) for r in m]))))
    losses = int(round(float(np.mean([np.sum(~r & b) for r in m]))))
    n = wins + losses
    if n == 0:
        return 1.0
    return float(binom.sf(wins - 1, n, 0.5))


def beats_exact(model_correct: np.ndarray, base_correct: np.ndarray) -> bool:
    """True when the model is significantly (level ALPHA) more often right than the baseline."""
    m = np.atleast_2d(np.asarray(model_correct, dtype=bool))
    if float(m.mean()) <= float(np.mean(base_correct)):
        return False
    return mcnemar_p(m, base_correct) < ALPHA


def noisy_verdict(majority: Any, model_hits: float, base_hits: float, n: float,
                  halfwidth: int) -> tuple[bool, list[float], str]:
    """(better, 95% interval of the accuracy difference, verdict) of a DP comparison: the
    noisy counts' difference +- `halfwidth`, over `n` rows; "better" only when the whole
    interval is above 0."""
    diff = model_hits - base_hits
    lo, hi = diff - halfwidth, diff + halfwidth
    better = lo > 0
    scale = 1.0 / n if n > 0 else 0.0
    # a difference of two accuracies lies in [-1, 1]
    interval = [max(lo * scale, -1.0), min(hi * scale, 1.0)]
    words = (f"test accuracy {'+' if diff >= 0 else ''}{diff * scale:.3f} against it, 95% "
             f"noise interval [{interval[0]:+.3f}, {interval[1]:+.3f}]")
    if better:
        return True, interval, f"better than always predicting {str(majority)!r} ({words})"
    return False, interval, f"{no_better_text(majority)} ({words}, which includes 0)"
