"""Fine-tuning the audit's model: plain, or DP-SGD with per-text clipping (per-example
gradients by torch.func), Poisson sampling, Gaussian noise and sigma calibrated by the PLD
accountant; the guarantee is per text (group privacy for a secret planted r times)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from privlab.audit.lm.model import (
    _per_text_loss,
    encode,
)
from privlab.core.dpsgd import (
    clipped_sum,
    factors_from_squared_norms,
    poisson_batch,
    set_noisy_grads,
)
from privlab.core.guarantee import PrivacyGuarantee, check_delta, check_epsilon
from privlab.core.rng import SEEDED_NOTE, RngLike, is_seeded, make_rng
from privlab.errors import InvalidInputError, option_name


@dataclass
class LMTrainConfig:
    """`epsilon=None`: plain fine-tuning. Otherwise DP-SGD to (epsilon, delta) per text."""

    epochs: int = 30
    batch_size: int = 16
    lr: float = 2e-3
    epsilon: float | None = None
    delta: float = 1e-5
    clip: float = 1.0
    max_length: int = 40

    def validate(self, n: int) -> None:
        if not (isinstance(self.epochs, int) and self.epochs >= 1):
            raise InvalidInputError(f"epochs must be an integer >= 1, got {self.epochs!r}")
        if not (isinstance(self.batch_size, int) and 1 <= self.batch_size <= n):
            name = option_name("batch_size", "--batch-size")
            raise InvalidInputError(f"{name} must be in 1..{n}, got {self.batch_size!r}")
        if not self.lr > 0:
            raise InvalidInputError(f"lr must be > 0, got {self.lr!r}")
        if self.epsilon is not None:
            check_epsilon(self.epsilon)
            check_delta(self.delta)
            if not (0 < self.delta < 1.0 / n):
                raise InvalidInputError(f"delta must be in (0, 1/n = {1 / n:.3g}), got "
                                        f"{self.delta!r}")
            if not self.clip > 0:
                raise InvalidInputError(f"clip must be > 0, got {self.clip!r}")


@dataclass
class LMTrainResult:
    guarantee: PrivacyGuarantee
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0
    noise_multiplier: float | None = None
    sample_rate: float | None = None
    steps: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"guarantee": self.guarantee.to_dict(), "history": self.history,
                "seconds": self.seconds, "noise_multiplier": self.noise_multiplier,
                "sample_rate": self.sample_rate, "steps": self.steps}


Progress = Callable[[int, int, dict[str, float]], None]


def train_lm(model: Any, tokenizer: Any, texts: Sequence[str], config: LMTrainConfig, *,
             rng: RngLike = None, progress: Progress | None = None) -> LMTrainResult:
    """Fine-tune in place: shuffled mini-batches (plain) or DP-SGD (Poisson batches, per-text
    clipping, Gaussian noise; sigma calibrated by PLD to config.epsilon)."""
    import torch

    n = len(texts)
    config.validate(n)
    ids, labels = encode(tokenizer, texts, config.max_length)
    gen = make_rng(rng)
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    opt = torch.optim.Adam(list(params.values()), lr=config.lr)
    started = time.perf_counter()
    history: list[dict[str, float]] = []
    model.train()
    if config.epsilon is None:
        b = config.batch_size
        for epoch in range(config.epochs):
            order = torch.from_numpy(gen.permutation(n))
            total = 0.0
            for s in range(0, n, b):
                idx = order[s:s + b]
                opt.zero_grad(set_to_none=True)
                loss = _per_text_loss(model(ids[idx], use_cache=False).logits, labels[idx])
                loss.mean().backward()
                opt.step()
                total += float(loss.detach().sum())
            row = {"epoch": epoch + 1, "loss": total / n}
            history.append(row)
            if progress:
                progress(epoch + 1, config.epochs, row)
        model.eval()
        g = PrivacyGuarantee.not_private(
            "language-model fine-tuning without DP", "no per-text clipping and no noise: the "
            "model can memorise and regurgitate the planted secrets")
        return LMTrainResult(g, history, time.perf_counter() - started)
    from privlab.core import accounting

    q = config.batch_size / n
    per_epoch = math.ceil(n / config.batch_size)
    steps = per_epoch * config.epochs
    sigma = accounting.calibrate_noise_multiplier(config.epsilon, config.delta, q, steps)
    clipper = _PerTextClipper(model, config.clip)
    for epoch in range(config.epochs):
        seen, loss_sum, clipped = 0, 0.0, 0
        for _ in range(per_epoch):
            idx = torch.from_numpy(poisson_batch(gen, n, q))
            grads, losses, factors = clipper(ids[idx], labels[idx])
            set_noisy_grads(list(params.values()), [grads[k] for k in params],
                            sigma * config.clip, q * n, gen)
            opt.step()
            seen += int(idx.numel())
            loss_sum += float(losses.sum())
            clipped += int((factors < 1).sum())
        row = {"epoch": epoch + 1, "loss": loss_sum / max(seen, 1), "examples": float(seen),
               "clipped_fraction": clipped / max(seen, 1)}
        history.append(row)
        if progress:
            progress(epoch + 1, config.epochs, row)
    model.eval()
    g = accounting.guarantee_for_dpsgd(
        sigma, q, steps, config.delta,
        mechanism="DP-SGD fine-tuning of a small GPT-2 (per-text L2 clipping, Poisson sampling)")
    notes = [f"privacy unit: one training text; clipping norm {config.clip:g}, noise "
             f"multiplier {sigma:.4g}",
             "noise is continuous Gaussian in float32 (standard DP-SGD practice)"]
    if is_seeded(rng):
        notes.append(SEEDED_NOTE + " (Poisson sampling and gradient noise)")
    return LMTrainResult(g.with_notes(*notes), history, time.perf_counter() - started,
                         sigma, q, steps)


class _PerTextClipper:
    """Per-text gradients by torch.func (vmap over grad), clipped to L2 norm <= clip, summed
    (the clip factors come from the DP-SGD core, `privlab.core.dpsgd`)."""

    def __init__(self, model: Any, clip: float) -> None:
        from torch.func import functional_call, grad, vmap

        self.model, self.clip = model, float(clip)
        self.names = [k for k, p in model.named_parameters() if p.requires_grad]
        buffers = dict(model.named_buffers())

        def one(prm: dict, ids: Any, lab: Any) -> tuple[Any, Any]:
            out = functional_call(model, {**prm, **buffers}, (ids.unsqueeze(0),),
                                  {"use_cache": False})
            loss = _per_text_loss(out.logits, lab.unsqueeze(0))[0]
            return loss, loss.detach()

        self._fn = vmap(grad(one, has_aux=True), in_dims=(None, 0, 0), randomness="different")

    def __call__(self, ids: Any, labels: Any) -> tuple[dict[str, Any], Any, Any]:
        import torch

        prm = {k: p.detach() for k, p in self.model.named_parameters() if p.requires_grad}
        if ids.shape[0] == 0:
            z = torch.zeros(0)
            return {k: torch.zeros_like(v) for k, v in prm.items()}, z, z
        per, losses = self._fn(prm, ids, labels)
        b = ids.shape[0]
        sq = torch.zeros(b, dtype=torch.float64)
        for k in self.names:
            sq += per[k].reshape(b, -1).double().pow(2).sum(1)
        _, factors = factors_from_squared_norms(sq, self.clip)
        grads = {k: clipped_sum(factors, per[k]) for k in self.names}
        return grads, losses, factors
