"""A declared schema in the curator-side commands (`privlab assess`, `privlab anonymize`).

Why: without a schema, assess and anonymize guess each column's kind from pandas dtypes, bin
numbers between the data's own min and max, and would happily measure (or generalise) a
record id. With `--schema`, the declaration decides instead:

- the rows are conformed to it first (`privlab.schema.conform`, `--on-invalid refuse|coerce`);
- identifier and text columns are *direct identifiers*: left out of the assessed attributes
  (and of anonymize's output), refused as a quasi-identifier or sensitive attribute, and
  flagged in the report;
- integer / numeric columns are binned over their declared bounds (public, data-independent
  edges), an integer column whose declared range has no more values than the bins asked for
  keeps one value per bin, and anonymize cuts its intervals over the declared range.

Neither command is differential privacy; the schema makes their treatment of each column
declared and reproducible, not private.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from privlab.errors import InvalidInputError
from privlab.schema.conform import Policy, conform
from privlab.schema.model import Schema

#: What each non-released column type means in the report.
DIRECT_KIND = {"identifier": "declared identifier (a record or person key)",
               "text": "declared free text (may hold names or other identifiers)"}


@dataclass(frozen=True)
class DeclaredBins:
    """Bin edges taken from a column's declared bounds (never from the rows).

    `integer`: the edges are whole numbers and each bin is labelled by the inclusive range of
    the integers it holds ("17-24"); otherwise bins are half-open intervals, the last closed.
    """

    edges: tuple[float, ...]
    integer: bool = False

    def labels(self) -> list[str]:
        e = self.edges
        if not self.integer:
            return [f"[{e[i]:.6g}, {e[i + 1]:.6g}" + ("]" if i == len(e) - 2 else ")")
                    for i in range(len(e) - 1)]
        out = []
        for i in range(len(e) - 1):
            a, b = int(e[i]), int(e[i + 1]) - 1
            out.append(str(a) if a == b else f"{a}-{b}")
        return out


def declared_bins(schema: Schema, column: str, n_bins: int) -> DeclaredBins | None:
    """`--bin-numeric N` for a declared integer / numeric column; None: no binning needed (an
    integer column whose declared range holds at most N values keeps one value per bin)."""
    if n_bins < 1:
        raise InvalidInputError(f"--bin-numeric must be >= 1, got {n_bins}")
    col = schema.column(column)
    lo, hi = col.bounds  # type: ignore[misc]
    if col.type == "integer":
        lo, hi = int(lo), int(hi)
        size = hi - lo + 1
        if size <= n_bins:
            return None
        width = math.ceil(size / n_bins)
        starts = list(range(lo, hi + 1, width))
        return DeclaredBins(tuple(float(s) for s in [*starts, hi + 1]), integer=True)
    return DeclaredBins(tuple(float(x) for x in np.linspace(float(lo), float(hi), n_bins + 1)))


def direct_identifiers(schema: Schema, columns: Sequence[str]) -> list[dict[str, str]]:
    """The declared identifier / text columns among `columns`, for the report and the JSON."""
    out = []
    for name in columns:
        col = schema.column(name)
        if not col.is_released:
            out.append({"name": name, "type": col.type, "meaning": DIRECT_KIND[col.type]})
    return out


def refuse_direct(schema: Schema, names: Sequence[str] | None, option: str,
                  what: str = "assess reports it as a direct identifier") -> None:
    """A declared identifier / text column named in a role is refused in one line."""
    for name in names or ():
        col = schema.column(name)
        if not col.is_released:
            raise InvalidInputError(
                f"{option}: column {name!r} is declared {col.type} in schema {schema.name!r}: "
                f"a direct identifier is never published; leave it out ({what})")


def conform_rows(frame: pd.DataFrame, schema: Schema, policy: Policy,
                 what: str = "DATA") -> pd.DataFrame:
    """The rows' columns conformed to the schema, with integer columns without missing values
    back as int64 (so values print as 40, not 40.0). Every column of the rows must be
    declared; a declared column the rows lack is not needed (a curator may assess or
    anonymize an extract). Refusals name `what` (DATA or --population)."""
    try:
        out = conform(frame, schema, policy, columns=[str(c) for c in frame.columns])
    except InvalidInputError as exc:
        raise InvalidInputError(f"{what}: {exc}") from None
    for col in schema.columns:
        if col.name in out.columns and col.type == "integer" and not out[col.name].isna().any():
            out[col.name] = out[col.name].astype(np.int64)
    return out


def schema_summary(schema: Schema, policy: str, rows_read: int, rows_kept: int,
                   identifiers: list[dict[str, str]]) -> dict[str, Any]:
    """The JSON block that records which declaration the output was computed under."""
    return {"name": schema.name, "fingerprint": schema.fingerprint(), "on_invalid": policy,
            "rows_read": rows_read, "rows_dropped": rows_read - rows_kept,
            "direct_identifiers": identifiers}


__all__ = ["DIRECT_KIND", "DeclaredBins", "conform_rows", "declared_bins", "direct_identifiers",
           "refuse_direct", "schema_summary"]
