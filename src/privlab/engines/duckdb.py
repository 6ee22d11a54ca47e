"""DuckDB engine: a database file opened read-only, external access (files, extensions, HTTP)
disabled and its configuration locked; statements past their deadline interrupted."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Any

from privlab.engines.base import Engine, EngineError
from privlab.errors import InvalidInputError


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


class _OpenFiles:
    """The DuckDB database files this process holds open, one configuration each.

    DuckDB opens a file once per process: a second connection with another configuration
    is refused ("different configuration"), and one with the same configuration shares the
    first's database. So every engine on a file shares one base connection (each engine
    gets its own connection to it by `cursor()`); the base is closed with its last engine,
    and an engine asking for another configuration is told why in one line.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, tuple[tuple[Any, ...], Any, int]] = {}

    def acquire(self, path: Path, config: dict[str, Any]) -> Any:
        """A new connection to `path`'s database, opened with `config` if not open yet."""
        import duckdb

        key, wanted = str(path.resolve()), tuple(sorted(config.items()))
        with self._lock:
            if key in self._open:
                held, base, users = self._open[key]
                if held != wanted:
                    raise InvalidInputError(
                        f"database.url: {path} is already open in this process with another "
                        f"DuckDB configuration ({_describe(held)}, asked {_describe(wanted)}); "
                        "DuckDB opens a file with one configuration per process: close the "
                        "other engine first or open this one with the same settings")
                self._open[key] = (held, base, users + 1)
                return base.cursor()
            base = None
            try:
                base = duckdb.connect(str(path), read_only=True, config=config)
                # no progress bar: it would write to the terminal, inside `--json` output
                base.execute("SET enable_progress_bar = false")
                base.execute("SET lock_configuration = true")
            except duckdb.Error as exc:
                if base is not None:
                    base.close()
                raise InvalidInputError(f"database.url: {path} could not be opened as a DuckDB "
                                        f"database ({_why(exc)})") from None
            self._open[key] = (wanted, base, 1)
            return base.cursor()

    def release(self, path: Path) -> None:
        key = str(path.resolve())
        with self._lock:
            held, base, users = self._open[key]
            if users > 1:
                self._open[key] = (held, base, users - 1)
                return
            del self._open[key]
        base.close()


def _describe(config: tuple[Any, ...]) -> str:
    threads = dict(config).get("threads")
    return f"threads={threads}" if threads is not None else "threads=default"


def _why(exc: Exception) -> str:
    if "different configuration" in str(exc):
        return ("another connection of this process holds it with another configuration; "
                "close it first")
    if "lock" in str(exc).lower():
        return "another process holds it open for writing"
    return type(exc).__name__


_OPEN = _OpenFiles()


def _release(path: Path, con: Any, cursors: list[Any], lock: threading.Lock) -> None:
    """Close an engine's cursors and connection, then its share of the file (no `self`:
    this is also the finalizer of an engine dropped open)."""
    with lock:
        held, cursors[:] = list(cursors), []
    for cur in held:
        with contextlib.suppress(Exception):
            cur.close()
    try:
        con.close()
    finally:
        _OPEN.release(path)


class DuckDBEngine(Engine):
    """A DuckDB database file opened read-only; one cursor per thread. Close it (`close()`
    or `with`): the file stays open, in this process's one configuration for it, until then.
    """

    dialect = "duckdb"

    def __init__(self, path: str | Path, timeout_s: float = 10.0, threads: int | None = None):
        path = Path(path)
        if not path.is_file():
            raise InvalidInputError(f"database.url: DuckDB file {path} does not exist")
        config: dict[str, Any] = {"enable_external_access": False,
                                  "autoinstall_known_extensions": False,
                                  "autoload_known_extensions": False}
        if threads is not None:
            config["threads"] = int(threads)
        self._con = _OPEN.acquire(path, config)
        self.timeout_s = float(timeout_s)
        self._local = threading.local()
        self._watchdog = _Watchdog()
        self._lock = threading.Lock()
        self._cursors: list[Any] = []
        self.path = path
        self._hold(lambda c=self._con, cs=self._cursors, lk=self._lock:
                   _release(path, c, cs, lk), f"DuckDBEngine({str(path)!r})")

    def _cursor(self) -> Any:
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            if self.closed:
                raise EngineError("duckdb: the engine is closed")
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
