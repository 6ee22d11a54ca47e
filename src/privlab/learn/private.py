"""Wrap the user's own model, optimizer and DataLoader for DP-SGD (Opacus), PLD-calibrated.

    private = make_private(model, optimizer, loader, epsilon=1.0, delta=1e-5, epochs=5)
    for epoch in range(5):
        for x, y in private.data_loader:          # Poisson-sampled batches
            private.optimizer.zero_grad()
            loss = criterion(private.module(x), y)  # or private.criterion in ghost mode
            loss.backward()
            private.optimizer.step()                # clip per example, add noise
    private.guarantee()                            # epsilon of the steps actually taken

The training loop stays the user's. Opacus does the per-example clipping (default hooks, or
ghost clipping with `grad_sample_mode="ghost"`) and the Poisson sampling; privlab picks the
noise multiplier with the PLD accountant (tighter than Opacus' default RDP, so less noise
for the same target) and accounts the steps Opacus records, by PLD and RDP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from privlab.core.guarantee import PrivacyGuarantee, check_delta, check_epsilon
from privlab.errors import InvalidInputError, setting
from privlab.learn.dpsgd import FLOAT_NOTE, quiet_rdp_warnings


@dataclass
class PrivateTraining:
    """What `make_private` returns: the wrapped objects and the privacy bookkeeping."""

    module: Any
    optimizer: Any
    data_loader: Any
    criterion: Any
    privacy_engine: Any
    noise_multiplier: float
    sample_rate: float
    planned_steps: int
    delta: float
    clip: float
    accountant: str
    grad_sample_mode: str

    def history(self) -> list[tuple[float, float, int]]:
        """(noise multiplier, sample rate, steps) as recorded by Opacus' optimizer hook."""
        return [(float(s), float(q), int(k)) for s, q, k in
                self.privacy_engine.accountant.history]

    @property
    def steps(self) -> int:
        return sum(k for _, _, k in self.history())

    def _event(self) -> Any:
        from privlab.core import accounting

        parts = [accounting.dpsgd_event(s, q, k) for s, q, k in self.history() if k > 0]
        if not parts:
            raise InvalidInputError("no DP-SGD step was taken yet: nothing to account")
        return parts[0] if len(parts) == 1 else accounting.ComposedDpEvent(parts)

    def epsilon(self, accountant: str | None = None) -> float:
        """Epsilon of the steps taken so far ("pld" or "rdp"; default: the chosen one)."""
        from privlab.core import accounting

        with quiet_rdp_warnings():
            return accounting.epsilon_for(self._event(), self.delta, accountant or self.accountant)

    def guarantee(self) -> PrivacyGuarantee:
        """The guarantee of the steps taken so far, with both accountants' epsilons."""
        eps = self.epsilon()
        other = "rdp" if self.accountant == "pld" else "pld"
        label = ("PLD (dp-accounting, pessimistic, adaptive grid; privlab.core.accounting)"
                 if self.accountant == "pld" else
                 "RDP (dp-accounting, default orders; privlab.core.accounting)")
        return PrivacyGuarantee(
            epsilon=eps, delta=self.delta, neighbouring="add_remove_record", model="central",
            mechanism=f"DP-SGD via Opacus ({self.grad_sample_mode} per-example clipping, "
                      "Poisson sampling)",
            accountant=label,
            notes=(f"{self.steps} steps taken (planned {self.planned_steps}); sample rate "
                   f"{self.sample_rate:.6g}; noise multiplier {self.noise_multiplier:.6g}; "
                   f"clipping norm {self.clip:g}",
                   f"same steps by the {other.upper()} accountant: epsilon = "
                   f"{self.epsilon(other):.4g}",
                   "noise and sampling from torch's default generator (Opacus "
                   "secure_mode=False)",
                   FLOAT_NOTE))


def make_private(module: Any, optimizer: Any, data_loader: Any, *, epsilon: float | None = None,
                 delta: float, epochs: int, clip: float = 1.0, accountant: str = "pld",
                 noise_multiplier: float | None = None, grad_sample_mode: str = "hooks",
                 criterion: Any = None) -> PrivateTraining:
    """Make the user's (module, optimizer, data_loader) DP-SGD with a PLD-calibrated sigma."""
    from opacus import PrivacyEngine
    from opacus.validators import ModuleValidator

    from privlab.core import accounting

    delta = check_delta(delta)
    if delta <= 0:
        raise InvalidInputError("delta must be > 0 for DP-SGD (e.g. 1e-5)")
    if (epsilon is None) == (noise_multiplier is None):
        raise InvalidInputError("give exactly one of epsilon (target) or noise_multiplier")
    if accountant not in ("pld", "rdp"):
        raise InvalidInputError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")
    if grad_sample_mode not in ("hooks", "ghost"):
        raise InvalidInputError(f"grad_sample_mode must be 'hooks' or 'ghost', got "
                                f"{grad_sample_mode!r}")
    if not (isinstance(clip, (int, float)) and math.isfinite(clip) and clip > 0):
        raise InvalidInputError(f"clip must be a finite number > 0, got {clip!r}")
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise InvalidInputError(f"epochs must be a whole number >= 1, got {epochs!r}")
    errors = ModuleValidator.validate(module, strict=False)
    if errors:
        raise InvalidInputError(f"the module is not DP-SGD compatible: {errors[0]}; fix it with "
                                "opacus.validators.ModuleValidator.fix(module)")
    batches = len(data_loader)
    if batches < 1:
        raise InvalidInputError("the data loader is empty")
    n = len(data_loader.dataset)
    if data_loader.batch_size is not None and data_loader.batch_size > n:
        shown = setting("batch_size", "--batch-size", data_loader.batch_size)
        raise InvalidInputError(f"{shown} is larger than the "
                                f"dataset ({n} rows); use at most {n}")
    q = 1.0 / batches                      # what Opacus' Poisson DataLoader uses
    steps = epochs * batches
    if noise_multiplier is None:
        epsilon = check_epsilon(epsilon)
        with quiet_rdp_warnings():
            sigma = accounting.calibrate_noise_multiplier(epsilon, delta, q, steps,
                                                          accountant=accountant)
        if sigma >= n * q:
            raise InvalidInputError(
                f"epsilon={epsilon:g} is too small for useful training on {n} rows: it needs "
                f"noise multiplier {sigma:.3g} >= the expected batch size {n * q:.3g}")
    else:
        sigma = float(noise_multiplier)
        if not (math.isfinite(sigma) and sigma > 0):
            raise InvalidInputError(f"noise_multiplier must be > 0, got {noise_multiplier!r}")
    engine = PrivacyEngine(accountant="rdp", secure_mode=False)
    kwargs = dict(module=module, optimizer=optimizer, data_loader=data_loader,
                  noise_multiplier=sigma, max_grad_norm=float(clip), poisson_sampling=True)
    if grad_sample_mode == "ghost":
        import torch

        crit = criterion if criterion is not None else torch.nn.CrossEntropyLoss()
        mod, opt, crit, loader = engine.make_private(**kwargs, criterion=crit,
                                                     grad_sample_mode="ghost")
    else:
        mod, opt, loader = engine.make_private(**kwargs)
        crit = criterion
    return PrivateTraining(mod, opt, loader, crit, engine, sigma, q, steps, delta, float(clip),
                           accountant, grad_sample_mode)
