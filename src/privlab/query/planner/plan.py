"""What the planner produces: the plan objects, the plan under construction, and the refusals.

A refusal's message depends only on the query text and the public config, never on data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, Literal

from privlab.errors import InvalidInputError, PrivlabError
from privlab.query.config import ColumnSpec, TableSpec

#: "key", "count", "units", "sum", "avg", "quantile", or the name of a statistic of the
#: registry with an SQL form (`privlab.measure.stats`, e.g. "variance", "stddev")
AggKind = str


class QueryRefused(InvalidInputError):
    """The query cannot be answered with differential privacy (HTTP 400).

    The message depends only on the query text and the public config.
    """

    status_code = 400


class AccessDenied(PrivlabError):
    """Unknown key (HTTP 401) or a table or record of someone else (HTTP 403)."""

    exit_code = 1
    status_code = 403


def refuse(message: str) -> QueryRefused:
    return QueryRefused(message)


@dataclass(frozen=True)
class TableUse:
    alias: str  # our alias in the generated SQL: t0, t1, ...
    spec: TableSpec
    names: tuple[str, ...]  # how the query may refer to it (table name, its alias)


@dataclass(frozen=True)
class Measure:
    """A column value fed to an aggregate, clamped into its bounds when numeric."""

    index: int
    table: TableUse
    column: ColumnSpec
    clamp: tuple[float, float] | None

    @property
    def key(self) -> str:
        return f"__m{self.index}"

    @property
    def label(self) -> str:
        return self.column.name


@dataclass(frozen=True)
class GroupKey:
    index: int
    table: TableUse
    column: ColumnSpec

    @property
    def key(self) -> str:
        return f"__g{self.index}"

    @property
    def domain(self) -> tuple[Any, ...] | None:
        return self.column.domain


@dataclass(frozen=True)
class Output:
    """One column of the answer."""

    name: str
    kind: AggKind
    group: int | None = None  # kind == "key"
    measure: int | None = None  # None: COUNT(*)
    q: float | None = None  # quantiles

    def describe(self, plan: QueryPlan) -> str:
        col = "*" if self.measure is None else plan.measures[self.measure].label
        if self.kind == "key":
            return f"group key {plan.groups[self.group or 0].column.name}"
        if self.kind == "quantile":
            return f"quantile({col}, {self.q:g})"
        return f"{self.kind}({col})"


@dataclass(frozen=True)
class Primitive:
    """A noisy measurement that consumes budget: count, sum, centred sum, centred sum of
    squares (csq), units, quantile."""

    kind: Literal["count", "sum", "csum", "csq", "units", "quantile"]
    measure: int | None = None
    q: float | None = None


@dataclass(frozen=True)
class QueryPlan:
    """A validated query: what to compute, how to compute it, and what it costs."""

    sql: str
    params: tuple[Any, ...]
    quantile_sql: str | None
    quantile_params: tuple[Any, ...]
    tables: tuple[TableUse, ...]
    measures: tuple[Measure, ...]
    groups: tuple[GroupKey, ...]
    outputs: tuple[Output, ...]
    primitives: tuple[Primitive, ...]
    order: tuple[tuple[int, bool], ...]  # (output index, descending)
    limit: int | None
    offset: int
    max_rows: int  # contribution bound per privacy unit
    user_level: bool  # a privacy-unit column exists (else: one row = one person)
    partition_selection: bool
    result_columns: tuple[str, ...]  # column names of `sql`'s result
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def table_names(self) -> tuple[str, ...]:
        return tuple(t.spec.name for t in self.tables)

    @property
    def n_cells(self) -> int | None:
        """Number of output groups when the domain is public, None with partition selection."""
        if self.partition_selection:
            return None
        return reduce(lambda a, g: a * len(g.domain or ()), self.groups, 1)

    def cells(self) -> list[tuple[Any, ...]]:
        """Every cell of the public domain (cartesian product, declared order)."""
        out: list[tuple[Any, ...]] = [()]
        for g in self.groups:
            out = [c + (v,) for c in out for v in (g.domain or ())]
        return out


@dataclass
class PlanState:
    """The plan under construction while the query tree is checked: the tables, measures
    and group keys met so far, and the bound parameters of the SQL generated so far."""

    tables: list[TableUse] = field(default_factory=list)
    measures: list[Measure] = field(default_factory=list)
    groups: list[GroupKey] = field(default_factory=list)
    params: list[Any] = field(default_factory=list)
    placeholder: Callable[[int], str] = lambda i: "?"

    def param(self, value: Any) -> str:
        self.params.append(value)
        return self.placeholder(len(self.params) - 1)
