"""GroupCommitter: concurrent charges batched into one transaction, same guarantees."""

from __future__ import annotations

import threading
import time

import pytest

from privlab.core.group_commit import GroupCommitter
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
