"""How an attacker trains reference (shadow) models: `fit_predict(X, y, subsets, X_query)`.

A trainer returns, for M training subsets of (X, y), the (M, n_query, k) float64
log-probabilities of each trained model on X_query. Two kinds:

- `SklearnTrainer(estimator)`: clones the estimator per subset (any scikit-learn classifier
  with predict_proba).
- `TorchTrainer(model_fn, config)`: privlab.learn's trainers; `at_once=True` trains all M
  models in one vectorised run (`privlab.learn.multi.train_many`), `at_once=False` one
  after another (`train_one`), which is what the benchmark compares.

Subsets are index arrays. The attacker's shadow models should be trained like the target
(same architecture, optimiser, epochs, privacy setting), so the CLI builds both from the
same config.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from privlab.audit.target import as_target
from privlab.errors import InvalidInputError


class ShadowTrainer(Protocol):
    n_classes: int

    def fit_predict(self, x: np.ndarray, y: np.ndarray, subsets: Sequence[np.ndarray],
                    x_query: np.ndarray, seed: int = 0) -> np.ndarray: ...


def _check_subsets(n: int, subsets: Sequence[np.ndarray]) -> list[np.ndarray]:
    out = []
    if len(subsets) == 0:
        raise InvalidInputError("at least one shadow model is needed")
    for s in subsets:
        arr = np.asarray(s, dtype=np.int64)
        if arr.ndim != 1 or arr.size == 0 or arr.min() < 0 or arr.max() >= n:
            raise InvalidInputError("a shadow training subset is empty or out of range")
        out.append(arr)
    return out


@dataclass
class SklearnTrainer:
    """Shadow models from a scikit-learn estimator (cloned, fitted per subset)."""

    estimator: Any
    n_classes: int
    seconds: float = field(default=0.0, init=False)

    def fit_predict(self, x: np.ndarray, y: np.ndarray, subsets: Sequence[np.ndarray],
                    x_query: np.ndarray, seed: int = 0) -> np.ndarray:
        from sklearn.base import clone

        if not hasattr(self.estimator, "predict_proba"):
            raise InvalidInputError(f"shadow estimator {type(self.estimator).__name__} has no "
                                    "predict_proba")
        rows = _check_subsets(len(x), subsets)
        started = time.perf_counter()
        out = np.empty((len(rows), len(x_query), self.n_classes))
        for m, idx in enumerate(rows):
            est = clone(self.estimator)
            if "random_state" in est.get_params():
                est.set_params(random_state=seed + m)
            est.fit(x[idx], y[idx])
            proba = est.predict_proba(x_query)
            full = np.zeros((len(x_query), self.n_classes))
            full[:, np.asarray(est.classes_, dtype=np.int64)] = proba
            out[m] = as_target(lambda _x, p=full: p, name="shadow").log_proba(x_query)
        self.seconds = time.perf_counter() - started
        return out


@dataclass
class TorchTrainer:
    """Shadow models from privlab.learn (plain or DP-SGD per `config`, a TrainConfig)."""

    model_fn: Callable[[], Any]
    config: Any
    n_classes: int
    at_once: bool = True
    seconds: float = field(default=0.0, init=False)
    guarantees: list[Any] = field(default_factory=list, init=False)

    def fit_predict(self, x: np.ndarray, y: np.ndarray, subsets: Sequence[np.ndarray],
                    x_query: np.ndarray, seed: int = 0) -> np.ndarray:
        from privlab.learn.multi import train_many, train_one

        rows = _check_subsets(len(x), subsets)
        seeds = [seed * 1000 + m for m in range(len(rows))]
        # shadow models train on the attacker's own rows, which are not private: their
        # count is public to the attacker, so each subset's size is its public size
        config = self.config.sized_by(int(rows[0].size), override=True)
        started = time.perf_counter()
        equal = len({r.size for r in rows}) == 1
        if self.at_once and equal:
            res = train_many(self.model_fn, x, y, config=config, subsets=rows, seeds=seeds)
            models, self.guarantees = res.models, res.guarantees
        else:
            models, self.guarantees = [], []
            for idx, s in zip(rows, seeds, strict=True):
                one = self.config.sized_by(int(idx.size), override=True)
                model, res1 = train_one(self.model_fn, x[idx], y[idx], one, seed=s)
                models.append(model)
                self.guarantees.append(res1.guarantee)
        self.seconds = time.perf_counter() - started
        return np.stack([as_target(m).log_proba(x_query) for m in models])


def stratified_half(y: np.ndarray, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A random half of each class (so every shadow model sees every class), and the rest.
    Sizes are the same for every call on the same y (needed to train models at once)."""
    ins, outs = [], []
    for c in np.unique(y):
        idx = gen.permutation(np.flatnonzero(y == c))
        h = idx.size // 2
        ins.append(idx[:h])
        outs.append(idx[h:])
    return np.sort(np.concatenate(ins)), np.sort(np.concatenate(outs))
