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


class DuckDBEngine(Engine):
    """A DuckDB database file opened read-only; one cursor per thread."""

    dialect = "duckdb"

    def __init__(self, path: str | Path, timeout_s: float = 10.0, threads: int | None = None):
        import duckdb

        from privlab.utils.duck import connect

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
            self._con = connect(str(path), read_only=True, config=config)
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
