"""DP-VAE: a variational autoencoder over the one-hot encoded domain, trained with DP-SGD.

Seed 000 (sections V-VI) names DP-trained autoencoders as one way to protect the input layer.
The VAE sees every column as categorical codes (numeric columns binned over DP-safe bounds,
the same `Domain` MST uses); the decoder gives one softmax per column, and synthetic rows are
decoded from z ~ N(0, I): post-processing of the DP-trained weights.

Privacy, step by step (add/remove one record):
1. Domain and row count: zCDP (`privlab.synth.budget`): a discrete-Gaussian row count (the
   sampling rate q = batch / n must not depend on the exact n), plus bounds / categories that
   were not declared. Converted to (eps_pre, delta_pre).
2. DP-SGD (Abadi et al. 2016) exactly as the accountant assumes: Poisson sampling with rate
   q, exact per-example gradient norms (ghost norms for the Linear layers, checked against
   Opacus' `GradSampleModule` in the tests) and clipping to L2 norm <= clip, Gaussian
   noise std = sigma * clip on the sum from the ChaCha20 CSPRNG (`privlab.core.rng`),
   divided by the expected batch size. sigma is the smallest noise multiplier meeting
   (eps - eps_pre, delta_sgd) under the PLD accountant (`privlab.core.accounting`).
3. The two compose sequentially: (eps_pre + eps_sgd, delta_pre + delta_sgd).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from privlab.core.calibration import rho_for_target
from privlab.core.guarantee import PrivacyGuarantee
from privlab.core.samplers import discrete_gaussian
from privlab.errors import InvalidInputError
from privlab.synth.base import THRESHOLD_DELTA_SHARE, Prepared, Synthesizer

#: Share of epsilon spent before DP-SGD: the row count only, or the row count plus the
#: bounds / categories that were not declared.
PRE_SHARE_COUNT_ONLY = 0.02
PRE_SHARE_WITH_DOMAIN = 0.1
COUNT_SHARE_OF_PRE = 0.1  # of the pre-training rho, when the domain is also estimated
PRE_DELTA_SHARE = 0.1
NORM_MARGIN = 1e-5
FLOAT_NOTE = ("DP-SGD noise is continuous Gaussian in float32 (standard practice); the "
              "floating-point caveat of Mironov 2012 is not addressed for the weights")


@contextlib.contextmanager
def _single_thread(torch: Any) -> Iterator[None]:
    """Tiny matrices: one intra-op thread is faster, and far faster on a busy machine where
    spinning OpenMP workers fight for cores (measured: 1000x on cross-entropy). Restored."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _torch() -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover - depends on the install
        raise InvalidInputError("--method dpvae needs torch and opacus: pip install "
                                "'privlab[ml]'") from None
    return torch


class DPVAESynthesizer(Synthesizer):
    """Deep generative DP synthesizer: a small VAE trained with DP-SGD (Opacus per-sample
    gradients, Poisson sampling, PLD-calibrated noise)."""

    method = "dpvae"
    mechanism = "DP-VAE trained with DP-SGD (Poisson-subsampled Gaussian)"

    def __init__(self, *, epochs: int = 20, batch_size: int = 512, hidden: int = 128,
                 latent: int = 16, lr: float = 2e-3, clip: float = 1.0,
                 accountant: str = "pld", **kw: Any) -> None:
        super().__init__(**kw)
        for name, v, lo in (("epochs", epochs, 1), ("batch_size", batch_size, 1),
                            ("hidden", hidden, 1), ("latent", latent, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise InvalidInputError(f"{name} must be an integer >= {lo}, got {v!r}")
        if not (lr > 0 and math.isfinite(lr)):
            raise InvalidInputError(f"lr must be a finite number > 0, got {lr!r}")
        if not (clip > 0 and math.isfinite(clip)):
            raise InvalidInputError(f"clip must be a finite number > 0, got {clip!r}")
        if accountant not in ("pld", "rdp"):
            raise InvalidInputError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")
        self.epochs, self.batch_size, self.hidden, self.latent = epochs, batch_size, hidden, latent
        self.lr, self.clip, self.accountant = lr, clip, accountant
        self.train_info: dict[str, Any] = {}
        self._sgd_guarantee: PrivacyGuarantee | None = None

    # ------------------------------------------------------------------ fit
    def _fit(self, prep: Prepared) -> None:
        torch = _torch()
        with _single_thread(torch):
            self._fit_torch(torch, prep)

    def _fit_torch(self, torch: Any, prep: Prepared) -> None:
        from privlab.core.accounting import (
            calibrate_noise_multiplier,
            guarantee_for_dpsgd,
            sequential,
        )

        gen = prep.gen
        n_hat: float
        if prep.private:
            need_domain = self.needs_bounds(prep) or self.needs_threshold(prep)
            delta_thr = prep.delta * THRESHOLD_DELTA_SHARE if self.needs_threshold(prep) else 0.0
            delta_pre = prep.delta * PRE_DELTA_SHARE
            delta_sgd = prep.delta - delta_thr - delta_pre
            eps_pre = prep.epsilon * (PRE_SHARE_WITH_DOMAIN if need_domain
                                      else PRE_SHARE_COUNT_ONLY)
            rho_pre = rho_for_target(eps_pre, delta_pre)
            rho_count = rho_pre * (COUNT_SHARE_OF_PRE if need_domain else 1.0)
            rest = rho_pre - rho_count
            nb, nc = self.needs_bounds(prep), self.needs_threshold(prep)
            rho_b = rest * (0.5 if nc else 1.0) if nb else 0.0
            rho_c = rest - rho_b if nc else 0.0
            self._build_domain(prep, rho_b, rho_c, delta_thr)
            sigma_n = math.sqrt(1 / (2 * rho_count))
            n_hat = float(len(prep.frame) + discrete_gaussian(sigma_n, rng=gen))
            self.account.spend("row count (sets the sampling rate)", rho_count,
                               detail=f"discrete Gaussian sigma={sigma_n:.4g}")
            n_hat = max(n_hat, 1.0)
            pre = self.account.guarantee(delta_pre, "domain and row count")
            eps_sgd = prep.epsilon - pre.epsilon
            if prep.delta > 0.1 / n_hat:
                self.warnings.append(f"delta={prep.delta:g} is not much smaller than 1/n (n is "
                                     f"about {n_hat:.0f}): pass a smaller delta")
        else:
            self._build_domain(prep, 0.0, 0.0, 0.0)
            n_hat = float(len(prep.frame))
        assert self.domain is not None
        codes = self.domain.encode(prep.frame)
        sizes = self.domain.sizes
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        dim = int(offsets[-1])
        n = codes.shape[0]
        q = min(1.0, self.batch_size / n_hat)
        steps = max(1, int(round(self.epochs / q)))
        torch_gen = torch.Generator().manual_seed(int(gen.integers(0, 2**62)))
        torch.manual_seed(int(gen.integers(0, 2**62)))
        model = _make_vae(torch, dim, self.hidden, self.latent)
        x_all = torch.zeros((n, dim), dtype=torch.float32)
        rows = torch.arange(n).unsqueeze(1).expand(n, codes.shape[1])
        x_all[rows, torch.from_numpy(codes + offsets[:-1])] = 1.0
        y_all = torch.from_numpy(codes)
        slices = [(int(offsets[j]), int(sizes[j])) for j in range(len(sizes))]
        if prep.private:
            sigma = calibrate_noise_multiplier(eps_sgd, delta_sgd, q, steps, self.accountant)
            history = self._train_dp(torch, model, x_all, y_all, slices, q, steps, sigma,
                                     q * n_hat, gen, torch_gen)
            sgd = guarantee_for_dpsgd(sigma, q, steps, delta_sgd, self.accountant,
                                      mechanism="DP-SGD training of the VAE")
            self._sgd_guarantee = sgd
            total = sequential([pre, sgd])
            self._guarantee = PrivacyGuarantee(
                epsilon=total.epsilon, delta=total.delta, neighbouring="add_remove_record",
                model="central", mechanism=self.mechanism,
                accountant="sequential composition of the zCDP pre-processing and the "
                           "DP-SGD accountant",
                notes=(f"pre-processing (domain, row count): ({pre.epsilon:.4g}, "
                       f"{pre.delta:.3g})-DP by zCDP",
                       f"DP-SGD: ({sgd.epsilon:.4g}, {sgd.delta:.3g})-DP by {sgd.accountant}",
                       *sgd.notes, FLOAT_NOTE))
            self.train_info = {"noise_multiplier": sigma, "sample_rate": q, "steps": steps,
                               "clip": self.clip, "expected_batch": q * n_hat,
                               "epochs": self.epochs, "history": history}
        else:
            history = self._train_plain(torch, model, x_all, y_all, slices, gen, torch_gen)
            self.train_info = {"steps": len(history), "epochs": self.epochs,
                               "history": history}
        self._model = model
        self._slices = slices
        self._torch_gen = torch_gen

    def _loss(self, torch: Any, model: Any, x: Any, y: Any, slices: list[tuple[int, int]],
              torch_gen: Any, keep: bool = False) -> Any:
        """Per-example VAE loss: sum of per-column cross-entropies plus the KL term.
        With keep=True the model records each Linear layer's input and output."""
        f = torch.nn.functional
        eps = torch.randn((x.shape[0], self.latent), generator=torch_gen)
        logits, mu, logvar = model(x, eps, keep=keep)
        loss = 0.5 * (mu.pow(2) + logvar.exp() - 1 - logvar).sum(dim=1)
        for j, (start, size) in enumerate(slices):
            loss = loss + f.cross_entropy(logits[:, start:start + size], y[:, j],
                                          reduction="none")
        return loss

    def _train_dp(self, torch: Any, model: Any, x: Any, y: Any, slices: list[tuple[int, int]],
                  q: float, steps: int, sigma: float, denom: float, gen: np.random.Generator,
                  torch_gen: Any) -> list[dict[str, float]]:
        params = [p for p in model.parameters() if p.requires_grad]
        sizes = [p.numel() for p in params]
        opt = torch.optim.Adam(params, lr=self.lr)
        n = x.shape[0]
        std = sigma * self.clip
        history: list[dict[str, float]] = []
        per_epoch = max(1, int(round(1 / q)))
        loss_sum, seen, clipped = 0.0, 0, 0
        model.train()
        for step in range(steps):
            k = int(gen.binomial(n, q))
            if k > 0:
                idx = torch.from_numpy(np.sort(gen.choice(n, size=k, replace=False)))
                summed, losses, factor = clipped_gradient_sum(
                    torch, model, lambda xb, yb: self._loss(torch, model, xb, yb, slices,
                                                            torch_gen, keep=True),
                    x[idx], y[idx], self.clip)
                loss_sum += float(losses.sum())
                seen += k
                clipped += int((factor < 1).sum())
            else:
                summed = [torch.zeros_like(p) for p in params]
            noise = torch.from_numpy(gen.standard_normal(sum(sizes), dtype=np.float32))
            offset = 0
            for p, s, size in zip(params, summed, sizes, strict=True):
                p.grad = (s + std * noise[offset:offset + size].view_as(p)) / denom
                offset += size
            opt.step()
            opt.zero_grad(set_to_none=True)
            if (step + 1) % per_epoch == 0 or step + 1 == steps:
                history.append({"step": step + 1, "loss": loss_sum / max(seen, 1),
                                "clipped_fraction": clipped / max(seen, 1)})
                loss_sum, seen, clipped = 0.0, 0, 0
                self.progress("DP-SGD", step + 1, steps)
        model.eval()
        return history

    def _train_plain(self, torch: Any, model: Any, x: Any, y: Any,
                     slices: list[tuple[int, int]], gen: np.random.Generator,
                     torch_gen: Any) -> list[dict[str, float]]:
        opt = torch.optim.Adam(model.parameters(), lr=self.lr)
        n = x.shape[0]
        history = []
        model.train()
        for epoch in range(self.epochs):
            order = torch.from_numpy(gen.permutation(n))
            total = 0.0
            for start in range(0, n, self.batch_size):
                idx = order[start:start + self.batch_size]
                losses = self._loss(torch, model, x[idx], y[idx], slices, torch_gen)
                opt.zero_grad(set_to_none=True)
                losses.mean().backward()
                opt.step()
                total += float(losses.detach().sum())
            history.append({"epoch": epoch + 1, "loss": total / n})
            self.progress("training (not private)", epoch + 1, self.epochs)
        model.eval()
        return history

    # ------------------------------------------------------------------ sample
    def _sample_codes(self, n: int, gen: np.random.Generator) -> np.ndarray:
        torch = _torch()
        out = np.empty((n, len(self._slices)), dtype=np.int64)
        chunk = 8192
        with torch.no_grad(), _single_thread(torch):
            for start in range(0, n, chunk):
                m = min(chunk, n - start)
                z = torch.from_numpy(gen.standard_normal((m, self.latent), dtype=np.float32))
                logits = self._model.decode(z)
                for j, (s, size) in enumerate(self._slices):
                    p = torch.softmax(logits[:, s:s + size].double(), dim=1).numpy()
                    cdf = np.cumsum(p, axis=1)
                    cdf[:, -1] = 1.0
                    u = gen.random((m, 1))
                    out[start:start + m, j] = (cdf < u).sum(axis=1).clip(0, size - 1)
        return out

    def budget_lines(self) -> list[dict[str, Any]]:
        lines = super().budget_lines()
        if self._sgd_guarantee is not None:
            g = self._sgd_guarantee
            lines.append({"step": "DP-SGD training", "epsilon": g.epsilon, "delta": g.delta,
                          "detail": "; ".join(g.notes[:1]) + f"; accountant {g.accountant}"})
        return lines

    def details(self) -> dict[str, Any]:
        info = {k: v for k, v in self.train_info.items() if k != "history"}
        hist = self.train_info.get("history") or []
        if hist:
            info["final_loss"] = hist[-1]["loss"]
        info.update(hidden=self.hidden, latent=self.latent, lr=self.lr,
                    batch_size=self.batch_size)
        return info


def clipped_gradient_sum(torch: Any, model: Any, loss_fn: Any, x: Any, y: Any,
                         clip: float) -> tuple[list[Any], Any, Any]:
    """Sum over the batch of per-example gradients, each scaled to L2 norm <= clip.

    Every trainable parameter sits in a Linear layer applied once per example, so with the
    layer input a_i and the gradient g_i of the loss w.r.t. the layer output, example i's
    weight gradient is g_i a_i^T (norm^2 = |g_i|^2 |a_i|^2) and its bias gradient is g_i:
    exact per-example norms from one backward pass, without materialising per-example
    gradients (the "ghost norm" of Goodfellow 2015 / Bu et al. 2022). The tests check it
    against Opacus' `GradSampleModule` per-sample gradients.
    Returns (clipped sums in `model.parameters()` order, per-example losses, clip factors).
    """
    losses = loss_fn(x, y)
    records = model.records
    outs = [o for _, o in records]
    grads = torch.autograd.grad(losses.sum(), outs)
    norms2 = torch.zeros(x.shape[0], dtype=torch.float64)
    for (a, _), g in zip(records, grads, strict=True):
        norms2 += ((g * g).sum(dim=1) * ((a * a).sum(dim=1) + 1.0)).double()
    factor = (clip / (norms2.sqrt() * (1 + NORM_MARGIN) + 1e-6)).clamp(max=1.0).float()
    sums = {}
    for layer, (a, _), g in zip(model.layers, records, grads, strict=True):
        cg = g * factor[:, None]
        sums[id(layer.weight)] = cg.T @ a
        sums[id(layer.bias)] = cg.sum(dim=0)
    model.records = []
    return [sums[id(p)] for p in model.parameters()], losses.detach(), factor


def _make_vae(torch: Any, dim: int, hidden: int, latent: int) -> Any:
    nn = torch.nn
    relu = torch.relu

    class VAE(nn.Module):
        """Encoder dim -> hidden -> (mu, logvar); decoder latent -> hidden -> dim logits.
        Only Linear layers (each used once per example) and ReLU: no batch coupling."""

        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList([
                nn.Linear(dim, hidden), nn.Linear(hidden, 2 * latent),
                nn.Linear(latent, hidden), nn.Linear(hidden, dim)])
            self.records: list[tuple[Any, Any]] = []

        def _lin(self, i: int, a: Any, keep: bool) -> Any:
            out = self.layers[i](a)
            if keep:
                self.records.append((a.detach(), out))
            return out

        def forward(self, x: Any, eps: Any, keep: bool = False) -> Any:
            self.records = []
            mu, logvar = self._lin(1, relu(self._lin(0, x, keep)), keep).chunk(2, dim=1)
            logvar = logvar.clamp(-8.0, 8.0)
            z = mu + (0.5 * logvar).exp() * eps
            return self._lin(3, relu(self._lin(2, z, keep)), keep), mu, logvar

        def decode(self, z: Any) -> Any:
            return self.layers[3](relu(self.layers[2](z)))

    return VAE()
