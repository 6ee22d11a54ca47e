"""The grouped-counts capability of the engine protocol: an engine over one table `__data`
that answers SQL in DuckDB's dialect and only ever sends counts back (`privlab.assess`'s
grouped path: DuckDB over Parquet in place, Spark, a declared schema's conformed view; the
sources themselves live in `privlab.assess.sources` and `assess.declared_sql`).

Why a capability of `Engine` rather than a protocol of its own: one engine idea (connection,
close, dropped-open warning, `supports`), so a caller holding any engine asks
`engine.supports(GROUPED_COUNTS)` and an engine may offer both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from privlab.engines.base import GROUPED_COUNTS, Engine

if TYPE_CHECKING:
    import pandas as pd

#: Engine type names (DuckDB and Spark spellings) read as integers / floats.
INT_TYPES = ("tinyint", "smallint", "int", "integer", "bigint", "hugeint", "utinyint",
             "usmallint", "uinteger", "ubigint", "long", "short", "byte", "int8", "int16",
             "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOAT_TYPES = ("double", "float", "real", "float4", "float8")


class GroupedCounts(Engine):
    """A table an engine can count: `columns` (name -> type name), `sql(text)` -> rows and
    `frame(text)` -> pandas. Queries are written in DuckDB's dialect against `__data`.
    `close()` (or `with`) releases its connection, if it holds one."""

    name = "engine"
    capabilities: ClassVar[frozenset[str]] = frozenset({GROUPED_COUNTS})
    columns: dict[str, str]

    def sql(self, text: str) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def frame(self, text: str) -> pd.DataFrame:
        raise NotImplementedError

    def kind(self, column: str) -> str:
        """"int", "float" or "other": how the engine's type of `column` is read."""
        t = self.columns[column].lower().split("(")[0].strip()
        if t.startswith("decimal") or t in INT_TYPES or t in FLOAT_TYPES:
            return "float" if t in FLOAT_TYPES or t.startswith("decimal") else "int"
        return "other"
