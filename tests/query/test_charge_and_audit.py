"""ChargeAndAudit: a charge and its audit row in one group-committed transaction."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from privlab.core.ledger import BudgetLedger, ChargeRequest
from privlab.errors import BudgetExceededError
from privlab.query.audit import AuditLog
from privlab.query.commit import BudgetView, ChargeAndAudit, Commit, shared_database


def _released(i: int) -> dict[str, object]:
    return {"decision": "released", "epsilon_spent": 0.01, "delta_spent": 0.0,
            "result": {"columns": ["n"], "rows": [[i]]}}


def _pair(tmp_path: Path) -> tuple[BudgetLedger, AuditLog, ChargeAndAudit]:
    db = str(tmp_path / "ledger.db")
    book = BudgetLedger(db)
    book.set_budget("alice", 1.0)
    log = AuditLog(db, key=b"k" * 32, checkpoint=tmp_path / "audit.head")
    assert shared_database(book, log)
    return book, log, ChargeAndAudit(book, log)


def test_only_one_database_is_shared(tmp_path: Path) -> None:
    with BudgetLedger(str(tmp_path / "a.db")) as book, AuditLog(str(tmp_path / "b.db")) as log:
        assert not shared_database(book, log)


def test_a_fault_inside_the_transaction_leaves_neither_row(tmp_path: Path) -> None:
    """The crash between charge and audit, simulated inside the transaction: after the
    charge and the audit row were written, before COMMIT."""
    book, log, joint = _pair(tmp_path)

    def crash() -> None:
        raise OSError("power cut")

    joint._in_transaction_hook = crash
    with pytest.raises(OSError, match="power cut"):
        joint.commit(Commit(ChargeRequest("alice", 0.5, description="q1"), "q1",
                            {"analyst": "alice"}, _released(1)))
    assert book.history("alice") == [] and book.spent("alice") == (0.0, 0.0)
    assert log.all() == []
    joint._in_transaction_hook = None
    entry = joint.commit(Commit(ChargeRequest("alice", 0.5, description="q2"), "q2",
                                {"analyst": "alice"}, _released(2)))
    rows = log.all()
    assert [(r.query_id, r.decision, r.ledger_entry_id) for r in rows] == \
        [("q2", "released", entry.entry_id)]
    assert log.verify() == [] and book.verify().ok
    log.close()
    book.close()


def test_threads_spend_exactly_the_budget_with_one_audit_row_each(tmp_path: Path) -> None:
    book, log, joint = _pair(tmp_path)
    book._in_transaction_hook = lambda: time.sleep(0.01)  # a busy disk: threads queue up
    outcomes: list[str] = []
    lock = threading.Lock()

    def worker(w: int) -> None:
        for i in range(10):
            qid = f"w{w}-{i}"
            try:
                joint.commit(Commit(ChargeRequest("alice", 0.01, description=qid), qid,
                                    {"analyst": "alice"}, _released(i)))
                res = "ok"
            except BudgetExceededError:
                res = "refused"
            with lock:
                outcomes.append(res)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # 120 charges of 0.01 against 1.0: exactly 100 granted (exact decimal arithmetic)
    assert outcomes.count("ok") == 100 and outcomes.count("refused") == 20
    assert book.spent("alice") == (1.0, 0.0) and book.verify().ok
    rows = log.all()
    assert len(rows) == 120 and log.verify() == []
    released = [r for r in rows if r.decision == "released"]
    assert len(released) == 100
    assert sorted(r.ledger_entry_id for r in released) == \
        sorted(e.entry_id for e in book.history("alice"))
    assert sum(r.decision == "budget_exceeded" for r in rows) == 20
    assert joint.batches < 120  # group-committed
    log.close()
    book.close()


def test_the_view_vouches_only_for_charges_that_fit(tmp_path: Path) -> None:
    book, log, joint = _pair(tmp_path)
    view = BudgetView(book)
    first = view.reserve(ChargeRequest("alice", 0.6))
    assert first is not None
    assert view.reserve(ChargeRequest("alice", 0.6)) is None  # 0.6 in flight
    view.release(first)
    entry = joint.commit(Commit(ChargeRequest("alice", 0.6), "q", {}, _released(0)))
    view.learn(entry)
    assert view.reserve(ChargeRequest("alice", 0.6)) is None  # 0.6 spent
    assert view.reserve(ChargeRequest("alice", 0.4)) is not None
    assert view.reserve(ChargeRequest("nobody", 0.1)) is None  # the charge path refuses it
    log.close()
    book.close()


def test_the_batch_transaction_holds_only_reads_and_writes(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """The charge's checks and the release's audit row are made in the caller's thread,
    before the batch takes the writer lock (issue 32); the stored row is the one
    `row_values` builds, with the entry id filled in inside, and an invalid charge is
    still refused and audited in the batch."""
    import privlab.core.ledger.book as book_module
    import privlab.query.commit as commit_module

    book, log, joint = _pair(tmp_path)
    lock = book._writer_lock._thread_lock  # type: ignore[union-attr]
    locked_at: list[tuple[str, bool]] = []
    checks, rows = book_module.check_charge, commit_module.row_values

    def counted_check(*args: object) -> object:
        locked_at.append(("check", lock.locked()))
        return checks(*args)

    def counted_row(*args: object, **kwargs: object) -> object:
        locked_at.append(("row", lock.locked()))
        return rows(*args, **kwargs)

    monkeypatch.setattr(book_module, "check_charge", counted_check)
    monkeypatch.setattr(commit_module, "row_values", counted_row)
    entry = joint.commit(Commit(ChargeRequest("alice", 0.25, description="q1"), "q1",
                                {"analyst": "alice", "sql": "SELECT 1"}, _released(7)))
    assert locked_at == [("check", False), ("row", False)]
    (row,) = log.all()
    assert (row.query_id, row.decision, row.ledger_entry_id, row.result) == \
        ("q1", "released", entry.entry_id, {"columns": ["n"], "rows": [[7]]})
    assert row.sql == "SELECT 1" and row.created_at.endswith("+00:00")
    with pytest.raises(Exception, match="epsilon"):
        joint.commit(Commit(ChargeRequest("alice", -1.0, description="bad"), "q2",
                            {"analyst": "alice"}, _released(8)))
    assert [r.decision for r in log.all()] == ["released", "error"]
    assert book.spent("alice") == (0.25, 0.0)
    assert log.verify() == [] and book.verify().ok
    log.close()
    book.close()
