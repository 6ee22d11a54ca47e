"""WriterLock: SQLite writers queue on a lock file instead of SQLite's sleeping busy handler."""

import multiprocessing as mp
import threading
import time
from pathlib import Path

import pytest

from privlab.core.ledger import BudgetLedger
from privlab.core.writer_lock import WriterLock, sqlite_file


def test_sqlite_file_only_for_files() -> None:
    assert sqlite_file("/tmp/x.db") == Path("/tmp/x.db")
    assert sqlite_file(":memory:") is None
    assert sqlite_file("file:x?mode=memory") is None
    assert sqlite_file(None) is None


def _hold(path: str, ready: "mp.synchronize.Event", release: "mp.synchronize.Event") -> None:
    lock = WriterLock(Path(path))
    with lock.held():
        ready.set()
        release.wait(30)


def _record_acquisitions(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each `_acquire` in this process got the lock (False: gave up at its timeout)."""
    results: list[bool] = []
    acquire = WriterLock._acquire

    def spy(self: WriterLock, fd: int) -> bool:
        results.append(acquire(self, fd))
        return results[-1]

    monkeypatch.setattr(WriterLock, "_acquire", spy)
    return results


def test_excludes_another_process_and_wakes_when_released(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    acquired = _record_acquisitions(monkeypatch)
    db = tmp_path / "l.db"
    ctx = mp.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(str(db), ready, release))
    holder.start()
    assert ready.wait(60)
    got: list[float] = []

    def waiter() -> None:
        with WriterLock(db).held():
            got.append(time.monotonic())

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.3)
    assert got == []  # still excluded while the other process holds it
    released = time.monotonic()
    release.set()
    t.join(30)
    holder.join(30)
    assert not t.is_alive() and got and got[0] >= released
    # woken by the release and holding the lock, not let through by its 30 s timeout
    assert acquired == [True]


def test_threads_of_one_process_are_serialised(tmp_path: Path) -> None:
    lock = WriterLock(tmp_path / "l.db")
    inside, overlaps = [0], [0]

    def work() -> None:
        for _ in range(200):
            with lock.held():
                inside[0] += 1
                if inside[0] > 1:
                    overlaps[0] += 1
                inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == [0]


def test_a_stuck_holder_delays_a_charge_by_a_bounded_time(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A holder of the lock file that never commits anything (the database itself is not
    locked) delays a charge until the lock's timeout (the busy timeout), then the charge goes
    ahead without the lock while the holder still holds it."""
    db = tmp_path / "ledger.db"
    book = BudgetLedger(str(db), busy_timeout_s=0.5)
    book.set_budget("alice", 1.0)
    ctx = mp.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(str(db), ready, release))
    holder.start()
    try:
        assert ready.wait(60)
        acquired = _record_acquisitions(monkeypatch)
        entry = book.charge("alice", 0.25)
        holder_still_holds = holder.is_alive() and not release.is_set()
    finally:
        release.set()
        holder.join(30)
    assert entry.remaining_epsilon == 0.75
    assert acquired == [False] and holder_still_holds  # gave up at the timeout, then went on
    book.close()
