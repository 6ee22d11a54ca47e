"""Parse, validate and rewrite an analyst's SQL into a bounded aggregation the engine runs.

Whitelist, not blacklist: the query is parsed with sqlglot and every node of the tree must be
one this module knows how to translate; the SQL the engine runs is *generated* from the
checked tree (identifiers from the config, quoted by us; every literal a bound parameter), so
nothing the analyst typed reaches the engine as text. Accepted:

    SELECT <group keys and aggregates> FROM <declared table> [JOIN <declared join> ...]
    [WHERE <row filter>] [GROUP BY <columns with a public domain or partition selection>]
    [ORDER BY <outputs>] [LIMIT n] [OFFSET n]

Aggregates: COUNT(*), COUNT(col), COUNT(DISTINCT <privacy unit>), SUM(col), AVG(col),
MEDIAN(col), PERCENTILE_CONT/DISC(q) WITHIN GROUP (ORDER BY col), QUANTILE_CONT(col, q).
Row filters: comparisons of a column with a literal of its declared type (or of two columns
of one type), AND / OR / NOT, IN (literals), BETWEEN, IS [NOT] NULL, [I]LIKE 'pattern'.
No arithmetic, casts or functions in filters: a data-dependent runtime error (a division
by zero, a failed cast, an overflow) would itself reveal something about a row. For the
same reason a `float` column is always read as DOUBLE PRECISION (`value_ref`) and an `int`
column is admitted at start-up only with a type inside 64 bits: every comparison and clamp
the planner emits is then total on every value the column can hold (docs/gateway.md).

Refusal reasons name only the query text and the public config, never anything read from
the data. The rewrite clamps every aggregated value into its public bounds and keeps at most
`max_rows` rows per privacy unit (ROW_NUMBER() OVER (PARTITION BY unit ORDER BY random())),
so the sensitivity of every aggregate is known before the engine runs.

One module per job: `limits` (text limits, tokenizing, parsing), `cache` (the plan cache and
its lock), `validate` (the tree walk that accepts or refuses and builds the plan), `filters`
(WHERE and JOIN ... ON, translated as they are checked), `outputs` (the select list),
`sqlgen` (the generated SQL), `plan` (the plan objects); `Planner` composes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from privlab.errors import InvalidInputError
from privlab.query.config import GatewayConfig
from privlab.query.planner.cache import PlanCache, _Template, template_of
from privlab.query.planner.limits import (
    MAX_DEPTH,
    MAX_IN_LIST,
    MAX_LITERAL_CHARS,
    check_text,
    tokenize,
)
from privlab.query.planner.plan import (
    AccessDenied,
    AggKind,
    GroupKey,
    Measure,
    Output,
    Primitive,
    QueryPlan,
    QueryRefused,
    TableUse,
)
from privlab.query.planner.sqlgen import value_ref
from privlab.query.planner.validate import Validator, like_pattern

__all__ = ["MAX_DEPTH", "MAX_IN_LIST", "MAX_LITERAL_CHARS", "AccessDenied", "AggKind",
           "GroupKey", "Measure", "Output", "Planner", "Primitive", "QueryPlan", "QueryRefused",
           "TableUse", "like_pattern", "value_ref"]


class Planner:
    """Turns SQL text into a `QueryPlan` for one engine dialect ("duckdb" or "postgres").

    Plans are cached by (sql, analyst tables) in a small LRU, and by normalised SQL: a query
    that differs from a planned one only in the literals of its WHERE clause (passed to the
    engine as bound parameters, verbatim) reuses that plan with its own parameters, so a
    dashboard's stream of similar queries is tokenized, not parsed and planned again
    (`privlab.query.planner.cache`).
    """

    def __init__(self, config: GatewayConfig, dialect: str = "duckdb",
                 placeholder: Callable[[int], str] | None = None, cache_size: int = 512) -> None:
        if dialect not in ("duckdb", "postgres"):
            raise InvalidInputError(f"dialect must be 'duckdb' or 'postgres', got {dialect!r}")
        self.config = config
        self.dialect = dialect
        self.placeholder = placeholder or (lambda i: "?")
        self._validator = Validator(config, self.placeholder)
        self._plans = PlanCache(cache_size)

    @property
    def _templates(self) -> dict[tuple[Any, ...], _Template]:
        """The stored templates (tests and the planning benchmark look at them)."""
        return self._plans.templates

    def _plan(self, sql: str, allowed: tuple[str, ...] | None,
              tokens: list[Any] | None = None) -> QueryPlan:
        """Validate and rewrite without the cache (`Validator.check`)."""
        return self._validator.check(sql, allowed, tokens)

    def plan(self, sql: str, allowed_tables: tuple[str, ...] | None = None) -> QueryPlan:
        """Validate and rewrite `sql`; `QueryRefused` (400) otherwise (also for a table the
        analyst may not query: the same refusal as for a missing one)."""
        if not isinstance(sql, str):
            return self._plan(sql, allowed_tables)  # refuses: not a string
        key = (sql, allowed_tables)
        hit = self._plans.get(key)
        if hit is not None:
            return hit
        limits = self.config.limits
        tokens = tokenize(check_text(sql, limits.max_sql_chars), limits)
        shape, values = template_of(tokens)
        plan = None if shape is None else self._plans.bind((shape, allowed_tables), values)
        if plan is None:
            plan = self._plan(sql, allowed_tables, tokens)
            if shape is not None:
                self._plans.remember((shape, allowed_tables), plan, values)
        self._plans.put(key, plan)
        return plan
