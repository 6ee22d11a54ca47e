"""The discrete domain a synthesizer works on, and how it is obtained without leaking.

Every column becomes a finite set of codes: categorical columns one code per category (plus
an `<other>` bucket when the categories were selected privately, plus a missing code),
numeric columns one code per bin over bounds, one code per declared point mass (a value that
carries its own mass, e.g. 0: `point_masses` in the schema, so the share of exact zeros
survives instead of being smeared over the bin that holds it), plus a missing code. Where
the categories and bounds come from matters for privacy, so each column says so in `source`:

- declared: the data publisher states them in a public schema (`privlab.schema`, e.g. the
  bundled `adult` schema, taken from the UCI `adult.names` documentation and the survey's
  public top-codes);
- estimated (the columns named by `estimate`, `--estimate-domain`): measured with part of the
  privacy budget (zCDP, see `privlab.synth.budget`):
  categorical labels by a thresholded discrete-Gaussian histogram (a label is kept only if its
  noisy count clears a threshold set so that a label held by one person appears with
  probability <= delta'), numeric bounds by a noisy histogram over a fixed log-scale grid
  (lower bound = left edge of the first bin whose noisy count clears a threshold, upper bound =
  right edge of the last one);
- observed: read from the data without noise (only in the non-private baseline mode).

Which columns exist, their kind (categorical / numeric, integer or not) and whether they may be
missing come from the one declaration format, a `privlab.schema.Schema`, never from the data:
`declaration_from_schema` turns it into this module's internal `DomainDeclaration` (identifier
and text columns are dropped by declaration). The rows are first conformed to the schema
(`privlab.schema.conform`), so their dtypes, and the output's dtypes, do not depend on the
values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import pandas as pd

from privlab.core.samplers import discrete_gaussian
from privlab.errors import InvalidInputError
from privlab.schema.model import ColumnSchema, Schema
from privlab.synth.budget import ZCDPAccount

OTHER = "<other>"
DEFAULT_BINS = 32
#: Integer columns whose range holds at most this many values (or `bins`, if larger) get one
#: bin per value: uniform draws inside a wider bin would smear point masses such as a
#: 40-hour week over 40..42.
UNIT_BINS_MAX = 128
MAX_BINS = 1024
MAX_CATEGORIES = 5000

Kind = Literal["categorical", "numeric"]


# --------------------------------------------------------------------------------------------
# Column specification: codes <-> values
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnSpec:
    """One column's codes. Categorical: categories, then `<other>` (if `other`), then missing.
    Numeric: bins [edges[i], edges[i+1]) (the last one closed), then one code per point mass
    (a value equal to a point is coded as the point, not as its bin), then missing."""

    name: str
    kind: Kind
    categories: tuple[str, ...] = ()
    other: bool = False
    edges: tuple[float, ...] = ()
    integer: bool = False
    missing: bool = True
    source: str = "declared"
    points: tuple[float, ...] = ()

    @property
    def bins(self) -> int:
        return max(len(self.edges) - 1, 0)

    @property
    def values(self) -> int:
        """Codes that stand for a value (not missing)."""
        if self.kind == "categorical":
            return len(self.categories) + int(self.other)
        return self.bins + len(self.points)

    @property
    def size(self) -> int:
        return self.values + int(self.missing)

    @property
    def missing_code(self) -> int | None:
        return self.values if self.missing else None

    def labels(self) -> list[str]:
        """Human labels of every code (for reports and marginal tables)."""
        if self.kind == "categorical":
            out = list(self.categories) + ([OTHER] if self.other else [])
        else:
            e = self.edges
            last = len(e) - 2
            if self.integer:
                out = [f"{int(e[i])}" if e[i + 1] - e[i] == 1 and i < last else
                       f"[{int(e[i])}, {int(e[i + 1]) - (0 if i == last else 1)}]"
                       for i in range(len(e) - 1)]
            else:
                out = [f"[{e[i]:g}, {e[i + 1]:g}{']' if i == last else ')'}"
                       for i in range(len(e) - 1)]
            out += [f"={int(v) if self.integer else v:g}" for v in self.points]
        return out + (["<missing>"] if self.missing else [])

    def encode(self, series: pd.Series) -> np.ndarray:
        """Codes of a column's values (int64)."""
        missing = series.isna().to_numpy()
        if missing.any() and not self.missing:
            raise InvalidInputError(f"column {self.name!r} has missing values but its domain "
                                    "declares none; set \"missing\": true or drop those rows")
        codes = np.empty(len(series), dtype=np.int64)
        if self.kind == "categorical":
            index = {c: i for i, c in enumerate(self.categories)}
            text = series[~missing].astype(str).to_numpy()
            mapped = pd.Series(text).map(index)
            unknown = mapped.isna().to_numpy()
            if unknown.any() and not self.other:
                example = text[unknown][0]
                raise InvalidInputError(
                    f"column {self.name!r} has values outside its declared categories (e.g. "
                    f"{example!r}); add them to the domain or set \"other\": true")
            vals = mapped.fillna(len(self.categories)).to_numpy(dtype=np.int64)
            codes[~missing] = vals
        else:
            x = numeric_values(series[~missing], self.name)
            e = np.asarray(self.edges, dtype=np.float64)
            hi = e[-1] - 1 if self.integer else e[-1]
            x = np.clip(x, e[0], hi)
            coded = np.clip(np.searchsorted(e, x, side="right") - 1, 0, self.bins - 1)
            for j, v in enumerate(self.points):
                coded[x == v] = self.bins + j
            codes[~missing] = coded
        if self.missing:
            codes[missing] = self.values
        return codes

    def decode(self, codes: np.ndarray, gen: np.random.Generator) -> pd.Series:
        """Values for codes: a category, or a uniform draw inside the bin (post-processing).

        The dtype depends on the spec alone, never on which codes were drawn: categorical
        -> str; integer -> Int64 when the column has a missing code (even if no missing value
        was drawn), int64 otherwise; numeric -> float64."""
        codes = np.asarray(codes, dtype=np.int64)
        miss = codes == self.missing_code if self.missing else np.zeros(codes.size, bool)
        if self.kind == "categorical":
            labels = np.array(list(self.categories) + ([OTHER] if self.other else [""]),
                              dtype=object)
            vals = np.where(miss, None, labels[np.where(miss, 0, codes)])
            out = pd.Series(vals, name=self.name, dtype="object")
            out[miss] = np.nan
            return out.astype("str")
        e = np.asarray(self.edges, dtype=np.float64)
        point = (codes >= self.bins) & ~miss
        b = np.where(miss | point, 0, codes)
        lo, hi = e[b], e[b + 1]
        if self.points:  # a point code decodes to its value exactly
            at = np.asarray(self.points, dtype=np.float64)[np.where(point, codes - self.bins, 0)]
            lo, hi = np.where(point, at, lo), np.where(point, at + (1 if self.integer else 0), hi)
        if self.integer:
            # bin [lo, hi) holds the integers lo .. hi - 1 (edges are integers)
            span = np.maximum(hi - lo, 1).astype(np.int64)
            vals = lo.astype(np.int64) + (gen.random(codes.size) * span).astype(np.int64)
            vals = np.minimum(vals, hi.astype(np.int64) - 1)
            if self.missing:
                series = pd.Series(vals, name=self.name, dtype="Int64")
                series[miss] = pd.NA
                return series
            return pd.Series(vals, name=self.name, dtype="int64")
        vals = lo + gen.random(codes.size) * (hi - lo)
        vals[miss] = np.nan
        return pd.Series(vals, name=self.name, dtype="float64")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.kind, "size": self.size,
                               "missing_code": self.missing, "source": self.source}
        if self.kind == "categorical":
            out.update(categories=list(self.categories), other=self.other)
        else:
            out.update(bounds=[self.edges[0], self.edges[-1] - (1 if self.integer else 0)],
                       bins=self.bins, integer=self.integer)
            if self.points:
                out["point_masses"] = list(self.points)
        return out


@dataclass(frozen=True)
class Domain:
    """The columns of a synthetic table, in order."""

    columns: tuple[ColumnSpec, ...]

    def __len__(self) -> int:
        return len(self.columns)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def sizes(self) -> list[int]:
        return [c.size for c in self.columns]

    def encode(self, frame: pd.DataFrame) -> np.ndarray:
        """An (n, d) int64 matrix of codes."""
        if not self.columns:
            return np.zeros((len(frame), 0), dtype=np.int64)
        return np.column_stack([c.encode(frame[c.name]) for c in self.columns])

    def decode(self, codes: np.ndarray, gen: np.random.Generator) -> pd.DataFrame:
        return pd.DataFrame({c.name: c.decode(codes[:, j], gen)
                             for j, c in enumerate(self.columns)})

    def to_dict(self) -> dict[str, Any]:
        return {"columns": [c.to_dict() for c in self.columns]}

    def to_schema(self, name: str = "synthetic") -> Schema:
        """The public schema of the synthetic table: declared categories and bounds as
        declared, DP-estimated ones as estimated (post-processing of a DP release, so
        public), `<other>` as the schema's other bucket. One declaration format for what
        follows (`privlab train --schema`, `privlab release --schema` on the synthetic rows).
        Refused when a column was observed without noise (the non-private baseline)."""
        observed = [c.name for c in self.columns if c.source.startswith("observed")]
        if observed:
            raise InvalidInputError(f"the domain of {observed} was read from the data without "
                                    "noise (non-private mode): it is not a public schema")
        cols = []
        for c in self.columns:
            if c.kind == "categorical":
                cols.append(ColumnSchema(c.name, "categorical", tuple(c.categories),
                                         other=c.other, missing=c.missing))
                continue
            lo, hi = c.edges[0], c.edges[-1] - (1 if c.integer else 0)
            bounds = (int(lo), int(hi)) if c.integer else (float(lo), float(hi))
            cols.append(ColumnSchema(c.name, "integer" if c.integer else "numeric",
                                     bounds=bounds, missing=c.missing,
                                     point_masses=tuple(c.points)))
        sources = sorted({c.source for c in self.columns})
        return Schema(tuple(cols), name=name, source="privlab synth domain: "
                      + "; ".join(sources))


def numeric_values(series: pd.Series, name: str) -> np.ndarray:
    """Float values of a numeric column, or a one-line error naming it."""
    try:
        return pd.to_numeric(series, errors="raise").to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInputError(f"column {name!r} is declared numeric but holds non-numbers; "
                                "declare it \"categorical\" or clean it") from None


# --------------------------------------------------------------------------------------------
# The declaration, read from the schema
# --------------------------------------------------------------------------------------------


@dataclass
class ColumnDeclaration:
    """What the schema states about a column, as the synthesizer uses it (built only by
    `declaration_from_schema`); unset categories / bounds (the `estimate` columns) are
    estimated privately. A numeric column is integer only when `integer` is true."""

    kind: Kind | None = None
    categories: list[str] | None = None
    other: bool | None = None
    bounds: tuple[float, float] | None = None
    bins: int | None = None
    edges: list[float] | None = None
    integer: bool | None = None
    scale: Literal["linear", "log"] = "linear"
    missing: bool = True
    points: tuple[float, ...] = ()


@dataclass
class DomainDeclaration:
    """The synthesizer's internal view of a schema (not a declaration format of its own)."""

    columns: dict[str, ColumnDeclaration] = field(default_factory=dict)
    drop: list[str] = field(default_factory=list)
    name: str = "declared"


# --------------------------------------------------------------------------------------------
# Planning: which columns, which kind, what must be estimated
# --------------------------------------------------------------------------------------------


@dataclass
class ColumnPlan:
    name: str
    kind: Kind
    decl: ColumnDeclaration
    integer: bool

    @property
    def needs_bounds(self) -> bool:
        return self.kind == "numeric" and self.decl.bounds is None and self.decl.edges is None

    @property
    def needs_categories(self) -> bool:
        return self.kind == "categorical" and self.decl.categories is None


NO_SCHEMA = ("privlab synth reads column types from a declaration, never from the data: pass "
             "--schema NAME|FILE (draft one with `privlab schema draft DATA > schema.yaml` "
             "and review it)")


def plan_columns(columns: Sequence[str], decl: DomainDeclaration,
                 drop: Sequence[str] = ()) -> list[ColumnPlan]:
    """Columns to synthesize (in `columns` order), each with the kind its declaration states.

    `columns` are the input's column names. The kind of a column is never read from its
    values or dtype: a column the declaration does not type is refused, naming `privlab
    schema draft` (a type guessed from the dtype would let one row, e.g. an age of 40.5 or
    the text "unknown", change the published table's shape)."""
    names = [str(c) for c in columns]
    if len(set(names)) != len(names):
        raise InvalidInputError("the input has duplicate column names; rename them")
    dropping = list(dict.fromkeys(list(drop) + decl.drop))
    missing = [c for c in drop if c not in names]
    if missing:
        raise InvalidInputError(f"--exclude names columns that are not in the data: {missing}")
    absent = [c for c in decl.columns if c not in names and c not in dropping]
    if absent:
        raise InvalidInputError(f"the schema declares columns that are not in the data: "
                                f"{absent}")
    plans = []
    for name in names:
        if name in dropping:
            continue
        d = decl.columns.get(name)
        if d is None or d.kind is None:
            if decl.name == "none":
                raise InvalidInputError(NO_SCHEMA)
            raise InvalidInputError(f"column {name!r} is not declared in {decl.name}: "
                                    "declare it there or --exclude it")
        plans.append(ColumnPlan(name, d.kind, d, bool(d.integer) and d.kind == "numeric"))
    if not plans:
        raise InvalidInputError("no columns left to synthesize; drop fewer columns")
    return plans


ALL = "all"


def estimate_columns(schema: Schema, estimate: str | Sequence[str] | None,
                     drop: Sequence[str] = ()) -> tuple[str, ...]:
    """The columns whose categories / bounds are estimated under DP (`--estimate-domain`):
    None -> none, "all" -> every synthesized column, "A,B" or a list -> those, each a
    categorical, integer or numeric column of the schema that is not excluded."""
    if estimate is None:
        return ()
    synthesized = [c.name for c in schema.columns
                   if c.type in ("categorical", "integer", "numeric") and c.name not in drop]
    if isinstance(estimate, str):
        if estimate.strip() == ALL:
            return tuple(synthesized)
        names = [n.strip() for n in estimate.split(",") if n.strip()]
    else:
        names = [str(n) for n in estimate]
    if not names:
        raise InvalidInputError("--estimate-domain needs 'all' or column names A,B")
    bad = [n for n in names if n not in synthesized]
    if bad:
        raise InvalidInputError(
            f"--estimate-domain names {bad}: not categorical / integer / numeric columns of "
            f"schema {schema.name!r} that are synthesized (columns: {', '.join(synthesized)})")
    return tuple(dict.fromkeys(names))


def declaration_from_schema(schema: Schema, drop: Sequence[str] = (), *,
                            allow_unit: bool = False, estimate: Sequence[str] = ()
                            ) -> DomainDeclaration:
    """The synthesizer's declaration of a public `Schema`: categorical -> categories (+
    `<other>` if declared), integer -> integer numeric over its bounds, numeric -> bounds;
    scale and bins hints kept. Identifier and text columns are dropped by declaration (no
    synthesizer releases them); datetime columns are refused (not synthesized) unless
    dropped. A person privacy unit needs `allow_unit` (the caller bounds each person's rows
    and accounts per person, `Synthesizer.person_bound`); else it is refused naming the
    option.

    A column in `estimate` keeps only its type (categorical, or numeric and whether integer):
    its categories or bounds are estimated under DP, it may be missing, and it takes no
    scale, bins or point-mass hint (the declaration the retired `--domain adult-types` made,
    so the budget split and the estimate are the same)."""
    if schema.privacy_unit != "row" and not allow_unit:
        raise InvalidInputError(
            f"schema {schema.name!r} has privacy unit {schema.privacy_unit!r} (several rows per "
            "person): pass --max-rows-per-unit M (aim or mst) to keep each person's first M "
            "rows and account per person")
    out = DomainDeclaration(name=f"schema {schema.name}")
    for c in schema.columns:
        if not c.is_released or c.name in drop:
            out.drop.append(c.name)
        elif c.name in estimate and c.type in ("categorical", "integer", "numeric"):
            kind: Kind = "categorical" if c.type == "categorical" else "numeric"
            out.columns[c.name] = ColumnDeclaration(
                kind=kind, integer=True if c.type == "integer" else None)
        elif c.type == "categorical":
            out.columns[c.name] = ColumnDeclaration(
                kind="categorical", categories=list(c.categories), other=c.other,
                missing=c.missing)
        elif c.type in ("integer", "numeric"):
            lo, hi = c.bounds  # type: ignore[misc]
            out.columns[c.name] = ColumnDeclaration(
                kind="numeric", bounds=(float(lo), float(hi)), bins=c.bins,
                integer=c.type == "integer", scale=c.scale, missing=c.missing,
                points=tuple(c.point_masses))
        else:
            raise InvalidInputError(f"column {c.name!r} is a {c.type} column in schema "
                                    f"{schema.name!r}: privlab synth does not synthesize it; "
                                    f"--exclude {c.name}")
    return out


def conform_schema(schema: Schema, decl: DomainDeclaration) -> Schema:
    """The schema the rows are conformed to: `schema` itself, except that a column whose
    domain is estimated is conformed by its type alone (categorical as text, numeric over
    (-inf, inf), missing allowed), so that its declared categories / bounds, which are not
    used, cannot change the rows the estimate reads."""
    open_ = {name for name, d in decl.columns.items()
             if d.categories is None and d.bounds is None and d.edges is None}
    if not open_:
        return schema
    cols = []
    for c in schema.columns:
        if c.name not in open_:
            cols.append(c)
        elif c.type == "categorical":
            cols.append(ColumnSchema(c.name, "text", missing=True))
        else:
            cols.append(ColumnSchema(c.name, c.type, bounds=(-math.inf, math.inf), missing=True))
    return replace(schema, columns=tuple(cols))


# --------------------------------------------------------------------------------------------
# Private estimation of categories and bounds
# --------------------------------------------------------------------------------------------


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
