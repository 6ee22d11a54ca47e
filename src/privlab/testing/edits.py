"""One-row edits of a table: the D' of every front end that reads a frame or a file.

A release path is sound when, run on D and on D' (one row added, removed or changed) with the
same seed, everything outside its noised values is identical. `one_row_edits` is the battery
of edits under the declared schema; `representation_edits` writes one cell differently (the
reader's view of a file); `edits_for_policy` picks the edits whose handling differs between
`--on-invalid refuse` and `coerce`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from privlab.schema import Schema

HOSTILE = "x\\%_'\"; DROP--é漢\U0001F600\\"


def _first(schema: Schema, types: Iterable[str]) -> str | None:
    for c in schema.columns:
        if c.type in types:
            return c.name
    return None


def one_row_edits(frame: pd.DataFrame, schema: Schema, row: int = 0) -> dict[str, pd.DataFrame]:
    """D' for each edit in the battery (those that apply to the schema's column types).

    Edits: add a new row, remove one, change a categorical to its rarest declared category and
    to a new category, a missing value, a non-integer in an integer column, text in a numeric
    column, an extreme value, a hostile string (backslash, percent, quote, unicode), a
    duplicate person.
    """
    base = frame.reset_index(drop=True)
    edits: dict[str, pd.DataFrame] = {}
    edits["remove"] = base.drop(index=row).reset_index(drop=True)
    edits["add"] = pd.concat([base, base.iloc[[row]]], ignore_index=True)
    edits["duplicate_person"] = pd.concat([base, base.iloc[[len(base) - 1]]], ignore_index=True)

    def changed(col: str, value: Any) -> pd.DataFrame:
        out = base.copy()
        out[col] = out[col].astype(object)
        out.at[row, col] = value
        return out

    cat = _first(schema, ["categorical"])
    if cat is not None:
        declared = schema.column(cat).categories
        observed = base[cat].astype(str).value_counts()
        rare = min(declared, key=lambda c: (int(observed.get(c, 0)), c))
        edits["rare_category"] = changed(cat, rare)
        edits["new_category"] = changed(cat, "Atlantis-新")
        edits["hostile_string"] = changed(cat, HOSTILE)
        edits["missing_categorical"] = changed(cat, None)
    integer = _first(schema, ["integer"])
    if integer is not None:
        edits["non_integer"] = changed(integer, float(schema.column(integer).bounds[0]) + 0.5)
    num = _first(schema, ["integer", "numeric"])
    if num is not None:
        edits["text_in_numeric"] = changed(num, "unknown")
        edits["extreme_value"] = changed(num, 1e12)
        edits["missing_numeric"] = changed(num, np.nan)
    return edits


def representation_edits(frame: pd.DataFrame, schema: Schema, row: int = 0
                         ) -> dict[str, pd.DataFrame]:
    """D' whose one edited cell is *written* differently (issue 29): the file's text is what
    the reader sees, so these edits are cells of text.

    - text_code / leading_zero: a column of digit codes ("01", "02") gets "XX" / "6" in one
      row (pandas read the whole column as numbers, or as text, from all its rows);
    - first_row_z / first_row_offset / first_row_dayfirst: the first datetime cell written
      with a Z, an offset, or day first (`pd.to_datetime` took the column's format from it);
    - bool_True / bool_1 / bool_yes: a "true"/"false" column spelled another way in one row;
    - long_ids_missing_one: 19-digit ids with one cell blank (pandas read them as floats);
    - blank_cell / whitespace_cell: a categorical cell "" or "  " (one rule: both missing).
    """
    base = frame.reset_index(drop=True).astype(object)
    edits: dict[str, pd.DataFrame] = {}

    def changed(col: str, value: Any, at: int = row) -> pd.DataFrame:
        out = base.copy()
        out.at[at, col] = value
        return out

    cats = [c for c in schema.columns if c.type == "categorical"]
    digits = next((c for c in cats if all(k.isdigit() for k in c.categories)), None)
    if digits is not None:
        edits["text_code"] = changed(digits.name, "XX")
        code = next(k for k in digits.categories if k.startswith("0") and k != "0")
        edits["leading_zero"] = changed(digits.name, str(int(code)))
    when = _first(schema, ["datetime"])
    if when is not None:
        stamp = pd.Timestamp(base.at[0, when])
        edits["first_row_z"] = changed(when, stamp.strftime("%Y-%m-%dT%H:%M:%SZ"), 0)
        edits["first_row_offset"] = changed(when, stamp.strftime("%Y-%m-%dT%H:%M:%S+02:00"), 0)
        edits["first_row_dayfirst"] = changed(when, stamp.replace(day=13).strftime("%d/%m/%Y"),
                                              0)
    flag = next((c for c in cats if {k.lower() for k in c.categories} == {"true", "false"}),
                None)
    if flag is not None:
        for spelling in ("True", "1", "yes"):
            edits[f"bool_{spelling}"] = changed(flag.name, spelling)
    ident = _first(schema, ["identifier"])
    if ident is not None and base[ident].astype(str).str.fullmatch(r"\d{19}").all():
        edits["long_ids_missing_one"] = changed(ident, None)
    if cats:
        edits["blank_cell"] = changed(cats[0].name, "")
        edits["whitespace_cell"] = changed(cats[0].name, "  ")
    return edits


#: The edits of `representation_edits`.
REPRESENTATION = {"text_code", "leading_zero", "first_row_z", "first_row_offset",
                  "first_row_dayfirst", "bool_True", "bool_1", "bool_yes",
                  "long_ids_missing_one", "blank_cell", "whitespace_cell"}


#: Edits whose values lie outside a schema with no `<other>` bucket and no missing values in
#: its first integer column (e.g. adult): refused in refuse mode, coerced otherwise.
OUTSIDE = {"new_category", "hostile_string", "text_in_numeric", "extreme_value", "non_integer",
           "missing_numeric"}


def edits_for_policy(frame: pd.DataFrame, policy: str, schema: Schema
                     ) -> dict[str, pd.DataFrame]:
    """The whole battery in refuse mode; in coerce mode only the edits outside the schema (the
    only ones whose handling differs between the two policies), to keep slow files short."""
    out = one_row_edits(frame, schema)
    return out if policy == "refuse" else {k: v for k, v in out.items() if k in OUTSIDE}
