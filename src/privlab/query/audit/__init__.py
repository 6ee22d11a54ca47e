"""Append-only, hash-chained audit log of every query the gateway receives and its decision.

One row per request: who, when, the SQL, the requested (epsilon, delta), the decision
(`released`, `refused`, `denied`, `budget_exceeded`, `error`, `charged_outcome_unknown`),
the reason, the ledger entry it charged and the released (noisy) answer. Rows are never
updated or deleted (database triggers refuse it) and each carries
`hash = HMAC-SHA256(key, format || seq || previous hash || canonical JSON of the row)` (plain
SHA-256 when no key is configured), with `seq` assigned by the gateway as the previous row's
plus one: `verify()` detects an edited, renumbered, deleted or inserted row (a gap in `seq`
or a broken link); with the key kept outside the database (a secret file or an environment
variable), an edit whose chain was recomputed is detected too. After every append a signed
checkpoint of the head (sequence number and hash) is written to a file apart from the
database, so deleting the newest rows is detected as well. Before each append batch the
writer checks that the rows from the last head it saw (or the checkpoint's, if newer) to the
database's head are present, contiguous and intact (other writers' rows are expected; missing
or altered ones are not) and otherwise raises the alarm (`AuditLogBroken`, logged, sticky):
new rows never chain onto a truncated log. Appends are serialized (SQLite `BEGIN IMMEDIATE`;
PostgreSQL an advisory transaction lock) to keep the chain linear.

Format: `privlab_gateway_audit_meta` holds `format = 2`. A log of format 1 (before `seq` was
under the MAC) is refused with a one-line error naming `privlab audit-log migrate`, which
verifies it, keeps it as the table `privlab_gateway_audit_v1` and starts a format-2 log
whose first row records the old head.

Split by idea: `records` (a row and the log's errors), `chain` (the table, the MACs, the
append SQL and the triggers), `checkpoint` (the signed head in its own file), `log`
(`AuditLog`: appends, the tamper alarm, reading and `verify`), `migrate` (format 1 to 2). The
database handling (paths and URLs, engine settings, transactions, locks, close) is
`privlab.core.store`'s, shared with the budget ledger. Every name keeps the path
`privlab.query.audit` it had when this was one module.

Durability: SQLite runs in WAL mode with `synchronous=NORMAL` (a committed row survives a
process crash; a power cut may lose the newest rows). Charges are never lost that way: the
budget ledger commits with `synchronous=FULL` before anything is computed, and on start-up
the gateway re-adds any charged query missing here as `charged_outcome_unknown`.
"""

from __future__ import annotations

# `as` marks a re-export kept for the old import path
from privlab.query.audit.chain import GENESIS as GENESIS
from privlab.query.audit.chain import _audit as _audit
from privlab.query.audit.chain import _row_hash as _row_hash
from privlab.query.audit.chain import _row_hash_v1 as _row_hash_v1
from privlab.query.audit.checkpoint import _checkpoint_mac as _checkpoint_mac
from privlab.query.audit.log import AuditLog
from privlab.query.audit.migrate import migrate_v1
from privlab.query.audit.records import (
    ARCHIVE_V1,
    DECISIONS,
    FORMAT,
    AuditFormatError,
    AuditLogBroken,
    AuditRecord,
    row_values,
)

__all__ = ["ARCHIVE_V1", "DECISIONS", "FORMAT", "AuditFormatError", "AuditLog", "AuditLogBroken",
           "AuditRecord", "migrate_v1", "row_values"]
