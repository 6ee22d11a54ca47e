"""Per-sample gradient clipping: the step DP-SGD's privacy rests on.

`GradientClipper(module, clip)(x, y)` returns the SUM over the batch of per-example gradients,
each first scaled to L2 norm <= clip, plus the per-example norms. Two engines:

- "fast" (book-keeping, one backward pass; Bu et al. 2022 "Differentially Private
  Optimization on Large Model at Small Cost"): forward hooks keep each layer's input `a` and
  one backward pass gives the gradient `b` w.r.t. each layer's output, for all examples at
  once and WITHOUT the ordinary parameter gradients. Per-example norms come from (a, b)
  alone: for a Linear layer on (B, d) inputs, ||g_i||^2 = ||a_i||^2 ||b_i||^2 (ghost norm),
  and the clipped sum is one matrix product (c * b)^T a with c_i = min(1, C / ||g_i||).
  Other layers (Conv, LayerNorm, GroupNorm, Embedding, ...) use Opacus' registered per-sample
  gradient functions. Cost: about one ordinary forward + backward.
- "vmap": `torch.func.vmap(grad(loss))` over the examples, for any module without
  batch-coupling layers (materialises every per-example gradient; slower, fully general).

"auto" picks "fast" when every trainable parameter sits in a layer type Opacus supports and
each such layer runs once per forward; otherwise "vmap". Both engines are checked against a
per-example loop in the tests, and the clipped norms never exceed `clip`. The clip factors
themselves (and their norm margin) come from the DP-SGD core, `privlab.core.dpsgd`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from privlab.core.dpsgd import clipped_sum, factors_from_squared_norms
from privlab.errors import InvalidInputError, UnsafeConfigurationError

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

BATCH_COUPLING = (nn.modules.batchnorm._BatchNorm, nn.SyncBatchNorm)


def per_sample_cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each example (no reduction): the per-example loss DP-SGD clips."""
    return F.cross_entropy(logits, target, reduction="none")


def check_module_for_dp(module: nn.Module) -> None:
    """Refuse layers that mix examples in a batch (per-example sensitivity would not hold)."""
    for name, sub in module.named_modules():
        if isinstance(sub, BATCH_COUPLING):
            raise InvalidInputError(
                f"layer {name or type(module).__name__!r} ({type(sub).__name__}) mixes examples "
                "within a batch, which breaks per-example clipping; use GroupNorm or LayerNorm "
                "(opacus.validators.ModuleValidator.fix replaces it)")


def _grad_samplers() -> dict[type, Callable]:
    from opacus.grad_sample import GradSampleModule

    return GradSampleModule.GRAD_SAMPLERS


@dataclass
class ClippedBatch:
    """Result of one clipping pass: summed clipped gradients (aligned with `params`)."""

    grads: list[torch.Tensor]
    norms: torch.Tensor          # (B,) per-example gradient norms before clipping
    factors: torch.Tensor        # (B,) clip factors c_i
    loss_sum: float              # sum of per-example losses (for monitoring)
    correct: int = 0             # correctly classified examples in the batch (monitoring)


class GradientClipper:
    """Computes per-example clipped gradient sums for `module` (see the module docstring)."""

    def __init__(self, module: nn.Module, clip: float, loss_fn: LossFn | None = None,
                 engine: str = "auto", chunk_size: int | None = None) -> None:
        if not (clip > 0):
            raise InvalidInputError(f"clip must be > 0, got {clip!r}")
        if engine not in ("auto", "fast", "vmap"):
            raise InvalidInputError(f"engine must be 'auto', 'fast' or 'vmap', got {engine!r}")
        check_module_for_dp(module)
        self.module = module
        self.clip = float(clip)
        self.loss_fn = loss_fn or per_sample_cross_entropy
        self.chunk_size = chunk_size
        self.params = [p for p in module.parameters() if p.requires_grad]
        if not self.params:
            raise InvalidInputError("the module has no trainable parameters")
        self._layers = self._fast_layers()
        if engine == "fast" and self._layers is None:
            raise UnsafeConfigurationError(
                "engine='fast' needs every trainable parameter in a layer type with a known "
                "per-sample gradient (Linear, Conv, LayerNorm, GroupNorm, Embedding, ...); "
                "use engine='vmap'")
        self.engine = "fast" if (engine in ("auto", "fast") and self._layers is not None) \
            else "vmap"
        self._requested = engine

    # ------------------------------------------------------------------ engine selection
    def _fast_layers(self) -> list[nn.Module] | None:
        return fast_layers(self.module)

    # ------------------------------------------------------------------ public call
    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> ClippedBatch:
        if x.shape[0] == 0:
            zeros = [torch.zeros_like(p) for p in self.params]
            empty = torch.zeros(0)
            return ClippedBatch(zeros, empty, empty, 0.0, 0)
        if self.engine == "fast":
            try:
                return self._fast(x, y)
            except _FallBack as exc:
                if self._requested == "fast":
                    raise UnsafeConfigurationError(f"engine='fast' cannot run this module: {exc}; "
                                                   "use engine='vmap'") from None
                self.engine = "vmap"
        return self._vmap(x, y)

    # ------------------------------------------------------------------ fast engine
    def _fast(self, x: torch.Tensor, y: torch.Tensor) -> ClippedBatch:
        records: dict[nn.Module, list[tuple[torch.Tensor, torch.Tensor]]] = {}

        def hook(mod: nn.Module, inputs: tuple, output: object) -> torch.Tensor:
            if not isinstance(output, torch.Tensor) or len(inputs) != 1:
                raise _FallBack(f"{type(mod).__name__} has several inputs or outputs")
            records.setdefault(mod, []).append((inputs[0].detach(), output))
            # Downstream in-place ops (ReLU(inplace=True)) act on the clone, so the gradient
            # w.r.t. `output` below is the gradient w.r.t. this layer's true output.
            return output.clone()

        handles = [m.register_forward_hook(hook) for m in self._layers]
        try:
            with torch.enable_grad():
                logits = self.module(x)
        finally:
            for h in handles:
                h.remove()
        losses = self.loss_fn(logits, y)
        if losses.shape != (x.shape[0],):
            raise InvalidInputError("loss_fn must return one loss per example (reduction='none')")
        for mod in self._layers:
            if len(records.get(mod, ())) != 1:
                raise _FallBack(f"{type(mod).__name__} ran {len(records.get(mod, ()))} times in "
                                "one forward")
        outs = [records[m][0][1] for m in self._layers]
        backs = torch.autograd.grad(losses.sum(), outs, allow_unused=True)

        batch = x.shape[0]
        sq_norms = torch.zeros(batch, dtype=torch.float64)
        plan: list[tuple[nn.Module, torch.Tensor, torch.Tensor, dict | None]] = []
        samplers = _grad_samplers()
        for mod, back in zip(self._layers, backs, strict=True):
            act = records[mod][0][0]
            if back is None:
                back = torch.zeros_like(records[mod][0][1])
            back = back.detach()
            if type(mod) is nn.Linear and back.dim() == 2:
                a2 = act.pow(2).sum(1)
                b2 = back.pow(2).sum(1)
                part = torch.zeros_like(b2)
                if mod.weight.requires_grad:
                    part = part + a2 * b2
                if mod.bias is not None and mod.bias.requires_grad:
                    part = part + b2
                sq_norms += part.to(torch.float64)
                plan.append((mod, act, back, None))
            else:
                per_sample = samplers[type(mod)](mod, [act], back)
                for g in per_sample.values():
                    sq_norms += g.reshape(batch, -1).pow(2).sum(1).to(torch.float64)
                plan.append((mod, act, back, per_sample))
        norms, factors = factors_from_squared_norms(sq_norms, self.clip)

        grads: dict[int, torch.Tensor] = {}
        for mod, act, back, per_sample in plan:
            if per_sample is None:
                scaled = back * factors[:, None]
                if mod.weight.requires_grad:
                    grads[id(mod.weight)] = scaled.t() @ act
                if mod.bias is not None and mod.bias.requires_grad:
                    grads[id(mod.bias)] = scaled.sum(0)
            else:
                for p, g in per_sample.items():
                    grads[id(p)] = clipped_sum(factors, g)
        correct = _correct(logits, y)
        return ClippedBatch([grads[id(p)] for p in self.params], norms, factors,
                            float(losses.detach().sum()), correct)

    # ------------------------------------------------------------------ vmap engine
    def _vmap(self, x: torch.Tensor, y: torch.Tensor) -> ClippedBatch:
        from torch.func import functional_call, vmap

        names = [n for n, p in self.module.named_parameters() if p.requires_grad]
        params = {n: p.detach() for n, p in self.module.named_parameters() if p.requires_grad}
        others = {n: p.detach() for n, p in self.module.named_parameters()
                  if not p.requires_grad}
        others.update(dict(self.module.named_buffers()))
        module, loss_fn = self.module, self.loss_fn

        def one(prm: dict, xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
            out = functional_call(module, {**prm, **others}, (xi.unsqueeze(0),))
            return loss_fn(out, yi.unsqueeze(0)).sum(), out

        per_sample, (losses, logits) = vmap(
            _grad_value_aux(one),
            in_dims=(None, 0, 0), randomness="different", chunk_size=self.chunk_size,
        )(params, x, y)
        batch = x.shape[0]
        sq = torch.zeros(batch, dtype=torch.float64)
        for n in names:
            sq += per_sample[n].reshape(batch, -1).pow(2).sum(1).to(torch.float64)
        norms, factors = factors_from_squared_norms(sq, self.clip)
        grads = [clipped_sum(factors, per_sample[n]) for n in names]
        by_name = dict(zip(names, grads, strict=True))
        ordered = [by_name[n] for n, p in self.module.named_parameters() if p.requires_grad]
        return ClippedBatch(ordered, norms, factors, float(losses.sum()),
                            _correct(logits.squeeze(1), y))

    # ------------------------------------------------------------------ testing aid
    def per_sample_gradients(self, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
        """Materialised per-example gradients by a plain loop (slow; for tests and audits)."""
        out = [torch.zeros((x.shape[0], *p.shape)) for p in self.params]
        for i in range(x.shape[0]):
            loss = self.loss_fn(self.module(x[i:i + 1]), y[i:i + 1]).sum()
            gs = torch.autograd.grad(loss, self.params, allow_unused=True)
            for k, g in enumerate(gs):
                if g is not None:
                    out[k][i] = g
        return out


def fast_layers(module: nn.Module) -> list[nn.Module] | None:
    """Layers holding the trainable parameters, if all have known per-sample gradients."""
    samplers = _grad_samplers()
    trainable = {id(p) for p in module.parameters() if p.requires_grad}
    owned: set[int] = set()
    layers = []
    for sub in module.modules():
        direct = [p for p in sub.parameters(recurse=False) if p.requires_grad]
        if not direct:
            continue
        if type(sub) not in samplers:
            return None
        layers.append(sub)
        owned.update(id(p) for p in direct)
    if owned != trainable:
        return None  # shared or unusual parameters: let vmap handle them
    return layers


class _FallBack(Exception):
    """Raised inside the fast engine when the module needs the general vmap engine."""


def _grad_value_aux(fn: Callable) -> Callable:
    """grad of fn's first output w.r.t. its first argument, also returning (loss, logits)."""
    from torch.func import grad

    def inner(prm: dict, xi: torch.Tensor, yi: torch.Tensor):
        def wrapped(p: dict) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
            loss, out = fn(p, xi, yi)
            return loss, (loss.detach(), out.detach())

        return grad(wrapped, has_aux=True)(prm)

    return inner


def _correct(logits: torch.Tensor, y: torch.Tensor) -> int:
    if logits.dim() != 2 or y.dim() != 1 or y.dtype not in (torch.int64, torch.int32):
        return 0
    return int((logits.detach().argmax(1) == y).sum())
