"""`Closing`: the one way an object that holds a database open lets it go.

Such an object (an engine, the ledger, the audit log, a gateway) closes deterministically:
`close()` (idempotent) or `with obj:`. One dropped open would keep its database file open
until the garbage collector happens to run it, and a second open of that file in the same
process (a notebook, the studio's worker, the next test) fails or sees another
configuration; so dropping one open emits a `ResourceWarning` (then closes it), as Python
does for an unclosed file. The warning says "privlab:" first so tests can single it out.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T", bound="Closing")


def _dropped_open(release: Callable[[], None], what: str) -> None:
    """Run by the finalizer when the holder was collected without `close()`."""
    try:
        warnings.warn(f"privlab: {what} was dropped without close(); close it (or use `with`) "
                      "so its database is released at once", ResourceWarning, stacklevel=2)
    finally:
        release()


class Closing:
    """Mix-in: `_hold(release, what)` arms the dropped-open warning; `close()` runs `release`
    once; `with` closes on exit. `release` must not refer to the holder itself (it would keep
    the holder alive): pass the connection's own close, not a bound method of `self`."""

    _finalizer: weakref.finalize | None = None

    def _hold(self, release: Callable[[], None], what: str) -> None:
        """From now on `close()` runs `release`; dropping `self` unclosed warns and runs it."""
        finalizer = weakref.finalize(self, _dropped_open, release, what)
        finalizer.atexit = False  # at interpreter exit the process lets go of everything
        self._finalizer = finalizer

    @property
    def closed(self) -> bool:
        return self._finalizer is None or not self._finalizer.alive

    def close(self) -> None:
        """Release what `_hold` armed; a second call does nothing."""
        finalizer = self._finalizer
        held = finalizer.detach() if finalizer is not None else None
        if held is not None:
            release = held[2][0]
            release()

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
