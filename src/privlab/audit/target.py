"""The audited model as a function X -> log-probabilities (float64), whatever it is.

Membership attacks only need the model's output distribution on a record. Three kinds of
model are accepted: a torch module (its outputs are logits), a scikit-learn estimator with
`predict_proba`, or a plain callable returning probabilities. Everything downstream works on
float64 log-probabilities because float32 cross-entropy rounds the loss of many confidently
fitted training records to exactly 0, which ties them and blunts the loss attack.

Per-record statistics (`RecordStats`) are the features every attack uses: loss, maximum
confidence, entropy, modified entropy (Song & Mittal 2021) and the logit-scaled confidence of
the true label phi = log p_y - log(1 - p_y) (LiRA, Carlini et al. 2022), computed stably from
log-probabilities (log(1 - p_y) as a log-sum-exp over the other classes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import logsumexp

from privlab.errors import InvalidInputError

#: Floor for probabilities handed over as plain numbers (sklearn, callables). Such vectors are
#: often computed as 1 - p, which carries no information below float64's resolution (~1e-16)
#: and is exactly 0 for confident records: log(0) = -inf. Flooring at 1e-15 caps the
#: logit-scaled confidence near 34.5 instead of letting it jump to 690 (which would wreck
#: LiRA's Gaussian fits). Torch targets give logits and need no floor.
PROB_FLOOR = 1e-15


class TargetModel:
    """Wraps a model so that `log_proba(X)` returns (n, k) float64 log-probabilities."""

    def __init__(self, fn: Callable[[np.ndarray], np.ndarray], kind: str, *,
                 outputs: str = "proba", n_classes: int | None = None, name: str = "") -> None:
        self._fn = fn
        self.kind = kind
        self.outputs = outputs
        self.n_classes = n_classes
        self.name = name or kind

    @classmethod
    def from_logits(cls, fn: Callable[[np.ndarray], Any], name: str = "") -> TargetModel:
        """A callable returning unnormalised logits (n, k)."""
        return cls(fn, "logits-callable", outputs="logits", name=name)

    def log_proba(self, x: np.ndarray) -> np.ndarray:
        out = self._fn(x)
        if hasattr(out, "detach"):
            out = out.detach().cpu().numpy()
        arr = np.asarray(out, dtype=np.float64)
        n = len(x)
        if arr.ndim == 1 and self.outputs == "proba":
            raise InvalidInputError(
                f"the model ({self.name}) returned one number per record; membership attacks need "
                "one probability per class (n, k): pass an estimator with predict_proba or a "
                "callable returning class probabilities")
        if arr.ndim != 2 or arr.shape[0] != n or arr.shape[1] < 2:
            raise InvalidInputError(
                f"the model ({self.name}) returned shape {arr.shape} for {n} records; expected "
                f"({n}, k) with k >= 2 classes")
        if not np.all(np.isfinite(arr)):
            raise InvalidInputError(f"the model ({self.name}) returned NaN or infinite outputs")
        if self.n_classes is not None and arr.shape[1] != self.n_classes:
            raise InvalidInputError(f"the model ({self.name}) returned {arr.shape[1]} columns, "
                                    f"expected {self.n_classes}")
        if self.outputs == "logits":
            return arr - logsumexp(arr, axis=1, keepdims=True)
        if arr.min() < -1e-9 or arr.max() > 1 + 1e-9 or \
                np.abs(arr.sum(1) - 1).max() > 1e-3:
            raise InvalidInputError(
                f"the model ({self.name}) does not return probabilities (rows must be in [0, 1] "
                "and sum to 1); if it returns logits wrap it with TargetModel.from_logits(fn)")
        arr = np.clip(arr, PROB_FLOOR, 1.0)
        return np.log(arr / arr.sum(1, keepdims=True))

    def stats(self, x: np.ndarray, y: np.ndarray) -> RecordStats:
        return RecordStats.from_log_proba(self.log_proba(x), y)


def as_target(model: Any, name: str = "") -> TargetModel:
    """Accept a torch module, a scikit-learn estimator, a TargetModel or a proba callable."""
    if isinstance(model, TargetModel):
        return model
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is in the ml extra
        torch = None  # type: ignore[assignment]
    inner = getattr(model, "model_", None)
    if torch is not None and isinstance(inner, torch.nn.Module) and hasattr(model, "_prepare"):
        # a fitted privlab.learn estimator: audit its module's logits (exact float64 losses)
        # rather than its float32 softmax; X goes through the estimator's own checks
        est = model
        wrapped = as_target(inner, name or type(model).__name__)
        return TargetModel(lambda x: wrapped.log_proba(est._prepare(x)), "privlab",
                           outputs="logits", name=wrapped.name)
    if torch is not None and isinstance(model, torch.nn.Module):
        module = model

        def logits(x: np.ndarray) -> np.ndarray:
            module.eval()
            xt = torch.as_tensor(np.ascontiguousarray(x), dtype=torch.float32)
            with torch.no_grad():
                return torch.cat([module(xt[i:i + 4096]) for i in range(0, len(xt), 4096)]
                                 ).double().numpy()

        return TargetModel(logits, "torch", outputs="logits", name=name or type(model).__name__)
    if hasattr(model, "predict_proba") and hasattr(model, "fit"):
        return TargetModel(model.predict_proba, "sklearn", name=name or type(model).__name__)
    if hasattr(model, "predict_proba"):
        return TargetModel(model.predict_proba, "predict_proba", name=name or type(model).__name__)
    if hasattr(model, "fit") or hasattr(model, "predict"):
        raise InvalidInputError(
            f"model {type(model).__name__} has no predict_proba; membership attacks need class "
            "probabilities (e.g. SVC(probability=True), or CalibratedClassifierCV around it)")
    if callable(model):
        return TargetModel(model, "callable", name=name or getattr(model, "__name__", "callable"))
    raise InvalidInputError(
        f"model of type {type(model).__name__} is not supported; pass a torch module, a "
        "scikit-learn estimator with predict_proba, or a callable X -> probabilities")


@dataclass
class RecordStats:
    """Per-record attack features from log-probabilities and true labels."""

    log_proba: np.ndarray   # (n, k)
    labels: np.ndarray      # (n,) int

    @classmethod
    def from_log_proba(cls, log_proba: np.ndarray, y: np.ndarray) -> RecordStats:
        labels = check_labels(y, log_proba.shape[1], len(log_proba))
        return cls(np.asarray(log_proba, dtype=np.float64), labels)

    @property
    def proba(self) -> np.ndarray:
        return np.exp(self.log_proba)

    @property
    def true_log_proba(self) -> np.ndarray:
        return self.log_proba[np.arange(len(self.labels)), self.labels]

    @property
    def loss(self) -> np.ndarray:
        """Cross-entropy -log p_y in float64."""
        return -self.true_log_proba

    @property
    def confidence(self) -> np.ndarray:
        return self.proba.max(1)

    @property
    def entropy(self) -> np.ndarray:
        p = self.proba
        return -(p * self.log_proba).sum(1)

    @property
    def log_one_minus_true(self) -> np.ndarray:
        """log(1 - p_y) as log-sum-exp over the other classes (exact when p_y ~ 1)."""
        other = self.log_proba.copy()
        other[np.arange(len(self.labels)), self.labels] = -np.inf
        return logsumexp(other, axis=1)

    @property
    def phi(self) -> np.ndarray:
        """Logit-scaled confidence log p_y - log(1 - p_y) (LiRA's approximately Gaussian score)."""
        return self.true_log_proba - self.log_one_minus_true

    @property
    def modified_entropy(self) -> np.ndarray:
        """Song & Mittal (2021): -(1-p_y) log p_y - sum_{j!=y} p_j log(1-p_j); low = member."""
        p = self.proba
        rows = np.arange(len(self.labels))
        log1m = np.log1p(-np.clip(p, 0.0, 1.0 - 1e-16))
        log1m[rows, self.labels] = self.log_one_minus_true  # exact where p_y ~ 1
        term = -p * log1m
        term[rows, self.labels] = -(1.0 - p[rows, self.labels]) * self.log_proba[rows, self.labels]
        return term.sum(1)


def check_labels(y: Any, k: int, n: int) -> np.ndarray:
    """Labels must be integer class indices 0..k-1, one per record."""
    arr = np.asarray(y)
    if arr.ndim != 1 or len(arr) != n:
        raise InvalidInputError(f"y must be one label per record ({n}), got shape {arr.shape}")
    if arr.dtype.kind not in "iub":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise InvalidInputError("y must hold integer class indices 0..k-1 (encode labels "
                                    "the way the model was trained)")
    arr = arr.astype(np.int64)
    if n and (arr.min() < 0 or arr.max() >= k):
        raise InvalidInputError(f"y has labels outside 0..{k - 1}, the model's {k} classes")
    return arr
