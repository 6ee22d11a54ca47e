"""scikit-learn-style DP classifiers: fit / predict / predict_proba / score / get_params.

Every fitted estimator has `guarantee_` (a `PrivacyGuarantee`). `method="none"` trains the
same model without privacy (a baseline, or an overfit target for membership-inference
audits): its guarantee says NOT private and a `NotPrivateWarning` is raised.

- `DPLogisticRegression`: method "objective" (default; objective perturbation), "output"
  (output perturbation baseline), "dpsgd" or "none". `alpha` is the L2 regularisation of
  (1/n) sum loss + alpha/2 ||w||^2, `data_norm` the public bound on a row's L2 norm.
- `DPMLPClassifier`: the Kobylianska (2025) MLP (LayerNorm, ReLU, Dropout) by DP-SGD or plainly.
- `DPCNNClassifier`: the 4-block GroupNorm CNN for images (n, C, H, W) or flattened rows
  with `image_shape`.

Public facts come from arguments, never from X or y (`privlab.schema.facts.PublicFacts`):

- `classes`: the public class list (e.g. a schema's declared categories); the output layer
  has one unit per declared class whatever the rows hold. A private fit without it is
  refused: one replaced label must not add a class. (`method="none"` may read it from y.)
- DP-SGD (`method="dpsgd"`): `sample_rate` (a public Poisson rate, with `batch_size` the
  public expected batch) or `public_size` (a publicly known row count: q = batch_size /
  public_size). A fit without either is refused: q = batch_size / len(X) would make the
  sampling rate, the steps and the noise multiplier functions of the exact n.
- objective / output perturbation (`DPLogisticRegression`) use n = len(X) in their
  sensitivity. That is legitimate because their neighbouring relation is replace-one (n is the
  same on neighbours, i.e. treated as public; the guarantee notes "n public"). If n itself is
  secret, use DP-SGD with `public_size` or `sample_rate` instead.

`random_state` seeds initialisation, batches AND the DP noise (for tests only; the guarantee
notes it); None draws the noise from a CSPRNG.
"""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from privlab.core.guarantee import PrivacyGuarantee
from privlab.errors import InvalidInputError
from privlab.learn.data import as_feature_matrix, encode_labels


class NotPrivateWarning(UserWarning):
    """A model was trained without differential privacy (method='none')."""


def _warn_plain(name: str) -> None:
    warnings.warn(f"{name}(method='none') trains WITHOUT differential privacy; its guarantee_ "
                  "says so. Use it as a baseline or an audit target only.", NotPrivateWarning,
                  stacklevel=3)


CLASSES_NEEDED = ("classes: pass the public class list (e.g. classes=[0, 1], or a schema's "
                  "categories); a private fit does not read it from y")
RATE_NEEDED = ("sample_rate: DP-SGD needs a public sampling rate; pass sample_rate=Q (batch_size "
               "is then the public expected batch) or public_size=N (a publicly known row count), "
               "not len(X)")


def _public_facts(est: Any, private: bool) -> Any:
    """The estimator's public facts, from its arguments alone (never from X or y)."""
    from privlab.schema.facts import PublicFacts

    classes = getattr(est, "classes", None)
    if private and classes is None:
        raise InvalidInputError(CLASSES_NEEDED)
    size = getattr(est, "public_size", None)
    if size is not None and (isinstance(size, bool) or not isinstance(size, (int, np.integer))
                             or size < 1):
        raise InvalidInputError(f"public_size must be a whole number >= 1, got {size!r}")
    return PublicFacts().with_arguments(
        classes=classes, sample_rate=getattr(est, "sample_rate", None)).with_argument(
        "size", size, "public_size")


def _check_fitted(est: Any) -> None:
    if not hasattr(est, "guarantee_"):
        raise InvalidInputError(f"this {type(est).__name__} is not fitted yet; call fit(X, y) "
                                "first")


class _TorchClassifier(ClassifierMixin, BaseEstimator):
    """Shared fit/predict of the torch-based estimators (subclasses build the module)."""

    _methods: tuple[str, ...] = ("dpsgd", "none")

    def _build(self, n_features: int, n_classes: int, x: np.ndarray) -> Any:
        raise NotImplementedError

    def _prepare(self, x: Any) -> np.ndarray:
        return as_feature_matrix(x)

    def _config(self) -> Any:
        from privlab.learn.dpsgd import TrainConfig

        if self.method not in self._methods:
            raise InvalidInputError(f"method must be one of {', '.join(self._methods)}, got "
                                    f"{self.method!r}")
        private = self.method == "dpsgd"
        if private and self.epsilon is None and self.noise_multiplier is None:
            raise InvalidInputError("method='dpsgd' needs epsilon (or noise_multiplier); use "
                                    "method='none' for a non-private baseline")
        return TrainConfig(
            method="dpsgd" if private else "none",
            epsilon=(self.epsilon if self.noise_multiplier is None else None) if private
            else None,
            noise_multiplier=self.noise_multiplier if private else None,
            delta=self.delta, clip=self.clip, epochs=self.epochs, batch_size=self.batch_size,
            lr=self.lr, optimizer=self.optimizer, weight_decay=getattr(self, "alpha", 0.0) or 0.0,
            accountant=self.accountant, engine=self.engine,
            sample_rate=self._rate(self.batch_size) if private else None)

    def _rate(self, batch_size: int) -> float:
        q, self.rate_source_ = _public_facts(self, True).sample_rate(batch_size,
                                                                     missing=RATE_NEEDED)
        return q

    def fit(self, X: Any, y: Any, progress: Any = None) -> _TorchClassifier:  # noqa: N803
        """Train; `progress(epoch, epochs, metrics)` is called after each epoch if given."""
        import torch

        from privlab.learn.dpsgd import train_classifier

        x = self._prepare(X)
        facts = _public_facts(self, self.method == "dpsgd")
        codes, classes = encode_labels(y, facts.optional("classes"))
        if len(codes) != x.shape[0]:
            raise InvalidInputError(f"X has {x.shape[0]} rows but y has {len(codes)}")
        config = self._config()
        if config.method == "none":
            _warn_plain(type(self).__name__)
        seed = self.random_state
        if seed is not None:
            torch.manual_seed(int(seed))
        module = self._build(x.shape[1] if x.ndim == 2 else int(np.prod(x.shape[1:])),
                             len(classes), x)
        if seed is not None:
            torch.manual_seed(int(seed) + 1)
        result = train_classifier(module, x, codes, config, rng=seed, progress=progress)
        self.model_ = module
        self.classes_ = classes
        self.n_features_in_ = x.shape[1] if x.ndim == 2 else int(np.prod(x.shape[1:]))
        self.training_ = result
        notes = ["classes_ from the public `classes` argument; the architecture is public"]
        if config.method == "dpsgd":
            notes.append(f"sample rate {config.sample_rate:.4g} from {self.rate_source_}")
        self.guarantee_: PrivacyGuarantee = result.guarantee.with_notes(*notes) \
            if result.guarantee.is_dp else result.guarantee
        return self

    def _logits(self, X: Any) -> Any:
        from privlab.learn.dpsgd import predict_logits

        _check_fitted(self)
        return predict_logits(self.model_, self._prepare(X))

    def predict_proba(self, X: Any) -> np.ndarray:  # noqa: N803
        import torch

        return torch.softmax(self._logits(X), dim=1).numpy().astype(np.float64)

    def decision_function(self, X: Any) -> np.ndarray:  # noqa: N803
        logits = self._logits(X).numpy().astype(np.float64)
        return logits[:, 1] - logits[:, 0] if logits.shape[1] == 2 else logits

    def predict(self, X: Any) -> np.ndarray:  # noqa: N803
        _check_fitted(self)
        return self.classes_[self.predict_proba(X).argmax(axis=1)]

    def per_example_loss(self, X: Any, y: Any) -> np.ndarray:  # noqa: N803
        """Cross-entropy of each row (the score of a loss-based membership attack)."""
        proba = self.predict_proba(X)
        return per_example_log_loss(proba, y, self.classes_)

    def save(self, path: str | Path) -> None:
        save_model(self, path)


def per_example_log_loss(proba: np.ndarray, y: Any, classes: np.ndarray) -> np.ndarray:
    """-log p(y_i | x_i) for each row, with labels mapped through `classes`."""
    y = np.asarray(y)
    lookup = {c: i for i, c in enumerate(classes.tolist())}
    try:
        idx = np.array([lookup[v] for v in y.tolist()])
    except KeyError as exc:
        raise InvalidInputError(f"label {exc.args[0]!r} was not seen in fit; classes are "
                                f"{classes.tolist()}") from None
    if len(idx) != proba.shape[0]:
        raise InvalidInputError(f"X has {proba.shape[0]} rows but y has {len(idx)}")
    p = proba[np.arange(len(idx)), idx]
    return -np.log(np.clip(p, 1e-300, 1.0))


class DPMLPClassifier(_TorchClassifier):
    """Kobylianska's MLP (Linear-LayerNorm-ReLU-Dropout blocks) trained by DP-SGD or plainly."""

    def __init__(self, hidden_layer_sizes: tuple[int, ...] = (128, 64), dropout: float = 0.2,
                 layer_norm: bool = True, epsilon: float | None = 1.0, delta: float = 1e-5,
                 method: str = "dpsgd", clip: float = 1.0, epochs: int = 10,
                 batch_size: int = 256, lr: float = 1e-3, optimizer: str = "adam",
                 noise_multiplier: float | None = None, accountant: str = "pld",
                 engine: str = "auto", random_state: int | None = None,
                 classes: Any = None, sample_rate: float | None = None,
                 public_size: int | None = None) -> None:
        self.classes = classes
        self.sample_rate = sample_rate
        self.public_size = public_size
        self.hidden_layer_sizes = hidden_layer_sizes
        self.dropout = dropout
        self.layer_norm = layer_norm
        self.epsilon = epsilon
        self.delta = delta
        self.method = method
        self.clip = clip
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.optimizer = optimizer
        self.noise_multiplier = noise_multiplier
        self.accountant = accountant
        self.engine = engine
        self.random_state = random_state

    def _build(self, n_features: int, n_classes: int, x: np.ndarray) -> Any:
        from privlab.learn.models import SeedMLP

        if x.ndim != 2:
            raise InvalidInputError(f"DPMLPClassifier needs 2-D X (rows x features), got shape "
                                    f"{x.shape}")
        if not (0 <= self.dropout < 1):
            raise InvalidInputError(f"dropout must be in [0, 1), got {self.dropout!r}")
        return SeedMLP(n_features, tuple(self.hidden_layer_sizes), n_classes,
                       dropout=self.dropout, layer_norm=self.layer_norm)


class DPCNNClassifier(_TorchClassifier):
    """The 4-block GroupNorm CNN for small images, trained by DP-SGD or plainly."""

    def __init__(self, channels: tuple[int, ...] = (32, 64, 128, 256),
                 image_shape: tuple[int, int, int] | None = None, epsilon: float | None = 1.0,
                 delta: float = 1e-5, method: str = "dpsgd", clip: float = 1.0,
                 epochs: int = 10, batch_size: int = 64, lr: float = 1e-3,
                 optimizer: str = "adam", noise_multiplier: float | None = None,
                 accountant: str = "pld", engine: str = "auto",
                 random_state: int | None = None, classes: Any = None,
                 sample_rate: float | None = None,
                 public_size: int | None = None) -> None:
        self.classes = classes
        self.sample_rate = sample_rate
        self.public_size = public_size
        self.channels = channels
        self.image_shape = image_shape
        self.epsilon = epsilon
        self.delta = delta
        self.method = method
        self.clip = clip
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.optimizer = optimizer
        self.noise_multiplier = noise_multiplier
        self.accountant = accountant
        self.engine = engine
        self.random_state = random_state

    def _prepare(self, x: Any) -> np.ndarray:
        arr = np.asarray(x, dtype=np.float32) if not hasattr(x, "columns") else \
            as_feature_matrix(x)
        if self.image_shape is not None:
            shape = tuple(int(v) for v in self.image_shape)
            if len(shape) != 3 or arr.ndim < 2 or int(np.prod(arr.shape[1:])) != int(
                    np.prod(shape)):
                raise InvalidInputError(f"X rows have {int(np.prod(arr.shape[1:]))} values but "
                                        f"image_shape {self.image_shape} needs "
                                        f"{int(np.prod(shape))}")
            arr = arr.reshape((arr.shape[0], *shape))
        if arr.ndim == 3:
            arr = arr[:, None]
        if arr.ndim != 4:
            raise InvalidInputError(f"DPCNNClassifier needs images (n, C, H, W) or rows with "
                                    f"image_shape=(C, H, W); got shape {arr.shape}")
        if arr.shape[2] != arr.shape[3]:
            raise InvalidInputError(f"images must be square, got {arr.shape[2]}x{arr.shape[3]}")
        if arr.shape[0] == 0 or not np.all(np.isfinite(arr)):
            raise InvalidInputError("X is empty or has missing / infinite pixel values")
        return arr

    def _build(self, n_features: int, n_classes: int, x: np.ndarray) -> Any:
        from privlab.learn.models import SmallCNN

        return SmallCNN(in_channels=x.shape[1], num_classes=n_classes,
                        channels=tuple(self.channels), image_size=x.shape[2])


class DPLogisticRegression(ClassifierMixin, BaseEstimator):
    """L2-regularised logistic regression with a DP guarantee (see module docstring)."""

    def __init__(self, epsilon: float | None = 1.0, delta: float = 0.0,
                 method: str = "objective", alpha: float = 1e-4, data_norm: float = 1.0,
                 fit_intercept: bool = True, clip: float = 1.0, epochs: int = 10,
                 batch_size: int = 256, lr: float = 0.01, accountant: str = "pld",
                 random_state: int | None = None, classes: Any = None,
                 sample_rate: float | None = None,
                 public_size: int | None = None) -> None:
        self.classes = classes
        self.sample_rate = sample_rate
        self.public_size = public_size
        self.epsilon = epsilon
        self.delta = delta
        self.method = method
        self.alpha = alpha
        self.data_norm = data_norm
        self.fit_intercept = fit_intercept
        self.clip = clip
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.accountant = accountant
        self.random_state = random_state

    def fit(self, X: Any, y: Any, progress: Any = None) -> DPLogisticRegression:  # noqa: N803
        from privlab.learn import objective

        methods = ("objective", "output", "dpsgd", "none")
        if self.method not in methods:
            raise InvalidInputError(f"method must be one of {', '.join(methods)}, got "
                                    f"{self.method!r}")
        x = as_feature_matrix(X)
        self.n_features_in_ = x.shape[1]
        facts = _public_facts(self, self.method != "none")
        if self.method == "dpsgd":
            return self._fit_dpsgd(x, y, progress)
        if self.method == "none":
            _warn_plain("DPLogisticRegression")
            lin = objective.logistic_plain(x, y, l2=self.alpha, data_norm=self.data_norm,
                                           fit_intercept=self.fit_intercept,
                                           classes=facts.optional("classes"))
        else:
            if self.epsilon is None:
                raise InvalidInputError(f"method={self.method!r} needs epsilon; use "
                                        "method='none' for a non-private baseline")
            fn = (objective.logistic_objective_perturbation if self.method == "objective"
                  else objective.logistic_output_perturbation)
            lin = fn(x, y, self.epsilon, self.delta, l2=self.alpha, data_norm=self.data_norm,
                     fit_intercept=self.fit_intercept, rng=self.random_state,
                     classes=facts.classes(CLASSES_NEEDED))
        self.linear_ = lin
        self.classes_ = lin.classes
        self.coef_ = lin.coef
        self.intercept_ = lin.intercept
        self.guarantee_ = lin.guarantee.with_notes(
            "classes_ from the public `classes` argument") if lin.guarantee.is_dp \
            else lin.guarantee
        return self

    def _fit_dpsgd(self, x: np.ndarray, y: Any, progress: Any) -> DPLogisticRegression:
        mlp = _LogisticDPSGD(epsilon=self.epsilon, delta=self.delta, clip=self.clip,
                             epochs=self.epochs, batch_size=self.batch_size, lr=self.lr,
                             alpha=self.alpha, accountant=self.accountant,
                             random_state=self.random_state, classes=self.classes,
                             sample_rate=self.sample_rate, public_size=self.public_size)
        if self.delta <= 0:
            raise InvalidInputError("method='dpsgd' needs delta > 0 (e.g. 1e-5)")
        mlp.fit(x, y, progress=progress)
        self.torch_ = mlp
        self.linear_ = None
        self.classes_ = mlp.classes_
        weight = mlp.model_.linear.weight.detach().numpy().astype(np.float64)
        bias = mlp.model_.linear.bias.detach().numpy().astype(np.float64)
        if weight.shape[0] == 2:  # softmax with 2 logits == logistic on their difference
            self.coef_, self.intercept_ = (weight[1] - weight[0])[None], np.array(
                [bias[1] - bias[0]])
        else:
            self.coef_, self.intercept_ = weight, bias
        self.guarantee_ = mlp.guarantee_
        return self

    def decision_function(self, X: Any) -> np.ndarray:  # noqa: N803
        _check_fitted(self)
        x = as_feature_matrix(X).astype(np.float64)
        if x.shape[1] != self.n_features_in_:
            raise InvalidInputError(f"X has {x.shape[1]} features, the model was fitted on "
                                    f"{self.n_features_in_}")
        if self.linear_ is not None:
            return self.linear_.decision_function(x)
        return self.torch_.decision_function(x)

    def predict_proba(self, X: Any) -> np.ndarray:  # noqa: N803
        _check_fitted(self)
        if self.linear_ is not None:
            return self.linear_.predict_proba(as_feature_matrix(X))
        return self.torch_.predict_proba(X)

    def predict(self, X: Any) -> np.ndarray:  # noqa: N803
        _check_fitted(self)
        return self.classes_[self.predict_proba(X).argmax(axis=1)]

    def per_example_loss(self, X: Any, y: Any) -> np.ndarray:  # noqa: N803
        return per_example_log_loss(self.predict_proba(X), y, self.classes_)

    def save(self, path: str | Path) -> None:
        save_model(self, path)


class _LogisticDPSGD(_TorchClassifier):
    """Multinomial logistic regression trained by DP-SGD (used by DPLogisticRegression)."""

    def __init__(self, epsilon: float | None = 1.0, delta: float = 1e-5, clip: float = 1.0,
                 epochs: int = 10, batch_size: int = 256, lr: float = 0.01,
                 alpha: float = 0.0, accountant: str = "pld",
                 random_state: int | None = None, classes: Any = None,
                 sample_rate: float | None = None,
                 public_size: int | None = None) -> None:
        self.classes = classes
        self.sample_rate = sample_rate
        self.public_size = public_size
        self.epsilon = epsilon
        self.delta = delta
        self.clip = clip
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.alpha = alpha
        self.accountant = accountant
        self.random_state = random_state
        self.method = "dpsgd"
        self.noise_multiplier = None
        self.optimizer = "adam"
        self.engine = "auto"

    def _build(self, n_features: int, n_classes: int, x: np.ndarray) -> Any:
        from privlab.learn.models import LogisticModel

        return LogisticModel(n_features, n_classes)


def without_timings(estimator: Any) -> Any:
    """A shallow copy of `estimator` whose training record holds no wall-clock time.

    How long a run took follows the private row count (the loop time grows with n), so a
    saved model keeps none of it: `training_.seconds`, `training_.loop_seconds` and
    `training_.plan.calibration_seconds` are None in the copy (issue 29). The estimator
    itself keeps its timings for the caller's own use."""
    import copy
    import dataclasses

    out = copy.copy(estimator)
    training = getattr(out, "training_", None)
    if training is not None:
        plan = training.plan
        out.training_ = dataclasses.replace(
            training, seconds=None, loop_seconds=None,
            plan=None if plan is None else dataclasses.replace(plan, calibration_seconds=None))
    inner = getattr(out, "torch_", None)
    if inner is not None:
        out.torch_ = without_timings(inner)
    return out


def save_model(estimator: Any, path: str | Path, extra: dict[str, Any] | None = None) -> None:
    """Pickle a fitted estimator (and e.g. its preprocessor) atomically, with its guarantee,
    and without wall-clock timings (`without_timings`).

    Load only files you trust (`load_model` unpickles)."""
    from privlab.utils.atomic import atomic_open

    _check_fitted(estimator)
    payload = {"format": "privlab-model-1", "estimator": without_timings(estimator),
               "guarantee": estimator.guarantee_.to_dict(), **(extra or {})}
    try:
        with atomic_open(path, "wb") as handle:
            pickle.dump(payload, handle, protocol=pickle.HIGHEST_PROTOCOL)
    except OSError as exc:
        raise InvalidInputError(f"cannot write model file {path}: {exc.strerror or exc}") from None


def load_model(path: str | Path) -> dict[str, Any]:
    """Read a file written by `save_model` (a pickle: load only files you trust)."""
    p = Path(path)
    if not p.is_file():
        raise InvalidInputError(f"model file not found: {p}")
    try:
        with p.open("rb") as handle:
            payload = pickle.load(handle)  # noqa: S301 - documented: trusted files only
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError) as exc:
        raise InvalidInputError(f"{p} is not a privlab model file: {exc}") from None
    if not isinstance(payload, dict) or payload.get("format") != "privlab-model-1":
        raise InvalidInputError(f"{p} is not a privlab model file")
    return payload

