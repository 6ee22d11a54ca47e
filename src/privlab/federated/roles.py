"""The four roles of on-device personalization, with narrow interfaces (ODP design note).

* `Server` (untrusted): publishes the shared parameters and updates them from DP outputs;
  `receive` accepts nothing but a `NoisyAggregate` and keeps every message in `inbox` so the
  boundary can be audited.
* `TrustedDistributor`: holds the published parameters and hands each client the rows it asks
  for; it keeps no record of requests and has no channel back to the server.
* `TrustedAggregator`: decides who takes part (Poisson sampling, DP-FTRL batches or everyone),
  clips each user's contribution, sums, adds Gaussian noise (tree-aggregated for DP-FTRL),
  charges the run's accountant and only then forwards the result.
* `Client`: holds users' data and their local parameters (the billboard model), which never
  leave it. One `Client` may hold many users for the vectorized simulation; every computation
  in it is per user and users never see each other's data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import sparse

from privlab.errors import InvalidInputError
from privlab.federated.messages import (
    _AGGREGATOR_TOKEN,
    Contributions,
    NoisyAggregate,
    ParameterSubset,
    PrivacyBoundaryError,
    PublishedModel,
    RoundInstructions,
    concat_contributions,
)
from privlab.federated.tree import TreeAggregator

if TYPE_CHECKING:  # accounting pulls in dp-accounting; device processes do not need it
    from privlab.federated.accounting import Plan, RunAccountant


# --------------------------------------------------------------------------------------------
# untrusted server
# --------------------------------------------------------------------------------------------


class Server:
    """Untrusted: sees only what the aggregator releases; updates the shared parameters."""

    def __init__(self, model: Any, plan: Plan, params: dict[str, np.ndarray],
                 server_lr: float = 1.0):
        self.model = model
        self.algorithm = plan.algorithm
        self.params = {k: np.array(v, dtype=float) for k, v in params.items()}
        self.server_lr = float(server_lr)
        self.round = 0
        self.inbox: list[NoisyAggregate] = []
        self._anchor: dict[str, np.ndarray] | None = None

    def publish(self) -> PublishedModel:
        return PublishedModel(self.round, {k: v.copy() for k, v in self.params.items()})

    def receive(self, message: Any) -> None:
        """Take one DP output and update the parameters (post-processing only)."""
        if not isinstance(message, NoisyAggregate):
            raise PrivacyBoundaryError(
                f"the server accepts only NoisyAggregate messages from the trusted aggregator, "
                f"got {type(message).__name__}"
            )
        self.inbox.append(message)
        if self.algorithm == "dpam":
            self.params[self.model.table] = self.model.solve_items(
                message.values["gram"], message.values["moment"],
                message.noise_std.get("gram", 0.0))
        elif self.algorithm == "dpfedavg":
            for name, value in message.values.items():
                self.params[name] = self.params[name] + (
                    self.server_lr * value / message.denominator)
        elif self.algorithm == "dpftrl":
            if message.step_in_epoch == 0 or self._anchor is None:
                self._anchor = {k: v.copy() for k, v in self.params.items()}
            for name, value in message.values.items():
                self.params[name] = self._anchor[name] + (
                    self.server_lr * value / message.denominator)
        else:  # pragma: no cover - validated at construction elsewhere
            raise InvalidInputError(f"unknown algorithm {self.algorithm!r}")
        self.round += 1


# --------------------------------------------------------------------------------------------
# trusted distributor
# --------------------------------------------------------------------------------------------


class TrustedDistributor:
    """Serves parameter rows to clients without telling anyone who fetched which."""

    def __init__(self) -> None:
        self._published: PublishedModel | None = None

    def load(self, published: PublishedModel) -> None:
        self._published = published

    @property
    def round(self) -> int:
        return -1 if self._published is None else self._published.round

    def fetch(self, rows: dict[str, np.ndarray]) -> ParameterSubset:
        if self._published is None:
            raise InvalidInputError("the distributor has no published model yet")
        out_rows, out_values = {}, {}
        for name, wanted in rows.items():
            table = self._published.params[name]
            wanted = np.unique(np.asarray(wanted, dtype=np.int64))
            if len(wanted) and (wanted[0] < 0 or wanted[-1] >= len(table)):
                raise InvalidInputError(f"row request out of range for {name!r}")
            out_rows[name] = wanted
            out_values[name] = table[wanted].copy()
        return ParameterSubset(out_rows, out_values)


# --------------------------------------------------------------------------------------------
# clients
# --------------------------------------------------------------------------------------------


class Client:
    """Holds its users' data; computes locally; sends contributions to the aggregator only."""

    def __init__(self, model: Any, batch: Any):
        self.model = model
        self._batch = batch  # private: raw ratings / records never leave this object

    @property
    def users(self) -> np.ndarray:
        return self._batch.users

    def needs(self) -> dict[str, np.ndarray]:
        return self.model.needed_rows(self._batch)

    def compute(self, subset: ParameterSubset, instructions: RoundInstructions
                ) -> Contributions | None:
        """The round's per-user contributions of the users that take part (None if none)."""
        take = np.flatnonzero(np.isin(self._batch.users, instructions.participants))
        if len(take) == 0:
            return None
        batch = self._batch if len(take) == len(self._batch.users) else self._batch.select(take)
        if instructions.kind == "stats":
            return self.model.stats(batch, subset)
        return self.model.update(batch, subset, instructions.hyper)

    def evaluate(self, subset: ParameterSubset) -> dict[str, float]:
        return self.model.evaluate(self._batch, subset)


# --------------------------------------------------------------------------------------------
# trusted aggregator
# --------------------------------------------------------------------------------------------


@dataclass
class AggregatorReport:
    """Diagnostics kept inside the trust boundary (they depend on the data): not released."""

    users_seen: list[int] = field(default_factory=list)
    clipped_fraction: list[float] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


class TrustedAggregator:
    """Per-user clipping, summation, Gaussian noise, privacy charge; then forwards."""

    def __init__(self, plan: Plan, parts: dict[str, tuple[int, int]],
                 clip_norms: dict[str, float], kind: str, accountant: RunAccountant,
                 rng: np.random.Generator, hyper: dict[str, float] | None = None,
                 user_ids: np.ndarray | None = None):
        if sorted(parts) != sorted(clip_norms):
            raise InvalidInputError("every part needs a clip norm")
        ids = np.arange(plan.n_users) if user_ids is None else np.asarray(user_ids)
        if len(ids) != plan.n_users:
            raise InvalidInputError(f"user_ids has {len(ids)} entries for {plan.n_users} users")
        self._ids = [str(int(u)) for u in ids]
        # the participation key: secret (from the aggregator's CSPRNG) unless seeded
        self._key = rng.bytes(32)
        self.plan = plan
        self.parts = dict(parts)
        self.clip_norms = {k: float(v) for k, v in clip_norms.items()}
        self.kind = kind
        self.accountant = accountant
        self.rng = rng
        self.hyper = dict(hyper or {})
        self.report = AggregatorReport()
        self._epochs = plan.epochs()
        self._tree: TreeAggregator | None = None
        self._order: np.ndarray | None = None
        self._released = 0

    # ------------------------------------------------------------ who takes part
    def _epoch_of(self, round_index: int) -> tuple[int, int]:
        start = 0
        for e, steps in enumerate(self._epochs):
            if round_index < start + steps:
                return e, round_index - start
            start += steps
        raise InvalidInputError(f"round {round_index} is past the planned {self.plan.rounds}")

    @property
    def denominator(self) -> float:
        """Public normaliser: expected participants (never the real count)."""
        if self.plan.algorithm == "dpfedavg":
            return self.plan.sample_rate * self.plan.n_users
        if self.plan.algorithm == "dpftrl":
            return float(min(self.plan.clients_per_round or self.plan.n_users,
                             self.plan.n_users))
        return 1.0

    def _coins(self, what: str, index: int) -> np.ndarray:
        """One uniform [0, 1) draw per user for round / epoch `index`: a keyed hash of
        (index, the user's own id), so no user's draw depends on who else is enrolled
        (docs/guarantees.md, "Per-user randomness")."""
        import hashlib

        out = np.empty(len(self._ids))
        for pos, uid in enumerate(self._ids):
            mac = hashlib.blake2b(f"{what}:{index}:{uid}".encode(), digest_size=8,
                                  key=self._key)
            out[pos] = (int.from_bytes(mac.digest(), "big") >> 11) / float(1 << 53)
        return out

    def instructions(self, round_index: int) -> RoundInstructions:
        """Participants of a round; drawn here, inside the trust boundary. DP-FedAvg's
        Poisson coin of each user and DP-FTRL's shuffle key come from `_coins`."""
        n = self.plan.n_users
        if self.plan.algorithm == "dpfedavg" and self.plan.sample_rate < 1:
            chosen = np.flatnonzero(self._coins("round", round_index) < self.plan.sample_rate)
        elif self.plan.algorithm == "dpftrl":
            epoch, step = self._epoch_of(round_index)
            if step == 0:
                # users in the order of their own keyed draws (a uniform shuffle)
                self._order = np.argsort(self._coins("epoch", epoch), kind="stable")
            k = int(self.denominator)
            assert self._order is not None
            chosen = np.sort(self._order[step * k: (step + 1) * k])
        else:
            chosen = np.arange(n)
        return RoundInstructions(round_index, self.kind, chosen.astype(np.int64), self.hyper)

    # ------------------------------------------------------------ clip, sum, noise
    def _clip_and_sum(self, contrib: Contributions | None) -> dict[str, np.ndarray]:
        sums = {name: np.zeros(shape) for name, shape in self.parts.items()}
        if contrib is None:
            self.report.clipped_fraction.append(0.0)
            return sums
        n_users = len(contrib.users)
        clipped = np.zeros(n_users, dtype=bool)
        for name in sorted(self.parts):
            part = contrib.parts[name]
            owner = part.row_owner()
            if self.plan.private:
                sq = np.bincount(owner, weights=np.einsum("mw,mw->m", part.values, part.values),
                                 minlength=n_users)
                norm = np.sqrt(sq)
                c = self.clip_norms[name]
                scale = np.where(norm > c, c / np.maximum(norm, 1e-300), 1.0)
                clipped |= norm > c
            else:
                scale = np.ones(n_users)
            weights = scale[owner]
            mat = sparse.csr_matrix((weights, (part.rows, np.arange(len(part.rows)))),
                                    shape=(part.n_rows, len(part.rows)))
            sums[name] = np.asarray(mat @ part.values)
        self.report.clipped_fraction.append(float(clipped.mean()) if n_users else 0.0)
        return sums

    @staticmethod
    def _well_formed(p: Any, n_users: int, n_rows: int, width: int) -> bool:
        if (p.n_rows, p.width) != (n_rows, width) or p.values.shape != (len(p.rows), width):
            return False
        if len(p.user_ptr) != n_users + 1 or p.user_ptr[-1] != len(p.rows):
            return False
        if len(p.rows) and (p.rows.min() < 0 or p.rows.max() >= n_rows):
            return False
        return bool(np.isfinite(p.values).all())

    def _validate(self, instructions: RoundInstructions,
                  batches: list[Contributions | None]) -> Contributions | None:
        """Keep only well-formed contributions of this round's participants, one per user."""
        allowed = set(instructions.participants.tolist())
        seen: set[int] = set()
        kept: list[Contributions] = []
        for b in batches:
            if b is None or len(b.users) == 0:
                continue
            if sorted(b.parts) != sorted(self.parts):
                self.report.dropped.append(f"round {instructions.round}: wrong parts")
                continue
            ok = all(self._well_formed(b.parts[name], len(b.users), *shape)
                     for name, shape in self.parts.items())
            users = b.users.tolist()
            if not ok or not set(users) <= allowed or seen & set(users) or \
                    len(set(users)) != len(users):
                self.report.dropped.append(
                    f"round {instructions.round}: malformed, duplicate or non-participant "
                    "contribution dropped")
                continue
            seen |= set(users)
            kept.append(b)
        self.report.users_seen.append(len(seen))
        return concat_contributions(kept)

    def aggregate(self, instructions: RoundInstructions,
                  batches: list[Contributions | None]) -> NoisyAggregate:
        """Clip per user, sum, add noise, charge the accountant, and return the DP output."""
        contrib = self._validate(instructions, batches)
        sums = self._clip_and_sum(contrib)
        sigma = self.plan.noise_multiplier
        std = {name: sigma * self.clip_norms[name] for name in self.parts}
        epoch, step = 0, 0
        if self.plan.algorithm == "dpftrl":
            epoch, step = self._epoch_of(instructions.round)
            if step == 0:
                steps = self._epochs[epoch]
                self._tree = TreeAggregator(std, self.rng)
                if self.plan.private:
                    self.accountant.charge(self.plan.epoch_event(steps),
                                           f"DP-FTRL tree epoch of {steps} round(s)")
            assert self._tree is not None
            values = self._tree.add(sums)
            kind = "prefix_sum"
        else:
            values = {}
            for name in sorted(sums):
                noise = self.rng.normal(0.0, std[name], size=sums[name].shape) \
                    if std[name] > 0 else 0.0
                values[name] = sums[name] + noise
            if self.plan.private:
                what = ("Poisson-sampled Gaussian round" if self.plan.algorithm == "dpfedavg"
                        else "Gaussian round over all users")
                self.accountant.charge(self.plan.round_event(), what)
            kind = "sum"
        self._released += 1
        return NoisyAggregate(
            round=instructions.round, kind=kind, values=values, noise_std=std,
            clip_norm=dict(self.clip_norms) if self.plan.private else
            {k: math.inf for k in self.parts},
            denominator=self.denominator, epoch=epoch, step_in_epoch=step,
            charge=self.accountant.descriptions[-1] if self.accountant.descriptions else "none",
            _issuer=_AGGREGATOR_TOKEN,
        )

    @property
    def released(self) -> int:
        return self._released
