"""A declared schema in the curator-side commands (`privlab assess`, `privlab anonymize`).

Why: without a schema, assess and anonymize guess each column's kind from pandas dtypes, bin
numbers between the data's own min and max, and would happily measure (or generalise) a
record id. With `--schema`, the declaration decides instead:

- the rows are conformed to it first (`privlab.schema.conform`, `--on-invalid refuse|coerce`);
- identifier and text columns are *direct identifiers*: left out of the assessed attributes
  (and of anonymize's output), refused as a quasi-identifier or sensitive attribute, and
  flagged in the report;
- integer / numeric / datetime columns are binned over their declared bounds (public,
  data-independent edges), an integer column whose declared range has no more values than the
  bins asked for keeps one value per bin, a datetime range is cut into equal-width bins
  labelled by ISO dates, and anonymize cuts its intervals over the declared range.

Neither command is differential privacy; the schema makes their treatment of each column
declared and reproducible, not private.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
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
    `datetime`: the edges are whole microseconds since the epoch (exact in pandas' nanoseconds
    and in SQL TIMESTAMP literals) and bins are labelled by ISO dates.
    """

    edges: tuple[float, ...]
    integer: bool = False
    datetime: bool = False

    def labels(self) -> list[str]:
        e = self.edges
        if self.datetime:
            return _interval_labels(_iso_edges(e))
        if not self.integer:
            return _interval_labels([f"{x:.6g}" for x in e])
        out = []
        for i in range(len(e) - 1):
            a, b = int(e[i]), int(e[i + 1]) - 1
            out.append(str(a) if a == b else f"{a}-{b}")
        return out

    def timestamps(self) -> list[pd.Timestamp]:
        """The edges of a datetime binning as timestamps."""
        return [pd.Timestamp(int(x), unit="us") for x in self.edges]


def _interval_labels(edges: Sequence[str]) -> list[str]:
    """[a, b) ... [y, z]: half-open intervals, the last closed."""
    return [f"[{edges[i]}, {edges[i + 1]}" + ("]" if i == len(edges) - 2 else ")")
            for i in range(len(edges) - 1)]


def _iso_edges(edges: Sequence[float]) -> list[str]:
    """ISO dates when every edge is a midnight, else ISO date-times (to the second when that
    keeps the edges apart)."""
    stamps = [pd.Timestamp(int(x), unit="us") for x in edges]
    if all(t == t.normalize() for t in stamps):
        return [t.date().isoformat() for t in stamps]
    seconds = [t.isoformat(timespec="seconds") for t in stamps]
    if len(set(seconds)) == len(seconds):
        return seconds
    return [t.isoformat() for t in stamps]


def declared_bins(schema: Schema, column: str, n_bins: int) -> DeclaredBins | None:
    """`--bin-numeric N` for a declared integer / numeric / datetime column; None: no binning
    needed (an integer column whose declared range holds at most N values keeps one value per
    bin). A datetime range is cut into N equal-width bins (whole microseconds)."""
    if n_bins < 1:
        raise InvalidInputError(f"--bin-numeric must be >= 1, got {n_bins}")
    col = schema.column(column)
    lo, hi = col.bounds  # type: ignore[misc]
    if col.type == "datetime":
        return _datetime_bins(column, lo, hi, n_bins)
    if col.type == "integer":
        lo, hi = int(lo), int(hi)
        size = hi - lo + 1
        if size <= n_bins:
            return None
        width = math.ceil(size / n_bins)
        starts = list(range(lo, hi + 1, width))
        return DeclaredBins(tuple(float(s) for s in [*starts, hi + 1]), integer=True)
    return DeclaredBins(tuple(float(x) for x in np.linspace(float(lo), float(hi), n_bins + 1)))


def _datetime_bins(column: str, lo: Any, hi: Any, n_bins: int) -> DeclaredBins:
    start, end = (pd.Timestamp(b).value // 1000 for b in (lo, hi))
    span = end - start
    if span < n_bins:
        raise InvalidInputError(f"--bin-numeric {n_bins}: the declared range of {column!r} "
                                "is shorter than that many microseconds; ask for fewer bins")
    return DeclaredBins(tuple(start + span * i // n_bins for i in range(n_bins + 1)),
                        datetime=True)


def binnable(schema: Schema, column: str) -> bool:
    """Whether `--bin-numeric` cuts this declared column (numbers and dates have bounds)."""
    col = schema.column(column)
    return col.is_numeric or col.type == "datetime"


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


__all__ = ["DIRECT_KIND", "DeclaredBins", "binnable", "conform_rows", "declared_bins",
           "direct_identifiers", "refuse_direct", "schema_summary"]


def refuse_direct_roles(schema: Schema, attributes: Sequence[str] | None,
                        qis: Sequence[str] | None, sensitive: str | None) -> None:
    """No option may name a declared identifier or text column as something to assess."""
    refuse_direct(schema, attributes, "--attributes")
    refuse_direct(schema, qis, "--quasi-identifiers")
    refuse_direct(schema, [sensitive] if sensitive is not None else None, "--sensitive")


def declared_attributes(schema: Schema, names: Sequence[str],
                        attributes: Sequence[str] | None,
                        bins: int | Mapping[str, Any] | None
                        ) -> tuple[list[dict[str, str]], list[str], Any]:
    """(direct identifiers, attributes to assess, bins) of the conformed columns `names`:
    identifier and text columns set apart, an int `bins` cut over each declared range.
    Shared by the in-memory and the grouped (DuckDB / Spark) paths."""
    direct = direct_identifiers(schema, names)
    if attributes is None:
        attributes = [c for c in names if schema.column(c).is_released]
        if not attributes:
            raise InvalidInputError(f"schema {schema.name!r} declares every column identifier "
                                    "or text: nothing to assess")
    if isinstance(bins, int) and not isinstance(bins, bool):
        bins = {c: declared_bins(schema, c, bins) for c in attributes if binnable(schema, c)}
    return direct, list(attributes), bins
