"""Every engine the gateway, `DPQuery`, assess, synth and trajectory run on, behind one
protocol (`privlab.engines.base.Engine`) with two capabilities, asked by
`engine.supports(...)`: `QUERIES` (`dialect`, `placeholder(i)`, `run(sql, params)`,
`check_tables(config)`, `result_types(sql)`) and `GROUPED_COUNTS` (`engines.grouped`:
`columns`, `sql`, `frame`, `kind` over one table `__data`, what assess counts with):

- `engines.duckdb`: a DuckDB file, read-only (duckdb, a core dependency);
- `engines.postgres`: PostgreSQL through SQLAlchemy + psycopg (the `[postgres]` extra);
- `engines.spark`: Apache Spark (pyspark, the `[spark]` extra), embedded `local[*]` by
  default, a cluster through `--master` or Spark Connect (`SPARK_REMOTE`).

`engines.types` holds the start-up whitelist of database types per declared type. Engines
import their driver lazily, so importing this package needs no extra. This package imports
nothing from the rest of privlab but `privlab.errors`.
"""

from __future__ import annotations

from privlab.engines.base import GROUPED_COUNTS, QUERIES, Engine, EngineError, quote_ident
from privlab.engines.duckdb import DuckDBEngine
from privlab.engines.postgres import PostgresEngine
from privlab.engines.types import type_problem

__all__ = ["GROUPED_COUNTS", "QUERIES", "DuckDBEngine", "Engine", "EngineError",
           "PostgresEngine", "open_engine", "quote_ident", "type_problem"]


def open_engine(url: str, timeout_s: float = 10.0, threads: int | None = None) -> Engine:
    """DuckDB for a file path (or duckdb:///path), PostgreSQL for a postgresql URL.
    `threads`: DuckDB threads per query (None: DuckDB's default, every core).
    `spark:DIR` / `spark:catalog`: Apache Spark (`privlab.engines.spark`, the [spark] extra)."""
    if url.startswith("spark:"):
        from privlab.engines.spark import open_spark_engine

        return open_spark_engine(url, timeout_s=timeout_s)
    if url.startswith("duckdb:///"):
        return DuckDBEngine(url[len("duckdb:///"):], timeout_s=timeout_s, threads=threads)
    if "://" in url:
        return PostgresEngine(url, timeout_s=timeout_s)
    return DuckDBEngine(url, timeout_s=timeout_s, threads=threads)
