"""The DP-SGD core: the steps DP-SGD's privacy rests on, in one place for every trainer.

Every DP-SGD loop in privlab (`learn.dpsgd`, `learn.multi` / `learn.stacked`, `synth.dpsgd`
for the DP-VAE, `audit.lm` for the language model, and the canary audits of `audit.canary`)
gets its per-example gradient norms its own way (Opacus per-layer rules, ghost norms, stacked
layer chains, vmap over texts), then calls here for the parts the accountant's assumptions
(Abadi et al. 2016) depend on:

1. `poisson_batch`: Poisson sampling, every row in independently with probability q (one
   Binomial(n, q) size, then a uniform subset of that size: the same law);
2. `clip_factors` / `factors_from_squared_norms`: c_i = min(1, C / ||g_i||) with the
   relative `NORM_MARGIN`, so ||c_i g_i|| <= C holds even though ||g_i|| is a rounded float
   sum; `clipped_sum` sums per-example gradients scaled by c_i;
3. `flat_noise` / `noisy_gradient` / `set_noisy_grads`: one standard-normal draw per
   trainable coordinate per step (even when the batch is empty), scaled by sigma * C, added
   to the clipped sum and divided by the expected batch size.

The randomness comes from the caller's generator, `privlab.core.rng.make_rng`: the ChaCha20
CSPRNG unless a seed was given (tests only; the guarantee says so). Imports no torch at module
level, so a core install can import it; the tensor helpers take torch tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: Relative safety margin on computed norms so float rounding can never let a clipped
#: gradient exceed the clip (norms are float32 sums; their relative error is ~1e-6).
NORM_MARGIN = 1e-5
#: Absolute floor added to the norm: a zero gradient gets factor 1 instead of C / 0.
NORM_FLOOR = 1e-6


def clip_factors(norms: Any, clip: float) -> Any:
    """c_i = min(1, C / ||g_i||) for a tensor of per-example norms, with the margin so that
    ||c_i g_i|| <= C despite rounding. The one place privlab computes clip factors."""
    return (clip / (norms * (1 + NORM_MARGIN) + NORM_FLOOR)).clamp(max=1.0)


def factors_from_squared_norms(sq_norms: Any, clip: float) -> tuple[Any, Any]:
    """(norms, clip factors) in float32 from per-example squared norms (summed in float64 by
    the caller, so many small layer terms do not lose the large ones)."""
    import torch

    norms = sq_norms.sqrt().to(torch.float32)
    return norms, clip_factors(norms, clip)


def clipped_sum(factors: Any, per_example: Any) -> Any:
    """sum_i c_i g_i for materialised per-example gradients g of shape (B, ...)."""
    import torch

    return torch.einsum("n,n...->...", factors, per_example)


def poisson_batch(gen: np.random.Generator, n: int, q: float) -> np.ndarray:
    """Sorted indices of one Poisson-sampled batch: each of n rows in independently with
    probability q (a Binomial(n, q) size, then a uniform subset of that size). `gen` comes
    from `privlab.core.rng.make_rng` (CSPRNG unless seeded)."""
    k = int(gen.binomial(n, q))
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    return np.sort(gen.choice(n, size=k, replace=False))


def flat_noise(gen: np.random.Generator, size: int, out: np.ndarray | None = None) -> np.ndarray:
    """Standard normal noise for all trainable coordinates of one step (float32), from `gen`;
    written into `out` when given (its size wins)."""
    if out is not None:
        return gen.standard_normal(dtype=np.float32, out=out)
    return gen.standard_normal(size, dtype=np.float32)


def noisy_gradient(summed: Any, noise: Any, std: Any, denom: Any) -> Any:
    """(clipped sum + std * z) / denom, contiguous: the released gradient of one step.
    `std` = sigma * C and `denom` = the expected batch size (scalars, or tensors that
    broadcast over stacked models)."""
    return ((summed + std * noise) / denom).contiguous()


def set_noisy_grads(params: Sequence[Any], sums: Sequence[Any], std: float, denom: float,
                    gen: np.random.Generator) -> None:
    """p.grad = noisy_gradient(clipped sum, z, std, denom) for every parameter, z drawn by
    `flat_noise` in one call over all coordinates in `params` order."""
    import torch

    sizes = [p.numel() for p in params]
    noise = torch.from_numpy(flat_noise(gen, sum(sizes)))
    offset = 0
    for p, s, size in zip(params, sums, sizes, strict=True):
        p.grad = noisy_gradient(s, noise[offset:offset + size].view_as(p), std, denom)
        offset += size
