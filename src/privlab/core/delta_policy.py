"""The one delta policy of every command and of the studio: a delta too large to mean
anything is refused (exit 4) unless the user accepts it explicitly.

Why its own module in `core`: the CLI (`--allow-weak`) and `privlab studio` (no such option)
apply the same rule, and the studio must not import the CLI. Warnings go through a callback
so this module prints nothing itself."""

from __future__ import annotations

from collections.abc import Callable

from privlab.errors import InvalidInputError, UnsafeConfigurationError

#: The largest delta accepted without --allow-weak (and never 1/n or more: a mechanism may then
#: publish a whole record with probability delta per person).
MAX_DELTA = 1e-3

#: How a refusal tells the user to accept a weak delta anyway (the studio offers no option).
ALLOW_WEAK_REMEDY = "or pass --allow-weak to accept it"


def _ignore(_message: str) -> None:
    return None


def check_delta_strength(delta: float, allow_weak: bool, *, public_size: int | None,
                         size_hint: str = "--public-size N", field: str = "--delta",
                         require_size: bool = True,
                         warn: Callable[[str], None] = _ignore,
                         remedy: str = ALLOW_WEAK_REMEDY) -> None:
    """Refuse a delta that is too large to mean anything, unless --allow-weak (exit 4).

    Above MAX_DELTA it is refused whatever the data. Otherwise it must be below 1/n, and n
    must be PUBLIC (`public_size`: a schema's `public_size` or an option such as
    `--public-size`), never the row count of the data: the refusal and its message would
    reveal it (issue 21). Without a public size the check cannot run: refused (exit 2, naming
    `size_hint`) unless --allow-weak, which accepts it with a warning; `require_size=False`
    (a command whose delta is checked elsewhere against a DP estimate of n) skips it quietly.
    Keyword-only on purpose, so no caller passes `len(frame)` by position."""
    if delta <= 0:
        return
    n = public_size
    if delta > MAX_DELTA:
        why = f"it is above {MAX_DELTA:g}"
    elif n is None:
        if not require_size:
            return
        if not allow_weak:
            raise InvalidInputError(f"{field} needs a public size to check delta < 1/n "
                                    f"against: pass {size_hint} (a public bound on the number "
                                    "of rows), or --allow-weak to skip the check")
        warn(f"{field} {delta:g} accepted with --allow-weak without a check against 1/n (no "
             f"public size: {size_hint})")
        return
    elif n > 0 and delta >= 1.0 / n:
        why = f"it is not below 1/n = {1.0 / n:.3g} for the public size n = {n}"
    else:
        return
    if not allow_weak:
        raise UnsafeConfigurationError(
            f"{field} {delta:g} is too weak: {why}, so the mechanism may reveal a whole record "
            f"with that probability; use e.g. 1e-6, {remedy}")
    warn(f"{field} {delta:g} accepted with --allow-weak although {why}")


def check_delta_policy(delta: float | None, allow_weak: bool, *, public_size: int | None,
                       field: str = "--delta", warn: Callable[[str], None] = _ignore,
                       remedy: str = ALLOW_WEAK_REMEDY) -> None:
    """The one delta policy for a command that checks it before any row is read: against
    `public_size` (a public option such as `federated --users`, or the declared schema's
    `public_size`, resolved by the caller), never the data's row count; without one, only the
    data-independent ceiling MAX_DELTA applies."""
    if delta is None:
        return
    from privlab.core.guarantee import check_delta

    delta = check_delta(delta, field)  # outside [0, 1) is invalid input (exit 2), not weak
    check_delta_strength(delta, allow_weak, public_size=public_size, field=field,
                         size_hint="a --schema that declares public_size", require_size=False,
                         warn=warn, remedy=remedy)
