"""A SQLite store's writes use one held driver connection (issue 32: the pool's check-out and
reset-on-return were paid inside the writer lock on every commit). It must stay one
writer's at a time, be replaced after a failed transaction, never be the parent's after a
fork, and be closed with the store."""

from __future__ import annotations

import multiprocessing as mp
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from privlab.core.ledger import BudgetLedger


def _checkouts(book: BudgetLedger) -> list[int]:
    seen: list[int] = []
    sa.event.listen(book._engine, "checkout", lambda *a: seen.append(1))
    return seen


def test_writes_reuse_one_connection(tmp_path: Path) -> None:
    book = BudgetLedger(tmp_path / "l.db")
    book.set_budget("p", 10.0)
    book.charge("p", 0.1)
    seen = _checkouts(book)
    for _ in range(20):
        book.charge("p", 0.1)
    assert seen == []  # every charge on the held connection, none from the pool
    assert book.status("p").spent_epsilon_exact == Decimal("2.1")
    book.close()


def test_a_failed_transaction_takes_a_fresh_connection(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    book = BudgetLedger(tmp_path / "l.db")
    book.set_budget("p", 10.0)
    book.charge("p", 1.0)
    held = book._held._raw  # type: ignore[union-attr]

    def fail() -> None:
        raise RuntimeError("fault inside the transaction")

    monkeypatch.setattr(book, "_in_transaction_hook", fail)
    with pytest.raises(RuntimeError):
        book.charge("p", 1.0)
    assert book._held._raw is None  # type: ignore[union-attr]
    monkeypatch.setattr(book, "_in_transaction_hook", None)
    seen = _checkouts(book)
    book.charge("p", 2.0)
    assert len(seen) == 1 and book._held._raw is not held  # type: ignore[union-attr]
    assert book.status("p").spent_epsilon_exact == Decimal("3")  # the failed one: nothing
    book.close()


def test_closing_the_store_returns_the_connection(tmp_path: Path) -> None:
    book = BudgetLedger(tmp_path / "l.db")
    book.set_budget("p", 1.0)
    book.charge("p", 0.5)
    assert book._engine.pool.checkedout() == 1
    book.close()
    assert book._engine.pool.checkedout() == 0


def _charge_in_child(book: BudgetLedger, queue: Any) -> None:
    book.charge("p", 0.2)
    queue.put(id(book._held._raw))  # type: ignore[union-attr]


def test_a_forked_child_writes_on_its_own_connection(tmp_path: Path) -> None:
    if "fork" not in mp.get_all_start_methods():
        pytest.skip("the test is about a store used on both sides of fork(), and the fork start "
                    "method does not exist on this platform (Windows)")
    book = BudgetLedger(tmp_path / "l.db")
    book.set_budget("p", 1.0)
    book.charge("p", 0.1)
    parent_conn = book._held._raw  # type: ignore[union-attr]
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_charge_in_child, args=(book, queue))
    child.start()
    child_conn = queue.get(timeout=30)
    child.join(30)
    assert child.exitcode == 0 and child_conn != id(parent_conn)
    book.charge("p", 0.3)  # the parent's connection still works after the child's writes
    assert book._held._raw is parent_conn  # type: ignore[union-attr]
    assert book.status("p").spent_epsilon_exact == Decimal("0.6")
    book.close()
