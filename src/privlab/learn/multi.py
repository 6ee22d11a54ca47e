"""Many models of one architecture trained together: shadow models and epsilon sweeps.

`train_many(model_fn, X, y, subsets=..., seeds=..., config=...)` trains M copies of
`model_fn()` at once: the parameters are stacked (`torch.func.stack_module_state`) and every
step runs all M models in one vectorised call (`torch.func.vmap` over `functional_call`),
each on its own rows (`subsets[m]`) with its own seed. For small models the per-operation
overhead dominates a step, so one stacked step costs little more than one single step.

Model m is trained EXACTLY as `train_one(model_fn, X[subsets[m]], y[subsets[m]], config_m,
seed=seeds[m])` would train it alone: same initialisation (torch.manual_seed(seed) before
`model_fn()`), same batches and same DP noise (`make_rng(seed)`, drawn in the same order),
same optimizer arithmetic (Adam and SGD are elementwise, so one optimizer over stacked
tensors is M independent optimizers). Results agree to float rounding; the tests check it.
Exception: dropout masks are drawn by vmap (`randomness="different"`), so with dropout the
models match in distribution, not bit for bit.

DP: per-example gradients by the book-keeping trick made functional (gradients w.r.t. zero
"taps" added to each layer's output give every layer's output gradient in one backward,
`torch.func.grad`), vmapped over the models; or by `vmap(grad)` over the examples for layers
without a known per-sample rule. Poisson batches differ in size between models, so they are
padded to the largest and padded rows get clip factor 0. Each model has its own noise
multiplier (an epsilon sweep in one run) and its own guarantee.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
from torch import nn

from privlab.core.dpsgd import clip_factors, clipped_sum, flat_noise, noisy_gradient, poisson_batch
from privlab.core.guarantee import PrivacyGuarantee
from privlab.core.rng import is_seeded, make_rng
from privlab.errors import InvalidInputError
from privlab.learn.dpsgd import (
    DPSGDPlan,
    Progress,
    TrainConfig,
    TrainResult,
    dpsgd_guarantee,
    make_optimizer,
    plan_dpsgd,
    rate_note,
    train_classifier,
)
from privlab.learn.engine import (
    LossFn,
    _grad_samplers,
    check_module_for_dp,
    fast_layers,
    per_sample_cross_entropy,
)

ModelFn = Callable[[], nn.Module]


def build_model(model_fn: ModelFn, seed: int | None) -> nn.Module:
    """`model_fn()` with torch's generator seeded by `seed` (None: fresh random init)."""
    if seed is None:
        return model_fn()
    state = torch.random.get_rng_state()
    torch.manual_seed(int(seed))
    try:
        return model_fn()
    finally:
        torch.random.set_rng_state(state)


def train_one(model_fn: ModelFn, x: np.ndarray, y: np.ndarray, config: TrainConfig, *,
              seed: int | None = None, loss_fn: LossFn | None = None,
              progress: Progress | None = None) -> tuple[nn.Module, TrainResult]:
    """Train one model the way `train_many` trains each of its models (the reference)."""
    model = build_model(model_fn, seed)
    if seed is not None:
        torch.manual_seed(int(seed) + 1)  # dropout masks
    result = train_classifier(model, x, y, config, rng=seed, loss_fn=loss_fn, progress=progress)
    return model, result


@dataclass
class ManyResult:
    """Trained models (ordinary modules), one guarantee and plan per model."""

    models: list[nn.Module]
    guarantees: list[PrivacyGuarantee]
    plans: list[DPSGDPlan | None]
    history: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    loop_seconds: float = 0.0
    engine: str = "none"

    def to_dict(self) -> dict[str, Any]:
        return {"models": len(self.models), "engine": self.engine, "seconds": self.seconds,
                "loop_seconds": self.loop_seconds,
                "guarantees": [g.to_dict() for g in self.guarantees],
                "plans": [p.to_dict() if p else None for p in self.plans],
                "history": self.history}


class _Taps:
    """Forward hooks that record each layer's input and add a zero 'tap' to its output.

    The gradient of the summed loss w.r.t. the taps is each layer's output gradient for
    every example (the book-keeping trick), computed functionally so it can be vmapped.
    """

    def __init__(self, layers: list[nn.Module]) -> None:
        self.layers = layers
        self.index = {id(m): i for i, m in enumerate(layers)}
        self.active = False
        self.taps: list[torch.Tensor] = []
        self.acts: list[torch.Tensor | None] = []
        self.calls: list[int] = []
        self.shapes: list[tuple[int, ...] | None] = [None] * len(layers)
        self.handles = [m.register_forward_hook(self.hook) for m in layers]

    def hook(self, mod: nn.Module, inputs: tuple, output: Any) -> Any:
        i = self.index[id(mod)]
        if not isinstance(output, torch.Tensor) or len(inputs) != 1:
            raise InvalidInputError(f"{type(mod).__name__} has several inputs or outputs; "
                                    "the multi-model fast path cannot tap it")
        if self.shapes[i] is None:
            self.shapes[i] = tuple(output.shape[1:])
        if not self.active:
            return None
        self.calls[i] += 1
        self.acts[i] = inputs[0]
        return output + self.taps[i]

    def start(self, taps: list[torch.Tensor]) -> None:
        self.active, self.taps = True, taps
        self.acts = [None] * len(self.layers)
        self.calls = [0] * len(self.layers)

    def stop(self) -> list[torch.Tensor]:
        self.active = False
        if any(c != 1 for c in self.calls):
            raise InvalidInputError("a layer ran more or less than once per forward; the "
                                    "multi-model fast path needs each layer used exactly once")
        return [a for a in self.acts if a is not None]


class _StackedTrainer:
    """The shared machinery of `train_many`: stacked state, vmapped forward and clipping."""

    def __init__(self, models: list[nn.Module], loss_fn: LossFn, clip: float | None,
                 engine: str) -> None:
        from torch.func import stack_module_state

        self.m = len(models)
        self.loss_fn = loss_fn
        base = copy.deepcopy(models[0])
        self.names = [n for n, p in base.named_parameters() if p.requires_grad]
        params, buffers = stack_module_state(models)
        self.params = {n: params[n] for n in self.names}
        frozen = {n: params[n].detach() for n in params if n not in self.params}
        self.buffers = {**buffers, **frozen}
        self.base = base.to("meta")
        self.clip = clip
        self.layers = fast_layers(self.base) if engine in ("auto", "fast") else None
        self.chain = None
        self._allow_chain = engine in ("auto", "fast")
        self._first = models[0]
        if engine == "fast" and self.layers is None:
            raise InvalidInputError("engine='fast' needs every trainable parameter in a layer "
                                    "with a known per-sample gradient; use engine='vmap'")
        self.engine = "fast" if self.layers is not None else "vmap"
        self.taps = _Taps(self.layers) if self.layers is not None else None
        self.param_of = {id(p): n for n, p in self.base.named_parameters()}

    def probe(self, x: torch.Tensor) -> None:
        """Record each layer's output shape (a meta-device forward: no computation) and see
        whether the model is a plain layer chain that can run stacked without vmap."""
        from privlab.learn.stacked import as_chain

        if self._allow_chain:
            self.chain = as_chain(self._first, tuple(x.shape[1:]))
            if self.chain is not None:
                self.engine = "stacked"
        if self.taps is not None:
            with torch.no_grad():
                self.base(torch.empty((1, *x.shape[1:]), device="meta"))

    # -------------------------------------------------------------- plain forward
    def logits(self, params: dict, x: torch.Tensor) -> torch.Tensor:
        from torch.func import functional_call, vmap

        base, buffers = self.base, self.buffers

        def one(p: dict, b: dict, xb: torch.Tensor) -> torch.Tensor:
            return functional_call(base, {**p, **b}, (xb,))

        return vmap(one, randomness="different")(params, buffers, x)

    def mean_grads(self, x: torch.Tensor, y: torch.Tensor) -> tuple[dict, torch.Tensor]:
        """Gradients of each model's mean batch loss (non-private step), vmapped."""
        from torch.func import functional_call, grad, vmap

        base, loss_fn = self.base, self.loss_fn

        def one(p: dict, b: dict, xb: torch.Tensor, yb: torch.Tensor) -> tuple:
            def f(prm: dict) -> tuple:
                losses = loss_fn(functional_call(base, {**prm, **b}, (xb,)), yb)
                return losses.mean(), losses.detach()

            return grad(f, has_aux=True)(p)

        if self.chain is not None:
            from privlab.learn.stacked import chain_mean_grads

            return chain_mean_grads(self.chain, self.params, x, y, loss_fn)
        params = {n: t.detach() for n, t in self.params.items()}
        return vmap(one, randomness="different")(params, self.buffers, x, y)

    # -------------------------------------------------------------- DP clipping, fast
    def _fast_one(self, p: dict, b: dict, x: torch.Tensor, y: torch.Tensor,
                  mask: torch.Tensor) -> tuple[dict, torch.Tensor, torch.Tensor, torch.Tensor]:
        from torch.func import functional_call, grad

        taps, base, loss_fn, samplers = self.taps, self.base, self.loss_fn, _grad_samplers()
        batch = x.shape[0]
        zeros = [torch.zeros((batch, *s), dtype=x.dtype) for s in taps.shapes]

        def total(tp: list[torch.Tensor]) -> tuple[torch.Tensor, tuple]:
            taps.start(tp)
            try:
                out = functional_call(base, {**p, **b}, (x,))
            finally:
                acts = taps.stop()
            losses = loss_fn(out, y)
            return (losses * mask).sum(), (acts, losses.detach(), out.detach())

        backs, (acts, losses, out) = grad(total, has_aux=True)(zeros)
        sq = torch.zeros(batch, dtype=x.dtype)
        plan = []
        for mod, a, g in zip(taps.layers, acts, backs, strict=True):
            a = a.detach()
            if type(mod) is nn.Linear and g.dim() == 2:
                b2 = g.pow(2).sum(1)
                part = torch.zeros_like(b2)
                if mod.weight.requires_grad:
                    part = part + a.pow(2).sum(1) * b2
                if mod.bias is not None and mod.bias.requires_grad:
                    part = part + b2
                sq = sq + part
                plan.append((mod, a, g, None))
            else:
                per = samplers[type(mod)](mod, [a], g)
                for t in per.values():
                    sq = sq + t.reshape(batch, -1).pow(2).sum(1)
                plan.append((mod, a, g, per))
        norms = sq.sqrt()
        factors = clip_factors(norms, self.clip) * mask
        grads: dict[str, torch.Tensor] = {}
        for mod, a, g, per in plan:
            if per is None:
                scaled = g * factors[:, None]
                if mod.weight.requires_grad:
                    grads[self.param_of[id(mod.weight)]] = scaled.t() @ a
                if mod.bias is not None and mod.bias.requires_grad:
                    grads[self.param_of[id(mod.bias)]] = scaled.sum(0)
            else:
                for prm, t in per.items():
                    grads[self.param_of[id(prm)]] = clipped_sum(factors, t)
        correct = ((out.argmax(-1) == y).to(x.dtype) * mask).sum()
        return grads, norms, (losses * mask).sum(), correct

    # -------------------------------------------------------------- DP clipping, vmap
    def _vmap_one(self, p: dict, b: dict, x: torch.Tensor, y: torch.Tensor,
                  mask: torch.Tensor) -> tuple[dict, torch.Tensor, torch.Tensor, torch.Tensor]:
        from torch.func import functional_call, grad, vmap

        base, loss_fn = self.base, self.loss_fn

        def one(prm: dict, xi: torch.Tensor, yi: torch.Tensor) -> tuple:
            out = functional_call(base, {**prm, **b}, (xi.unsqueeze(0),))
            loss = loss_fn(out, yi.unsqueeze(0)).sum()
            return loss, (loss.detach(), out.detach().squeeze(0))

        per, (losses, out) = vmap(grad(one, has_aux=True), in_dims=(None, 0, 0),
                                  randomness="different")(p, x, y)
        batch = x.shape[0]
        sq = sum(per[n].reshape(batch, -1).pow(2).sum(1) for n in self.names)
        norms = sq.sqrt()
        factors = clip_factors(norms, self.clip) * mask
        grads = {n: clipped_sum(factors, per[n]) for n in self.names}
        correct = ((out.argmax(-1) == y).to(x.dtype) * mask).sum()
        return grads, norms, (losses * mask).sum(), correct

    def clipped(self, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor,
                chunk_size: int | None) -> tuple[dict, torch.Tensor, torch.Tensor, torch.Tensor]:
        from torch.func import vmap

        if self.chain is not None:
            from privlab.learn.stacked import chain_clipped

            grads, norms = chain_clipped(self.chain, self.params, x, y, mask, self.clip,
                                         self.loss_fn)
            return grads, norms, None, None
        params = {n: t.detach() for n, t in self.params.items()}
        fn = self._fast_one if self.engine == "fast" else self._vmap_one
        return vmap(fn, randomness="different", chunk_size=chunk_size)(
            params, self.buffers, x, y, mask)

    def export(self, model_fn: ModelFn) -> list[nn.Module]:
        models = []
        for i in range(self.m):
            mod = model_fn()
            with torch.no_grad():
                for n, t in mod.named_parameters():
                    src = self.params[n] if n in self.params else self.buffers[n]
                    t.copy_(src[i])
                for n, t in mod.named_buffers():
                    t.copy_(self.buffers[n][i])
            mod.eval()
            models.append(mod)
        return models


def _check_subsets(n: int, m: int | None, subsets: Sequence[Sequence[int]] | None
                   ) -> list[np.ndarray]:
    if subsets is None:
        if m is None:
            raise InvalidInputError("give subsets (one index array per model) or seeds")
        return [np.arange(n)] * m
    out = []
    for i, s in enumerate(subsets):
        arr = np.asarray(s)
        if arr.dtype == bool:
            if arr.shape != (n,):
                raise InvalidInputError(f"subsets[{i}] is a mask of length {arr.shape[0]}, "
                                        f"expected {n}")
            arr = np.flatnonzero(arr)
        if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
            raise InvalidInputError(f"subsets[{i}] must be a non-empty array of row indices")
        if arr.min() < 0 or arr.max() >= n:
            raise InvalidInputError(f"subsets[{i}] has row indices outside 0..{n - 1}")
        out.append(arr.astype(np.int64))
    sizes = {len(s) for s in out}
    if len(sizes) > 1:
        raise InvalidInputError(f"all subsets must have the same size (got {sorted(sizes)}); "
                                "train groups of equal size together")
    return out


def train_many(model_fn: ModelFn, x: np.ndarray, y: np.ndarray, *,
               config: TrainConfig | Sequence[TrainConfig],
               subsets: Sequence[Sequence[int]] | None = None,
               seeds: Sequence[int | None] | None = None,
               loss_fn: LossFn | None = None, engine: str | None = None,
               chunk_size: int | None = None,
               progress: Progress | None = None) -> ManyResult:
    """Train len(seeds) models at once; config may be one TrainConfig or one per model
    (differing only in epsilon / noise_multiplier, e.g. an epsilon sweep)."""
    xt = torch.from_numpy(np.ascontiguousarray(x)).float() if not isinstance(x, torch.Tensor) \
        else x.float()
    yt = torch.from_numpy(np.ascontiguousarray(y)) if not isinstance(y, torch.Tensor) else y
    n = int(xt.shape[0])
    if yt.shape[0] != n:
        raise InvalidInputError(f"X has {n} rows but y has {yt.shape[0]}")
    count = len(seeds) if seeds is not None else (len(config) if not isinstance(
        config, TrainConfig) else (len(subsets) if subsets is not None else None))
    rows = _check_subsets(n, count, subsets)
    m = len(rows)
    seeds = list(seeds) if seeds is not None else [None] * m
    if len(seeds) != m:
        raise InvalidInputError(f"got {len(seeds)} seeds for {m} subsets")
    configs = [config] * m if isinstance(config, TrainConfig) else list(config)
    if len(configs) != m:
        raise InvalidInputError(f"got {len(configs)} configs for {m} models")
    shared = {k: v for k, v in vars(configs[0]).items()
              if k not in ("epsilon", "noise_multiplier")}
    for c in configs[1:]:
        other = {k: v for k, v in vars(c).items() if k not in ("epsilon", "noise_multiplier")}
        if other != shared:
            raise InvalidInputError("per-model configs may differ only in epsilon or "
                                    "noise_multiplier")
    cfg0 = configs[0]
    if engine is not None:
        configs = [replace(c, engine=engine) for c in configs]
        cfg0 = configs[0]
    n_m = len(rows[0])
    for c in configs:
        c.validate(n_m)
    loss_fn = loss_fn or per_sample_cross_entropy
    started = time.perf_counter()
    models = [build_model(model_fn, s) for s in seeds]
    if cfg0.method == "dpsgd":
        check_module_for_dp(models[0])
    trainer = _StackedTrainer(models, loss_fn, cfg0.clip if cfg0.method == "dpsgd" else None,
                              cfg0.engine)
    gens = [make_rng(s) for s in seeds]
    index = torch.from_numpy(np.stack(rows))             # (M, n_m) global row ids
    trainer.probe(xt)
    plans: list[DPSGDPlan | None] = [None] * m
    if cfg0.method == "dpsgd":
        plans = [plan_dpsgd(n_m, c) for c in configs]
    if seeds[0] is not None:
        torch.manual_seed(int(seeds[0]) + 1)
    loop_start = time.perf_counter()
    if cfg0.method == "none":
        history = _loop_plain(trainer, xt, yt, index, cfg0, gens, progress)
    else:
        history = _loop_dp(trainer, xt, yt, index, cfg0, plans, gens, chunk_size, progress)
    loop = time.perf_counter() - loop_start
    if cfg0.method == "none":
        guarantees = [PrivacyGuarantee.not_private(
            "plain training (no DP-SGD)", "no clipping and no noise: the model can memorise "
            "training records (use it as a baseline or audit target only)")] * m
        engine_used = "multi-" + trainer.engine
    else:
        engine_used = "multi-" + trainer.engine
        guarantees = [dpsgd_guarantee(p, c.accountant, engine=engine_used, seeded=is_seeded(s),
                                      extra=rate_note(c))
                      for p, c, s in zip(plans, configs, seeds, strict=True)]
    return ManyResult(trainer.export(model_fn), guarantees, plans, history,
                      time.perf_counter() - started, loop, engine_used)


def _loop_plain(trainer: _StackedTrainer, x: torch.Tensor, y: torch.Tensor,
                index: torch.Tensor, cfg: TrainConfig, gens: list[np.random.Generator],
                progress: Progress | None) -> list[dict[str, Any]]:
    m, n_m = index.shape
    opt = make_optimizer(list(trainer.params.values()), cfg)
    trainer.base.train()
    history = []
    b = cfg.batch_size
    for epoch in range(int(cfg.epochs)):
        orders = torch.from_numpy(np.stack([g.permutation(n_m) for g in gens]))
        total = torch.zeros(m)
        for start in range(0, n_m, b):
            local = orders[:, start:start + b]                  # (M, B) positions
            rows = torch.gather(index, 1, local)                 # (M, B) global rows
            xb, yb = x[rows], y[rows]
            grads, losses = trainer.mean_grads(xb, yb)
            for name in trainer.names:
                # contiguous: the fused optimizer assumes the parameter's memory layout
                trainer.params[name].grad = grads[name].contiguous()
            opt.step()
            total += losses.sum(1)
        row = {"epoch": epoch + 1, "mean_loss": float(total.mean()) / n_m}
        history.append(row)
        if progress:
            progress(epoch + 1, int(cfg.epochs), row)
    return history


def _loop_dp(trainer: _StackedTrainer, x: torch.Tensor, y: torch.Tensor, index: torch.Tensor,
             cfg: TrainConfig, plans: list[DPSGDPlan], gens: list[np.random.Generator],
             chunk_size: int | None,
             progress: Progress | None) -> list[dict[str, Any]]:
    m, n_m = index.shape
    opt = make_optimizer(list(trainer.params.values()), cfg)
    trainer.base.train()
    sizes = [trainer.params[n][0].numel() for n in trainer.names]
    total_size = sum(sizes)
    std = torch.tensor([p.noise_multiplier * p.clip for p in plans]).float()
    denom = torch.tensor([p.expected_batch_size for p in plans]).float()
    q = plans[0].sample_rate
    total_steps = int(cfg.epochs) * plans[0].steps_per_epoch
    buffers = [np.empty((m, total_size), dtype=np.float32) for _ in range(2)]

    def draw(step: int) -> tuple[list[np.ndarray], np.ndarray]:
        """One step's batches and noise; per model the same draws, in the same order, as
        train_one (its batch, then its noise). Runs one step ahead on a helper thread
        (NumPy releases the GIL while sampling), so drawing 16 x P normals overlaps the
        stacked gradient: it was half of a DP step."""
        buf = buffers[step % 2]
        batches = []
        for i, g in enumerate(gens):
            batches.append(poisson_batch(g, n_m, q))
            flat_noise(g, total_size, out=buf[i])
        return batches, buf

    history = []
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(draw, 0) if total_steps > 0 else None
        step = 0
        for epoch in range(int(cfg.epochs)):
            seen = np.zeros(m)
            for _ in range(plans[0].steps_per_epoch):
                batches, noise_buf = pending.result()
                step += 1
                # the buffer drawn next is the other one: this step's noise stays intact
                pending = pool.submit(draw, step) if step < total_steps else None
                _dp_step(trainer, x, y, index, batches, noise_buf, seen, sizes, std, denom,
                         opt, chunk_size)
            row = {"epoch": epoch + 1, "mean_examples": float(seen.mean())}
            history.append(row)
            if progress:
                progress(epoch + 1, int(cfg.epochs), row)
    return history


def _dp_step(trainer: _StackedTrainer, x: torch.Tensor, y: torch.Tensor, index: torch.Tensor,
             batches: list[np.ndarray], noise_buf: np.ndarray, seen: np.ndarray,
             sizes: list[int], std: torch.Tensor, denom: torch.Tensor, opt: Any,
             chunk_size: int | None) -> None:
    """One DP-SGD step of all models: clipped stacked gradients + each model's noise."""
    m = index.shape[0]
    k = max(1, max(len(bt) for bt in batches))
    local = np.zeros((m, k), dtype=np.int64)
    mask = np.zeros((m, k), dtype=np.float32)
    for i, bt in enumerate(batches):
        local[i, :len(bt)] = bt
        mask[i, :len(bt)] = 1.0
        seen[i] += len(bt)
    rows = torch.gather(index, 1, torch.from_numpy(local))
    grads, _, _, _ = trainer.clipped(x[rows], y[rows], torch.from_numpy(mask), chunk_size)
    noise = torch.from_numpy(noise_buf)                   # (M, P)
    offset = 0
    for name, size in zip(trainer.names, sizes, strict=True):
        prm = trainer.params[name]
        chunk = noise[:, offset:offset + size].view_as(prm)
        shape = (m,) + (1,) * (prm.dim() - 1)
        prm.grad = noisy_gradient(grads[name], chunk, std.view(shape), denom.view(shape))
        offset += size
    opt.step()


def shadow_subsets(n: int, models: int, size: int, seed: int = 0) -> list[np.ndarray]:
    """Random equal-size subsets (without replacement inside each), e.g. for shadow models."""
    if size > n:
        raise InvalidInputError(f"subset size {size} is larger than the pool ({n} rows)")
    gen = np.random.default_rng(seed)
    return [np.sort(gen.choice(n, size=size, replace=False)) for _ in range(models)]

