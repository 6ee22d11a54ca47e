"""BudgetLedger: exact charging, refusal past the budget, contention and crash safety.

The PostgreSQL variants run only when PRIVLAB_TEST_POSTGRES_URL is set (each test then gets
its own schema, dropped afterwards: the `ledger_url` fixture of tests/core/conftest.py).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sqlite3
import time
from decimal import Decimal
from pathlib import Path

import pytest

from privlab.core.guarantee import PrivacyGuarantee
from privlab.core.ledger import BudgetLedger, ChargeRequest
from privlab.errors import BudgetExceededError, InvalidInputError, PrivlabError

CTX = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")


# --------------------------------------------------------------------------- basics

def test_charge_then_refuse_past_budget(ledger_url):
    book = BudgetLedger(ledger_url)
    book.set_budget("alice", 1.0, 1e-5)
    entry = book.charge("alice", 0.4, 1e-6, description="count of age")
    assert entry.epsilon == 0.4 and entry.delta == 1e-6
    assert (entry.remaining_epsilon, entry.remaining_delta) == (0.6, 9e-6)
    assert entry.entry_id >= 1 and entry.created_at.tzinfo is not None
    with pytest.raises(BudgetExceededError, match="exceed its budget"):
        book.charge("alice", 0.7)
    with pytest.raises(BudgetExceededError, match="delta"):
        book.charge("alice", 0.1, 1e-5)
    # refused charges wrote nothing
    assert book.spent("alice") == (0.4, 1e-6)
    assert book.remaining("alice") == (0.6, 9e-6)
    assert [e.entry_id for e in book.history("alice")] == [entry.entry_id]
    assert book.principals() == ["alice"]
    assert book.verify().ok


def test_exact_arithmetic_ten_tenths(ledger_url):
    book = BudgetLedger(ledger_url)
    book.set_budget("p", 1.0)
    for _ in range(10):
        last = book.charge("p", 0.1)
    assert last.remaining_epsilon == 0.0 and last.spent_epsilon_exact == Decimal(1)
    with pytest.raises(BudgetExceededError):
        book.charge("p", 0.1)
    with pytest.raises(BudgetExceededError):
        book.charge("p", 1e-15)
    assert book.spent("p") == (1.0, 0.0) and len(book.history("p")) == 10
    # in floats, 0.1 + 0.2 > 0.3 and ten 0.1s sum to 0.9999999999999999: no drift here
    book.set_budget("q", 0.3)
    book.charge("q", 0.1)
    book.charge("q", 0.2)
    assert book.remaining("q") == (0.0, 0.0)


def test_two_hundred_small_charges_no_drift(tmp_path):
    book = BudgetLedger(tmp_path / "l.db")
    book.set_budget("p", 1.0)
    for _ in range(200):
        book.charge("p", 0.005)
    with pytest.raises(BudgetExceededError):
        book.charge("p", 0.005)
    assert book.status("p").spent_epsilon_exact == Decimal(1)
    assert book.status("p").n_charges == 200


def test_charge_many_applies_in_order_and_refuses_item_by_item(ledger_url):
    """Group commit: one transaction, each request checked against the totals before it."""
    book = BudgetLedger(ledger_url)
    book.set_budget("alice", 1.0)
    book.set_budget("bob", 0.5)
    results = book.charge_many([
        ChargeRequest("alice", 0.6, description="a1"),
        ChargeRequest("bob", 0.3, description="b1"),
        ChargeRequest("alice", 0.6, description="a2"),  # 1.2 > 1.0: refused, nothing written
        ChargeRequest("nobody", 0.1),  # unknown principal: refused
        ChargeRequest("alice", -1),  # invalid amount: refused before the transaction
        ChargeRequest("alice", 0.4, description="a3"),  # exactly exhausts alice
        ChargeRequest("bob", 0.2, description="b2"),  # exactly exhausts bob
    ])
    kinds = [type(r).__name__ for r in results]
    assert kinds == ["LedgerEntry", "LedgerEntry", "BudgetExceededError", "InvalidInputError",
                     "InvalidInputError", "LedgerEntry", "LedgerEntry"]
    assert [results[0].remaining_epsilon, results[5].remaining_epsilon] == [0.4, 0.0]
    assert results[1].seq == 1 and results[6].seq == 2 and results[6].remaining_epsilon == 0.0
    assert [e.description for e in book.history("alice")] == ["a1", "a3"]
    assert book.spent("alice") == (1.0, 0.0) and book.spent("bob") == (0.5, 0.0)
    assert book.verify().ok
    # entries are durable: a fresh ledger object on the same store sees them
    assert len(BudgetLedger(ledger_url).history()) == 4


def test_nul_in_a_description_is_stored_as_text(ledger_url):
    """PostgreSQL text cannot hold NUL: the ledger stores it as the characters \\x00."""
    book = BudgetLedger(ledger_url)
    book.set_budget("alice", 1.0)
    entry = book.charge("alice", 0.1, description="query\x00; DROP")
    assert entry.description == "query\\x00; DROP"
    assert [e.description for e in book.history("alice")] == ["query\\x00; DROP"]


def test_charge_many_rolls_back_the_whole_batch_on_failure(ledger_url):
    book = BudgetLedger(ledger_url)
    book.set_budget("alice", 1.0)

    def boom() -> None:
        raise RuntimeError("crash inside the batch transaction")

    book._in_transaction_hook = boom
    with pytest.raises(RuntimeError):
        book.charge_many([ChargeRequest("alice", 0.1), ChargeRequest("alice", 0.2)])
    book._in_transaction_hook = None
    assert book.history() == [] and book.spent("alice") == (0.0, 0.0)


def test_unknown_principal_and_bad_amounts(ledger_url):
    book = BudgetLedger(ledger_url)
    with pytest.raises(InvalidInputError, match="privlab budget set"):
        book.charge("nobody", 0.1)
    with pytest.raises(InvalidInputError, match="privlab budget set"):
        book.remaining("nobody")
    book.set_budget("p", 1.0, 0.5)
    for eps in (0, -1.0, float("nan"), float("inf"), True, "abc", None, 2e9):
        with pytest.raises(InvalidInputError, match="epsilon"):
            book.charge("p", eps)
    for delta in (-0.1, 1.0, float("nan")):
        with pytest.raises(InvalidInputError, match="delta"):
            book.charge("p", 0.1, delta)
    for name in ("", "   ", "a\nb", 5, "x" * 201):
        with pytest.raises(InvalidInputError, match="principal"):
            book.set_budget(name, 1.0)
    with pytest.raises(InvalidInputError, match="epsilon"):
        book.set_budget("p", 0)
    assert book.history() == [] and book.principals() == ["p"]


def test_set_budget_changes_are_audited(ledger_url):
    book = BudgetLedger(ledger_url)
    book.set_budget("p", 1.0)
    book.charge("p", 0.75)
    with pytest.raises(InvalidInputError, match="already spent"):
        book.set_budget("p", 0.5)
    assert book.set_budget("p", 0.75).remaining_epsilon_exact == 0  # freeze at what was spent
    with pytest.raises(BudgetExceededError):
        book.charge("p", 0.01)
    book.set_budget("p", 2.0, 1e-6)
    assert book.remaining("p") == (1.25, 1e-6)
    changes = book.budget_changes("p")
    assert [float(c.budget_epsilon_exact) for c in changes] == [1.0, 0.75, 2.0]
    assert changes[0].previous_epsilon_exact is None
    assert changes[2].previous_epsilon_exact == Decimal("0.75")


def test_guarantee_is_stored_and_checked(ledger_url):
    book = BudgetLedger(ledger_url)
    book.set_budget("p", 5.0, 1e-5)
    g = PrivacyGuarantee(0.5, 1e-6, mechanism="gaussian")
    entry = book.charge("p", 0.5, 1e-6, description="mean", guarantee=g)
    assert entry.guarantee["mechanism"] == "gaussian"
    assert book.history("p")[0].guarantee == g.to_dict()
    assert book.history("p")[0].description == "mean"
    with pytest.raises(InvalidInputError, match="larger than the charged"):
        book.charge("p", 0.1, guarantee={"epsilon": 0.5})
    with pytest.raises(InvalidInputError, match="not differentially private"):
        book.charge("p", 0.1, guarantee=PrivacyGuarantee.not_private("raw", "no noise"))
    assert len(book.history("p")) == 1


def test_a_guarantee_serialised_once_is_stored_and_checked_like_its_dict(ledger_url):
    """`GuaranteeJSON` (the gateway's guarantee, serialised once per measurement) stores the
    text the dict would, and each charge still refuses a claim above what it pays."""
    from privlab.core.ledger.amounts import GuaranteeJSON

    book = BudgetLedger(ledger_url)
    book.set_budget("p", 5.0, 1e-5)
    g = PrivacyGuarantee(0.5, 1e-6, mechanism="gaussian")
    once = GuaranteeJSON.of(g.to_dict())
    a = book.charge("p", 0.5, 1e-6, description="dict", guarantee=g.to_dict())
    b = book.charge("p", 0.5, 1e-6, description="once", guarantee=once)
    assert a.guarantee == b.guarantee == g.to_dict()
    assert [e.guarantee for e in book.history("p")] == [g.to_dict(), g.to_dict()]
    with pytest.raises(InvalidInputError, match="guarantee epsilon=0.5 is larger than"):
        book.charge("p", 0.4, 1e-6, guarantee=once)
    with pytest.raises(InvalidInputError, match="guarantee delta=1e-06 is larger than"):
        book.charge("p", 0.5, 0.0, guarantee=once)
    with pytest.raises(InvalidInputError, match="JSON serialisable"):
        GuaranteeJSON.of({"epsilon": float("inf")})
    with pytest.raises(InvalidInputError, match="not differentially private"):
        GuaranteeJSON.of(PrivacyGuarantee.not_private("raw", "no noise"))
    assert len(book.history("p")) == 2


def test_reserve_commits_before_the_body_and_keeps_the_charge(ledger_url):
    book = BudgetLedger(ledger_url)
    book.set_budget("p", 1.0)
    other = BudgetLedger(ledger_url)  # another connection sees the charge inside the body
    with book.reserve("p", 0.25, description="first") as entry:
        assert [e.entry_id for e in other.history("p")] == [entry.entry_id]
    with pytest.raises(RuntimeError), book.reserve("p", 0.25):
        raise RuntimeError("mechanism failed")
    assert other.spent("p") == (0.5, 0.0)  # the failed release is still charged
    with pytest.raises(BudgetExceededError), book.reserve("p", 0.75):
        pytest.fail("the body must not run when the charge is refused")


def test_entries_are_append_only(tmp_path):
    book = BudgetLedger(tmp_path / "l.db")
    book.set_budget("p", 1.0)
    book.charge("p", 0.5)
    con = sqlite3.connect(tmp_path / "l.db")
    for sql in ("DELETE FROM privlab_entries", "UPDATE privlab_entries SET epsilon = '0'",
                "DELETE FROM privlab_budget_changes"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            con.execute(sql)
    con.close()
    assert book.spent("p") == (0.5, 0.0)


def test_verify_detects_tampering(tmp_path):
    book = BudgetLedger(tmp_path / "l.db")
    book.set_budget("p", 1.0)
    book.charge("p", 0.5)
    assert book.verify().ok
    con = sqlite3.connect(tmp_path / "l.db")
    with con:
        con.execute("UPDATE privlab_principals SET spent_epsilon = '0.1'")
    con.close()
    check = book.verify()
    assert not check.ok and any("sum of entries" in p for p in check.problems)


def test_locations(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    BudgetLedger("plain.db").set_budget("p", 1.0)  # a bare file name, no directory part
    assert (tmp_path / "plain.db").is_file()
    assert BudgetLedger(f"sqlite:///{tmp_path / 'plain.db'}").remaining("p") == (1.0, 0.0)
    with pytest.raises(InvalidInputError, match="does not exist"):
        BudgetLedger(tmp_path / "missing" / "l.db")
    with pytest.raises(InvalidInputError, match="directory"):
        BudgetLedger(tmp_path)
    with pytest.raises(InvalidInputError, match="not supported"):
        BudgetLedger("mysql://u@h/db")
    (tmp_path / "data.csv").write_text("a,b\n" + "1,2\n" * 500)
    with pytest.raises(InvalidInputError, match="not a SQLite database"):
        BudgetLedger(tmp_path / "data.csv")


# --------------------------------------------------------------------------- contention

N_PROCS, N_CHARGES = 8, 200
AMOUNTS = (Decimal("0.1"), Decimal("0.05"), Decimal("0.3"), Decimal("0.01"))
BUDGET = Decimal("120")  # the 1600 charges below total 184; only about two thirds fit


def _charge_loop(url: str, worker: int, barrier, results) -> None:
    book = BudgetLedger(url)
    barrier.wait()
    ok: list[tuple[int, str, float]] = []
    refused = 0
    errors: list[str] = []
    for i in range(N_CHARGES):
        amount = AMOUNTS[(worker + i) % len(AMOUNTS)]
        try:
            entry = book.charge("shared", float(amount), description=f"w{worker}")
            ok.append((entry.entry_id, str(amount), entry.remaining_epsilon))
        except BudgetExceededError:
            refused += 1
        except Exception as exc:  # reported, and fails the test in the parent
            errors.append(f"{type(exc).__name__}: {exc}")
    results.put((worker, ok, refused, errors))


def test_contention_never_overspends(ledger_url):
    book = BudgetLedger(ledger_url)
    book.set_budget("shared", BUDGET)
    barrier, results = CTX.Barrier(N_PROCS), CTX.Queue()
    procs = [CTX.Process(target=_charge_loop, args=(ledger_url, w, barrier, results))
             for w in range(N_PROCS)]
    start = time.perf_counter()
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    elapsed = time.perf_counter() - start
    assert all(p.exitcode == 0 for p in procs)
    assert [e for *_, errs in outcomes for e in errs] == []
    successes = [s for _, ok, _, _ in outcomes for s in ok]
    refusals = sum(r for _, _, r, _ in outcomes)
    assert len(successes) + refusals == N_PROCS * N_CHARGES
    assert refusals > 0 and len(successes) > 0
    assert all(rem >= 0 for _, _, rem in successes)

    status = book.status("shared")
    history = book.history("shared")
    charged = sum((Decimal(a) for _, a, _ in successes), Decimal(0))
    assert status.spent_epsilon_exact <= BUDGET
    assert len(history) == len(successes) == status.n_charges
    assert sorted(e.entry_id for e in history) == sorted(i for i, _, _ in successes)
    assert sum((e.epsilon_exact for e in history), Decimal(0)) == status.spent_epsilon_exact
    assert status.spent_epsilon_exact == charged
    # nothing that was refused would have fitted at the end: the budget really ran out
    assert status.remaining_epsilon_exact < max(AMOUNTS)
    assert book.verify().ok
    switches = sum(a.description != b.description for a, b in zip(history, history[1:],
                                                                   strict=False))
    print(f"\n[{book.dialect}] {N_PROCS}x{N_CHARGES} charges in {elapsed:.2f} s: "
          f"{len(successes)} ok, {refusals} refused, spent {status.spent_epsilon_exact} of "
          f"{BUDGET}, {switches} switches between writers")


# --------------------------------------------------------------------------- crashes

def _hang_inside_charge(url: str, ready, n_before: int) -> None:
    book = BudgetLedger(url)
    for _ in range(n_before):
        book.charge("p", 0.1)

    def hang() -> None:  # runs after INSERT and UPDATE, before COMMIT
        ready.set()
        time.sleep(120)

    book._in_transaction_hook = hang
    book.charge("p", 0.1, description="never committed")


def _charge_forever(url: str, log_path: str) -> None:
    book = BudgetLedger(url)
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    while True:
        entry = book.charge("p", 0.001)
        os.write(fd, f"{entry.entry_id}\n".encode())


def _assert_consistent(url: str) -> BudgetLedger:
    book = BudgetLedger(url, busy_timeout_s=5)
    check = book.verify()
    assert check.ok, check
    status = book.status("p")
    entries = book.history("p")
    assert sum((e.epsilon_exact for e in entries), Decimal(0)) == status.spent_epsilon_exact
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
    return book


def test_kill_inside_the_transaction_leaves_no_trace(ledger_url):
    BudgetLedger(ledger_url).set_budget("p", 10.0)
    ready = CTX.Event()
    child = CTX.Process(target=_hang_inside_charge, args=(ledger_url, ready, 5))
    child.start()
    try:
        assert ready.wait(60), "the child never reached the inside of its charge"
        # While the child holds the write lock, another writer waits, then gives up cleanly.
        blocked = BudgetLedger(ledger_url, busy_timeout_s=0.3)
        with pytest.raises(PrivlabError, match="busy"):
            blocked.charge("p", 0.1)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.join(30)
    assert child.exitcode == -signal.SIGKILL
    book = _assert_consistent(ledger_url)
    assert len(book.history("p")) == 5 and book.spent("p") == (0.5, 0.0)
    assert all(e.description != "never committed" for e in book.history())
    assert book.charge("p", 0.1).seq == 6  # the lock died with the child


def test_kill_while_charging_in_a_loop(ledger_url, tmp_path):
    BudgetLedger(ledger_url).set_budget("p", 1000.0)
    log = tmp_path / "committed.txt"
    for round_ in range(3):
        child = CTX.Process(target=_charge_forever, args=(ledger_url, str(log)))
        child.start()
        deadline = time.monotonic() + 30
        # wait for some commits, then kill at an arbitrary point of the loop
        while time.monotonic() < deadline and (not log.exists() or
                                               log.read_text().count("\n") < 20 * (round_ + 1)):
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
        child.join(30)
        assert child.exitcode == -signal.SIGKILL
    book = _assert_consistent(ledger_url)
    reported = [int(x) for x in log.read_text().split()]
    stored = [e.entry_id for e in book.history("p")]
    assert len(reported) >= 60
    # every charge a child saw committed is durable; at most one commit per kill went
    # unreported (killed between COMMIT and the log write)
    assert set(reported) <= set(stored)
    assert 0 <= len(stored) - len(reported) <= 3
    book.charge("p", 0.5)
    assert book.verify().ok


def test_reopen_after_fork_uses_own_connection(tmp_path):
    book = BudgetLedger(tmp_path / "l.db")
    book.set_budget("p", 1.0)
    book.charge("p", 0.1)
    if "fork" not in mp.get_all_start_methods():
        pytest.skip("the fork start method does not exist on this platform (Windows): the "
                    "test is about a ledger opened before fork() in the parent")
    child = mp.get_context("fork").Process(target=book.charge, args=("p", 0.2))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    assert book.spent("p") == (0.3, 0.0)
    assert book.status("p").spent_epsilon_exact == Decimal("0.3")


def test_sqlite_pragmas(tmp_path):
    book = BudgetLedger(Path(tmp_path / "l.db"))
    with book._engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL


def test_replace_with_fresh_ledger(tmp_path):
    """`privlab demo`'s fresh ledger per run lives in the ledger module: the new database
    holds only the given budgets, the old one's journal is gone, no temporary file is left."""
    from privlab.core.ledger import replace_with_fresh_ledger

    path = tmp_path / "budget.db"
    assert replace_with_fresh_ledger(path, {"a": 2.0}) is False
    with BudgetLedger(path) as book:
        book.charge("a", 1.5)
    (tmp_path / "budget.db-journal").write_bytes(b"stale")
    assert replace_with_fresh_ledger(path, {"a": 2.0, "b": 1.0}) is True
    assert not (tmp_path / "budget.db-journal").exists()
    with BudgetLedger(path) as book:
        assert book.principals() == ["a", "b"] and book.spent("a") == (0.0, 0.0)
    assert sorted(p.name for p in tmp_path.iterdir() if ".fresh-" in p.name) == []
