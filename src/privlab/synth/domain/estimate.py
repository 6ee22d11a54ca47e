"""The domain built before fitting (`build_domain`): declared columns from the declaration,
the others estimated under DP (categories by thresholded discrete-Gaussian counts, bounds by
noisy counts over a public grid), charged to the zCDP account; bin edges and point masses."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from privlab.core.samplers import discrete_gaussian
from privlab.errors import InvalidInputError
from privlab.synth.budget import ZCDPAccount
from privlab.synth.domain.declaration import (
    ColumnPlan,
)
from privlab.synth.domain.spec import (
    DEFAULT_BINS,
    MAX_BINS,
    MAX_CATEGORIES,
    OTHER,
    UNIT_BINS_MAX,
    ColumnSpec,
    Domain,
    numeric_values,
)


def discrete_gaussian_tail(sigma: float, t: int) -> float:
    """P[Z >= t] for the discrete Gaussian N_Z(0, sigma^2), computed exactly by summation."""
    if sigma <= 0:
        return 0.0 if t > 0 else 1.0
    width = int(math.ceil(40 * sigma)) + 10
    k = np.arange(-width, width + 1, dtype=np.float64)
    logp = -(k ** 2) / (2 * sigma * sigma)
    m = logp.max()
    w = np.exp(logp - m)
    total = w.sum()
    return float(w[k >= t].sum() / total)


def threshold_for(sigma: float, delta_each: float) -> int:
    """Smallest integer tau with P[1 + Z >= tau] <= delta_each: a label held by one record
    survives the threshold with probability at most delta_each."""
    if sigma <= 0:
        return 1
    # every tail at once (O(sigma)); a linear search from the Gaussian bound took minutes
    # for large sigma (tiny epsilon: 92 s at sigma 15,000, measured)
    width = int(math.ceil(40 * sigma)) + 10
    k = np.arange(-width, width + 1, dtype=np.float64)
    w = np.exp(-(k ** 2) / (2 * sigma * sigma))
    tails = np.cumsum(w[::-1])[::-1] / w.sum()
    t = max(int(k[int(np.argmax(tails <= delta_each))]), 0)
    # settle on the exact definition used by discrete_gaussian_tail (a step or two at most)
    while discrete_gaussian_tail(sigma, t) > delta_each:
        t += 1
    while t > 0 and discrete_gaussian_tail(sigma, t - 1) <= delta_each:
        t -= 1
    return t + 1


def _bound_grid() -> np.ndarray:
    """Fixed, data-independent bin edges for bound estimation: 0 and +-m 2^k,
    m in {1, 1.25, 1.5, 1.75}, k in [-10, 40] (25% resolution from 1e-3 to 2e12)."""
    mags = np.array(sorted(m * 2.0 ** k for k in range(-10, 41) for m in (1, 1.25, 1.5, 1.75)))
    return np.concatenate([-mags[::-1], [0.0], mags])


BOUND_GRID = _bound_grid()
#: False-positive rate of the bound histogram threshold, over all its empty bins together.
BOUND_FALSE_POSITIVE = 1e-3


def estimate_bounds(values: np.ndarray, sigma: float, integer: bool,
                    gen: np.random.Generator) -> tuple[float, float] | None:
    """(lo, hi) from a noisy histogram on BOUND_GRID: one discrete-Gaussian count per bin,
    sensitivity 1 (a record is in one bin), so 1/(2 sigma^2)-zCDP. None if no bin passes."""
    e = BOUND_GRID
    x = np.clip(values[np.isfinite(values)], e[0], e[-1])
    idx = np.clip(np.searchsorted(e, x, side="right") - 1, 0, e.size - 2)
    counts = np.bincount(idx, minlength=e.size - 1)
    noisy = counts + discrete_gaussian(sigma, size=counts.size, rng=gen)
    tau = threshold_for(sigma, BOUND_FALSE_POSITIVE / counts.size) - 1
    passing = np.flatnonzero(noisy >= tau)
    if passing.size == 0:
        return None
    lo, hi = float(e[passing[0]]), float(e[passing[-1] + 1])
    if integer:
        lo_i = math.floor(lo)
        hi_i = max(math.ceil(hi) - 1, lo_i)
        return float(lo_i), float(hi_i)
    return lo, hi


def make_edges(lo: float, hi: float, bins: int, integer: bool, scale: str = "linear"
               ) -> np.ndarray:
    """Bin edges over [lo, hi]. Integer columns: integer edges, bins [a, b) hold a .. b-1,
    one bin per value when the range has at most max(bins, UNIT_BINS_MAX) values, and 0 gets
    its own bin when it lies inside the range (zero is a common special value, e.g. capital
    gains); the rule uses no data."""
    if integer:
        lo_i, hi_i = math.floor(lo), math.ceil(hi)
        if hi_i - lo_i + 1 <= max(bins, UNIT_BINS_MAX):
            return np.arange(lo_i, hi_i + 2, dtype=np.float64)
        if scale == "log":
            if lo_i < 0:
                raise InvalidInputError("scale \"log\" needs bounds with LO >= 0")
            start = max(lo_i, 1)
            geo = np.geomspace(start, hi_i + 1, bins + 1 - int(lo_i == 0))
            edges = np.unique(np.round(geo))
            edges = np.concatenate([[lo_i], edges]) if lo_i == 0 else edges
        else:
            edges = np.unique(np.round(np.linspace(lo_i, hi_i + 1, bins + 1)))
        if lo_i < 0 < hi_i + 1 or lo_i == 0:
            edges = np.union1d(edges, [0.0, 1.0] if hi_i >= 1 else [0.0])
        edges = edges[(edges >= lo_i) & (edges <= hi_i + 1)]
        edges = np.union1d(edges, [lo_i, hi_i + 1])
        return edges.astype(np.float64)
    if scale == "log":
        if lo < 0:
            raise InvalidInputError("scale \"log\" needs bounds with LO >= 0")
        if lo == 0:
            first = hi / 2 ** bins
            return np.concatenate([[0.0], np.geomspace(first, hi, bins)])
        return np.geomspace(lo, hi, bins + 1)
    return np.linspace(lo, hi, bins + 1)


@dataclass
class DomainBudget:
    """Privacy spent on the domain: zCDP for bounds and categories, delta for thresholds."""

    rho_bounds: float = 0.0
    rho_categories: float = 0.0
    delta_threshold: float = 0.0


def build_domain(frame: pd.DataFrame, plans: Sequence[ColumnPlan], *, private: bool,
                 budget: DomainBudget, account: ZCDPAccount | None, gen: np.random.Generator,
                 bins: int = DEFAULT_BINS, missing: bool = True) -> tuple[Domain, list[str]]:
    """Turn plans into a Domain, estimating what was not declared (privately unless
    `private` is False). Returns the domain and warnings derived only from released values."""
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= MAX_BINS:
        raise InvalidInputError(f"bins must be an integer in [1, {MAX_BINS}], got {bins!r}")
    warnings: list[str] = []
    need_b = [p for p in plans if p.needs_bounds]
    need_c = [p for p in plans if p.needs_categories]
    sigma_b = sigma_c = 0.0
    tau_c = 1
    if private:
        if need_b:
            sigma_b = math.sqrt(len(need_b) / (2 * budget.rho_bounds))
            assert account is not None
            account.spend(f"numeric bounds of {len(need_b)} column(s)", budget.rho_bounds,
                          detail=f"noisy log-grid histogram per column, discrete Gaussian "
                                 f"sigma={sigma_b:.4g}",
                          vectors=len(need_b))
        if need_c:
            sigma_c = math.sqrt(len(need_c) / (2 * budget.rho_categories))
            tau_c = threshold_for(sigma_c, budget.delta_threshold / len(need_c))
            assert account is not None
            account.spend(f"categories of {len(need_c)} column(s)", budget.rho_categories,
                          delta=budget.delta_threshold,
                          detail=f"thresholded histogram, discrete Gaussian sigma="
                                 f"{sigma_c:.4g}, threshold {tau_c}",
                          # one draw per distinct value present, but a row shifts one of
                          # them per column (the others are the same on both neighbours)
                          vectors=len(need_c))
    specs = []
    for p in plans:
        d = p.decl
        col_missing = missing and d.missing
        if p.kind == "categorical":
            if d.categories is not None:
                other = bool(d.other) if d.other is not None else False
                specs.append(ColumnSpec(p.name, "categorical", tuple(d.categories), other,
                                        missing=col_missing, source="declared"))
                continue
            s = frame[p.name].dropna().astype(str)
            counts = s.value_counts()
            if private:
                noisy = counts.to_numpy() + discrete_gaussian(sigma_c, size=len(counts),
                                                              rng=gen) if len(counts) else []
                kept = sorted(str(v) for v, c in zip(counts.index, noisy, strict=True)
                              if c >= tau_c)
                source = f"estimated (DP threshold {tau_c})"
                if not kept:
                    warnings.append(f"column {p.name!r}: no category passed the DP threshold "
                                    f"(about {tau_c} records needed): every value is "
                                    f"{OTHER!r}; declare its categories or raise epsilon")
            else:
                kept = sorted(str(v) for v in counts.index)
                source = "observed (not private)"
            if len(kept) > MAX_CATEGORIES:
                raise InvalidInputError(f"column {p.name!r} has more than {MAX_CATEGORIES} "
                                        "categories; coarsen it or drop it")
            if len(kept) == 1:
                warnings.append(f"column {p.name!r}: a single category ({kept[0]!r}) in the "
                                "domain: the column is (nearly) constant in the output")
            specs.append(ColumnSpec(p.name, "categorical", tuple(kept), other=True,
                                    missing=col_missing, source=source))
            continue
        # numeric
        if d.edges is not None:
            edges = np.asarray(d.edges, dtype=np.float64)
            if p.integer and not np.all(edges == np.round(edges)):
                raise InvalidInputError(f"column {p.name!r}: an integer column needs integer "
                                        "edges")
            specs.append(ColumnSpec(p.name, "numeric", edges=tuple(edges.tolist()),
                                    integer=p.integer, missing=col_missing, source="declared",
                                    points=own_codes(edges, d.points, p.integer)))
            continue
        if d.bounds is not None:
            lo, hi = d.bounds
            source = "declared"
        else:
            x = numeric_values(frame[p.name].dropna(), p.name)
            if private:
                found = estimate_bounds(x, sigma_b, p.integer, gen)
                if found is None:
                    raise InvalidInputError(
                        f"could not bound column {p.name!r} privately (no bin of its noisy "
                        "histogram cleared the threshold): declare its bounds in the schema (and "
                        "leave it out of --estimate-domain), or "
                        "raise epsilon")
                lo, hi = found
                source = "estimated (DP log-grid histogram)"
            else:
                if x.size == 0:
                    raise InvalidInputError(f"column {p.name!r} has no values; drop it")
                lo, hi = float(np.min(x)), float(np.max(x))
                source = "observed (not private)"
            if hi <= lo:
                hi = lo + 1.0
        edges = make_edges(lo, hi, d.bins or bins, p.integer, d.scale)
        if edges.size == 2 and not private:
            warnings.append(f"column {p.name!r}: a single bin: constant in the output")
        specs.append(ColumnSpec(p.name, "numeric", edges=tuple(edges.tolist()),
                                integer=p.integer, missing=col_missing, source=source,
                                points=own_codes(edges, d.points, p.integer)))
    return Domain(tuple(specs)), warnings


def own_codes(edges: np.ndarray, points: Sequence[float], integer: bool
              ) -> tuple[float, ...]:
    """The declared point masses that need a code of their own: inside the edges, and (integer
    columns) not already alone in a one-value bin. Public: edges and points are declared or
    DP-estimated, never read from the rows here."""
    e = np.asarray(edges, dtype=np.float64)
    hi = e[-1] - 1 if integer else e[-1]
    out = []
    for v in points:
        if not e[0] <= v <= hi:
            continue
        if integer:
            i = int(np.searchsorted(e, v, side="right") - 1)
            if e[i] == v and e[i + 1] == v + 1:
                continue
        out.append(float(v))
    return tuple(out)
