"""DP-VAE: a variational autoencoder over the one-hot encoded domain, trained with DP-SGD.

Seed 000 (sections V-VI) names DP-trained autoencoders as one way to protect the input layer.
The VAE sees every column as categorical codes (numeric columns binned over DP-safe bounds,
the same `Domain` MST uses); the decoder gives one softmax per column, and synthetic rows are
decoded from z ~ N(0, I): post-processing of the DP-trained weights.

Privacy (add/remove one record), in `privlab.synth.dpsgd`:
1. Domain and row count in zCDP, converted to (eps_pre, delta_pre).
2. DP-SGD on the whole VAE (every weight sees real rows): Poisson sampling, exact
   per-example clipping (ghost norms, checked against Opacus' `GradSampleModule` in the
   tests), CSPRNG Gaussian noise calibrated by the PLD accountant.
3. The two compose sequentially: (eps_pre + eps_sgd, delta_pre + delta_sgd).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privlab.core.dpsgd import poisson_batch, set_noisy_grads
from privlab.synth.base import Prepared
from privlab.synth.dpsgd import (
    DeepSynthesizer,
    check_count,
    clipped_gradient_sum,
    draw_codes,
    load_torch,
    one_hot,
)

__all__ = ["DPVAESynthesizer", "clipped_gradient_sum"]


class DPVAESynthesizer(DeepSynthesizer):
    """Deep generative DP synthesizer: a small VAE trained with DP-SGD (exact per-example
    clipping, Poisson sampling, PLD-calibrated noise)."""

    method = "dpvae"
    mechanism = "DP-VAE trained with DP-SGD (Poisson-subsampled Gaussian)"
    sgd_mechanism = "DP-SGD training of the VAE"

    def __init__(self, *, epochs: int = 20, batch_size: int = 512, hidden: int = 128,
                 latent: int = 16, lr: float = 2e-3, clip: float = 1.0,
                 accountant: str = "pld", **kw: Any) -> None:
        super().__init__(epochs=epochs, batch_size=batch_size, lr=lr, clip=clip,
                         accountant=accountant, **kw)
        check_count("hidden", hidden)
        check_count("latent", latent)
        self.hidden, self.latent = hidden, latent

    # ------------------------------------------------------------------ fit
    def _fit_torch(self, torch: Any, prep: Prepared) -> None:
        gen = prep.gen
        plan, codes, q, steps, torch_gen = self._start(torch, prep)
        assert self.domain is not None
        x_all, y_all, slices = one_hot(torch, codes, self.domain.sizes)
        model = _make_vae(torch, x_all.shape[1], self.hidden, self.latent)
        if prep.private:
            sigma = self._calibrate(plan, q, steps, prep.epsilon)
            history = self._train_dp(torch, model, x_all, y_all, slices, q, steps, sigma,
                                     q * plan.n_hat, gen, torch_gen)
            self._finish(plan, sigma, q, steps, history, {})
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
        opt = torch.optim.Adam(params, lr=self.lr)
        n = x.shape[0]
        std = sigma * self.clip
        history: list[dict[str, float]] = []
        per_epoch = max(1, int(round(1 / q)))
        loss_sum, seen, clipped = 0.0, 0, 0
        model.train()
        for step in range(steps):
            rows = poisson_batch(gen, n, q)
            if rows.size:
                idx = torch.from_numpy(rows)
                summed, losses, factor = clipped_gradient_sum(
                    torch, model, lambda xb, yb: self._loss(torch, model, xb, yb, slices,
                                                            torch_gen, keep=True),
                    x[idx], y[idx], self.clip)
                loss_sum += float(losses.sum())
                seen += len(idx)
                clipped += int((factor < 1).sum())
            else:
                summed = [torch.zeros_like(p) for p in params]
            set_noisy_grads(params, summed, std, denom, gen)
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
        torch = load_torch(self.method)
        return draw_codes(torch, self._model.decode, self.latent, n, self._slices, gen)

    def _model_details(self) -> dict[str, Any]:
        return {"hidden": self.hidden, "latent": self.latent, "lr": self.lr,
                "batch_size": self.batch_size}


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
