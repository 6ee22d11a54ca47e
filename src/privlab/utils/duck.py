"""Every DuckDB connection privlab opens: `connect` is `duckdb.connect` with the progress bar
off.

Why: DuckDB draws its progress bar on the process's stdout once a query runs for more than
two seconds when it believes a person is watching (as under `python -c`); in `--json` mode
that bar lands inside the JSON document (a studio job's `result.json` began with 5-40 KB of
bar). The option is per connection, not global, so it is set here, once, for every
connection; a configuration that asks to be locked is locked only after it is set."""

from __future__ import annotations

from typing import Any


def connect(database: str = ":memory:", *, read_only: bool = False,
            config: dict[str, Any] | None = None) -> Any:
    """`duckdb.connect(database, read_only, config)`, `enable_progress_bar` false."""
    import duckdb

    options = dict(config or {})
    lock = bool(options.pop("lock_configuration", False))
    con = duckdb.connect(database, read_only=read_only, config=options)
    try:
        con.execute("SET enable_progress_bar = false")
        if lock:
            con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con
