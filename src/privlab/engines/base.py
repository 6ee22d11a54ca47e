"""The engine protocol every engine implements (DuckDB, PostgreSQL, Spark), the engine error,
identifier quoting, and the start-up check that the database matches the declared tables.

The gateway only ever sends SQL that `privlab.query.planner` generated, with every literal
as a bound parameter; an engine runs it and returns rows. An engine error is reported to the
analyst as a generic failure: its text may quote data.
"""

from __future__ import annotations

from typing import Any

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


class Engine(Closing):
    """The protocol: `dialect` (the SQL the planner generates for it), `placeholder(i)` (the
    i-th bound parameter), `run(sql, params)` (rows), `check_tables(config)` (start-up),
    `result_types(sql)` and `close()` (idempotent; `with engine:` closes too; an engine
    dropped open warns, `privlab.utils.closing`). Subclasses: `DuckDBEngine`,
    `PostgresEngine`, `SparkEngine` (which overrides `check_tables`)."""

    dialect = "duckdb"

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
