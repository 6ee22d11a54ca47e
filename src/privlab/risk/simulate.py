"""A synthetic risk/accuracy simulator for testing selection and the adaptive search.

The attack success rate and the accuracy follow logistic curves in log eps (the shape seen in
DP-SGD sweeps: nothing leaks and nothing is learnt at tiny eps, both saturate at large eps);
attack counts are Binomial draws, accuracy per seed is Gaussian around the curve.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from privlab.risk.model import Evaluation


def logistic(x: float, mid: float, scale: float) -> float:
    return 1.0 / (1.0 + math.exp(-(x - mid) / scale))


def simulator(*, trials: int = 2000, seeds: int = 3, risk_top: float = 0.72,
              risk_mid: float = 1.5, acc_low: float = 0.5, acc_top: float = 0.82,
              acc_mid: float = 0.0, scale: float = 0.8, acc_noise: float = 0.01,
              attacks: tuple[str, ...] = ("loss", "shadow"),
              seed: int = 0) -> Callable[[float], Evaluation]:
    """evaluate(eps) -> Evaluation drawn from the logistic model (deterministic per eps)."""

    def evaluate(eps: float) -> Evaluation:
        x = math.log(eps)
        rng = np.random.default_rng([seed, int(round(x * 1e6)) & 0x7FFFFFFF])
        theta = 0.5 + (risk_top - 0.5) * logistic(x, risk_mid, scale)
        counts = {}
        for j, a in enumerate(attacks):
            th = 0.5 + (theta - 0.5) * (1.0 - 0.2 * j)
            counts[a] = (int(rng.binomial(trials, th)), trials)
        acc = acc_low + (acc_top - acc_low) * logistic(x, acc_mid, scale)
        accs = np.clip(acc + acc_noise * rng.standard_normal(seeds), 0, 1)
        return Evaluation(eps, counts, [float(a) for a in accs], train_seconds=1.0)

    return evaluate
