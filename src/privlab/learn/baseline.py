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
- DP releases (train) only have noisy counts: the model beats the baseline when its noisy
  accuracy is above the baseline's noisy accuracy (both ratios of the same noisy counts,
  post-processing, so no extra budget is spent).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import numpy as np

#: one-sided level of the exact McNemar test "the model is right more often than the baseline"
ALPHA = 0.05


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
