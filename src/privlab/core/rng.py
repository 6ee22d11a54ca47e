"""Random generators: cryptographically secure by default, seeded only for tests.

The default bit generator is randomgen's ChaCha (20 rounds) keyed from `os.urandom`: a
CSPRNG whose output an attacker cannot predict, wrapped in a NumPy `Generator` so every
vectorised NumPy sampler runs at full speed on it. A seed gives NumPy's PCG64 instead,
which is reproducible and therefore only for tests and experiments; releases made with a
seed say so in their guarantee notes.
"""

from __future__ import annotations

import hashlib
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


def is_secure(gen: np.random.Generator) -> bool:
    """Whether `gen` runs on the CSPRNG bit generator (`secure_generator`'s ChaCha): a stream
    nobody reproduces, so a sampler may take its raw words in any grouping."""
    kind = type(gen.bit_generator)
    return kind.__name__ == "ChaCha" and kind.__module__.startswith("randomgen")


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


def keyed_generator(seed: int, purpose: str, key: object) -> np.random.Generator:
    """A PCG64 generator that is a function of (seed, purpose, key) alone.

    For per-user choices (a user's train/test split, which of its rows are used): seeding
    each user's generator from a keyed hash of that user's own id (BLAKE2b, keyed by the seed
    and the purpose) makes the choice independent of every other user, so adding or removing
    one user changes nobody else's draw. One stream consumed user by user would not: each
    user's draws would depend on how many rows the users before it hold.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise InvalidInputError(f"seed must be an integer, got {seed!r}")
    secret = f"privlab {purpose} seed {int(seed)}".encode()
    if len(secret) > 64:  # BLAKE2b keys hold 64 bytes: keep purposes short
        raise InvalidInputError(f"purpose {purpose!r} is too long for a keyed hash")
    mac = hashlib.blake2b(str(key).encode(), digest_size=16, key=secret)
    return np.random.default_rng(int.from_bytes(mac.digest(), "big"))
