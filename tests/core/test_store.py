"""privlab.core.store: the one database handling of the budget ledger and the audit log.

Both stores read their location the same way, open SQLite with the same settings (but their
own `synchronous`), and let the database refuse edits of their append-only tables. The
PostgreSQL variant runs only when PRIVLAB_TEST_POSTGRES_URL is set (`ledger_url`,
tests/core/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from privlab.core.ledger import BudgetLedger
from privlab.core.store import SqlStore, database_url, remove_sqlite_files, same_database
from privlab.errors import InvalidInputError, PrivlabError
from privlab.query.audit import AuditLog


def test_a_path_is_an_absolute_sqlite_url_and_a_bad_one_names_the_setting(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    url = database_url("budget.db", setting="--ledger", example="budget.db")
    assert url.get_backend_name() == "sqlite" and url.database == str(tmp_path / "budget.db")
    pg = database_url("postgresql://u@h/db", setting="audit", example="audit.db")
    assert pg.drivername == "postgresql+psycopg"  # the driver privlab ships with
    for target, message in (
            (tmp_path, "--ledger .* is a directory; give a file path"),
            (tmp_path / "no" / "x.db", "--ledger directory .* does not exist; create it"),
            ("mysql://u@h/db", "--ledger database 'mysql' is not supported"),
            ("sqlite://:bad:://", "--ledger .* is not a valid database URL"),
            ("  ", "--ledger must be a file path or a database URL")):
        with pytest.raises(InvalidInputError, match=message):
            database_url(target, setting="--ledger", example="budget.db")


def test_same_database_is_one_file_or_one_url(tmp_path):
    (tmp_path / "sub").mkdir()
    a = database_url(tmp_path / "x.db", setting="s", example="x.db")
    b = database_url(f"sqlite:///{tmp_path}/sub/../x.db", setting="s", example="x.db")
    other = database_url(tmp_path / "y.db", setting="s", example="x.db")
    memory = make_url("sqlite:///:memory:")
    assert same_database(a, b) and not same_database(a, other)
    assert not same_database(memory, memory)  # two in-memory databases are two databases
    pg = make_url("postgresql+psycopg://u@h/db")
    assert same_database(pg, make_url("postgresql+psycopg://u@h/db"))
    assert not same_database(pg, make_url("postgresql+psycopg://u@h/other"))
    assert not same_database(a, pg)


def test_remove_sqlite_files_keeps_the_database_unless_asked(tmp_path):
    base = tmp_path / "x.db"
    names = ["x.db", "x.db-wal", "x.db-shm", "x.db-journal", "x.db-writer.lock"]
    for name in names:
        (tmp_path / name).write_bytes(b"")
    remove_sqlite_files(base, database=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.db", "x.db-writer.lock"]
    remove_sqlite_files(base)
    assert list(tmp_path.iterdir()) == []
    remove_sqlite_files(base)  # nothing left: no error


def _sqlite_pragma(store: SqlStore, name: str) -> int:
    with store._transaction(read_only=True) as conn:
        return int(conn.exec_driver_sql(f"PRAGMA {name}").scalar_one())


def test_ledger_and_audit_log_share_one_store_in_one_database(ledger_url):
    """One database holds both; each keeps its durability; the database itself refuses an
    edit of either's append-only rows."""
    with BudgetLedger(ledger_url) as book, AuditLog(ledger_url) as audit:
        assert isinstance(book, SqlStore) and isinstance(audit, SqlStore)
        assert same_database(book.url, audit.url)
        book.set_budget("alice", 1.0)
        entry = book.charge("alice", 0.5)
        audit.record("q1", "released", analyst="alice", ledger_entry_id=entry.entry_id)
        if book.dialect == "sqlite":
            assert _sqlite_pragma(book, "synchronous") == 2  # FULL: a charge survives power loss
            assert _sqlite_pragma(audit, "synchronous") == 1  # NORMAL
            assert _sqlite_pragma(book, "foreign_keys") == 1
        for store, statement in (
                (book, "UPDATE privlab_entries SET epsilon = '0'"),
                (book, "DELETE FROM privlab_budget_changes"),
                (audit, "UPDATE privlab_gateway_audit SET decision = 'refused'"),
                (audit, "DELETE FROM privlab_gateway_audit")):
            # the ledger hands a unique-key race (IntegrityError) to its caller as is
            with pytest.raises((PrivlabError, sa.exc.IntegrityError)), \
                    store._transaction() as conn:
                conn.exec_driver_sql(statement)
        assert audit.verify() == [] and len(audit.all()) == 1 and book.verify().ok
        assert book.spent("alice") == (0.5, 0.0)


def test_a_store_used_after_close_reconnects_and_is_closed_again(tmp_path: Path):
    book = BudgetLedger(tmp_path / "l.db")
    book.close()
    assert book.closed
    book.set_budget("bob", 1.0)  # reopens its pool ...
    assert not book.closed
    book.close()  # ... which close() lets go again (no ResourceWarning at collection)
    assert book.closed


def test_a_failed_driver_write_is_one_line_and_commits_nothing(tmp_path: Path):
    """The hot-path cursor (`_write_cursor`): a driver error, raised by a statement or the
    COMMIT, becomes the store's own one-line error, and the transaction is rolled back."""
    with BudgetLedger(tmp_path / "s.db") as book, AuditLog(str(tmp_path / "s.db")) as audit:
        book.set_budget("alice", 1.0)
        with pytest.raises(PrivlabError, match=r"^ledger .*: concurrent charge of 'alice' "
                           "detected; nothing was charged, try again$"), \
                book.write_transaction("'alice'") as cur:
            cur.execute("UPDATE privlab_principals SET spent_epsilon = '0.5'")
            cur.execute("INSERT INTO privlab_principals (name) VALUES ('alice')")  # unique
        with pytest.raises(PrivlabError, match=r"^audit log: database error "
                           r"\(OperationalError\)$"), audit._write_cursor() as cur:
            cur.execute("INSERT INTO privlab_gateway_audit_meta (name, value) VALUES ('x', 'y')")
            cur.execute("SELECT * FROM no_such_table")
        assert book.spent("alice") == (0.0, 0.0)
        with audit._transaction(read_only=True) as conn:
            assert conn.exec_driver_sql("SELECT name FROM privlab_gateway_audit_meta"
                                        ).scalars().all() == ["format"]
