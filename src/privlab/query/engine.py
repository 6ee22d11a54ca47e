"""Query engines: DuckDB (a read-only database file) and PostgreSQL (SQLAlchemy + psycopg).

The gateway only ever sends SQL that `privlab.query.planner` generated, with every literal
as a bound parameter. The engines add defence in depth: DuckDB opens the file read-only
with external access (files, extensions, HTTP) disabled and its configuration locked;
PostgreSQL sessions are `default_transaction_read_only` with a `statement_timeout`. An
engine error is reported to the analyst as a generic failure: its text may quote data.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from pathlib import Path
from typing import Any

from privlab.errors import InvalidInputError, PrivlabError


class EngineError(PrivlabError):
    """The database failed to run a generated query (HTTP 500; the message stays server-side)."""


class Engine:
    """Interface: `dialect`, `placeholder(i)`, `run(sql, params)`, `check_tables(config)`."""

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
        from privlab.query.planner import quote_ident

        for spec in config.tables.values():
            cols = ", ".join(quote_ident(c) for c in spec.columns)
            source = quote_ident(spec.source)
            if config.schema:
                source = f"{quote_ident(config.schema)}.{source}"
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

    def close(self) -> None:  # pragma: no cover - trivial
        pass


#: Integer types whose every value fits in a signed 64-bit integer: the planner compares
#: an `int` column as it is, with 64-bit literals and with other such columns, and clamps
#: it with 64-bit literals, so no comparison or clamp needs a narrowing cast.
_INT64 = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER",
          "INT1", "INT2", "INT4", "INT8"}
#: Types whose every value converts to DOUBLE PRECISION without an error: the planner reads
#: a `float` column only through `CAST(col AS DOUBLE PRECISION)` (comparisons, clamps, group
#: keys, joins), so these are compared, clamped and summed as doubles. DuckDB's 128-bit and
#: unsigned 64-bit integers stay below 3.5e38; a DECIMAL / NUMERIC(p, s) below 10^(p-s)
#: (see `_NUMERIC_DIGITS`); an unconstrained PostgreSQL numeric (up to 10^131072) is not here.
_DOUBLE_SAFE = _INT64 | {"FLOAT", "FLOAT4", "FLOAT8", "REAL", "DOUBLE", "DOUBLE PRECISION",
                         "HUGEINT", "UHUGEINT", "UBIGINT"}
#: A DECIMAL(p, s) / NUMERIC(p, s) holds |v| < 10^(p - s); casting it to DOUBLE PRECISION
#: (largest finite 1.8e308) cannot overflow while p - s <= this.
_NUMERIC_DIGITS = 307
#: Database types (upper case, without size or precision) each declared type accepts. A
#: whitelist: every expression the planner emits is total on every value of these types
#: (tests/soundness/test_gateway_types.py checks each with its extreme values on both engines).
_DECLARED: dict[str, set[str]] = {
    "int": _INT64,
    "float": _DOUBLE_SAFE | {"DECIMAL", "NUMERIC"},
    "text": {"VARCHAR", "TEXT", "CHARACTER VARYING", "CHARACTER", "BPCHAR", "CHAR", "STRING"},
    "bool": {"BOOLEAN", "BOOL"},
}
_PRECISION = re.compile(r"^\s*(\d+)\s*(?:,\s*(-?\d+)\s*)?$")


def type_problem(declared: str, db_type: str, column: str = "col") -> str | None:
    """None when a database column type (e.g. 'BIGINT', 'DECIMAL(10,2)', 'character
    varying(20)') holds values of the declared gateway type on which every generated
    expression is total; otherwise the fix, naming the cast to use (one line)."""
    base, _, rest = db_type.upper().partition("(")
    base = base.strip()
    wide_decimal = False
    if base in ("DECIMAL", "NUMERIC"):
        digits = _PRECISION.match(rest.rstrip(") "))
        wide_decimal = digits is None or \
            int(digits.group(1)) - int(digits.group(2) or 0) > _NUMERIC_DIGITS
        if declared == "float" and not wide_decimal:
            return None
    elif base in _DECLARED.get(declared, set()):
        return None
    if wide_decimal and declared in ("int", "float"):
        return (f"its values may exceed the double range, so a comparison or clamp could fail "
                f"on one row; declare it NUMERIC(p, s) with p - s <= {_NUMERIC_DIGITS} and "
                f"type float, or serve a view with CAST(LEAST(GREATEST({column}, -1e300), "
                f"1e300) AS DOUBLE PRECISION) AS {column} declared float")
    if declared == "int" and (base in _DOUBLE_SAFE or base in ("DECIMAL", "NUMERIC")):
        return (f"its values need not fit in 64 bits, so a comparison or clamp could fail on "
                f"one row; declare it float (compared and summed as DOUBLE PRECISION), or "
                f"serve a view with CAST({column} AS DOUBLE PRECISION) AS {column} declared "
                f"float")
    return (f"declare the matching type ({', '.join(sorted(_DECLARED.get(declared, ())))} "
            f"for {declared})")


def type_matches(declared: str, db_type: str) -> bool:
    """Whether a database column type holds values of the declared gateway type without
    any cast or comparison that could fail (`type_problem` says why not)."""
    return type_problem(declared, db_type) is None


class _Watchdog:
    """One daemon thread that interrupts DuckDB statements past their deadline (a timer
    thread per query would cost more than a small query)."""

    def __init__(self, tick_s: float = 0.1) -> None:
        self._active: dict[int, tuple[float, Any]] = {}
        self._lock = threading.Lock()
        self._tick = tick_s
        self._next = 0
        self._thread: threading.Thread | None = None

    def watch(self, deadline: float, cursor: Any) -> int:
        with self._lock:
            self._next += 1
            self._active[self._next] = (deadline, cursor)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="privlab-duckdb-watchdog",
                                                daemon=True)
                self._thread.start()
            return self._next

    def done(self, token: int) -> None:
        with self._lock:
            self._active.pop(token, None)

    def _loop(self) -> None:
        while True:
            time.sleep(self._tick)
            now = time.monotonic()
            # Under the lock: `done()` (called when a statement ends) waits for us, so a
            # cursor is never interrupted after its thread moved on to the next statement.
            with self._lock:
                late = [k for k, (d, _) in self._active.items() if d <= now]
                for k in late:
                    _, cursor = self._active.pop(k)
                    with contextlib.suppress(Exception):
                        cursor.interrupt()
                late = cursor = None  # hold no cursor while sleeping (no DuckDB leak)


class DuckDBEngine(Engine):
    """A DuckDB database file opened read-only; one cursor per thread."""

    dialect = "duckdb"

    def __init__(self, path: str | Path, timeout_s: float = 10.0, threads: int | None = None):
        import duckdb

        path = Path(path)
        if not path.is_file():
            raise InvalidInputError(f"database.url: DuckDB file {path} does not exist")
        config: dict[str, Any] = {"enable_external_access": False,
                                  "autoinstall_known_extensions": False,
                                  "autoload_known_extensions": False,
                                  "lock_configuration": True}
        if threads is not None:
            config["threads"] = int(threads)
        try:
            self._con = duckdb.connect(str(path), read_only=True, config=config)
        except duckdb.Error as exc:
            raise InvalidInputError(f"database.url: {path} could not be opened as a DuckDB "
                                    f"database ({type(exc).__name__})") from None
        self.timeout_s = float(timeout_s)
        self._local = threading.local()
        self._watchdog = _Watchdog()
        self._lock = threading.Lock()
        self._cursors: list[Any] = []
        self.path = path

    def _cursor(self) -> Any:
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            cur = self._con.cursor()
            self._local.cursor = cur
            with self._lock:
                self._cursors.append(cur)
        return cur

    def run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        import duckdb

        cur = self._cursor()
        token = self._watchdog.watch(time.monotonic() + self.timeout_s, cur)
        try:
            return cur.execute(sql, list(params)).fetchall()
        except duckdb.Error as exc:
            self._local.cursor = None  # an interrupted cursor is not reused
            with self._lock:
                if cur in self._cursors:
                    self._cursors.remove(cur)
            with contextlib.suppress(Exception):
                cur.close()
            raise EngineError(f"duckdb: {type(exc).__name__}") from None
        finally:
            self._watchdog.done(token)

    def result_types(self, sql: str) -> list[str]:
        import duckdb

        try:
            rows = self._cursor().execute(f"DESCRIBE {sql}").fetchall()
        except duckdb.Error as exc:
            raise EngineError(f"duckdb: {type(exc).__name__}") from None
        return [str(r[1]) for r in rows]

    def close(self) -> None:
        with self._lock:
            cursors, self._cursors = self._cursors, []
        for cur in cursors:
            with contextlib.suppress(Exception):
                cur.close()
        self._con.close()


class PostgresEngine(Engine):
    """PostgreSQL through SQLAlchemy; read-only sessions with a statement timeout."""

    dialect = "postgres"

    def __init__(self, url: str, timeout_s: float = 10.0, pool_size: int = 8):
        import sqlalchemy as sa
        from sqlalchemy.engine import make_url

        try:
            parsed = make_url(url)
        except Exception:
            raise InvalidInputError("database.url is not a valid SQLAlchemy URL") from None
        if parsed.get_backend_name() != "postgresql":
            raise InvalidInputError("database.url: only DuckDB files and postgresql URLs are "
                                    "supported")
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        options = (f"-c default_transaction_read_only=on "
                   f"-c statement_timeout={int(timeout_s * 1000)}")
        self._sa = sa
        self._engine = sa.create_engine(parsed, pool_size=pool_size, max_overflow=pool_size * 2,
                                        pool_pre_ping=True,
                                        connect_args={"options": options, "connect_timeout": 5})
        self.timeout_s = timeout_s

    @staticmethod
    def placeholder(i: int) -> str:
        return f":p{i}"

    def run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        sa = self._sa
        try:
            with self._engine.connect() as conn:
                result = conn.execute(sa.text(sql), {f"p{i}": v for i, v in enumerate(params)})
                rows = [tuple(r) for r in result.fetchall()]
                conn.rollback()
                return rows
        except sa.exc.SQLAlchemyError as exc:
            raise EngineError(f"postgres: {type(exc).__name__}") from exc

    def result_types(self, sql: str) -> list[str]:
        sa = self._sa
        try:
            with self._engine.connect() as conn:
                result = conn.exec_driver_sql(sql)
                cursor = result.cursor
                # with the type modifier: numeric(p, s) and numeric differ in what they hold
                mods = [cursor.pgresult.fmod(i) for i in range(len(cursor.description))]
                names = [conn.exec_driver_sql("SELECT format_type(%(oid)s, %(mod)s)",
                                              {"oid": d[1], "mod": mod}).scalar_one()
                         for d, mod in zip(cursor.description, mods, strict=True)]
                conn.rollback()
        except sa.exc.SQLAlchemyError as exc:
            raise EngineError(f"postgres: {type(exc).__name__}") from exc
        return [str(n) for n in names]

    def close(self) -> None:
        self._engine.dispose()


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
