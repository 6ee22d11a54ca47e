"""A one-hidden-layer MLP (binary classification) trained by federated local steps.

Pure NumPy with hand-written backpropagation, vectorized over clients: each client's copy of
the weights carries a leading client axis, so K clients take their local gradient steps in
one batched pass (padding rows are masked out). Kept independent of torch so the Flower
client processes start fast and the federated package needs no ML extra.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privlab.errors import InvalidInputError
from privlab.federated.data import TabularData
from privlab.federated.messages import Contributions, ParameterSubset, Part


@dataclass(frozen=True)
class MLPConfig:
    hidden: int = 16
    clip_update: float = 1.0  # per-user L2 bound of the model delta
    local_steps: int = 5
    local_lr: float = 0.5
    server_lr: float = 1.0

    def __post_init__(self) -> None:
        if self.hidden < 1 or self.local_steps < 1:
            raise InvalidInputError("hidden and local_steps must be >= 1")
        for name in ("clip_update", "local_lr", "server_lr"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise InvalidInputError(f"{name} must be a finite number > 0, got {value!r}")


@dataclass(frozen=True)
class TabularBatch:
    """The records of the users one `Client` holds, padded to (users, n_max, features)."""

    users: np.ndarray
    x: np.ndarray  # (U, n_max, p)
    y: np.ndarray  # (U, n_max)
    mask: np.ndarray  # (U, n_max)
    x_test: np.ndarray
    y_test: np.ndarray
    mask_test: np.ndarray

    @staticmethod
    def _pad(ptr: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple:
        counts = np.diff(ptr)
        n_max = max(int(counts.max()) if len(counts) else 0, 1)
        u = len(counts)
        xs = np.zeros((u, n_max, x.shape[1]))
        ys = np.zeros((u, n_max))
        mask = np.arange(n_max)[None, :] < counts[:, None]
        owner = np.repeat(np.arange(u), counts)
        pos = np.arange(len(owner)) - np.repeat(ptr[:-1], counts)
        xs[owner, pos] = x[: len(owner)]
        ys[owner, pos] = y[: len(owner)]
        return xs, ys, mask.astype(float)

    @classmethod
    def from_data(cls, data: TabularData, users: np.ndarray | None = None) -> TabularBatch:
        users = np.arange(data.n_users) if users is None else np.asarray(users, dtype=np.int64)
        sub = data.subset_users(users)
        x, y, m = cls._pad(sub.train_indptr, sub.x_train, sub.y_train)
        xt, yt, mt = cls._pad(sub.test_indptr, sub.x_test, sub.y_test)
        return cls(users, x, y, m, xt, yt, mt)

    def select(self, positions: np.ndarray) -> TabularBatch:
        return TabularBatch(self.users[positions], self.x[positions], self.y[positions],
                            self.mask[positions], self.x_test[positions],
                            self.y_test[positions], self.mask_test[positions])


class MLPModel:
    """Logistic output over one ReLU hidden layer; parameters as one flat row 'theta'."""

    table = "theta"

    def __init__(self, n_features: int, config: MLPConfig | None = None):
        self.p = int(n_features)
        self.config = config or MLPConfig()
        self.h = self.config.hidden
        self.size = self.p * self.h + self.h + self.h + 1

    def shapes(self) -> dict[str, tuple[int, int]]:
        return {self.table: (1, self.size)}

    def parts(self, kind: str) -> dict[str, tuple[int, int]]:
        if kind != "update":
            raise InvalidInputError("the MLP task trains with dpfedavg or dpftrl, not dpam")
        return {self.table: (1, self.size)}

    def clip_norms(self, kind: str) -> dict[str, float]:
        return {self.table: self.config.clip_update}

    def init_params(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        w1 = rng.normal(0.0, 1.0 / math.sqrt(self.p), (self.p, self.h))
        w2 = rng.normal(0.0, 1.0 / math.sqrt(self.h), self.h)
        theta = np.concatenate([w1.ravel(), np.zeros(self.h), w2, [0.0]])
        return {self.table: theta[None, :]}

    def unpack(self, theta: np.ndarray) -> tuple[np.ndarray, ...]:
        """(..., size) -> W1 (..., p, h), b1 (..., h), w2 (..., h), b2 (...)."""
        lead = theta.shape[:-1]
        a = self.p * self.h
        w1 = theta[..., :a].reshape(*lead, self.p, self.h)
        b1 = theta[..., a: a + self.h]
        w2 = theta[..., a + self.h: a + 2 * self.h]
        b2 = theta[..., -1]
        return w1, b1, w2, b2

    def logits(self, theta: np.ndarray, x: np.ndarray) -> np.ndarray:
        """theta (U, size), x (U, n, p) -> (U, n)."""
        w1, b1, w2, b2 = self.unpack(theta)
        hidden = np.maximum(np.einsum("unp,uph->unh", x, w1) + b1[:, None, :], 0.0)
        return np.einsum("unh,uh->un", hidden, w2) + b2[:, None]

    def gradient(self, theta: np.ndarray, x: np.ndarray, y: np.ndarray,
                 mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-client gradient of the mean log loss over its rows; also the losses."""
        w1, b1, w2, b2 = self.unpack(theta)
        pre = np.einsum("unp,uph->unh", x, w1) + b1[:, None, :]
        hidden = np.maximum(pre, 0.0)
        logit = np.einsum("unh,uh->un", hidden, w2) + b2[:, None]
        n = np.maximum(mask.sum(axis=1), 1.0)
        prob = 0.5 * (1.0 + np.tanh(0.5 * logit))  # stable sigmoid
        loss = (np.logaddexp(0.0, logit) - y * logit) * mask
        dlogit = (prob - y) * mask / n[:, None]
        g_w2 = np.einsum("unh,un->uh", hidden, dlogit)
        g_b2 = dlogit.sum(axis=1)
        dh = dlogit[:, :, None] * w2[:, None, :] * (pre > 0)
        g_w1 = np.einsum("unp,unh->uph", x, dh)
        g_b1 = dh.sum(axis=1)
        grad = np.concatenate([g_w1.reshape(len(theta), -1), g_b1, g_w2, g_b2[:, None]], axis=1)
        return grad, loss.sum(axis=1) / n

    def needed_rows(self, batch: TabularBatch) -> dict[str, np.ndarray]:
        return {self.table: np.array([0])}

    def update(self, batch: TabularBatch, subset: ParameterSubset,
               hyper: dict[str, float]) -> Contributions:
        """Local GD steps from the published model; the delta is the user's contribution."""
        theta0 = subset.lookup(self.table, np.array([0]))[0]
        u = len(batch.users)
        theta = np.repeat(theta0[None, :], u, axis=0)
        lr = float(hyper.get("local_lr", self.config.local_lr))
        for _ in range(int(hyper.get("local_steps", self.config.local_steps))):
            grad, _ = self.gradient(theta, batch.x, batch.y, batch.mask)
            theta -= lr * grad
        ptr = np.arange(u + 1, dtype=np.int64)
        return Contributions(batch.users, {
            self.table: Part(1, self.size, ptr, np.zeros(u, dtype=np.int64), theta - theta0)})

    def stats(self, batch: TabularBatch, subset: ParameterSubset) -> Contributions:
        raise InvalidInputError("the MLP task trains with dpfedavg or dpftrl, not dpam")

    def evaluate(self, batch: TabularBatch, subset: ParameterSubset) -> dict[str, float]:
        """Sums for the experimenter's test accuracy and log loss (held-out, not DP)."""
        theta0 = subset.lookup(self.table, np.array([0]))[0]
        theta = np.repeat(theta0[None, :], len(batch.users), axis=0)
        logit = self.logits(theta, batch.x_test)
        m = batch.mask_test
        correct = ((logit > 0) == (batch.y_test > 0.5)) * m
        loss = (np.logaddexp(0.0, logit) - batch.y_test * logit) * m
        return {"correct": float(correct.sum()), "logloss": float(loss.sum()),
                "n": float(m.sum())}
