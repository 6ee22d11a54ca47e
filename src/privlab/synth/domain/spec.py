"""A synthesizer's column domain: `ColumnSpec` (one column's codes <-> values: categories,
bin edges, point masses) and `Domain` (all columns), the constants that bound them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from privlab.errors import InvalidInputError
from privlab.schema.model import ColumnSchema, Schema

OTHER = "<other>"
DEFAULT_BINS = 32
#: Integer columns whose range holds at most this many values (or `bins`, if larger) get one
#: bin per value: uniform draws inside a wider bin would smear point masses such as a
#: 40-hour week over 40..42.
UNIT_BINS_MAX = 128
MAX_BINS = 1024
MAX_CATEGORIES = 5000

Kind = Literal["categorical", "numeric"]


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
