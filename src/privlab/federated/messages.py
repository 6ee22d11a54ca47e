"""The messages exchanged by the roles, and the privacy boundary between them.

Flow of one round (the ODP design note, docs/references.md):

    Server --PublishedModel--> TrustedDistributor --ParameterSubset--> Client
    Client --Contributions--> TrustedAggregator --NoisyAggregate--> Server

`Contributions` carry per-user values (gradients, sufficient statistics) and may only go to
the trusted aggregator. The untrusted `Server` accepts nothing but a `NoisyAggregate`, and a
`NoisyAggregate` can only be minted by the aggregator (it checks a private issuer token), after
per-user clipping, summation, Gaussian noise and the privacy charge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privlab.errors import InvalidInputError, UnsafeConfigurationError


class PrivacyBoundaryError(UnsafeConfigurationError):
    """Something that is not a DP output was about to reach the untrusted server (exit 4)."""


# Only roles.TrustedAggregator holds this object; NoisyAggregate refuses any other issuer.
_AGGREGATOR_TOKEN = object()


@dataclass(frozen=True)
class PublishedModel:
    """Shared parameters the server publishes (already DP: post-processing of DP outputs)."""

    round: int
    params: dict[str, np.ndarray]


@dataclass(frozen=True)
class ParameterSubset:
    """What the distributor hands to a client: the requested rows of each shared table."""

    rows: dict[str, np.ndarray]  # name -> row indices (sorted, unique)
    values: dict[str, np.ndarray]  # name -> (len(rows), width)

    def lookup(self, name: str, wanted: np.ndarray) -> np.ndarray:
        """Values of the rows `wanted` (which must have been requested)."""
        rows = self.rows[name]
        pos = np.searchsorted(rows, wanted)
        if len(wanted) and (pos.max() >= len(rows) or not np.array_equal(rows[pos], wanted)):
            raise InvalidInputError(f"parameter rows of {name!r} were not requested")
        return self.values[name][pos]


@dataclass(frozen=True)
class RoundInstructions:
    """From the trusted side to the clients: who takes part this round and what to compute.

    Goes to clients only (through the trusted channel); the server never sees `participants`.
    """

    round: int
    kind: str  # "stats" (DPAM sufficient statistics) or "update" (local training delta)
    participants: np.ndarray  # sorted global user indices taking part
    hyper: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Part:
    """One named block of per-user contributions, as rows of a (n_rows, width) table.

    User k of the batch contributes rows[user_ptr[k]:user_ptr[k+1]] with those values; a dense
    vector is one row (n_rows = 1).
    """

    n_rows: int
    width: int
    user_ptr: np.ndarray  # (n_users + 1,)
    rows: np.ndarray  # (m,) int64
    values: np.ndarray  # (m, width) float64

    def row_owner(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.user_ptr) - 1), np.diff(self.user_ptr))


@dataclass(frozen=True)
class Contributions:
    """Per-user values from clients to the TRUSTED aggregator. Never given to the server."""

    users: np.ndarray  # (n,) sorted global user indices
    parts: dict[str, Part]

    def to_arrays(self) -> list[np.ndarray]:
        """Flat list for a transport (Flower): users, then per part ptr/rows/values."""
        out: list[np.ndarray] = [np.asarray(self.users, dtype=np.int64)]
        for name in sorted(self.parts):
            p = self.parts[name]
            out += [np.array([p.n_rows, p.width], dtype=np.int64), p.user_ptr, p.rows, p.values]
        return out

    @classmethod
    def from_arrays(cls, arrays: list[np.ndarray], names: list[str]) -> Contributions:
        if len(arrays) != 1 + 4 * len(names):
            raise InvalidInputError("contributions: wrong number of arrays for the part names")
        parts = {}
        for k, name in enumerate(sorted(names)):
            shape, ptr, rows, values = arrays[1 + 4 * k: 5 + 4 * k]
            parts[name] = Part(int(shape[0]), int(shape[1]), np.asarray(ptr, dtype=np.int64),
                               np.asarray(rows, dtype=np.int64),
                               np.asarray(values, dtype=np.float64))
        return cls(np.asarray(arrays[0], dtype=np.int64), parts)


def concat_contributions(batches: list[Contributions]) -> Contributions | None:
    """Merge contributions of several clients, ordered by user (the order of the sum)."""
    batches = [b for b in batches if len(b.users)]
    if not batches:
        return None
    names = sorted(batches[0].parts)
    if len(batches) == 1 and np.all(np.diff(batches[0].users) > 0):
        return batches[0]
    for b in batches:
        if sorted(b.parts) != names:
            raise InvalidInputError(f"contributions: parts {sorted(b.parts)} != {names}")
    users = np.concatenate([b.users for b in batches])
    order = np.argsort(users, kind="stable")
    parts = {}
    for name in names:
        first = batches[0].parts[name]
        lengths = np.concatenate([np.diff(b.parts[name].user_ptr) for b in batches])
        starts = np.concatenate([
            b.parts[name].user_ptr[:-1] + off for b, off in zip(
                batches, np.cumsum([0] + [b.parts[name].user_ptr[-1] for b in batches[:-1]]),
                strict=True)])
        rows = np.concatenate([b.parts[name].rows for b in batches])
        values = np.concatenate([b.parts[name].values for b in batches])
        lengths, starts = lengths[order], starts[order]
        ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        take = (np.repeat(starts - ptr[:-1], lengths) + np.arange(ptr[-1])).astype(np.int64)
        parts[name] = Part(first.n_rows, first.width, ptr, rows[take], values[take])
    return Contributions(users[order], parts)


@dataclass(frozen=True)
class NoisyAggregate:
    """The only message the untrusted server accepts: clipped, summed, noised, charged.

    `values[name]` is a dense (n_rows, width) table. `kind` is "sum" (one round's noisy sum)
    or "prefix_sum" (DP-FTRL: noisy sum of the epoch's rounds so far, by tree aggregation).
    `denominator` is the public normaliser (expected participants), never the real count.
    """

    round: int
    kind: str
    values: dict[str, np.ndarray]
    noise_std: dict[str, float]
    clip_norm: dict[str, float]
    denominator: float
    epoch: int = 0
    step_in_epoch: int = 0
    charge: str = ""
    _issuer: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self._issuer is not _AGGREGATOR_TOKEN:
            raise PrivacyBoundaryError(
                "a NoisyAggregate can only be created by the TrustedAggregator (after clipping, "
                "noise and the privacy charge)"
            )

    def public_summary(self) -> dict[str, Any]:
        return {"round": self.round, "kind": self.kind, "noise_std": dict(self.noise_std),
                "clip_norm": dict(self.clip_norm), "denominator": self.denominator,
                "epoch": self.epoch, "step_in_epoch": self.step_in_epoch,
                "charge": self.charge, "shapes": {k: list(v.shape) for k, v in
                                                  self.values.items()}}
