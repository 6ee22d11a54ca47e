"""By-group statistics of an analysis plan: the declared groups of a `by:` column and the
group of each row.

Why a module of its own: the groups must come from the declared schema, never from the rows
(a group seen only in the data would reveal that someone is in it). Every declared group is
released, an empty one included, so the set of output keys is public. A categorical column
gives its declared categories (and the schema's "other" and missing groups where it declares
them); an integer column gives the bins a histogram of it would use (its declared bounds and
bins, `core.queries.histogram_edges`), values clamped into the end bins as the histogram does.

Accounting (docs/measurements.md): adding or removing one row changes one group, so the
groups compose in parallel and a by-group item costs what one group costs. Replacing a row may
move it between two groups: a removal from one and an addition to another, the two add/remove
steps the replace relation already charges. A person with at most M rows may touch up to M
groups, but their M rows are M add/remove steps in total however they are spread, and each
group's mechanism runs at epsilon/M per row: the person's loss is still the item's epsilon
(each person's first M rows are kept before the rows are split into groups).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from privlab.errors import InvalidInputError

#: The group of rows whose `by` value is missing (where the schema allows missing values).
MISSING = "<missing>"


@dataclass(frozen=True)
class Groups:
    """The declared groups of column `column` (labels, in the schema's order)."""

    column: str
    labels: tuple[str, ...]
    edges: tuple[float, ...] | None = None  # an integer column's bin edges

    def keys(self, frame: pd.DataFrame) -> pd.Series:
        """Each row's group label (rows read as the schema declares)."""
        values = frame[self.column]
        if self.edges is None:
            return values.astype(object).where(values.notna(), MISSING).astype(str)
        edges = np.asarray(self.edges)
        x = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
        index = np.searchsorted(edges, np.clip(x, edges[0], edges[-1] - 1), side="right") - 1
        labels = np.asarray(self.labels, dtype=object)
        bins = len(self.labels) - (1 if self.labels[-1] == MISSING else 0)
        out = np.where(np.isnan(x), MISSING, labels[np.clip(index, 0, bins - 1)])
        return pd.Series(out, index=frame.index, dtype=object)

    def split(self, frame: pd.DataFrame) -> list[pd.DataFrame]:
        """The rows of each declared group, in the declared order (empty groups included)."""
        key = self.keys(frame)
        return [frame.loc[key == label] for label in self.labels]


def groups_of(schema: Any, by: str, column: str | None) -> Groups:
    """The declared groups of `by`, refused (one line naming the fix) where the schema does
    not declare them."""
    from privlab.core.queries import histogram_edges
    from privlab.schema import OTHER

    if by not in schema.names:
        raise InvalidInputError(f"by: {by!r} is not a column of schema {schema.name!r}")
    if by == column:
        raise InvalidInputError(f"by: {by!r} is the statistic's own column; group by another "
                                "column")
    col = schema.column(by)
    missing = (MISSING,) if col.missing else ()
    if col.type == "categorical" and col.categories:
        return Groups(by, tuple(str(c) for c in col.categories) +
                      ((OTHER,) if col.other else ()) + missing)
    if col.type == "integer" and col.bounds is not None:
        bins = col.bins if col.bins is not None else 10
        edges, labels = histogram_edges((float(col.bounds[0]), float(col.bounds[1])), bins,
                                        True)
        return Groups(by, tuple(labels) + missing, tuple(float(e) for e in edges))
    raise InvalidInputError(f"by: {by!r} is declared {col.type} in schema {schema.name!r}; "
                            "group by a categorical column with declared categories or an "
                            "integer column with declared bounds (and bins)")


def group_columns(schema: Any) -> list[str]:
    """The columns a plan item may be grouped by: those whose groups `groups_of` finds
    declared (the one rule, asked of each column; nothing read from rows)."""
    out = []
    for name in schema.names:
        try:
            groups_of(schema, name, None)
        except InvalidInputError:
            continue
        out.append(name)
    return out


def by_note(groups: Groups, epsilon: float, relation: Any) -> str:
    """The guarantee's note on a by-group item: what composes in parallel and why."""
    m = relation.steps
    person = (f"; a person's {m} rows may fall in up to {m} groups, but they are {m} "
              f"add/remove steps in total at epsilon/{m} per row, so epsilon {epsilon:.4g} "
              "per person" if relation.unit is not None and m > 1 else
              "; a replaced row may move between two groups: the two add/remove steps the "
              "replace relation charges" if relation.steps > 1 else "")
    return (f"by {groups.column}: one release per declared group ({len(groups.labels)}, "
            f"empty ones included); one row is in one group, so the groups compose in "
            f"parallel at epsilon {epsilon:.4g}{person}")


__all__ = ["MISSING", "Groups", "by_note", "group_columns", "groups_of"]
