"""Random generators: cryptographically secure by default, seeded only for tests.

The default bit generator is randomgen's ChaCha (20 rounds) keyed from `os.urandom`: a
CSPRNG whose output an attacker cannot predict, wrapped in a NumPy `Generator` so every
vectorised NumPy sampler runs at full speed on it. A seed gives NumPy's PCG64 instead,
which is reproducible and therefore only for tests and experiments; releases made with a
seed say so in their guarantee notes.
"""

from __future__ import annotations

import os

import numpy as np

from privlab.errors import InvalidInputError

RngLike = np.random.Generator | int | None

SEEDED_NOTE = "noise drawn from a seeded (reproducible, predictable) generator: for testing only"


def secure_generator() -> np.random.Generator:
    """A NumPy Generator over ChaCha20 keyed with 256 bits from the OS entropy pool."""
    from randomgen import ChaCha

    key = int.from_bytes(os.urandom(32), "little")
    return np.random.Generator(ChaCha(key=key, counter=0, rounds=20))


def make_rng(rng: RngLike = None) -> np.random.Generator:
    """Return a Generator: secure if `rng` is None, PCG64(seed) for an int, or `rng` itself."""
    if rng is None:
        return secure_generator()
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        if rng < 0:
            raise InvalidInputError(f"seed must be a non-negative integer, got {rng}")
        return np.random.default_rng(int(rng))
    raise InvalidInputError(f"rng must be None, an int seed or a numpy Generator, got {rng!r}")


def is_seeded(rng: RngLike) -> bool:
    """True when the caller asked for reproducible (hence predictable) noise."""
    return rng is not None
