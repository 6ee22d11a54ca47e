"""The engine protocol every engine implements (DuckDB, PostgreSQL, Spark, and the assessment's
grouped-count sources), its capabilities, the engine error, identifier quoting, and the
start-up check that the database matches the declared tables.

One protocol, two capabilities: `QUERIES` (parameterised SQL in the engine's dialect: what
the gateway, `DPQuery`, synth and trajectory send) and `GROUPED_COUNTS` (counts grouped over
one table `__data`: what `privlab.assess` sends; `privlab.engines.grouped`). A caller asks
`engine.supports(...)` or `engine.require(...)` rather than the engine's class.

The gateway only ever sends SQL that `privlab.query.planner` generated, with every literal
as a bound parameter; an engine runs it and returns rows. An engine error is reported to the
analyst as a generic failure: its text may quote data.
"""

from __future__ import annotations

from typing import Any, ClassVar

from privlab.engines.types import type_problem
from privlab.errors import InvalidInputError, PrivlabError
from privlab.utils.closing import Closing


def quote_ident(name: str) -> str:
    """A SQL identifier in double quotes (embedded quotes doubled): every engine's dialect."""
    return '"' + name.replace('"', '""') + '"'


def qualified_source(source: str, schema: str | None) -> str:
    """A declared table's source, schema-qualified when the config names a schema (the
    planner's generated SQL and the engines' start-up check read the same table)."""
    if schema:
        return f"{quote_ident(schema)}.{quote_ident(source)}"
    return quote_ident(source)


class EngineError(PrivlabError):
    """The database failed to run a generated query (HTTP 500; the message stays server-side)."""


#: Parameterised SQL in `dialect`: `placeholder(i)`, `run(sql, params)`, `check_tables`,
#: `result_types` (the gateway's engines: `DuckDBEngine`, `PostgresEngine`, `SparkEngine`).
QUERIES = "queries"
#: Counts grouped over one table `__data`: `columns`, `sql(text)`, `frame(text)`, `kind(col)`
#: (`privlab.engines.grouped.GroupedCounts`: DuckDB over Parquet, Spark, a conformed view).
GROUPED_COUNTS = "grouped_counts"


class Engine(Closing):
    """The protocol: `capabilities` (which of `QUERIES`, `GROUPED_COUNTS` it offers;
    `supports` / `require` ask), `close()` (idempotent; `with engine:` closes too; an engine
    dropped open warns, `privlab.utils.closing`) and, under `QUERIES`: `dialect` (the SQL the
    planner generates for it), `placeholder(i)` (the i-th bound parameter), `run(sql, params)`
    (rows), `check_tables(config)` (start-up), `result_types(sql)`. Subclasses:
    `DuckDBEngine`, `PostgresEngine`, `SparkEngine` (which overrides `check_tables`), and
    `engines.grouped.GroupedCounts` for the grouped-counts capability."""

    dialect = "duckdb"
    capabilities: ClassVar[frozenset[str]] = frozenset({QUERIES})

    def supports(self, capability: str) -> bool:
        """Whether this engine offers `capability` (`QUERIES`, `GROUPED_COUNTS`)."""
        return capability in self.capabilities

    def require(self, capability: str, what: str = "this use") -> None:
        """TypeError naming the engine and the missing capability (a wiring mistake)."""
        if not self.supports(capability):
            raise TypeError(f"{what} needs an engine with {capability!r}; "
                            f"{type(self).__name__} offers {sorted(self.capabilities)}")

    @staticmethod
    def placeholder(i: int) -> str:
        return "?"

    def run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def check_tables(self, config: Any) -> None:
        """Fail at start-up when a declared table or column is missing from the database, or
        when a column's database type does not match its declared type.

        The type check is part of the privacy argument: the planner only compares a column
        with literals of its *declared* type, so a text column declared `int` would make
        the engine cast every row, and a cast that fails on one row is an error that
        reveals that row. The catalog types are schema, not rows: reading them is public.
        """
        for spec in config.tables.values():
            cols = ", ".join(quote_ident(c) for c in spec.columns)
            source = qualified_source(spec.source, config.schema)
            try:
                types = self.result_types(f"SELECT {cols} FROM {source} WHERE 1 = 0")
            except EngineError:
                raise InvalidInputError(
                    f"tables.{spec.name}: table {spec.source!r} or one of its declared columns "
                    "is missing from the database") from None
            for (name, col), db_type in zip(spec.columns.items(), types, strict=True):
                problem = type_problem(col.type, db_type, name)
                if problem is not None:
                    raise InvalidInputError(f"tables.{spec.name}.columns.{name}.type: declared "
                                            f"{col.type} but the database column is {db_type}; "
                                            f"{problem}")

    def result_types(self, sql: str) -> list[str]:
        """Upper-case type names of the columns of `sql`'s result (run with no rows)."""
        raise NotImplementedError
