"""The discrete domain a synthesizer works on, and how it is obtained without leaking.

Every column becomes a finite set of codes: categorical columns one code per category (plus
an `<other>` bucket when the categories were selected privately, plus a missing code),
numeric columns one code per bin over bounds, one code per declared point mass (a value that
carries its own mass, e.g. 0: `point_masses` in the schema, so the share of exact zeros
survives instead of being smeared over the bin that holds it), plus a missing code. Where
the categories and bounds come from matters for privacy, so each column says so in `source`:

- declared: the data publisher states them (a public schema, e.g. `ADULT_DOMAIN` below, taken
  from the UCI `adult.names` documentation and the survey's public top-codes);
- estimated: measured with part of the privacy budget (zCDP, see `privlab.synth.budget`):
  categorical labels by a thresholded discrete-Gaussian histogram (a label is kept only if its
  noisy count clears a threshold set so that a label held by one person appears with
  probability <= delta'), numeric bounds by a noisy histogram over a fixed log-scale grid
  (lower bound = left edge of the first bin whose noisy count clears a threshold, upper bound =
  right edge of the last one);
- observed: read from the data without noise (only in the non-private baseline mode).

Which columns exist, their kind (categorical / numeric, integer or not) and whether they may be
missing come from a declaration, never from the data: a `privlab.schema.Schema`
(`declaration_from_schema`; identifier and text columns are dropped by declaration) or a
domain declaration that states every column's type. The rows are first conformed to that
declaration (`privlab.schema.conform`), so their dtypes, and the output's dtypes, do not
depend on the values.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
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
# Declared domains
# --------------------------------------------------------------------------------------------


@dataclass
class ColumnDeclaration:
    """What the publisher states about a column; unset categories / bounds are estimated
    privately. `kind` must be stated (a column without it is refused); a numeric column is
    integer only when `integer` is stated true."""

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
    columns: dict[str, ColumnDeclaration] = field(default_factory=dict)
    drop: list[str] = field(default_factory=list)
    name: str = "declared"


_COLUMN_KEYS = {"type", "categories", "other", "bounds", "bins", "edges", "integer", "scale",
                "missing", "point_masses"}


def parse_declaration(spec: Mapping[str, Any] | None, name: str = "declared"
                      ) -> DomainDeclaration:
    """Validate a domain mapping {"columns": {col: {...}}, "drop": [...]}."""
    if spec is None:
        return DomainDeclaration(name="none")
    if not isinstance(spec, Mapping):
        raise InvalidInputError("domain must be a JSON object with a \"columns\" object")
    unknown = set(spec) - {"columns", "drop", "name", "source"}
    if unknown:
        raise InvalidInputError(f"domain has unknown keys {sorted(unknown)}; use \"columns\" "
                                "and \"drop\"")
    cols = spec.get("columns", {})
    if not isinstance(cols, Mapping):
        raise InvalidInputError("domain \"columns\" must map column names to objects")
    out = DomainDeclaration(name=str(spec.get("name", name)))
    drop = spec.get("drop", [])
    if not isinstance(drop, list) or not all(isinstance(d, str) for d in drop):
        raise InvalidInputError("domain \"drop\" must be a list of column names")
    out.drop = list(drop)
    for col, raw in cols.items():
        if not isinstance(raw, Mapping):
            raise InvalidInputError(f"domain column {col!r} must be an object")
        bad = set(raw) - _COLUMN_KEYS
        if bad:
            raise InvalidInputError(f"domain column {col!r} has unknown keys {sorted(bad)}; "
                                    f"allowed: {sorted(_COLUMN_KEYS)}")
        kind = raw.get("type")
        if kind not in (None, "categorical", "numeric"):
            raise InvalidInputError(f"domain column {col!r}: type must be \"categorical\" or "
                                    f"\"numeric\", got {kind!r}")
        decl = ColumnDeclaration(kind=kind, missing=bool(raw.get("missing", True)))
        if "categories" in raw:
            cats = raw["categories"]
            if (not isinstance(cats, list) or not cats
                    or len({str(c) for c in cats}) != len(cats)):
                raise InvalidInputError(f"domain column {col!r}: categories must be a non-empty "
                                        "list of distinct values")
            if len(cats) > MAX_CATEGORIES:
                raise InvalidInputError(f"domain column {col!r}: more than {MAX_CATEGORIES} "
                                        "categories; coarsen it or drop it")
            decl.categories = [str(c) for c in cats]
            decl.kind = decl.kind or "categorical"
        if "other" in raw:
            decl.other = bool(raw["other"])
        if "bounds" in raw:
            decl.bounds = _check_bounds(raw["bounds"], col)
            decl.kind = decl.kind or "numeric"
        if "edges" in raw:
            e = raw["edges"]
            try:
                arr = np.asarray(e, dtype=np.float64)
            except (TypeError, ValueError):
                arr = np.array([])
            if arr.ndim != 1 or arr.size < 2 or not np.all(np.isfinite(arr)) \
                    or not np.all(np.diff(arr) > 0):
                raise InvalidInputError(f"domain column {col!r}: edges must be >= 2 increasing "
                                        "finite numbers")
            decl.edges = arr.tolist()
            decl.kind = decl.kind or "numeric"
        if "bins" in raw:
            b = raw["bins"]
            if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= MAX_BINS:
                raise InvalidInputError(f"domain column {col!r}: bins must be an integer in "
                                        f"[1, {MAX_BINS}], got {b!r}")
            decl.bins = b
        if "integer" in raw:
            decl.integer = bool(raw["integer"])
        if "scale" in raw:
            if raw["scale"] not in ("linear", "log"):
                raise InvalidInputError(f"domain column {col!r}: scale must be \"linear\" or "
                                        "\"log\"")
            decl.scale = raw["scale"]
        if "point_masses" in raw:
            pts = raw["point_masses"]
            if not isinstance(pts, list) or not pts or any(
                    isinstance(v, bool) or not isinstance(v, (int, float))
                    or not math.isfinite(v) for v in pts) or len(set(pts)) != len(pts):
                raise InvalidInputError(f"domain column {col!r}: point_masses must be a "
                                        "non-empty list of distinct finite numbers, e.g. [0]")
            decl.points = tuple(sorted(float(v) for v in pts))
            decl.kind = decl.kind or "numeric"
        if decl.kind == "categorical" and (decl.bounds or decl.edges or decl.points):
            raise InvalidInputError(f"domain column {col!r}: a categorical column takes "
                                    "categories, not bounds or edges")
        if decl.kind == "numeric" and decl.categories:
            raise InvalidInputError(f"domain column {col!r}: a numeric column takes bounds or "
                                    "edges, not categories")
        out.columns[str(col)] = decl
    return out


def _check_bounds(value: Any, col: str) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"domain column {col!r}: bounds must be two numbers "
                                f"[LO, HI], got {value!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise InvalidInputError(f"domain column {col!r}: bounds must be finite with LO < HI, "
                                f"got {value!r}")
    return lo, hi


def declaration_spec(schema: Schema, name: str, *, missing: bool | None = None
                     ) -> dict[str, Any]:
    """A public `Schema` written in the domain-declaration format (`--domain FILE`), so that
    the declarations privlab ships are read from the one place public facts live, the
    schema: categorical -> categories (+ `other`), integer / numeric -> bounds, integer flag,
    scale, bins and point masses. `missing` overrides every column's missing flag (None:
    the schema's). Identifier, text and datetime columns are dropped (never synthesized)."""
    cols: dict[str, Any] = {}
    drop: list[str] = []
    for c in schema.columns:
        if c.type == "categorical":
            col: dict[str, Any] = {"categories": [str(v) for v in c.categories]}
            if c.other:
                col["other"] = True
        elif c.type in ("integer", "numeric"):
            lo, hi = c.bounds  # type: ignore[misc]
            col = {"type": "numeric", "bounds": [lo, hi]}
            if c.type == "integer":
                col["integer"] = True
            if c.scale != "linear":
                col["scale"] = c.scale
            if c.bins is not None:
                col["bins"] = c.bins
            if c.point_masses:
                col["point_masses"] = list(c.point_masses)
        else:
            drop.append(c.name)
            continue
        if not (c.missing if missing is None else missing):
            col["missing"] = False  # the declaration format's default is True
        cols[c.name] = col
    spec: dict[str, Any] = {"name": name, "columns": cols}
    if drop:
        spec["drop"] = drop
    return spec


def _bundled_adult() -> Schema:
    from privlab.schema.bundled import bundled_schema

    return bundled_schema("adult")


#: `--domain adult`: the bundled public schema of UCI Adult (`privlab schema show adult`:
#: categories from adult.names, ranges from its extraction rule and the survey's public
#: top-codes) in the declaration format. Every column may be missing, as this declaration
#: always allowed (`--schema adult` follows the schema's own missing flags).
ADULT_DOMAIN: dict[str, Any] = declaration_spec(
    _bundled_adult(), "adult (public schema from adult.names)", missing=True)


def types_only(spec: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The same declaration with only each column's type (and integer flag) kept: categories
    and bounds are then estimated under DP (`mst-estimated` in docs/synth.md)."""
    return {"name": name, "columns": {
        col: {k: v for k, v in (("type", raw.get("type") or (
            "categorical" if "categories" in raw else "numeric")),
                                ("integer", raw.get("integer"))) if v is not None}
        for col, raw in spec["columns"].items()}}


#: Adult's column types only: every category list and bound estimated under DP.
ADULT_TYPES = types_only(ADULT_DOMAIN, "adult-types (column types of adult.names; categories "
                         "and bounds estimated under DP)")

BUILTIN_DOMAINS = {"adult": ADULT_DOMAIN, "adult-types": ADULT_TYPES}


def load_declaration(source: str | Path | Mapping[str, Any] | None) -> DomainDeclaration:
    """A declaration from a built-in name ("adult"), a JSON file path, or a mapping."""
    if source is None or isinstance(source, Mapping):
        return parse_declaration(source)
    text = str(source)
    if text in BUILTIN_DOMAINS:
        return parse_declaration(BUILTIN_DOMAINS[text], name=text)
    path = Path(text)
    if not path.is_file():
        raise InvalidInputError(f"--domain {text!r} is neither a built-in domain "
                                f"({', '.join(BUILTIN_DOMAINS)}) nor a JSON file")
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"--domain {text}: not readable JSON ({exc})") from None
    return parse_declaration(spec, name=path.name)


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
        raise InvalidInputError(f"the domain declares columns that are not in the data: "
                                f"{absent}; drop them from the domain")
    plans = []
    for name in names:
        if name in dropping:
            continue
        d = decl.columns.get(name)
        if d is None or d.kind is None:
            if decl.name == "none":
                raise InvalidInputError(NO_SCHEMA)
            raise InvalidInputError(f"column {name!r} has no declared type in domain "
                                    f"{decl.name!r}: declare its \"type\" there, --exclude it, "
                                    "or pass --schema (`privlab schema draft DATA` drafts one)")
        plans.append(ColumnPlan(name, d.kind, d, bool(d.integer) and d.kind == "numeric"))
    if not plans:
        raise InvalidInputError("no columns left to synthesize; drop fewer columns")
    return plans


def declaration_from_schema(schema: Schema, drop: Sequence[str] = (), *,
                            allow_unit: bool = False) -> DomainDeclaration:
    """The synthesizer's declaration of a public `Schema`: categorical -> categories (+
    `<other>` if declared), integer -> integer numeric over its bounds, numeric -> bounds;
    scale and bins hints kept. Identifier and text columns are dropped by declaration (no
    synthesizer releases them); datetime columns are refused (not synthesized) unless
    dropped. A person privacy unit needs `allow_unit` (the caller bounds each person's rows
    and accounts per person, `Synthesizer.person_bound`); else it is refused naming the
    option."""
    if schema.privacy_unit != "row" and not allow_unit:
        raise InvalidInputError(
            f"schema {schema.name!r} has privacy unit {schema.privacy_unit!r} (several rows per "
            "person): pass --max-rows-per-unit M (aim or mst) to keep each person's first M "
            "rows and account per person")
    out = DomainDeclaration(name=f"schema {schema.name}")
    for c in schema.columns:
        if not c.is_released or c.name in drop:
            out.drop.append(c.name)
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


def declared_schema(plans: Sequence[ColumnPlan]) -> Schema:
    """A `Schema` for conforming rows to a domain declaration (not a public schema: columns
    whose categories or bounds are left to DP estimation get no list / infinite bounds).

    Categorical columns without declared categories are conformed as text; numeric columns
    without bounds over (-inf, inf); edges give the bounds of their outer bins."""
    cols = []
    for p in plans:
        d = p.decl
        if p.kind == "categorical":
            if d.categories is None:
                cols.append(ColumnSchema(p.name, "text", missing=d.missing))
            else:
                cols.append(ColumnSchema(p.name, "categorical", tuple(d.categories),
                                         other=bool(d.other), missing=d.missing))
            continue
        if d.bounds is not None:
            bounds: tuple[float, float] = d.bounds
        elif d.edges is not None:
            bounds = (d.edges[0], d.edges[-1] - (1 if p.integer else 0))
        else:
            bounds = (-math.inf, math.inf)
        cols.append(ColumnSchema(p.name, "integer" if p.integer else "numeric",
                                 bounds=bounds, missing=d.missing))
    return Schema(tuple(cols), name="domain declaration")


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
                                 f"sigma={sigma_b:.4g}")
        if need_c:
            sigma_c = math.sqrt(len(need_c) / (2 * budget.rho_categories))
            tau_c = threshold_for(sigma_c, budget.delta_threshold / len(need_c))
            assert account is not None
            account.spend(f"categories of {len(need_c)} column(s)", budget.rho_categories,
                          delta=budget.delta_threshold,
                          detail=f"thresholded histogram, discrete Gaussian sigma="
                                 f"{sigma_c:.4g}, threshold {tau_c}")
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
                        "histogram cleared the threshold): declare its bounds in --domain, or "
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
