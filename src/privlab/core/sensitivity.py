"""Sensitivity of the clamped aggregate queries, per neighbouring relation.

A mechanism is only as private as the sensitivity it is given, so the figures live in one
place, each with its derivation, instead of inline in every query. A `Sensitivity` holds the
L1 norm (Laplace, geometric), the L2 norm (Gaussian) and how many output coordinates one
neighbour can change (the mechanisms' `changed_coordinates`, which sets the rounding cost).

Relations: `add_remove_record` (one record added or removed) and `replace_record` (one
record's value replaced, the number of records fixed and public). With `contributions=m`
the "record" is a unit (a user) that owns up to m rows; the guarantee is then user-level.

Floats: every figure is an upper bound, in exact arithmetic, on the change of what the code
computes, rounded UP to a float. `hi - lo` in float64 can round below the true width, and
`(lo + hi) / 2` is itself rounded, so `clamped_sum(..., centre=c)` bounds the float values
`x - c` actually summed rather than using `(hi - lo) / 2`. Rounding errors of the summation
itself are not covered here (docs/guarantees.md, "What is not covered").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from privlab.errors import InvalidInputError

ADD_REMOVE = "add_remove_record"
REPLACE = "replace_record"
RELATIONS = (ADD_REMOVE, REPLACE)


@dataclass(frozen=True)
class Sensitivity:
    """How far one neighbour can move a query's output.

    `l1`, `l2`: largest L1 / L2 distance between the outputs on neighbouring inputs;
    `changed`: largest number of output coordinates one neighbour can change.
    """

    l1: float
    l2: float
    changed: int = 1

    def for_mechanism(self, mechanism: str) -> float:
        """The norm a mechanism is calibrated to: L2 for `gaussian`, L1 otherwise."""
        return self.l2 if mechanism == "gaussian" else self.l1


def check_sensitivity(sensitivity: Any, name: str = "sensitivity") -> float:
    """A finite sensitivity > 0, or a one-line InvalidInputError naming the field."""
    try:
        value = float(sensitivity)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a number > 0, got {sensitivity!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise InvalidInputError(f"{name} must be a finite number > 0, got {sensitivity!r}")
    return value


def check_bounds(bounds: Any, what: str = "bounds") -> tuple[float, float]:
    """Validate public clamping bounds (lo, hi) with lo < hi, both finite."""
    if bounds is None:
        raise InvalidInputError(f"{what} are required (public clamping range LO:HI): taking them "
                                "from the data would not be private")
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{what} must be two numbers LO:HI, got {bounds!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise InvalidInputError(f"{what} must be finite, got {bounds!r}")
    if lo >= hi:
        raise InvalidInputError(f"{what}: LO={lo:g} must be below HI={hi:g} (an inverted or "
                                "empty range)")
    return lo, hi


def _relation(neighbouring: str) -> str:
    if neighbouring not in RELATIONS:
        raise InvalidInputError(f"neighbouring must be one of {', '.join(RELATIONS)}, "
                                f"got {neighbouring!r}")
    return neighbouring


def _contributions(contributions: Any) -> int:
    if isinstance(contributions, bool) or not isinstance(contributions, int) \
            or contributions < 1:
        raise InvalidInputError(f"contributions must be a positive integer (rows per unit), "
                                f"got {contributions!r}")
    return contributions


def _up(exact: Fraction) -> float:
    """The smallest float >= an exact rational (float() rounds to nearest, maybe down)."""
    value = float(exact)
    return math.nextafter(value, math.inf) if Fraction(value) < exact else value


def _sqrt_up(exact: Fraction) -> float:
    """sqrt(exact) as an int when exact, else a float >= it (math.sqrt rounds to nearest,
    so one step up suffices). Ints keep integer sensitivities integral in JSON output."""
    root = math.sqrt(exact)
    if Fraction(root) ** 2 == exact and root.is_integer():
        return int(root)
    return math.nextafter(root, math.inf) if Fraction(root) ** 2 < exact else root


def count(neighbouring: str = ADD_REMOVE, *, condition: bool = False) -> Sensitivity:
    """Number of records (`condition=True`: of records meeting a public condition).

    Add/remove changes either count by 1. Replace changes a conditional count by 1 (the
    record may stop or start meeting it) and the total count by nothing: under replace the
    number of records is public, sensitivity 0, nothing to protect.
    """
    if _relation(neighbouring) == REPLACE and not condition:
        return Sensitivity(0, 0, 0)
    return Sensitivity(1, 1, 1)


def clamped_sum(bounds: tuple[float, float], neighbouring: str = ADD_REMOVE, *,
                centre: float = 0.0) -> Sensitivity:
    """Sum of the values clamped to [lo, hi], each shifted by `centre` before summing.

    Add/remove adds or drops one term x - c, |x - c| <= max(|lo - c|, |hi - c|); computed
    in float it is fl(x - c), which by monotone rounding lies between fl(lo - c) and
    fl(hi - c), so those float values are the exact bound. Replace swaps one term for
    another: at most fl(hi - c) - fl(lo - c) (hi - lo for c = 0), rounded up.
    """
    lo, hi = check_bounds(bounds)
    c = float(centre)
    if not math.isfinite(c):
        raise InvalidInputError(f"centre must be a finite number, got {centre!r}")
    low, high = lo - c, hi - c
    if _relation(neighbouring) == ADD_REMOVE:
        d = max(abs(low), abs(high))
    else:
        d = _up(Fraction(high) - Fraction(low))
    return Sensitivity(d, d, 1)


def clamped_mean(bounds: tuple[float, float], n: int,
                 neighbouring: str = ADD_REMOVE) -> Sensitivity:
    """Exact mean of values clamped to [lo, hi], for a PUBLIC record count n.

    Replace (n records on both sides): the sum moves by at most hi - lo, the mean by
    (hi - lo) / n. Add/remove (n: a public lower bound on the smaller dataset's size):
    mean(D + x) - mean(D) = (x - mean(D)) / (n + 1), at most (hi - lo) / (n + 1).
    `dp_mean` does not use this: n is private under add/remove, so it releases a noisy
    sum and a noisy count instead.
    """
    lo, hi = check_bounds(bounds)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidInputError(f"n must be a positive integer (public record count), got {n!r}")
    width = Fraction(hi) - Fraction(lo)
    d = _up(width / (n if _relation(neighbouring) == REPLACE else n + 1))
    return Sensitivity(d, d, 1)


def histogram(neighbouring: str = ADD_REMOVE, *, contributions: int = 1,
              distinct_bins: bool = False) -> Sensitivity:
    """Counts over a public set of bins when each unit owns up to m = `contributions` rows.

    Add/remove of a unit moves counts by a non-negative vector summing to at most m:
    L1 = m; L2 = m when its rows may share a bin, sqrt(m) when they fall in distinct bins
    (`distinct_bins=True`); at most m bins change. Replace removes one such vector and adds
    another: L1 = 2m, L2 = sqrt(2) x the add/remove L2 (the worst case has disjoint
    supports, since ||a - b||^2 = ||a||^2 + ||b||^2 - 2 a.b and a.b >= 0), 2m bins.
    m = 1: L1 = L2 = 1 (add/remove); L1 = 2, L2 = sqrt(2) (replace).
    """
    m = _contributions(contributions)
    l2_squared = Fraction(m if distinct_bins else m * m)
    if _relation(neighbouring) == REPLACE:
        return Sensitivity(2 * m, _sqrt_up(2 * l2_squared), 2 * m)
    return Sensitivity(m, _sqrt_up(l2_squared), m)


def bounded_contributions(per_record: Sensitivity, contributions: int) -> Sensitivity:
    """Sensitivity when each unit owns up to m rows, from the per-row figure.

    A unit-level neighbour is a chain of at most m row-level neighbours of the same relation
    (add or remove its rows one at a time; for replace, both units padded to m rows), so by
    the triangle inequality L1 and L2 grow by a factor of m and at most m times as many
    coordinates change. This is the general bound; `histogram(contributions=m,
    distinct_bins=True)` is tighter in L2 (sqrt(m)) because its rows hit distinct bins.
    """
    m = _contributions(contributions)
    return Sensitivity(_up(Fraction(per_record.l1) * m), _up(Fraction(per_record.l2) * m),
                       per_record.changed * m)
