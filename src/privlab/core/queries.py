"""Clamped DP aggregate queries: count, sum, mean, histogram, quantile.

Neighbouring is add/remove one record unless stated. Bounds must be public: taking them
from the data would leak, so they are required, and refused when missing or inverted.
Sensitivities come from `privlab.core.sensitivity`, where each one is derived.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from privlab.core import sensitivity as sens
from privlab.core.guarantee import PrivacyGuarantee, check_epsilon
from privlab.core.mechanisms import gaussian_mechanism, geometric_mechanism, laplace_mechanism
from privlab.core.release import Release
from privlab.core.rng import SEEDED_NOTE, RngLike, is_seeded, make_rng
from privlab.core.samplers import power_of_two_at_most
from privlab.core.sensitivity import check_bounds
from privlab.errors import InvalidInputError

MECHANISMS = ("laplace", "gaussian", "geometric")

__all__ = ["MECHANISMS", "as_numeric", "check_bounds", "dp_count", "dp_histogram", "dp_mean",
           "dp_quantile", "dp_sum"]


def as_numeric(values: Any, what: str = "column") -> np.ndarray:
    """A 1-D float array without missing values, or an InvalidInputError naming the column."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "biuf":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise InvalidInputError(f"{what} is not numeric; choose a numeric column or use "
                                    "histogram with --categories") from None
    arr = arr.astype(np.float64).ravel()
    return arr[~np.isnan(arr)]


def _on_grid_within(x: float, lo: float, hi: float) -> tuple[float, float]:
    """Round x onto the grid 2^floor(log2((hi - lo) / 2^20)), staying inside [lo, hi].

    Returns (value, granularity). Clipping after rounding would put the value on lo or hi,
    off the grid; clipping the grid index keeps it on the grid and inside the bounds.
    """
    g = power_of_two_at_most((hi - lo) / 2**20)
    k = min(max(round(x / g), math.ceil(lo / g)), math.floor(hi / g))
    return k * g, g


def _additive(value: float, sensitivity: float, epsilon: float, delta: float, mechanism: str,
              rng: RngLike, integer_valued: bool = False, **kw: Any) -> Release:
    if mechanism not in MECHANISMS:
        raise InvalidInputError(f"mechanism must be one of {', '.join(MECHANISMS)}, "
                                f"got {mechanism!r}")
    if mechanism == "gaussian":
        return gaussian_mechanism(value, sensitivity, epsilon, delta, rng=rng,
                                  integer_valued=integer_valued, **kw)
    if mechanism == "geometric":
        if not integer_valued:
            raise InvalidInputError("the geometric mechanism releases integers: use it for "
                                    "count/histogram, or use laplace")
        return geometric_mechanism(value, int(sensitivity), epsilon, rng=rng, **kw)
    return laplace_mechanism(value, sensitivity, epsilon, rng=rng,
                             integer_valued=integer_valued, **kw)


def dp_count(values: Any, epsilon: float, *, delta: float = 0.0, mechanism: str = "geometric",
             rng: RngLike = None) -> Release:
    """Number of records, sensitivity 1 under add/remove."""
    n = len(values)
    if mechanism == "laplace":
        mechanism = "geometric"  # a count is an integer: the discrete Laplace on Z is exact
    d = sens.count().for_mechanism(mechanism)
    return _additive(n, d, epsilon, delta, mechanism, rng, integer_valued=True)


def dp_sum(values: Any, bounds: tuple[float, float], epsilon: float, *, delta: float = 0.0,
           mechanism: str = "laplace", rng: RngLike = None) -> Release:
    """Sum of values clamped to public bounds; sensitivity max(|lo|, |hi|) under add/remove.

    The grid depends only on public inputs (bounds, mechanism), never on the data: a grid
    chosen because "all values happen to be integers" would itself reveal that fact.
    `geometric` sums the clamped values rounded to integers and needs integer bounds.
    """
    lo, hi = check_bounds(bounds)
    x = np.clip(as_numeric(values), lo, hi)
    sensitivity = sens.clamped_sum((lo, hi)).for_mechanism(mechanism)  # max(|lo|, |hi|)
    integer = mechanism == "geometric"
    if integer:
        if not (float(lo).is_integer() and float(hi).is_integer()):
            raise InvalidInputError("geometric needs integer bounds LO:HI; use laplace")
        x = np.rint(x)
    release = _additive(float(x.sum()), sensitivity, epsilon, delta, mechanism, rng,
                        integer_valued=integer)
    return replace(release, details={"clamped_to": [lo, hi]})


def dp_mean(values: Any, bounds: tuple[float, float], epsilon: float, *, delta: float = 0.0,
            mechanism: str = "laplace", rng: RngLike = None) -> Release:
    """Mean as noisy sum / noisy count (budget split evenly), clamped into the bounds.

    The ratio is post-processing of two grid-valued releases; it is then rounded onto a
    power-of-two grid 2^-20 of the bounds' width so the released float is grid-valued too.
    """
    lo, hi = check_bounds(bounds)
    epsilon = check_epsilon(epsilon)
    gen = make_rng(rng)
    x = np.clip(as_numeric(values), lo, hi)
    # Shift to the centre so the sum's sensitivity is about half the width, not
    # max(|lo|, |hi|): the float values x - centre are bounded by fl(lo - c), fl(hi - c).
    centre = (lo + hi) / 2
    sum_mech = "laplace" if mechanism == "geometric" else mechanism
    count_mech = "geometric" if mechanism != "gaussian" else "gaussian"
    half = sens.clamped_sum((lo, hi), centre=centre).for_mechanism(sum_mech)
    s = _additive(float((x - centre).sum()), half, epsilon / 2, delta / 2, sum_mech, gen)
    c = _additive(len(x), sens.count().for_mechanism(count_mech), epsilon / 2, delta / 2,
                  count_mech, gen, integer_valued=True)
    count = max(float(c.value), 1.0)
    mean, g = _on_grid_within(centre + float(s.value) / count, lo, hi)
    guarantee = PrivacyGuarantee(
        epsilon=epsilon, delta=delta, mechanism=f"mean = noisy sum / noisy count ({mechanism})",
        accountant="sequential composition of 2 releases",
        notes=(f"sum and count each at epsilon={epsilon / 2:g}",)
        + ((SEEDED_NOTE,) if is_seeded(rng) else ()),
    )
    return Release(value=mean, guarantee=guarantee, granularity=g,
                   noise={"distribution": "ratio", "sum_scale": s.noise["scale"],
                          "count_scale": c.noise["scale"]},
                   details={"noisy_sum": float(s.value) + centre * count,
                            "noisy_count": c.value, "clamped_to": [lo, hi]})


def histogram_edges(bounds: tuple[float, float], bins: int, integer: bool = False
                    ) -> tuple[np.ndarray, list[str]]:
    """Public bin edges and labels over `bounds` (nothing read from the data).

    Numbers: `bins` equal bins, the last one closed. Integers (a column declared integer):
    whole-number edges, bin [a, b) holding a .. b-1, at most `bins` of them, so a range with
    no more values than `bins` gets one bin per value (a 1-5 rating: 5 bins labelled 1 .. 5,
    not 10 bins of which half cannot hold a value)."""
    lo, hi = bounds
    if not integer:
        edges = np.linspace(lo, hi, bins + 1)
        return edges, [f"[{edges[i]:g}, {edges[i + 1]:g}{']' if i == bins - 1 else ')'}"
                       for i in range(bins)]
    lo_i, hi_i = math.ceil(lo), math.floor(hi)
    if hi_i < lo_i:
        raise InvalidInputError(f"bounds {bounds} hold no whole number for an integer column")
    count = min(bins, hi_i - lo_i + 1)
    edges = np.unique(np.round(np.linspace(lo_i, hi_i + 1, count + 1)))
    labels = [f"{int(a)}" if b - a == 1 else f"[{int(a)}, {int(b) - 1}]"
              for a, b in zip(edges[:-1], edges[1:], strict=True)]
    return edges, labels


def dp_histogram(values: Any, epsilon: float, *, categories: Sequence[Any] | None = None,
                 bounds: tuple[float, float] | None = None, bins: int = 10, delta: float = 0.0,
                 mechanism: str = "geometric", rng: RngLike = None,
                 integer: bool = False) -> Release:
    """Counts over a PUBLIC domain: declared categories, or bins over `bounds`
    (`histogram_edges`: `bins` equal bins; `integer=True` for a column declared integer:
    whole-number bins, one per value when the range holds at most `bins` values).

    Adding or removing a record changes one count by 1 (L1 = L2 = 1). Values outside the
    declared domain are dropped (numeric ones are clamped into the end bins).
    """
    if categories is None and bounds is None:
        raise InvalidInputError("histogram needs a public domain: pass categories (for labels) "
                                "or bounds and bins (for numbers); the values seen in the data "
                                "are not public")
    if categories is not None:
        cats = list(categories)
        if not cats or len(set(cats)) != len(cats):
            raise InvalidInputError("categories must be a non-empty list of distinct values")
        index = {c: i for i, c in enumerate(cats)}
        codes = [index.get(str(v) if isinstance(cats[0], str) else v) for v in values]
        counts = np.bincount(np.asarray([c for c in codes if c is not None], dtype=np.int64),
                             minlength=len(cats))  # int dtype: an empty table counts 0s
        labels: list[Any] = cats
    else:
        lo, hi = check_bounds(bounds)
        if not isinstance(bins, int) or bins < 1:
            raise InvalidInputError(f"bins must be a positive integer, got {bins!r}")
        edges, labels = histogram_edges((lo, hi), bins, integer)
        x = np.clip(as_numeric(values), edges[0], edges[-1] - 1 if integer else edges[-1])
        counts, _ = np.histogram(x, bins=edges)
    if mechanism == "laplace":
        mechanism = "geometric"
    one_row = sens.histogram()  # L1 = L2 = 1, one changed count
    release = _additive(counts.astype(np.int64), one_row.for_mechanism(mechanism), epsilon,
                        delta, mechanism, rng, integer_valued=True,
                        changed_coordinates=one_row.changed)
    return replace(release, details={"labels": labels})


def dp_quantile(values: Any, q: float, bounds: tuple[float, float], epsilon: float, *,
                rng: RngLike = None) -> Release:
    """The q-quantile by the exponential mechanism over the gaps between sorted values
    (Smith 2011): utility -|rank - q n|, sensitivity 1. The point inside the chosen gap is
    drawn uniformly and then rounded onto a power-of-two grid of 2^-20 of the bounds' width."""
    epsilon = check_epsilon(epsilon)
    lo, hi = check_bounds(bounds)
    if not (0.0 <= float(q) <= 1.0):
        raise InvalidInputError(f"quantile q must be in [0, 1], got {q!r}")
    x = np.sort(np.clip(as_numeric(values), lo, hi))
    n = x.size
    edges = np.concatenate([[lo], x, [hi]])
    widths = np.diff(edges)
    ranks = np.arange(n + 1)
    utility = -np.abs(ranks - q * n)
    gen = make_rng(rng)
    with np.errstate(divide="ignore"):
        logw = np.log(widths) + epsilon * utility / 2.0
    index = int(np.argmax(logw + gen.gumbel(size=logw.size)))
    point = edges[index] + gen.random() * widths[index]
    value, g = _on_grid_within(float(point), lo, hi)
    guarantee = PrivacyGuarantee(epsilon=epsilon, mechanism="quantile (exponential mechanism)",
                                 accountant="exact",
                                 notes=(SEEDED_NOTE,) if is_seeded(rng) else ())
    return Release(value=value, guarantee=guarantee, granularity=g,
                   details={"q": float(q), "clamped_to": [lo, hi]})
