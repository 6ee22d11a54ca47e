"""`draft_schema`: suggest a schema from data, marked as a draft that must be reviewed.

The rows are read as text (`read_table`), like every other reader; the draft proposes a type
from the text by the same per-cell rules (`privlab.schema.values`), so a column of codes
"01", "02" is drafted as categorical with those codes, not as an integer.
A draft is computed from the private rows (their categories, minima and maxima), so it is
itself private: it is written with `draft: true`, which every loader refuses, and a header that
says so. A person must review it (widen bounds to public limits, replace observed category
lists with documented ones), treat it as public, and delete the draft line before use.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pandas as pd

from privlab.errors import InvalidInputError
from privlab.schema.model import MAX_CATEGORIES, Schema, parse_schema
from privlab.schema.values import INVALID, datetime_of, number_of, numbers, parse_each

_LEADING_ZERO = re.compile(r"[+-]?0\d")

#: Text columns with more distinct values than this share of their rows (and at least
#: IDENTIFIER_MIN_DISTINCT of them) are drafted as identifiers.
IDENTIFIER_SHARE = 0.5
IDENTIFIER_MIN_DISTINCT = 20
#: A numeric value holding at least this share of a column's values is drafted as a point
#: mass (its own code in synthesizers), at most POINT_MASS_MAX of them per column; integer
#: columns whose range holds at most POINT_MASS_RANGE values already get one bin per value.
POINT_MASS_SHARE = 0.05
POINT_MASS_MAX = 5
POINT_MASS_RANGE = 128

DRAFT_HEADER = """\
# DRAFT SCHEMA, DRAWN FROM THE DATA: it reveals the data's categories and ranges, and its
# point masses (point_masses: values that hold >= 5% of a numeric column, e.g. 0).
# Review every column before use: replace observed categories, bounds and point masses with
# public, documented ones (a code book, legal limits, "0 means none"), decide which column is
# the privacy unit, then treat the file as public and delete the line 'draft: true'. privlab
# refuses drafts.
"""


def _text_kind(values: pd.Series) -> str | None:
    """A text column's drafted kind, by the same per-cell rules the schema reads with:
    "integer" / "numeric" when every cell is a number, "text" when one of those is a code with
    a leading zero such as "01" (which a number would lose), "datetime" when every cell is
    ISO 8601; None otherwise (and for physical values)."""
    if values.empty or not all(isinstance(v, str) for v in values):
        return None
    parsed = parse_each(values, lambda v: number_of(v, True))
    if not any(v is INVALID for v in parsed):
        if any(_LEADING_ZERO.match(v) for v in values):
            return "text"
        return "integer" if all(isinstance(v, int) for v in parsed) else "numeric"
    if not any(v is INVALID for v in parse_each(values, datetime_of)):
        return "datetime"
    return None


def _column_draft(s: pd.Series) -> dict[str, Any]:
    missing = bool(s.isna().any())
    values = s.dropna()
    kind = _text_kind(values) if s.dtype == object else None
    if kind == "datetime":
        values = pd.Series(parse_each(values, datetime_of), dtype="datetime64[ns]")
        s = values
    elif kind in ("integer", "numeric"):
        values = numbers(values)
        if kind == "integer":
            values = values.astype(np.int64) if np.isfinite(values).all() else values
        s = values
    if pd.api.types.is_bool_dtype(s.dtype):
        return {"type": "categorical", "categories": ["False", "True"], "missing": missing}
    if pd.api.types.is_datetime64_any_dtype(s.dtype):
        if values.empty:
            return {"type": "text", "missing": True}
        lo, hi = values.min(), values.max()
        if lo == hi:
            hi = lo + pd.Timedelta(days=1)
        return {"type": "datetime", "bounds": [lo.isoformat(), hi.isoformat()],
                "missing": missing}
    numeric = pd.to_numeric(values, errors="coerce") if not pd.api.types.is_numeric_dtype(
        s.dtype) else values.astype(np.float64)
    if kind != "text" and len(values) and not numeric.isna().any():
        x = numeric.to_numpy(dtype=np.float64)
        x = x[np.isfinite(x)]
        if x.size == 0:
            return {"type": "text", "missing": True}
        integer = bool(np.all(x == np.round(x)))
        lo, hi = float(x.min()), float(x.max())
        if integer and len(values) >= IDENTIFIER_MIN_DISTINCT and \
                values.nunique() == len(values) and not pd.api.types.is_float_dtype(s.dtype):
            return {"type": "identifier", "missing": missing}
        if integer:
            lo_i, hi_i = math.floor(lo), math.ceil(hi)
            out = {"type": "integer", "bounds": [lo_i, hi_i if hi_i > lo_i else lo_i + 1],
                   "missing": missing}
            if hi_i - lo_i + 1 > POINT_MASS_RANGE:
                out.update(_point_masses(x, integer=True))
            return out
        return {"type": "numeric", "bounds": [lo, hi if hi > lo else lo + 1.0],
                **_point_masses(x, integer=False), "missing": missing}
    text = values.astype(str)
    distinct = int(text.nunique())
    if (distinct >= IDENTIFIER_MIN_DISTINCT and distinct > IDENTIFIER_SHARE * len(text)) or \
            distinct > MAX_CATEGORIES:
        return {"type": "identifier", "missing": missing}
    if distinct == 0:
        return {"type": "text", "missing": True}
    return {"type": "categorical", "categories": sorted(text.unique().tolist()),
            "missing": missing}


def _point_masses(x: np.ndarray, integer: bool) -> dict[str, Any]:
    """{"point_masses": [...]} for the values holding >= POINT_MASS_SHARE of `x` (data-derived:
    the draft header says so), else {}."""
    values, counts = np.unique(x, return_counts=True)
    heavy = np.flatnonzero(counts >= POINT_MASS_SHARE * x.size)
    if heavy.size == 0 or values.size <= heavy.size:  # every value heavy: a category-like column
        return {}
    top = heavy[np.argsort(-counts[heavy], kind="stable")][:POINT_MASS_MAX]
    pts = sorted(int(v) if integer else float(v) for v in values[top])
    return {"point_masses": pts}


def draft_schema(frame: pd.DataFrame, name: str = "draft") -> Schema:
    """A draft schema (`draft=True`) from the data; see the module docstring."""
    if not isinstance(frame, pd.DataFrame) or frame.shape[1] == 0:
        raise InvalidInputError("cannot draft a schema from a table without columns")
    names = [str(c) for c in frame.columns]
    if len(set(names)) != len(names):
        raise InvalidInputError("the input has duplicate column names; rename them")
    columns = {str(c): _column_draft(frame[c]) for c in frame.columns}
    spec = {"name": name, "draft": True, "privacy_unit": "row", "columns": columns,
            "description": "drafted from the data by `privlab schema draft`; NOT public until "
                           "reviewed"}
    return parse_schema(spec, name=name, allow_draft=True)


def draft_yaml(schema: Schema) -> str:
    return DRAFT_HEADER + schema.to_yaml()
