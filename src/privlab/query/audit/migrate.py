"""`migrate_v1`: `privlab audit-log migrate`, a format-1 audit log kept and a format-2 one
started in its place (see the package docstring)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from privlab.core.store import pg_advisory_lock
from privlab.errors import InvalidInputError
from privlab.query.audit.chain import (
    _FIELDS,
    _LOCK_ID,
    GENESIS,
    _audit,
    _row_hash_v1,
    create_triggers,
)
from privlab.query.audit.log import AuditLog
from privlab.query.audit.records import ARCHIVE_V1, FORMAT, AuditLogBroken


def migrate_v1(target: str, *, key: bytes | None,
               checkpoint: str | os.PathLike[str] | None) -> dict[str, Any]:
    """`privlab audit-log migrate`: verify a format-1 log (its chain and signed
    checkpoint, under the format-1 MAC), keep it as the table `privlab_gateway_audit_v1`
    (append-only triggers kept), start a format-2 log in its place whose first row
    (`log_migrated`) records the old head, and move the old checkpoint to `<file>.v1`.
    Refuses (AuditLogBroken) if the old log does not verify: keep it as evidence."""
    old = AuditLog(target, key=key, checkpoint=checkpoint, create=False)
    try:
        if not old.exists:
            raise InvalidInputError(f"audit log {old.describe()} does not exist")
        if old.format == FORMAT:
            raise InvalidInputError(f"audit log {old.describe()} is already format {FORMAT}; "
                                    "nothing to migrate")
        if old.format != 1:
            raise AuditLogBroken(f"audit log {old.describe()}: unknown format {old.format}")
        with old._transaction(read_only=True) as conn:
            if sa.inspect(conn).has_table(ARCHIVE_V1):
                raise InvalidInputError(f"audit log {old.describe()}: a table {ARCHIVE_V1} "
                                        "exists already (migrated before?); move it away")
            rows = conn.execute(sa.select(_audit).order_by(_audit.c.seq)).all()
        prev, head_seq = GENESIS, None
        for r in rows:
            values = {k: getattr(r, k) for k in _FIELDS}
            if r.prev_hash != prev or _row_hash_v1(prev, values, key) != r.hash:
                raise AuditLogBroken(f"audit log {old.describe()}: format-1 row {r.seq} does "
                                     "not verify; keep the log as evidence and start a new one")
            prev, head_seq = r.hash, int(r.seq)
        cp = old.read_checkpoint()
        if cp is not None:
            problem = old._checkpoint_problem(cp)
            if problem is None and not any(int(r.seq) == int(cp["seq"])
                                           and r.hash == cp["hash"] for r in rows):
                problem = f"the checkpoint records row {cp['seq']}, which is missing"
            if problem is not None:
                raise AuditLogBroken(f"audit log {old.describe()}: {problem}; keep the log as "
                                     "evidence and start a new one")
        with old._transaction() as conn:
            pg_advisory_lock(conn, _LOCK_ID)
            for index in sa.inspect(conn).get_indexes(_audit.name):
                conn.exec_driver_sql(f'DROP INDEX IF EXISTS "{index["name"]}"')
            on = "" if old.dialect == "sqlite" else f" ON {_audit.name}"
            for name in old._expected_triggers():
                conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}{on}")
            conn.exec_driver_sql(f"ALTER TABLE {_audit.name} RENAME TO {ARCHIVE_V1}")
            create_triggers(conn, ARCHIVE_V1)  # the archive stays append-only
            old._create(conn)
    finally:
        old.close()
    if checkpoint is not None and Path(checkpoint).is_file():
        os.replace(checkpoint, f"{checkpoint}.v1")
    new = AuditLog(target, key=key, checkpoint=checkpoint)
    try:
        new.record(os.urandom(16).hex(), "log_migrated", reason=(
            f"format-1 log kept as table {ARCHIVE_V1}: {len(rows)} rows, head row {head_seq}, "
            f"hash {prev}"))
        problems = new.verify()
    finally:
        new.close()
    if problems:
        raise AuditLogBroken(f"audit log {new.describe()}: {problems[0]}")
    return {"archived_table": ARCHIVE_V1, "archived_rows": len(rows),
            "archived_head_seq": head_seq, "archived_head_hash": prev,
            "old_checkpoint": None if checkpoint is None else f"{checkpoint}.v1"}
