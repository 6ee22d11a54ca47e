"""Fit private rows to a declared schema, so nothing downstream depends on their shape.

`conform(frame, schema)` returns a table whose columns, order and dtypes come from the schema
alone (categorical -> object strings, integer and numeric -> float64, datetime ->
datetime64[ns], identifier/text -> object strings), whatever the rows hold. Each cell is
converted on its own by the fixed rules of `privlab.schema.values` (text from a CSV, physical
values from Parquet or a library DataFrame): no value changes how another row is read.
Values that do not fit are handled by one of two policies:

- "refuse" (the CLI default; the CLI user is the data's curator): the first column with a
  value that does not fit raises a one-line `InvalidInputError` naming the column and the fix.
  Nothing has been written at that point.
- "coerce": numbers are clamped to the bounds (and rounded in integer columns), unknown
  categories go to the `<other>` bucket (or missing), unparseable values become missing, and a
  row whose value has no place at all (missing where none is allowed) is dropped
  (`keep_rows=False`) or keeps its position with the column's public fill value
  (`keep_rows=True`: the declared `default`, else the first category, else the lower bound).

Which one a release may use depends on its neighbouring relation. Under add/remove-one
neighbours a dropped row is a removal, so dropping stays inside the guarantee. Under
replace-one neighbours (objective / output perturbation, which treat n as public) a drop
would turn a replacement into a removal and change n: those callers pass `keep_rows=True`,
so n is the number of input rows whatever their values.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import pandas as pd

from privlab.errors import InvalidInputError
from privlab.schema.model import ISO8601, OTHER, ColumnSchema, Schema
from privlab.schema.values import INVALID, code_of, datetime_of, number_of, parse_each

Policy = Literal["refuse", "coerce"]
POLICIES = ("refuse", "coerce")
_FIX = "fix the data, widen the schema, or pass --on-invalid coerce"


def _refuse(col: ColumnSchema, what: str) -> InvalidInputError:
    return InvalidInputError(f"column {col.name!r}: {what}; {_FIX}")


def _conform_categorical(s: pd.Series, col: ColumnSchema, policy: Policy
                         ) -> tuple[pd.Series, np.ndarray]:
    codes = parse_each(s, code_of)
    missing = np.array([c is None for c in codes], dtype=bool)
    text = pd.Series(codes, index=s.index, dtype=object)
    known = text.isin(col.categories).to_numpy()
    unknown = ~known & ~missing
    drop = np.zeros(len(s), dtype=bool)
    if unknown.any():
        if policy == "refuse" and not col.other:
            raise _refuse(col, "a value outside its declared categories")
        if col.other:
            text = text.where(~unknown, OTHER)
        else:
            text = text.where(~unknown, None)
            missing = missing | unknown
    if missing.any() and not col.missing:
        if policy == "refuse":
            raise _refuse(col, "a missing value but the schema declares missing: false")
        drop |= missing
    out = pd.Series(text.to_numpy(dtype=object), index=s.index, name=col.name, dtype=object)
    out[missing] = np.nan
    return out, drop


#: |x| up to here converts between int64 and float64 exactly (the fast path's limit)
_EXACT = 2 ** 53


def _physical_floats(s: pd.Series, bounds: tuple[Any, Any]) -> np.ndarray | None:
    """A column of physical numbers (NumPy float or int dtype, as Parquet gives them) as
    float64, when every cell and both bounds convert exactly; None otherwise (object cells,
    nullable dtypes, booleans, 19-digit integers: the per-cell rules decide those)."""
    if not isinstance(s.dtype, np.dtype) or s.dtype.kind not in "fiu":
        return None
    if any(isinstance(b, bool) or float(b) != b or abs(b) > _EXACT for b in bounds):
        return None
    x = s.to_numpy()
    if s.dtype.kind in "iu" and x.size and max(abs(int(x.min())), abs(int(x.max()))) > _EXACT:
        return None
    return x.astype(np.float64)


def _conform_physical(x: np.ndarray, index: pd.Index, col: ColumnSchema, policy: Policy
                      ) -> tuple[pd.Series, np.ndarray]:
    """`_conform_numeric` for float64 cells, vectorised: the same checks in the same order,
    the same values (each cell is still read on its own: only NaN is missing)."""
    integer = col.type == "integer"
    lo, hi = col.bounds  # type: ignore[misc]
    missing = np.isnan(x)
    finite = np.isfinite(x)
    if integer and policy == "refuse" and (finite & (x != np.floor(x))).any():
        raise _refuse(col, "a non-integer value in an integer column")
    if policy == "refuse" and ((x < lo) | (x > hi)).any():  # NaN compares False
        raise _refuse(col, f"a value outside its declared bounds [{lo}, {hi}]")
    values = np.clip(x, float(lo), float(hi))  # NaN stays NaN
    if integer:
        values = np.where(np.isfinite(values), np.round(values), values)
    drop = np.zeros(len(x), dtype=bool)
    if missing.any() and not col.missing:
        if policy == "refuse":
            raise _refuse(col, "a missing value but the schema declares missing: false")
        drop = missing
    return pd.Series(values, index=index, name=col.name, dtype="float64"), drop


def _conform_numeric(s: pd.Series, col: ColumnSchema, policy: Policy
                     ) -> tuple[pd.Series, np.ndarray]:
    integer = col.type == "integer"
    physical = _physical_floats(s, col.bounds)  # type: ignore[arg-type]
    if physical is not None:  # Parquet / NumPy numbers: no per-cell Python (issue 32)
        return _conform_physical(physical, s.index, col, policy)
    parsed = parse_each(s, lambda v: number_of(v, integer))
    was_missing = np.array([v is None for v in parsed], dtype=bool)
    unparsed = np.array([v is INVALID for v in parsed], dtype=bool)
    if unparsed.any() and policy == "refuse":
        raise _refuse(col, f"a value that is not a number in a {col.type} column")
    lo, hi = col.bounds  # type: ignore[misc]
    # bounds are compared on the exact value (a 19-digit integer is not rounded first)
    fractional = np.array([isinstance(v, float) and math.isfinite(v) and not v.is_integer()
                           for v in parsed], dtype=bool) if integer else np.zeros(len(s), bool)
    if fractional.any() and policy == "refuse":
        raise _refuse(col, "a non-integer value in an integer column")
    nan_value = np.array([isinstance(v, float) and math.isnan(v) for v in parsed], dtype=bool)
    outside = np.array([v is not None and v is not INVALID and not _isnan(v)
                        and (v < lo or v > hi) for v in parsed], dtype=bool)
    if outside.any() and policy == "refuse":
        raise _refuse(col, f"a value outside its declared bounds [{lo}, {hi}]")
    values = np.array([np.nan if v is None or v is INVALID else
                       float(min(max(v, lo), hi)) if not _isnan(v) else np.nan
                       for v in parsed], dtype=np.float64)
    if integer:
        values = np.where(np.isfinite(values), np.round(values), values)
    missing = was_missing | unparsed | nan_value
    drop = np.zeros(len(s), dtype=bool)
    if missing.any() and not col.missing:
        if policy == "refuse":
            raise _refuse(col, "a missing value but the schema declares missing: false")
        drop = missing
    return pd.Series(values, index=s.index, name=col.name, dtype="float64"), drop


def _isnan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _conform_datetime(s: pd.Series, col: ColumnSchema, policy: Policy
                      ) -> tuple[pd.Series, np.ndarray]:
    parsed = parse_each(s, lambda v: datetime_of(v, col.format))
    unparsed = np.array([v is INVALID for v in parsed], dtype=bool)
    if unparsed.any() and policy == "refuse":
        fmt = "ISO 8601" if col.format == ISO8601 else repr(col.format)
        raise _refuse(col, f"a value that is not a date/time in its declared format ({fmt})")
    values = pd.Series([pd.NaT if v is None or v is INVALID else v for v in parsed],
                       index=s.index, dtype="datetime64[ns]")
    lo, hi = (pd.Timestamp(b) for b in col.bounds)  # type: ignore[union-attr]
    outside = values.notna() & ((values < lo) | (values > hi))
    if outside.any() and policy == "refuse":
        raise _refuse(col, f"a date outside its declared bounds [{lo}, {hi}]")
    values = values.clip(lower=lo, upper=hi)
    missing = values.isna().to_numpy()
    drop = np.zeros(len(s), dtype=bool)
    if missing.any() and not col.missing:
        if policy == "refuse":
            raise _refuse(col, "a missing value but the schema declares missing: false")
        drop = missing
    return pd.Series(values.to_numpy(), index=s.index, name=col.name), drop


def _conform_key(s: pd.Series, col: ColumnSchema, policy: Policy
                 ) -> tuple[pd.Series, np.ndarray]:
    codes = parse_each(s, code_of)
    missing = np.array([c is None for c in codes], dtype=bool)
    drop = np.zeros(len(s), dtype=bool)
    if missing.any() and not col.missing:
        if policy == "refuse":
            raise _refuse(col, "a missing value but the schema declares missing: false")
        drop = missing
    out = pd.Series(codes, index=s.index, name=col.name, dtype=object)
    out[missing] = np.nan
    return out, drop


def _fill(series: pd.Series, where: np.ndarray, col: ColumnSchema) -> pd.Series:
    """The column's public fill value at `where` (keep_rows), in the series' dtype."""
    value = col.fill_value
    out = series.copy()
    if col.type in ("integer", "numeric"):
        out[where] = float(value)
    elif col.type == "datetime":
        out[where] = pd.Timestamp(value)
    else:
        out[where] = str(value)
    return out


_CONFORMERS = {"categorical": _conform_categorical, "integer": _conform_numeric,
               "numeric": _conform_numeric, "datetime": _conform_datetime,
               "identifier": _conform_key, "text": _conform_key}


def check_policy(policy: str) -> Policy:
    if policy not in POLICIES:
        raise InvalidInputError(f"--on-invalid must be one of {', '.join(POLICIES)}, got "
                                f"{policy!r}")
    return policy  # type: ignore[return-value]


def conform(frame: pd.DataFrame, schema: Schema, policy: Policy = "coerce", *,
            columns: list[str] | None = None, keep_rows: bool = False) -> pd.DataFrame:
    """The rows of `frame` in the schema's columns and dtypes (see the module docstring).

    `columns` restricts the output to those schema columns (default: all of them). Columns of
    the frame that the schema does not declare are refused: an undeclared column would have
    no public domain. `keep_rows`: coerce fills instead of dropping (the row count is kept).
    """
    if not isinstance(frame, pd.DataFrame):
        raise InvalidInputError("expected a table (pandas DataFrame)")
    check_policy(policy)
    if schema.draft:
        raise InvalidInputError(f"schema {schema.name!r} is a draft drawn from the data: review "
                                "it and drop 'draft: true' before use")
    names = [str(c) for c in frame.columns]
    if len(set(names)) != len(names):
        raise InvalidInputError("the input has duplicate column names; rename them")
    wanted = schema.names if columns is None else list(columns)
    for name in wanted:
        schema.column(name)
    absent = [c for c in wanted if c not in names]
    if absent:
        raise InvalidInputError(f"the data has no column {absent[0]!r} that schema "
                                f"{schema.name!r} declares; add it or use a schema without it")
    undeclared = [c for c in names if schema.get(c) is None]
    if undeclared:
        raise InvalidInputError(f"column {undeclared[0]!r} is not in schema {schema.name!r}; "
                                "declare it (type and domain) or drop it from the data")
    parts: dict[str, pd.Series] = {}
    drop = np.zeros(len(frame), dtype=bool)
    for name in wanted:
        col = schema.column(name)
        series, bad = _CONFORMERS[col.type](frame[name], col, policy)
        if keep_rows and bad.any():
            series = _fill(series, bad, col)
        else:
            drop |= bad
        parts[name] = series
    out = pd.DataFrame(parts, index=frame.index)
    if drop.any():
        out = out.loc[~drop]
    return out.reset_index(drop=True)


__all__ = ["POLICIES", "Policy", "check_policy", "conform"]
