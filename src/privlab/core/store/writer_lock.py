"""`WriterLock`: one SQLite writer at a time across threads and processes, without polling.

SQLite lets one writer in at a time; the others wait in its busy handler, which sleeps in
steps of 1, 2, 5, 10, ... 100 ms before retrying. Two gateway workers that take turns every
millisecond lose most of their time in those sleeps (p99 latencies of 40-60 ms at a few
hundred queries a second). Taking an advisory `flock` on a lock file beside the database
first (retried every 50 us to 1 ms), and a thread lock inside the process, lets the next
writer in within a fraction of a millisecond of the last one's commit. SQLite's own locking
still guards correctness; this lock only decides who asks first, so a process that does not
use it (the sqlite3 shell, an older privlab) is still safe, merely slower to get in. A
writer that cannot get the lock within `timeout_s` goes on without it and leaves the wait
to SQLite's busy timeout, so a stuck holder delays others by a bounded time, never forever.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["WriterLock", "sqlite_file"]


def sqlite_file(database: str | None) -> Path | None:
    """The file of a SQLite URL's database, or None for an in-memory or URI database."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


#: The writer lock's file beside the SQLite database `<db>`: `<db>` + LOCK_SUFFIX.
LOCK_SUFFIX = "-writer.lock"


class WriterLock:
    """`with lock.held(): ...` holds the thread lock and an exclusive `flock` on `<db>-writer.lock`.

    The lock file is opened once per process (reopened after a fork, whose inherited
    descriptor would share the parent's lock)."""

    def __init__(self, database: Path, timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self.path = database.with_name(database.name + LOCK_SUFFIX)
        self._thread_lock = threading.Lock()
        self._fd: int | None = None
        self._pid: int | None = None

    def _descriptor(self) -> int:
        if self._fd is None or self._pid != os.getpid():
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            self._pid = os.getpid()
        return self._fd

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        with self._thread_lock:
            fd = self._descriptor()
            locked = self._acquire(fd)
            try:
                yield
            finally:
                if locked:
                    fcntl.flock(fd, fcntl.LOCK_UN)

    def _acquire(self, fd: int) -> bool:
        deadline = time.monotonic() + self.timeout_s
        pause = 50e-6
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(pause)
                pause = min(2 * pause, 1e-3)

    def close(self) -> None:
        with self._thread_lock:
            if self._fd is not None and self._pid == os.getpid():
                with contextlib.suppress(OSError):
                    os.close(self._fd)
            self._fd = None
