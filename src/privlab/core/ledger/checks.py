"""`verify_ledger`: recompute every total of a ledger from its entries.

Append-only triggers stop privlab's own paths from rewriting history; this check finds what
got past them (a hand edit with the triggers dropped, a restored old file, a bug): per
principal, entries numbered 1..n without gaps, each running total the previous plus the
charge, the stored total the sum of the entries, and no running total past the budget in
force when it was charged. On SQLite it adds the database's own `PRAGMA integrity_check`.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from privlab.core.ledger.amounts import _add, _dec, _text
from privlab.core.ledger.records import LedgerCheck
from privlab.core.ledger.tables import _entries, _principals


def verify_ledger(conn: Connection) -> LedgerCheck:
    """The check of the ledger in `conn`'s database (read inside one snapshot)."""
    problems: list[str] = []
    integrity = None
    if conn.dialect.name == "sqlite":
        integrity = "; ".join(str(r[0]) for r in conn.exec_driver_sql("PRAGMA integrity_check"))
    principal_rows = conn.execute(sa.select(_principals).order_by(_principals.c.name)).all()
    entry_rows = conn.execute(sa.select(_entries).order_by(_entries.c.principal,
                                                           _entries.c.seq)).all()
    by_principal: dict[str, list[Any]] = {}
    for r in entry_rows:
        by_principal.setdefault(r.principal, []).append(r)
    known = {r.name for r in principal_rows}
    for name in sorted(set(by_principal) - known):
        problems.append(f"{name!r}: entries without a principal row")
    for p in principal_rows:
        rows = by_principal.get(p.name, [])
        total_e = total_d = Decimal(0)
        for i, r in enumerate(rows, start=1):
            if int(r.seq) != i:
                problems.append(f"{p.name!r}: entry {r.entry_id} has seq {r.seq}, expected {i}")
                break
            total_e, total_d = _add(total_e, _dec(r.epsilon)), _add(total_d, _dec(r.delta))
            if (total_e, total_d) != (_dec(r.spent_epsilon), _dec(r.spent_delta)):
                problems.append(f"{p.name!r}: running total broken at entry {r.entry_id}")
                break
            if total_e > _dec(r.budget_epsilon) or total_d > _dec(r.budget_delta):
                problems.append(f"{p.name!r}: entry {r.entry_id} went past the budget")
        if len(rows) != int(p.n_charges):
            problems.append(f"{p.name!r}: {len(rows)} entries but n_charges={p.n_charges}")
        if (total_e, total_d) != (_dec(p.spent_epsilon), _dec(p.spent_delta)):
            problems.append(f"{p.name!r}: stored spent ({p.spent_epsilon}, {p.spent_delta}) "
                            f"!= sum of entries ({_text(total_e)}, {_text(total_d)})")
        if _dec(p.spent_epsilon) > _dec(p.budget_epsilon) or \
                _dec(p.spent_delta) > _dec(p.budget_delta):
            problems.append(f"{p.name!r}: spent exceeds budget")
    return LedgerCheck(integrity=integrity, principals=len(principal_rows),
                       entries=len(entry_rows), problems=tuple(problems))
