"""User-level privacy accounting of federated training runs (dp-accounting events).

Unit of privacy: one user (all their ratings / records). Per-user clipping bounds what one user
can change in any aggregate, so every round is a Gaussian mechanism with L2 sensitivity equal
to the clip norm:

* a round that sums P separately clipped parts (clip C_k, noise std sigma*C_k each) is the
  Gaussian mechanism on the concatenation of the parts scaled by 1/C_k: sensitivity sqrt(P),
  noise std sigma, i.e. GaussianDpEvent(sigma / sqrt(P));
* DP-FedAvg: Poisson sampling of users at rate q = K / N, so PoissonSampledDpEvent(q, .);
* DPAM: every user in every round (no sampling), R self-composed Gaussians;
* DP-FTRL (Kairouz et al. 2021), tree restarted every epoch, each user in at most one round per
  epoch: the user's clipped value enters one leaf, hence at most
  depth(T) = floor(log2 T) + 1 = ceil(log2(T + 1)) tree nodes of an epoch of T rounds (the
  levels whose dyadic block can complete within T steps). Each node gets N(0, sigma^2 C^2);
  the user's effect is a vector with depth(T) blocks of norm <= C, so an epoch is the Gaussian
  mechanism with noise multiplier sigma / sqrt(depth(T)) (also under adaptive leaf choice,
  Kairouz et al. 2021 / Smith & Thakurta 2013). This is dp-accounting's
  `SingleEpochTreeAggregationDpEvent` RDP (alpha * depth / (2 sigma^2)); we hand the
  equivalent Gaussian event to the PLD accountant, which gives a tighter epsilon than RDP.

Adding or removing a user only removes their contribution (the schedule, the public
normaliser K and the user count N are treated as public), so add/remove-one-user neighbouring
is the relation accounted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from importlib import metadata

from privlab.core.accounting import (
    ComposedDpEvent,
    DpEvent,
    GaussianDpEvent,
    PoissonSampledDpEvent,
    SelfComposedDpEvent,
    calibrate_noise_multiplier,
    epsilon_for,
)
from privlab.core.calibration import analytic_gaussian_sigma
from privlab.core.guarantee import PrivacyGuarantee, check_delta, check_epsilon
from privlab.errors import InvalidInputError

ALGORITHMS = ("dpam", "dpfedavg", "dpftrl")


def tree_depth(steps: int) -> int:
    """Tree nodes one leaf of a T-step online tree aggregation can reach: floor(log2 T) + 1."""
    if steps < 1:
        raise InvalidInputError(f"steps must be >= 1, got {steps}")
    return int(steps).bit_length()


def ftrl_epochs(n_users: int, clients_per_round: int, rounds: int) -> list[int]:
    """Rounds of each epoch: every user once per epoch, ceil(N / K) rounds an epoch."""
    if clients_per_round < 1 or n_users < 1 or rounds < 1:
        raise InvalidInputError("n_users, clients_per_round and rounds must be >= 1")
    per_epoch = math.ceil(n_users / min(clients_per_round, n_users))
    full, rest = divmod(rounds, per_epoch)
    return [per_epoch] * full + ([rest] if rest else [])


def _group(sigmas: list[float]) -> DpEvent:
    """ComposedDpEvent of the Gaussians, equal ones self-composed (cheaper PLD)."""
    counts: dict[float, int] = {}
    for s in sigmas:
        counts[s] = counts.get(s, 0) + 1
    events = [SelfComposedDpEvent(GaussianDpEvent(s), c) if c > 1 else GaussianDpEvent(s)
              for s, c in counts.items()]
    return events[0] if len(events) == 1 else ComposedDpEvent(events)


@dataclass(frozen=True)
class Plan:
    """Public parameters of a run's privacy mechanism."""

    algorithm: str
    rounds: int
    n_users: int
    noise_multiplier: float  # sigma; 0 = not private (no noise, no clipping)
    n_parts: int = 1
    clients_per_round: int | None = None  # dpfedavg (expected) and dpftrl (batch)

    @property
    def private(self) -> bool:
        return self.noise_multiplier > 0

    @property
    def sample_rate(self) -> float:
        if self.algorithm != "dpfedavg":
            return 1.0
        return min(1.0, (self.clients_per_round or self.n_users) / self.n_users)

    def epochs(self) -> list[int]:
        if self.algorithm != "dpftrl":
            return [1] * self.rounds
        return ftrl_epochs(self.n_users, self.clients_per_round or self.n_users, self.rounds)

    def round_event(self) -> DpEvent:
        """Event of one round (dpam, dpfedavg)."""
        g = GaussianDpEvent(self.noise_multiplier / math.sqrt(self.n_parts))
        if self.algorithm == "dpfedavg" and self.sample_rate < 1:
            return PoissonSampledDpEvent(self.sample_rate, g)
        return g

    def epoch_event(self, steps: int) -> DpEvent:
        """Event of one DP-FTRL epoch of `steps` rounds (tree aggregation)."""
        return GaussianDpEvent(
            self.noise_multiplier / math.sqrt(self.n_parts * tree_depth(steps)))

    def full_event(self) -> DpEvent:
        if self.algorithm == "dpftrl":
            return _group([self.epoch_event(t).noise_multiplier for t in self.epochs()])
        ev = self.round_event()
        return SelfComposedDpEvent(ev, self.rounds) if self.rounds > 1 else ev


def gaussian_only_sigma(plan: Plan, epsilon: float, delta: float) -> float:
    """Closed-form calibration when the run is a composition of Gaussians (dpam, dpftrl).

    A composition of Gaussian mechanisms with multipliers s_k is exactly one Gaussian with
    1/s^2 = sum 1/s_k^2, so sigma = s_1(eps, delta) * sqrt(total sensitivity^2), where s_1 is
    the analytic-Gaussian multiplier (Balle & Wang 2018) for sensitivity 1.
    """
    base = analytic_gaussian_sigma(1.0, epsilon, delta)
    if plan.algorithm == "dpftrl":
        weight = plan.n_parts * sum(tree_depth(t) for t in plan.epochs())
    else:
        weight = plan.n_parts * plan.rounds
    return base * math.sqrt(weight)


def calibrate(plan: Plan, epsilon: float, delta: float) -> float:
    """Smallest noise multiplier (to 0.1%) whose PLD epsilon is <= epsilon at delta."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    if delta == 0:
        raise InvalidInputError("delta must be > 0: the Gaussian mechanism is never (eps, 0)-DP")
    if plan.algorithm == "dpfedavg" and plan.sample_rate < 1:
        sigma = calibrate_noise_multiplier(epsilon, delta, plan.sample_rate, plan.rounds,
                                           neighbouring="user")
        # the round event splits sigma over n_parts; calibration was for one part
        return sigma * math.sqrt(plan.n_parts)
    sigma = gaussian_only_sigma(plan, epsilon, delta)
    # the PLD accountant is pessimistic (an upper bound): nudge up until it certifies the target
    for _ in range(200):
        probe = Plan(plan.algorithm, plan.rounds, plan.n_users, sigma, plan.n_parts,
                     plan.clients_per_round)
        if epsilon_for(probe.full_event(), delta, "pld", neighbouring="user") <= epsilon:
            return sigma
        sigma *= 1.0005
    raise InvalidInputError(  # pragma: no cover - the loop always ends first
        f"could not calibrate noise for epsilon={epsilon:g}")


@dataclass
class RunAccountant:
    """Charges every release BEFORE it is forwarded; the run's guarantee is their composition."""

    plan: Plan
    delta: float
    events: list[DpEvent] = field(default_factory=list)
    descriptions: list[str] = field(default_factory=list)

    def charge(self, event: DpEvent, description: str) -> None:
        self.events.append(event)
        self.descriptions.append(description)

    def event(self) -> DpEvent | None:
        """Composition of the charged events, equal ones self-composed (as calibrated)."""
        if not self.events:
            return None
        counts: dict[DpEvent, int] = {}
        for ev in self.events:
            counts[ev] = counts.get(ev, 0) + 1
        grouped = [SelfComposedDpEvent(ev, c) if c > 1 else ev for ev, c in counts.items()]
        return grouped[0] if len(grouped) == 1 else ComposedDpEvent(grouped)

    def guarantee(self, mechanism: str, notes: tuple[str, ...] = ()) -> PrivacyGuarantee:
        """User-level (epsilon, delta) of everything charged so far (PLD, dp-accounting)."""
        if not self.plan.private:
            return PrivacyGuarantee.not_private(
                mechanism, "no clipping and no noise: the released parameters can reveal "
                "a user's ratings").with_notes(*notes)
        event = self.event()
        if event is None:
            raise InvalidInputError("no round was released yet: nothing to account")
        eps = epsilon_for(event, self.delta, "pld", neighbouring="user")
        return PrivacyGuarantee(
            epsilon=eps, delta=self.delta, neighbouring="user", model="central",
            mechanism=mechanism, accountant=_accountant_label(), notes=(
                f"{len(self.events)} release(s) charged: "
                + "; ".join(sorted(set(self.descriptions))),
                "trusted aggregator clips each user's contribution, sums and adds Gaussian "
                "noise; user embeddings stay on the device (billboard model) and are not "
                "released",
                "one user = every rating row with the same userId (the privacy unit): "
                "neighbouring datasets add or remove all of one userId's ratings",
                *notes,
            ),
        )


def _accountant_label() -> str:
    try:
        version = metadata.version("dp-accounting")
    except metadata.PackageNotFoundError:  # pragma: no cover - a core dependency
        version = "unknown"
    return (f"PLD (dp-accounting {version}, pessimistic, grid refined to 0.1%), "
            "user-level add/remove")
