"""Every DuckDB connection privlab opens: `connect` is `duckdb.connect` with the progress bar
off.

Why: DuckDB draws its progress bar on the process's stdout once a query runs for more than
two seconds when it believes a person is watching (a `__main__` without a file: `python -c`,
a REPL, a notebook); in `--json` mode that bar lands inside the JSON document (a studio job's
`result.json` began with 5-40 KB of bar). The option belongs to each connection, not to the
database, so it is set here, for every connection; a configuration that asks to be locked
(`lock_configuration`, the gateway's engine) is locked right after.

One corner stays: DuckDB shares one database instance per file within a process, so a second
connection to a file whose configuration an earlier one locked cannot change the option; it
keeps DuckDB's default (already off unless the process looks interactive) rather than fail to
open."""

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
        locked = setting(con, "lock_configuration")
        if progress_bar(con) and not locked:  # locked: by an earlier connection, see above
            con.execute("SET enable_progress_bar = false")
        if lock and not locked:
            con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


def progress_bar(con: Any) -> bool:
    """Whether the connection would draw DuckDB's progress bar."""
    return setting(con, "enable_progress_bar")


def setting(con: Any, name: str) -> bool:
    # fetchall: a result left unfinished would block the connection's next statement
    return bool(con.execute(f"SELECT current_setting('{name}')").fetchall()[0][0])
