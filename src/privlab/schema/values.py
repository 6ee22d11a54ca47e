"""The fixed rules that turn one cell into a value of its declared type.

Why: a column's type comes from the declaration, and each cell is converted on its own, so no
value can change how another row is read (pandas' inference reads a column of "01", "02" as
numbers and the same column with one more row "XX" as text; `pd.to_datetime` takes a
column's format from its first value). Every function here looks at one cell only and
returns the parsed value, or `INVALID` when the cell does not fit (the caller applies the
`on_invalid` policy to that row alone), or `None` for a missing cell.

Cells arrive as text (CSV, read by `privlab.data.io.read_table`) or as physical values
(Parquet, a pandas DataFrame handed to the library, a table conformed once already).
The rules (docs/schema.md, "How values are read"):

- categorical / identifier / text: a text cell is its own code, exactly ("01" stays "01";
  "True", "true", "1" and "yes" are four different codes). A physical integer is its decimal
  digits (exact, any length); a whole float is the digits of its integer ("3.0" -> "3", what a
  nullable column of a library table holds); a physical boolean is "True" / "False".
- integer / numeric: a text cell must be a decimal number (`[+-]digits[.digits][e[+-]digits]`,
  no thousands separators, no "inf"); integer text is parsed exactly (19-digit values keep
  every digit until the bounds clamp them). Booleans (physical, or text such as "true") are
  not numbers: invalid.
- datetime: text by the column's declared `format` ("ISO8601" by default, else a strptime
  pattern); a value with an offset or `Z` is converted to UTC, a naive one is taken as
  written. Physical datetimes: tz-aware ones converted to UTC. Numbers are invalid.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import pandas as pd

from privlab.schema.model import ISO8601

#: A cell that does not fit its declared type.
INVALID: Any = type("Invalid", (), {"__repr__": lambda self: "INVALID"})()

_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")


def is_missing(value: Any) -> bool:
    """None, NaN, NaT and pd.NA are missing; every other value (any text) is a value."""
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    if isinstance(value, (float, np.floating)):
        return bool(np.isnan(value))
    return isinstance(value, np.datetime64) and bool(np.isnat(value))


def code_of(value: Any) -> str | None:
    """A categorical / identifier / text cell as its code (see the module docstring)."""
    if is_missing(value):
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def number_of(value: Any, integer: bool) -> Any:
    """A numeric cell as a Python int (exact integer text or physical int) or float;
    None when missing, INVALID when it is not a number."""
    if is_missing(value):
        return None
    if isinstance(value, (bool, np.bool_)):
        return INVALID
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, Decimal):
        return float(value) if value.is_finite() else INVALID
    if not isinstance(value, str):
        return INVALID
    text = value.strip()
    if integer and _INTEGER.fullmatch(text):
        return int(text)
    if not _NUMBER.fullmatch(text):
        return INVALID
    if integer:  # "3.0", "1e3": exact through Decimal, a whole value is that integer
        try:
            exact = Decimal(text)
        except InvalidOperation:  # pragma: no cover - the pattern admits only numbers
            return INVALID
        return int(exact) if exact == exact.to_integral_value() else float(exact)
    return float(text)


def _utc_naive(stamp: dt.datetime) -> dt.datetime:
    if stamp.tzinfo is not None:
        return stamp.astimezone(dt.UTC).replace(tzinfo=None)
    return stamp


def datetime_of(value: Any, fmt: str = ISO8601) -> Any:
    """A datetime cell as a naive UTC `pd.Timestamp`; None when missing, INVALID otherwise."""
    if is_missing(value):
        return None
    if isinstance(value, pd.Timestamp):
        return pd.Timestamp(value.tz_convert("UTC").tz_localize(None)) if value.tzinfo \
            else value
    if isinstance(value, np.datetime64):
        return pd.Timestamp(value)
    if isinstance(value, dt.datetime):
        return pd.Timestamp(_utc_naive(value))
    if isinstance(value, dt.date):
        return pd.Timestamp(value)
    if not isinstance(value, str):
        return INVALID
    text = value.strip()
    try:
        if fmt == ISO8601:  # Python's ISO 8601 reader: "2009-06-01", "...T08:00:00Z", ...
            stamp = dt.datetime.fromisoformat(text)
        else:
            stamp = dt.datetime.strptime(text, fmt)
    except ValueError:
        return INVALID
    try:
        return pd.Timestamp(_utc_naive(stamp))
    except (OverflowError, ValueError, pd.errors.OutOfBoundsDatetime):
        return INVALID


def parse_each(values: pd.Series, parse: Any) -> list[Any]:
    """`parse` applied to each cell on its own (each distinct cell parsed once)."""
    cache: dict[Any, Any] = {}
    out = []
    for cell in values.tolist():
        key = (type(cell), cell)  # True == 1 == 1.0 in a dict: the type keeps them apart
        try:
            hit = cache.get(key, cache)
        except TypeError:  # an unhashable cell (a list in a library table)
            hit = cache
        if hit is cache:
            hit = parse(cell)
            with contextlib.suppress(TypeError):
                cache[key] = hit
        out.append(hit)
    return out


def numbers(values: pd.Series) -> pd.Series:
    """Cells as float64 by the numeric rule, a cell that is not a number -> NaN (the reading
    of a column whose only declaration is a command's `--bounds`)."""
    parsed = parse_each(values, lambda v: number_of(v, False))
    return pd.Series([np.nan if v is None or v is INVALID else float(v) for v in parsed],
                     index=values.index, name=values.name, dtype=np.float64)


__all__ = ["INVALID", "code_of", "datetime_of", "is_missing", "number_of", "numbers",
           "parse_each"]
