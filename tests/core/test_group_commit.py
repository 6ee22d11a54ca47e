"""GroupCommitter: concurrent charges batched into one transaction, same guarantees."""

from __future__ import annotations

import threading
import time

import pytest

import privlab.core.group_commit as group_commit_module
from privlab.core.group_commit import GroupCommit, GroupCommitter
from privlab.core.ledger import BudgetLedger
from privlab.errors import BudgetExceededError


def _slow_commits(book: BudgetLedger, seconds: float) -> None:
    """Make every batch transaction slow, as a busy disk would, so that threads queue up."""
    book._in_transaction_hook = lambda: time.sleep(seconds)


def test_threads_are_batched_and_never_overspend(tmp_path):
    book = BudgetLedger(str(tmp_path / "ledger.db"))
    book.set_budget("alice", 1.0)
    _slow_commits(book, 0.02)
    group = GroupCommitter(book)
    outcomes: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(10):
            try:
                group.charge("alice", 0.01, description="q")
                res = "ok"
            except BudgetExceededError:
                res = "refused"
            with lock:
                outcomes.append(res)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # 160 requests of 0.01 against 1.0: exactly 100 succeed (exact decimal arithmetic)
    assert outcomes.count("ok") == 100 and outcomes.count("refused") == 60
    assert book.spent("alice") == (1.0, 0.0) and len(book.history("alice")) == 100
    assert [e.seq for e in book.history("alice")] == list(range(1, 101))
    assert book.verify().ok
    # 16 threads against 20 ms commits: far fewer transactions than charges
    assert group.requests == 160 and group.batches < 160 / 3


def test_a_failed_batch_fails_every_charge_in_it(tmp_path):
    book = BudgetLedger(str(tmp_path / "ledger.db"))
    book.set_budget("alice", 1.0)
    started = threading.Event()

    def hook() -> None:
        started.set()
        time.sleep(0.05)
        raise OSError("disk full")

    book._in_transaction_hook = hook
    group = GroupCommitter(book)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            group.charge("alice", 0.1)
        except BaseException as exc:  # noqa: BLE001 - the test collects whatever arrives
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 6 and all(isinstance(e, OSError) for e in errors)
    assert book.history() == [] and book.spent("alice") == (0.0, 0.0)


def test_alone_it_behaves_like_charge(tmp_path):
    book = BudgetLedger(str(tmp_path / "ledger.db"))
    book.set_budget("alice", 0.3)
    group = GroupCommitter(book)
    entry = group.charge("alice", 0.2, description="one")
    assert entry.remaining_epsilon == pytest.approx(0.1) and entry.description == "one"
    with pytest.raises(BudgetExceededError):
        group.charge("alice", 0.2)
    assert group.batches == 2 and group.requests == 2


def test_a_finished_batch_wakes_only_its_threads_and_the_next_leader(monkeypatch):
    """Each waiting thread wakes once: when its result is in, or to lead its batch; not on
    every batch before its own (a notify_all woke them all to sleep again: CPU under load)."""
    wakeups = [0]

    class Counting(threading.Condition):
        def wait(self, timeout=None):  # type: ignore[no-untyped-def]
            got = super().wait(timeout)
            if threading.current_thread().name.startswith("waiter"):  # not the test's own
                wakeups[0] += 1
            return got

    monkeypatch.setattr(group_commit_module.threading, "Condition", Counting)
    first, release = threading.Event(), threading.Event()

    def write_many(items):  # type: ignore[no-untyped-def]
        if items == [0]:  # the first batch holds until the others queue behind it
            first.set()
            release.wait(10)
        else:  # a disk flush: the threads woken for nothing would be back asleep by now
            time.sleep(0.05)
        return [i * 10 for i in items]

    group = GroupCommit(write_many)
    results: dict[int, int] = {}
    threads = [threading.Thread(target=lambda i=i: results.update({i: group.submit(i)}),
                                name=f"waiter{i}" if i else "first") for i in range(7)]
    threads[0].start()
    assert first.wait(10)
    for t in threads[1:]:
        t.start()
    deadline = time.monotonic() + 10
    while len(group._queue) < 6 and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.05)  # the six are waiting, not only queued
    release.set()
    for t in threads:
        t.join(10)
    assert results == {i: i * 10 for i in range(7)}
    assert group.batches == 2 and group.requests == 7
    assert wakeups[0] == 6  # one per waiting thread (the old notify_all: 11)
