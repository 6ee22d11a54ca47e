"""DP-SGD trainer: Poisson sampling, per-example clipping, Gaussian noise, PLD accounting.

One DP-SGD step (Abadi et al. 2016), exactly as the accountant assumes it:
1. Poisson sampling: every training row joins the batch independently with probability
   q = batch_size / n (drawn as k ~ Binomial(n, q) and a uniform k-subset, which is the same
   distribution); an empty batch still takes a (pure-noise) step.
2. Each example's gradient is clipped to L2 norm <= clip (`engine.GradientClipper`).
3. The clipped sum gets N(0, (sigma * clip)^2) noise per coordinate and is divided by the
   EXPECTED batch size q * n (a constant, so one example changes the update by <= clip / qn).
4. The optimizer (Adam or SGD) takes the noisy average as the gradient: post-processing.

sigma is the smallest noise multiplier whose epsilon at (q, steps, delta) meets the target
under the PLD accountant (`privlab.core.accounting`); the RDP epsilon of the same run is
reported beside it. Sampling and noise come from `privlab.core.rng.make_rng` (ChaCha20
CSPRNG unless a seed is given for testing). Steps 1 to 3 (Poisson batch, clip factors with
their norm margin, noise) are the shared DP-SGD core, `privlab.core.dpsgd`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import torch
from torch import nn

from privlab.core.dpsgd import poisson_batch, set_noisy_grads
from privlab.core.guarantee import PrivacyGuarantee, check_delta, check_epsilon
from privlab.core.rng import SEEDED_NOTE, RngLike, is_seeded, make_rng
from privlab.errors import InvalidInputError
from privlab.learn.data import check_batch_size
from privlab.learn.engine import GradientClipper, LossFn, per_sample_cross_entropy

Progress = Callable[[int, int, dict[str, float]], None]

FLOAT_NOTE = ("noise is continuous Gaussian in float32 (standard DP-SGD practice); the "
              "floating-point caveat of Mironov 2012 is not addressed for model weights")


#: The one-line refusal of a private TrainConfig without a public rate (issue 21): the rate
#: must never be read from the rows passed.
RATE_REQUIRED = ("TrainConfig: DP-SGD needs a public sampling rate: pass sample_rate=q or "
                 "public_size=N (a declared or DP-estimated row count, never len(x))")


@dataclass
class TrainConfig:
    """What to train and how. `method`: "dpsgd" (private) or "none" (plain baseline).

    For DP-SGD give either `epsilon` (sigma is calibrated) or `noise_multiplier` (epsilon is
    computed). `batch_size` is the expected Poisson batch size.

    `sample_rate`: a PUBLIC Poisson rate q (from a declared public size, an explicit option,
    or a DP estimate of n). The accountant assumes q does not depend on the data; the default
    q = batch_size / n reads the exact n. With `sample_rate` set, steps per epoch are
    ceil(1 / q) and `batch_size` is the public expected batch size that normalises the noisy
    sum, so nothing in the plan depends on the exact row count. `public_size`: a PUBLIC row
    count N instead (q = batch_size / N). A private run needs one of the two (issue 21: the
    rate is never read from the rows passed; `RATE_REQUIRED`). `public_size_source`: "public"
    (a declared or caller-given count) or "rows" (a caller that had no public count passed
    the exact number of rows: the guarantee's note then says so without printing it, and the
    caller names the rate in `not_covered`).
    """

    method: str = "dpsgd"
    epsilon: float | None = None
    delta: float = 1e-5
    clip: float = 1.0
    epochs: int = 10
    batch_size: int = 256
    lr: float = 1e-3
    optimizer: str = "adam"
    weight_decay: float = 0.0
    noise_multiplier: float | None = None
    accountant: str = "pld"
    engine: str = "auto"
    sample_rate: float | None = None
    public_size: int | None = None
    public_size_source: str = "public"

    def public_rate(self) -> float | None:
        """The public Poisson rate: `sample_rate`, else batch_size / `public_size`, else None."""
        if self.sample_rate is not None:
            return float(self.sample_rate)
        if self.public_size is not None:
            return min(1.0, self.batch_size / self.public_size)
        return None

    def sized_by(self, n: int, *, override: bool = False) -> TrainConfig:
        """This config with `n` as public_size, for DP-SGD on rows whose count is public to
        the caller (an audit's own runs, an attacker's shadow models), when no public rate
        was given; `override` also replaces a given public_size (a sample_rate is kept)."""
        if self.method != "dpsgd" or self.sample_rate is not None or (
                self.public_size is not None and not override):
            return self
        return replace(self, public_size=int(n))

    def validate(self, n: int) -> None:
        if self.method not in ("dpsgd", "none"):
            raise InvalidInputError(f"method must be 'dpsgd' or 'none', got {self.method!r}")
        if isinstance(self.epochs, bool) or not isinstance(self.epochs, (int, np.integer)) \
                or self.epochs < 1:
            raise InvalidInputError(f"epochs must be a whole number >= 1, got {self.epochs!r}")
        if self.public_size is not None and (
                isinstance(self.public_size, bool)
                or not isinstance(self.public_size, (int, np.integer)) or self.public_size < 1):
            raise InvalidInputError(f"public_size must be a whole number >= 1, got "
                                    f"{self.public_size!r}")
        if self.public_size_source not in ("public", "rows"):
            raise InvalidInputError(f"public_size_source must be 'public' or 'rows', got "
                                    f"{self.public_size_source!r}")
        if self.public_size is not None and self.sample_rate is not None:
            raise InvalidInputError("TrainConfig: pass sample_rate or public_size, not both")
        if self.sample_rate is None and self.public_size is None:
            if self.method == "dpsgd":
                raise InvalidInputError(RATE_REQUIRED)
            check_batch_size(self.batch_size, n)
        elif self.sample_rate is None:
            check_batch_size(self.batch_size, int(self.public_size))  # type: ignore[arg-type]
        else:
            check_batch_size(self.batch_size, self.batch_size)
            q = self.sample_rate
            if isinstance(q, bool) or not isinstance(q, (int, float)) or not (0 < q <= 1):
                raise InvalidInputError(f"sample_rate must be in (0, 1], got {q!r}")
        if not (self.lr > 0):
            raise InvalidInputError(f"lr must be > 0, got {self.lr!r}")
        if self.optimizer not in ("adam", "sgd"):
            raise InvalidInputError(f"optimizer must be 'adam' or 'sgd', got {self.optimizer!r}")
        if self.method == "none":
            return
        if not (isinstance(self.clip, (int, float)) and math.isfinite(self.clip)
                and self.clip > 0):
            raise InvalidInputError(f"clip must be a finite number > 0, got {self.clip!r}")
        if self.accountant not in ("pld", "rdp"):
            raise InvalidInputError(f"accountant must be 'pld' or 'rdp', got {self.accountant!r}")
        check_delta(self.delta)
        if self.delta <= 0:
            raise InvalidInputError("delta must be > 0 for DP-SGD (e.g. 1e-5, below 1/n)")
        size = (self.public_size if self.sample_rate is None
                else self.batch_size / self.sample_rate)
        if self.delta >= 1.0 / size:  # type: ignore[operator]
            what = ("1/public_size" if self.sample_rate is None
                    else "1/(batch size / sample rate)")
            raise InvalidInputError(f"delta={self.delta:g} is not below {what} = "
                                    f"{1 / size:.3g}; such a delta allows releasing a record "
                                    "outright")
        if (self.epsilon is None) == (self.noise_multiplier is None):
            raise InvalidInputError("DP-SGD needs exactly one of epsilon (target) or "
                                    "noise_multiplier")
        if self.epsilon is not None:
            check_epsilon(self.epsilon)
        elif not (self.noise_multiplier > 0):
            raise InvalidInputError(f"noise_multiplier must be > 0, got {self.noise_multiplier}")


@dataclass
class DPSGDPlan:
    """The privacy-relevant parameters of a DP-SGD run, enough to recompute its epsilon."""

    noise_multiplier: float
    sample_rate: float
    steps: int
    steps_per_epoch: int
    expected_batch_size: float
    delta: float
    clip: float
    epsilon_pld: float
    epsilon_rdp: float
    calibration_seconds: float | None = 0.0  # None in a saved model (not protected)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan_dpsgd(n: int, config: TrainConfig) -> DPSGDPlan:
    """Calibrate sigma (or take it) and check that training can still learn something."""
    from privlab.core import accounting

    config.validate(n)
    q = config.public_rate()
    if q is None:
        raise InvalidInputError(RATE_REQUIRED)
    if config.sample_rate is None:  # public size N: as batch/n would on N rows
        size = int(config.public_size)  # type: ignore[arg-type]
        per_epoch = math.ceil(size / config.batch_size)
        expected = q * size
    else:  # public rate: the plan does not read n
        per_epoch = math.ceil(1.0 / q - 1e-9)
        expected = float(config.batch_size)
    rows = f"at sample rate {q:.4g}"
    steps = per_epoch * int(config.epochs)
    started = time.perf_counter()
    if config.noise_multiplier is None:
        try:
            with quiet_rdp_warnings():
                sigma = accounting.calibrate_noise_multiplier(config.epsilon, config.delta, q,
                                                              steps, accountant=config.accountant)
        except InvalidInputError as exc:
            raise InvalidInputError(
                f"epsilon={config.epsilon:g} is too small for useful training {rows} "
                f"({steps} steps at batch {config.batch_size}): {exc}") from None
    else:
        sigma = float(config.noise_multiplier)
    seconds = time.perf_counter() - started
    # The noisy average has per-coordinate noise std sigma*clip/(q n); once that reaches the
    # clip, the noise on EVERY coordinate exceeds the largest possible total signal (one
    # clipped batch mean has norm <= clip): nothing useful can be learnt.
    if config.epsilon is not None and sigma >= config.batch_size:
        raise InvalidInputError(
            f"epsilon={config.epsilon:g} is too small for useful training {rows}: it needs "
            f"noise multiplier {sigma:.3g} >= the batch size {config.batch_size}, so noise "
            "swamps every update; raise epsilon, the batch size or the number of rows, or "
            "train fewer epochs")
    eps_pld = accounting.dpsgd_epsilon(sigma, q, steps, config.delta, "pld")
    with quiet_rdp_warnings():
        eps_rdp = accounting.dpsgd_epsilon(sigma, q, steps, config.delta, "rdp")
    return DPSGDPlan(sigma, q, steps, per_epoch, expected, config.delta, float(config.clip),
                     eps_pld, eps_rdp, seconds)


@contextlib.contextmanager
def quiet_rdp_warnings() -> Iterator[None]:
    """Silence dp-accounting's RDP 'failed to converge ... excluding this order' log lines
    (dropping an order only loosens the RDP bound; the comparison figure stays valid)."""
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def dpsgd_guarantee(plan: DPSGDPlan, accountant: str = "pld", *, engine: str = "",
                    seeded: bool = False, extra: tuple[str, ...] = ()) -> PrivacyGuarantee:
    """The guarantee of a planned DP-SGD run (add/remove-one-record neighbours)."""
    from privlab.core import accounting

    with quiet_rdp_warnings():
        g = accounting.guarantee_for_dpsgd(plan.noise_multiplier, plan.sample_rate, plan.steps,
                                           plan.delta, accountant,
                                           mechanism="DP-SGD (Poisson-subsampled Gaussian, "
                                                     "per-example L2 clipping)")
    other = "rdp" if accountant == "pld" else "pld"
    notes = [f"clipping norm C = {plan.clip:g}; noise std sigma*C = "
             f"{plan.noise_multiplier * plan.clip:.4g}; update = (sum of clipped gradients + "
             f"noise) / expected batch size {plan.expected_batch_size:g}",
             f"same run by the {other.upper()} accountant: epsilon = "
             f"{plan.epsilon_rdp if other == 'rdp' else plan.epsilon_pld:.4g}",
             FLOAT_NOTE]
    if engine:
        notes.append(f"per-example gradients by the {engine!r} engine")
    if seeded:
        notes.append(SEEDED_NOTE + " (Poisson sampling and gradient noise)")
    return g.with_notes(*notes, *extra)


@dataclass
class TrainResult:
    """What `train_classifier` returns besides the trained module."""

    guarantee: PrivacyGuarantee
    plan: DPSGDPlan | None
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float | None = 0.0  # wall-clock times: None in a saved model (without_timings)
    engine: str = "none"
    loop_seconds: float | None = 0.0  # the training loop alone (no calibration or accounting)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"guarantee": self.guarantee.to_dict(), "history": self.history,
                               "seconds": self.seconds, "loop_seconds": self.loop_seconds,
                               "engine": self.engine}
        if self.plan is not None:
            out.update(self.plan.to_dict())
        return out


def rate_note(config: TrainConfig) -> tuple[str, ...]:
    """Guarantee note naming where the rate came from (an exact row count is not printed)."""
    if config.sample_rate is not None:
        return ()
    if config.public_size_source == "rows":
        return ("sample rate = batch_size / the exact number of rows trained on (no public "
                "count was given: the rate is not covered, see not_covered)",)
    return (f"sample rate = batch_size / public_size {config.public_size} (a public count the "
            "caller passed, never the rows' count)",)


def make_optimizer(params: list[torch.Tensor], config: TrainConfig) -> torch.optim.Optimizer:
    # fused: one kernel per step instead of ~7 per tensor (elementwise, so one optimizer over
    # M stacked models is M independent optimizers)
    if config.optimizer == "sgd":
        return torch.optim.SGD(params, lr=config.lr, momentum=0.9,
                               weight_decay=config.weight_decay, fused=True)
    return torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay, fused=True)


def _as_tensors(x: np.ndarray | torch.Tensor, y: np.ndarray | torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
    xt = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(x))
    yt = y if isinstance(y, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(y))
    return xt.float(), yt


def train_classifier(model: nn.Module, x: np.ndarray | torch.Tensor,
                     y: np.ndarray | torch.Tensor, config: TrainConfig, *,
                     rng: RngLike = None, loss_fn: LossFn | None = None,
                     progress: Progress | None = None) -> TrainResult:
    """Train `model` in place on tensors (no DataLoader), privately or not per `config`."""
    xt, yt = _as_tensors(x, y)
    n = int(xt.shape[0])
    if yt.shape[0] != n:
        raise InvalidInputError(f"X has {n} rows but y has {yt.shape[0]}")
    config.validate(n)
    gen = make_rng(rng)
    loss_fn = loss_fn or per_sample_cross_entropy
    started = time.perf_counter()
    if config.method == "none":
        history = _train_plain(model, xt, yt, config, gen, loss_fn, progress)
        loop = time.perf_counter() - started
        guarantee = PrivacyGuarantee.not_private(
            "plain training (no DP-SGD)", "no clipping and no noise: the model can memorise "
            "training records (use it as a baseline or audit target only)")
        model.eval()
        return TrainResult(guarantee, None, history, time.perf_counter() - started, "none",
                           loop)
    plan = plan_dpsgd(n, config)
    clipper = GradientClipper(model, config.clip, loss_fn, engine=config.engine)
    loop_start = time.perf_counter()
    history = _train_dp(model, xt, yt, config, plan, clipper, gen, progress)
    loop = time.perf_counter() - loop_start
    guarantee = dpsgd_guarantee(plan, config.accountant, engine=clipper.engine,
                                seeded=is_seeded(rng),
                                extra=rate_note(config))
    model.eval()
    return TrainResult(guarantee, plan, history, time.perf_counter() - started, clipper.engine,
                       loop)


def _train_plain(model: nn.Module, x: torch.Tensor, y: torch.Tensor, config: TrainConfig,
                 gen: np.random.Generator, loss_fn: LossFn,
                 progress: Progress | None) -> list[dict[str, float]]:
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(params, config)
    n, b = x.shape[0], config.batch_size
    history = []
    model.train()
    for epoch in range(int(config.epochs)):
        order = torch.from_numpy(gen.permutation(n))
        total, correct = 0.0, 0
        for start in range(0, n, b):
            idx = order[start:start + b]
            xb, yb = x[idx], y[idx]
            opt.zero_grad(set_to_none=True)
            logits = model(xb)
            losses = loss_fn(logits, yb)
            losses.mean().backward()
            opt.step()
            total += float(losses.detach().sum())
            correct += int((logits.detach().argmax(1) == yb).sum()) if logits.dim() == 2 else 0
        row = {"epoch": epoch + 1, "loss": total / n, "train_accuracy": correct / n}
        history.append(row)
        if progress:
            progress(epoch + 1, int(config.epochs), row)
    return history


def _train_dp(model: nn.Module, x: torch.Tensor, y: torch.Tensor, config: TrainConfig,
              plan: DPSGDPlan, clipper: GradientClipper, gen: np.random.Generator,
              progress: Progress | None) -> list[dict[str, float]]:
    params = clipper.params
    opt = make_optimizer(params, config)
    n = x.shape[0]
    std = plan.noise_multiplier * plan.clip
    denom = plan.expected_batch_size
    history = []
    model.train()
    for epoch in range(int(config.epochs)):
        seen, loss_sum, correct, clipped = 0, 0.0, 0, 0
        for _ in range(plan.steps_per_epoch):
            idx = torch.from_numpy(poisson_batch(gen, n, plan.sample_rate))
            out = clipper(x[idx], y[idx])
            set_noisy_grads(params, out.grads, std, denom, gen)
            opt.step()
            seen += int(idx.numel())
            loss_sum += out.loss_sum
            correct += out.correct
            clipped += int((out.factors < 1).sum())
        row = {"epoch": epoch + 1, "loss": loss_sum / max(seen, 1),
               "train_accuracy": correct / max(seen, 1), "examples": float(seen),
               "clipped_fraction": clipped / max(seen, 1)}
        history.append(row)
        if progress:
            progress(epoch + 1, int(config.epochs), row)
    return history


@torch.no_grad()
def predict_logits(model: nn.Module, x: np.ndarray | torch.Tensor,
                   batch_size: int = 4096) -> torch.Tensor:
    """Logits in eval mode (dropout off), in chunks."""
    model.eval()
    xt = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(x))
    xt = xt.float()
    if xt.shape[0] == 0:
        raise InvalidInputError("X has no rows")
    return torch.cat([model(xt[i:i + batch_size]) for i in range(0, xt.shape[0], batch_size)])


def accuracy(model: nn.Module, x: np.ndarray, y: np.ndarray) -> float:
    logits = predict_logits(model, x)
    return float((logits.argmax(1).numpy() == np.asarray(y)).mean())
