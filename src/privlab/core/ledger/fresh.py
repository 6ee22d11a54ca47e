"""`replace_with_fresh_ledger`: start a SQLite ledger over, in one rename (`privlab demo`)."""

from __future__ import annotations

import os
from pathlib import Path

from privlab.core.ledger.book import BudgetLedger
from privlab.core.store import remove_sqlite_files


def replace_with_fresh_ledger(path: Path, budgets: dict[str, float]) -> bool:
    """Replace the SQLite ledger at `path` by a new one holding only `budgets`, in one rename:
    built beside it, the old database's journal files removed first so that they are never
    read as the new one's. Returns whether a ledger was replaced. (`privlab demo`: each run
    starts from its full budget.)"""
    tmp = path.with_name(f".{path.name}.fresh-{os.getpid()}")
    remove_sqlite_files(tmp)  # leftovers of a crashed earlier attempt
    try:
        with BudgetLedger(str(tmp)) as fresh:
            for principal, epsilon in budgets.items():
                fresh.set_budget(principal, epsilon)
        replaced = path.exists()
        remove_sqlite_files(path, database=False)
        os.replace(tmp, path)
    finally:
        remove_sqlite_files(tmp)
    return replaced
