"""Rows without a privacy-unit id: one policy for every front end (issue 29).

A row whose privacy-unit cell is missing belongs to no known person. Grouping such rows
together (`groupby(unit, dropna=False)`, or SQL's `PARTITION BY` which puts every NULL in one
partition) made them one "person": bounding that person to M rows meant that removing one
visitor without an id let another one in, an L1 change of 2 against noise calibrated for 1.

The policy, shared by `privlab release`, `privlab synth`, `privlab train`, the studio (and the
reproduce.py it writes) and the SQL gateway: such rows are **dropped before contribution
bounding**, and the guarantee says so in a fixed sentence (`missing_unit_note`; never a
count, which would be private). A dropped row influences nothing, so the per-person claim
stands for every person, whoever those rows belonged to. A schema that declares the unit
column `missing: false` keeps its own rule (`conform` refuses, or under coerce drops).

Missing is decided per value, by the declared reading: an NA cell (an empty CSV cell, None,
NaN, NaT) or text that is empty or only whitespace. No other row changes how one is read.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def missing_unit(ids: pd.Series) -> np.ndarray:
    """Per row: True where the privacy-unit id is missing (NA, or blank text)."""
    na = ids.isna().to_numpy()
    blank = np.fromiter((isinstance(v, str) and not v.strip() for v in ids.to_numpy()),
                        dtype=bool, count=len(ids))
    return na | blank


def bound_per_unit(frame: pd.DataFrame, unit: str, per_unit: int) -> pd.DataFrame:
    """Each person's first `per_unit` rows (in the file's order), after dropping the rows
    without an id. Which rows a person keeps depends on that person's rows alone."""
    rows = frame.loc[~missing_unit(frame[unit])]
    return rows.groupby(unit, sort=False).head(per_unit)


def missing_unit_note(unit: str) -> str:
    """The guarantee's sentence on rows without an id (always present with a person unit:
    whether any such row exists is itself private)."""
    return (f"privacy unit {unit!r}: rows without an id (a missing or NULL value, or blank "
            "text) belong to no known person and are left out before each person's rows are "
            "bounded; they contribute nothing to the release")


def unit_present_sql(ref: str, text: bool) -> str:
    """The SQL condition keeping rows that have an id, for the gateway's contribution
    bounding (`ref`: the unit column as the query reads it; `text`: a text column, where a
    blank value is missing as well)."""
    if text:
        return f"({ref} IS NOT NULL AND TRIM({ref}) <> '')"
    return f"{ref} IS NOT NULL"


__all__ = ["bound_per_unit", "missing_unit", "missing_unit_note", "unit_present_sql"]
