"""`read_declared`: the one way private rows enter privlab when a schema declares them.

Why one reader: every command, the studio, the library, trajectory and federated must read a
file the same way, and the way must not depend on the rows: a file is read as text (CSV) or
by its physical types (Parquet) by `privlab.data.io.read_table`, then each cell is converted
by its column's *declared* type (`privlab.schema.conform`, rules in `privlab.schema.values`)
and a cell that does not fit is refused or coerced by `on_invalid` for its row alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from privlab.schema.conform import Policy, check_policy, conform
from privlab.schema.load import load_schema
from privlab.schema.model import Schema


def read_declared(source: str | Path | pd.DataFrame, schema: Schema | str | Any,
                  on_invalid: Policy | str = "refuse", *, columns: list[str] | None = None,
                  keep_rows: bool = False, delimiter: str | None = None,
                  allow_empty: bool = False) -> pd.DataFrame:
    """The rows of `source` (a CSV/TSV/Parquet path, or a DataFrame) in the schema's columns
    and dtypes. `columns`, `keep_rows`: as in `conform` (a column of the file that the schema
    does not declare is refused, whatever `columns` says)."""
    from privlab.data.io import read_table

    sch = load_schema(schema)
    policy = check_policy(on_invalid)
    if isinstance(source, pd.DataFrame):
        frame = source
    else:
        frame = read_table(source, delimiter=delimiter, allow_empty=allow_empty)
    return conform(frame, sch, policy, columns=columns, keep_rows=keep_rows)


__all__ = ["read_declared"]
