"""Uniform random bits for the scalar samplers (`privlab.core.samplers`,
`privlab.core.laplace_table`): exact uniform integers below any bound, drawn from a bit
generator 512 bits at a time."""

from __future__ import annotations

import threading

import numpy as np

from privlab.core.rng import is_secure


class _BitPool:
    """Uniform random bits from the generator, 512 at a time, for the scalar path: exact
    uniform integers by rejection (a draw of bit_length(k - 1) bits is kept when below k).

    The CSPRNG's 512 bits are its next eight raw 64-bit words (`random_raw`); any other
    generator's come from `Generator.bytes`, which reads them through NumPy's buffered
    32-bit halves and so keeps every seeded stream as recorded. Both are uniform bits; the
    raw words cost a quarter as much, most of all right after an engine query has evicted
    the CPU caches (15 instead of 57 us per refill on Adult: the gateway draws one pool per
    answer, issue 32)."""

    def __init__(self, gen: np.random.Generator) -> None:
        self.gen, self.bits, self.left = gen, 0, 0
        self._raw = gen.bit_generator.random_raw if is_secure(gen) else None

    @property
    def raw(self) -> bool:
        """Whether the bits come from the CSPRNG's raw words (no recorded stream to keep)."""
        return self._raw is not None

    def _refill(self) -> int:
        if self._raw is not None:
            return int.from_bytes(self._raw(8).tobytes(), "little")
        return int.from_bytes(self.gen.bytes(64), "little")

    def below(self, k: int) -> int:
        if k <= 1:
            return 0
        width = (k - 1).bit_length()
        while True:
            if self.left < width:
                self.bits |= self._refill() << self.left
                self.left += 512
            r = self.bits & ((1 << width) - 1)
            self.bits >>= width
            self.left -= width
            if r < k:
                return r


#: each thread's pool over the CSPRNG it drew from last: (bit generator, pool)
_LAST = threading.local()


def pool_for(gen: np.random.Generator) -> _BitPool:
    """The bit pool a sampler draws from. On the CSPRNG, this thread's pool over that
    generator, kept between calls: its unused bits serve the next draw instead of being
    dropped, so a scalar query refills once in about four answers instead of in each, and
    builds no pool (issue 32). The bits are the same uniform CSPRNG output either way; a
    stream nobody reproduces has no grouping to keep. Any other generator gets a fresh pool
    per call, as before, so every seeded stream stays as recorded. One pool per thread (a
    pool is never shared between threads); a new generator (another process's, after a
    fork) gets a new pool."""
    bit_generator = gen.bit_generator
    last = getattr(_LAST, "pool", None)
    if last is not None and last[0] is bit_generator:
        return last[1]  # type: ignore[no-any-return]
    pool = _BitPool(gen)
    if pool.raw:
        _LAST.pool = (bit_generator, pool)
    return pool
