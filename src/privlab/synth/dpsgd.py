"""DP-SGD machinery shared by the deep synthesizers (`dpvae`; the retired `dpgan` shared it).

Why one module: both models must spend their budget the same way, and a privacy bug fixed in
one must be fixed in both. It holds:

1. the private pre-processing: bounds / categories that were not declared and a
   discrete-Gaussian row count (the Poisson sampling rate q = batch / n must not depend on
   the exact n), all in zCDP (`privlab.synth.budget`), converted to (eps_pre, delta_pre);
2. DP-SGD steps exactly as the accountant assumes (Abadi et al. 2016): Poisson sampling with
   rate q, exact per-example gradient norms ("ghost norms" for Linear layers) and clipping to
   L2 norm <= clip, Gaussian noise std = sigma * clip on the clipped sum from the ChaCha20
   CSPRNG (`privlab.core.rng`; seeded PCG64 only when the caller asks), divided by the
   expected batch size (the batch, the clip factors and the noise come from the DP-SGD
   core, `privlab.core.dpsgd`; only the ghost norms are computed here); sigma is the
   smallest noise multiplier meeting (eps - eps_pre, delta_sgd) under the PLD accountant
   (`privlab.core.accounting`);
3. a refusal when epsilon is too small for DP-SGD to learn anything (`check_feasible`);
4. the sequential composition of 1 and 2 into the release's guarantee.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privlab.core.dpsgd import factors_from_squared_norms
from privlab.core.guarantee import PrivacyGuarantee
from privlab.core.samplers import discrete_gaussian
from privlab.errors import InvalidInputError, missing_extra
from privlab.synth.base import (
    RHO_MARGIN,
    THRESHOLD_DELTA_SHARE,
    Prepared,
    Synthesizer,
    split_delta,
)
from privlab.synth.budget import SamplerReserve, reserve_for, rho_within
from privlab.synth.domain import ColumnPlan

#: Share of epsilon spent before DP-SGD: the row count only, or the row count plus the
#: bounds / categories that were not declared.
PRE_SHARE_COUNT_ONLY = 0.02
PRE_SHARE_WITH_DOMAIN = 0.1
COUNT_SHARE_OF_PRE = 0.1  # of the pre-training rho, when the domain is also estimated
PRE_DELTA_SHARE = 0.1
#: Refuse when the noisy row count is below this many standard deviations of its noise.
MIN_COUNT_IN_SIGMAS = 2.0
FLOAT_NOTE = ("DP-SGD noise is continuous Gaussian in float32 (standard practice); the "
              "floating-point caveat of Mironov 2012 is not addressed for the weights")


@contextlib.contextmanager
def single_thread(torch: Any) -> Iterator[None]:
    """Tiny matrices: one intra-op thread is faster, and far faster on a busy machine where
    spinning OpenMP workers fight for cores (measured: 1000x on cross-entropy). Restored."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def load_torch(method: str) -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover - depends on the install
        raise missing_extra("torch", f"--method {method}") from None
    return torch


def clipped_gradient_sum(torch: Any, model: Any, loss_fn: Any, x: Any, y: Any,
                         clip: float) -> tuple[list[Any], Any, Any]:
    """Sum over the batch of per-example gradients, each scaled to L2 norm <= clip.

    Every trainable parameter sits in a Linear layer applied once per example, so with the
    layer input a_i and the gradient g_i of the loss w.r.t. the layer output, example i's
    weight gradient is g_i a_i^T (norm^2 = |g_i|^2 |a_i|^2) and its bias gradient is g_i:
    exact per-example norms from one backward pass, without materialising per-example
    gradients (the "ghost norm" of Goodfellow 2015 / Bu et al. 2022). The tests check it
    against Opacus' `GradSampleModule` per-sample gradients. `model` records (input, output)
    of each of its `layers` in `model.records` when `loss_fn` runs it.
    Returns (clipped sums in `model.parameters()` order, per-example losses, clip factors).
    """
    losses = loss_fn(x, y)
    records = model.records
    outs = [o for _, o in records]
    grads = torch.autograd.grad(losses.sum(), outs)
    norms2 = torch.zeros(x.shape[0], dtype=torch.float64)
    for (a, _), g in zip(records, grads, strict=True):
        norms2 += ((g * g).sum(dim=1) * ((a * a).sum(dim=1) + 1.0)).double()
    _, factor = factors_from_squared_norms(norms2, clip)
    sums = {}
    for layer, (a, _), g in zip(model.layers, records, grads, strict=True):
        cg = g * factor[:, None]
        sums[id(layer.weight)] = cg.T @ a
        sums[id(layer.bias)] = cg.sum(dim=0)
    model.records = []
    return [sums[id(p)] for p in model.parameters()], losses.detach(), factor


def one_hot(torch: Any, codes: np.ndarray, sizes: list[int]) -> tuple[Any, Any,
                                                                       list[tuple[int, int]]]:
    """(n, dim) float one-hot matrix, (n, d) code tensor, and each column's (start, size)."""
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n, dim = codes.shape[0], int(offsets[-1])
    x = torch.zeros((n, dim), dtype=torch.float32)
    rows = torch.arange(n).unsqueeze(1).expand(n, codes.shape[1])
    x[rows, torch.from_numpy(codes + offsets[:-1])] = 1.0
    slices = [(int(offsets[j]), int(sizes[j])) for j in range(len(sizes))]
    return x, torch.from_numpy(codes), slices


def draw_codes(torch: Any, logits_of: Callable[[Any], Any], latent: int, n: int,
               slices: list[tuple[int, int]], gen: np.random.Generator) -> np.ndarray:
    """n rows of codes: z ~ N(0, I), one categorical draw per column from softmax(logits).
    Post-processing of the trained weights; randomness from `gen`."""
    out = np.empty((n, len(slices)), dtype=np.int64)
    chunk = 8192
    with torch.no_grad(), single_thread(torch):
        for start in range(0, n, chunk):
            m = min(chunk, n - start)
            z = torch.from_numpy(gen.standard_normal((m, latent), dtype=np.float32))
            logits = logits_of(z)
            for j, (s, size) in enumerate(slices):
                p = torch.softmax(logits[:, s:s + size].double(), dim=1).numpy()
                cdf = np.cumsum(p, axis=1)
                cdf[:, -1] = 1.0
                u = gen.random((m, 1))
                out[start:start + m, j] = (cdf < u).sum(axis=1).clip(0, size - 1)
    return out


@dataclass
class PrePlan:
    """What the private pre-processing left for DP-SGD."""

    n_hat: float
    pre: PrivacyGuarantee | None  # None for the non-private baseline
    eps_sgd: float
    delta_sgd: float
    sigma_count: float


class DeepSynthesizer(Synthesizer):
    """Base of the DP-SGD synthesizers: options, pre-processing, calibration, guarantee."""

    sgd_mechanism = "DP-SGD"
    covers = ("model weights (DP-SGD)",
              "noisy row count and the training schedule derived from it (details: "
              "sample_rate, steps, expected_batch, noise_multiplier)")

    def __init__(self, *, epochs: int = 20, batch_size: int = 512, lr: float = 2e-3,
                 clip: float = 1.0, accountant: str = "pld", **kw: Any) -> None:
        super().__init__(**kw)
        for name, v in (("epochs", epochs), ("batch_size", batch_size)):
            check_count(name, v)
        if not (lr > 0 and math.isfinite(lr)):
            raise InvalidInputError(f"lr must be a finite number > 0, got {lr!r}")
        if not (clip > 0 and math.isfinite(clip)):
            raise InvalidInputError(f"clip must be a finite number > 0, got {clip!r}")
        if accountant not in ("pld", "rdp"):
            raise InvalidInputError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")
        self.epochs, self.batch_size = epochs, batch_size
        self.lr, self.clip, self.accountant = lr, clip, accountant
        self.train_info: dict[str, Any] = {}
        self._sgd_guarantee: PrivacyGuarantee | None = None

    def _fit(self, prep: Prepared) -> None:
        torch = load_torch(self.method)
        with single_thread(torch):
            self._fit_torch(torch, prep)

    def _fit_torch(self, torch: Any, prep: Prepared) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _start(self, torch: Any, prep: Prepared) -> tuple[PrePlan, Any, float, int, Any]:
        """What every `_fit_torch` does first, in this order (seeded runs depend on it):
        private pre-processing, encoding, the sampling schedule, torch's generators.
        Returns (plan, codes, q, steps, torch_gen)."""
        plan = self._pre_process(prep)
        assert self.domain is not None
        codes = self.domain.encode(prep.frame)
        q, steps = self._schedule(plan.n_hat)
        torch_gen = torch.Generator().manual_seed(int(prep.gen.integers(0, 2**62)))
        torch.manual_seed(int(prep.gen.integers(0, 2**62)))
        return plan, codes, q, steps, torch_gen

    # ------------------------------------------------------------------ privacy steps
    def sampler_bound(self, plans: Sequence[ColumnPlan]) -> int:
        """The domain's histograms and the one row count (DP-SGD draws no discrete
        Gaussian)."""
        return super().sampler_bound(plans) + 1

    def _pre_budget(self, epsilon: float, delta: float, plans: Sequence[ColumnPlan]
                    ) -> tuple[float, SamplerReserve]:
        """(epsilon of the pre-processing, its sampler reserve out of its delta share)."""
        need_domain = any(p.needs_bounds or p.needs_categories for p in plans)
        eps_pre = epsilon * (PRE_SHARE_WITH_DOMAIN if need_domain else PRE_SHARE_COUNT_ONLY)
        return eps_pre, reserve_for(eps_pre, delta * PRE_DELTA_SHARE, self.sampler_bound(plans))

    def check_budget(self, epsilon: float, delta: float) -> None:
        if math.isfinite(epsilon):
            self._pre_budget(epsilon, delta, self.public_plans())

    def _pre_process(self, prep: Prepared) -> PrePlan:
        """Domain (undeclared parts) and the noisy row count, in zCDP; the non-private
        baseline observes both."""
        if not prep.private:
            self._build_domain(prep, 0.0, 0.0, 0.0)
            return PrePlan(float(len(prep.frame)), None, math.inf, 0.0, 0.0)
        need_domain = self.needs_bounds(prep) or self.needs_threshold(prep)
        delta_thr = prep.delta * THRESHOLD_DELTA_SHARE if self.needs_threshold(prep) else 0.0
        delta_pre = prep.delta * PRE_DELTA_SHARE
        delta_sgd = prep.delta - delta_thr - delta_pre
        # a share of it is set aside for the sampler's float64 step (synth/budget.py)
        _, sampler = self._pre_budget(prep.epsilon, prep.delta, prep.plans)
        self.account.sampler = sampler
        delta_pre_z = split_delta(delta_pre, 0.0, sampler.delta)
        rho_pre = rho_within(sampler.epsilon, delta_pre_z)
        self.account.rho_cap = rho_pre
        rho_pre *= 1 - RHO_MARGIN  # the steps' rounding never sums above the stated rho
        rho_count = rho_pre * (COUNT_SHARE_OF_PRE if need_domain else 1.0)
        rest = rho_pre - rho_count
        nb, nc = self.needs_bounds(prep), self.needs_threshold(prep)
        rho_b = rest * (0.5 if nc else 1.0) if nb else 0.0
        rho_c = rest - rho_b if nc else 0.0
        self._build_domain(prep, rho_b, rho_c, delta_thr)
        sigma_n = math.sqrt(1 / (2 * rho_count))
        n_hat = float(len(prep.frame) + discrete_gaussian(sigma_n, rng=prep.gen))
        self.account.spend("row count (sets the sampling rate)", rho_count,
                           detail=f"discrete Gaussian sigma={sigma_n:.4g}", vectors=1)
        pre = self.account.guarantee(delta_pre_z, "domain and row count")
        if n_hat < MIN_COUNT_IN_SIGMAS * sigma_n:
            raise InvalidInputError(
                f"epsilon={prep.epsilon:g} is too small for --method {self.method} on this "
                f"table: the noisy row count ({n_hat:.0f}) that sets the DP-SGD sampling rate is "
                f"within {MIN_COUNT_IN_SIGMAS:g} noise std ({sigma_n:.0f}) of zero; raise "
                f"--epsilon (the noise std shrinks like 1/epsilon), use more rows, or use "
                f"--method mst (spent so far: rho={self.account.rho:.3g}; nothing released)")
        n_hat = max(n_hat, 1.0)
        if prep.delta > 0.1 / n_hat:
            self.warnings.append(f"delta={prep.delta:g} is not much smaller than 1/n (n is "
                                 f"about {n_hat:.0f}): pass a smaller delta")
        return PrePlan(n_hat, pre, prep.epsilon - pre.epsilon, delta_sgd, sigma_n)

    def _schedule(self, n_hat: float) -> tuple[float, int]:
        """Poisson sampling rate q = batch / n_hat (n_hat is DP) and steps = epochs / q."""
        q = min(1.0, self.batch_size / n_hat)
        return q, max(1, int(round(self.epochs / q)))

    def _calibrate(self, plan: PrePlan, q: float, steps: int, epsilon: float) -> float:
        """The noise multiplier for (eps_sgd, delta_sgd), after `check_feasible`."""
        from privlab.core.accounting import calibrate_noise_multiplier

        check_feasible(self.method, epsilon, plan, q, steps, self.accountant)
        return calibrate_noise_multiplier(plan.eps_sgd, plan.delta_sgd, q, steps,
                                          self.accountant)

    def _finish(self, plan: PrePlan, sigma: float, q: float, steps: int,
                history: list[dict[str, float]], extra: dict[str, Any]) -> None:
        """The release's guarantee: pre-processing and DP-SGD composed sequentially, DP-SGD
        recomputed by the accountant for the run that happened."""
        from privlab.core.accounting import guarantee_for_dpsgd, sequential

        assert plan.pre is not None
        sgd = guarantee_for_dpsgd(sigma, q, steps, plan.delta_sgd, self.accountant,
                                  mechanism=self.sgd_mechanism)
        self._sgd_guarantee = sgd
        # the claims compose; what the pre-processing leaves outside them stays outside
        total = sequential([dataclasses.replace(plan.pre, not_covered=(), is_dp=True), sgd])
        self._guarantee = PrivacyGuarantee(
            epsilon=total.epsilon, delta=total.delta, neighbouring="add_remove_record",
            model="central", mechanism=self.mechanism,
            accountant="sequential composition of the zCDP pre-processing and the "
                       "DP-SGD accountant",
            notes=(f"pre-processing (domain, row count): ({plan.pre.epsilon:.4g}, "
                   f"{plan.pre.delta:.3g})-DP by zCDP",
                   f"DP-SGD: ({sgd.epsilon:.4g}, {sgd.delta:.3g})-DP by {sgd.accountant}",
                   *sgd.notes, *extra.pop("notes", ()), FLOAT_NOTE),
            not_covered=plan.pre.not_covered)
        self.train_info = {"noise_multiplier": sigma, "sample_rate": q, "steps": steps,
                           "clip": self.clip, "expected_batch": q * plan.n_hat,
                           "epochs": self.epochs, "history": history, **extra}

    def budget_lines(self) -> list[dict[str, Any]]:
        lines = super().budget_lines()
        if self._sgd_guarantee is not None:
            g = self._sgd_guarantee
            lines.append({"step": "DP-SGD training", "epsilon": g.epsilon, "delta": g.delta,
                          "detail": "; ".join(g.notes[:1]) + f"; accountant {g.accountant}"})
        return lines

    def details(self) -> dict[str, Any]:
        """Training facts for the JSON output: public settings and values derived from the
        noisy row count (sample rate, steps, batch sizes, noise multiplier). The per-epoch
        losses and clipped fractions (`train_info["history"]`) are computed on real rows
        WITHOUT noise, so they are not released (library attribute only)."""
        info = {k: v for k, v in self.train_info.items() if k != "history"}
        info.update(self._model_details())
        return info

    def _model_details(self) -> dict[str, Any]:
        return {}


def check_count(name: str, value: Any, lo: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise InvalidInputError(f"{name} must be an integer >= {lo}, got {value!r}")


def check_feasible(method: str, epsilon: float, plan: PrePlan, q: float, steps: int,
                   accountant: str) -> None:
    """Refuse a run whose noise drowns any possible signal.

    Along any fixed direction u the noise of one step is N(0, (sigma C)^2), while the clipped
    sum of an expected batch B = q n_hat is at most B C long; over T steps the signal adds up
    to at most T B C and the noise std to sqrt(T) sigma C. If sigma > sqrt(T) B, even a
    gradient shared by every record at every step is smaller than the noise along it:
    nothing can be learned. Equivalently (epsilon decreases in sigma), DP-SGD at
    sigma* = sqrt(T) B already spends more than eps_sgd; the message names the epsilon that
    would reach sigma* (a floor, not a recommendation).
    """
    from privlab.core.accounting import dpsgd_epsilon

    batch = q * plan.n_hat
    sigma_star = math.sqrt(steps) * batch
    needed = dpsgd_epsilon(sigma_star, q, steps, plan.delta_sgd, accountant)
    if needed <= plan.eps_sgd:
        return
    share = plan.eps_sgd / epsilon
    raise InvalidInputError(
        f"epsilon={epsilon:g} is too small for --method {method}: the DP-SGD noise multiplier "
        f"would exceed sqrt(steps) x expected batch = {sigma_star:.3g}, so the noise drowns "
        f"even a gradient shared by every record at every step; raise --epsilon above about "
        f"{needed / share:.2g}, use more rows, or use --method mst (nothing released)")
