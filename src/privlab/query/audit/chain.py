"""The audit table and its hash chain: each row's MAC covers its sequence number, the previous
row's MAC and its fields, so an edited, renumbered, deleted or inserted row breaks the chain.

`hash = HMAC-SHA256(key, format || seq || previous hash || canonical JSON of the row)` (plain
SHA-256 when no key is configured). Also here: the driver SQL of an append (on the hot path of
every query: written once per dialect, sqlite3 `?` / `:x`, psycopg `%s` / `%(x)s`) and the
append-only triggers in the form the catalog shows them, so `verify` can compare.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from privlab.core.store import append_only_function, append_only_triggers
from privlab.query.audit.records import FORMAT

_LOCK_ID = 7275829177

_metadata = sa.MetaData()
_audit = sa.Table(
    "privlab_gateway_audit", _metadata,
    # assigned by the writer (previous + 1, under the lock) and covered by the MAC
    sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True,
              autoincrement=False),
    sa.Column("query_id", sa.String(40), nullable=False, index=True),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("analyst", sa.String(200), nullable=True, index=True),
    sa.Column("sql", sa.Text, nullable=True),
    sa.Column("epsilon", sa.String(64), nullable=True),
    sa.Column("delta", sa.String(64), nullable=True),
    sa.Column("decision", sa.String(40), nullable=False),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("ledger_entry_id", sa.BigInteger, nullable=True),
    sa.Column("epsilon_spent", sa.Float, nullable=True),
    sa.Column("delta_spent", sa.Float, nullable=True),
    sa.Column("result", sa.Text, nullable=True),
    sa.Column("prev_hash", sa.String(64), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
)
_meta = sa.Table(
    "privlab_gateway_audit_meta", _metadata,
    sa.Column("name", sa.String(40), primary_key=True),
    sa.Column("value", sa.String(200), nullable=False),
)
_PG_LOCK_SQL = f"SELECT pg_advisory_xact_lock({_LOCK_ID})"
_PG_LOCK = sa.text(_PG_LOCK_SQL)
_FIELDS = ("query_id", "created_at", "analyst", "sql", "epsilon", "delta", "decision", "reason",
           "ledger_entry_id", "epsilon_spent", "delta_spent", "result")
# An append is on the hot path of every query: driver SQL written once per dialect (sqlite3
# named `:x`, psycopg `%(x)s`) skips SQLAlchemy's per-call statement handling.
_ROW_COLUMNS = ("seq", "prev_hash", "hash", *_FIELDS)
_HEAD_SQL = f"SELECT {', '.join(_ROW_COLUMNS)} FROM {_audit.name} ORDER BY seq DESC LIMIT 1"
# the row a writer saw last and whether any follows (the common case: none, 2 short rows)
_ANCHOR_SQL = {
    dialect: f"SELECT seq, hash FROM {_audit.name} WHERE seq >= {mark} ORDER BY seq LIMIT 2"
    for dialect, mark in (("sqlite", "?"), ("postgresql", "%s"))
}
_AFTER_SQL = {
    dialect: f"SELECT {', '.join(_ROW_COLUMNS)} FROM {_audit.name} WHERE seq > {mark} "
             "ORDER BY seq"
    for dialect, mark in (("sqlite", "?"), ("postgresql", "%s"))
}
_INSERT_COLUMNS = ("seq", *_FIELDS, "prev_hash", "hash")
_INSERT_SQL = {
    dialect: f"INSERT INTO {_audit.name} ({', '.join(_INSERT_COLUMNS)}) VALUES ("
             + ", ".join(fmt.format(c) for c in _INSERT_COLUMNS) + ")"
    for dialect, fmt in (("sqlite", ":{}"), ("postgresql", "%({})s"))
}
_TRIGGER_MESSAGE = "privlab audit log is append-only"
_PG_FUNCTION_BODY = f" BEGIN RAISE EXCEPTION '{_TRIGGER_MESSAGE}'; END; "
GENESIS = "0" * 64


def _mac(data: bytes, key: bytes | None) -> str:
    if key is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.digest(key, data, "sha256").hex()  # one-shot: no HMAC object per row


#: `json.dumps(..., sort_keys=True, default=str, separators=(",", ":"))`, one shared encoder
_ROW_ENCODER = json.JSONEncoder(sort_keys=True, default=str, separators=(",", ":"))


def _row_body(values: dict[str, Any]) -> str:
    """The row's fields as canonical JSON (sorted keys, no spaces): what both formats MAC."""
    return _ROW_ENCODER.encode({k: values.get(k) for k in _FIELDS})


def _row_hash(prev: str, values: dict[str, Any], key: bytes | None = None, *,
              seq: int) -> str:
    """The row's MAC (format 2): its sequence number, the previous row's MAC and its
    fields, so a renumbered or re-linked row no longer matches."""
    body = _row_body(values)
    return _mac(f"privlab-audit-row:{FORMAT}:{int(seq)}:{prev}:{body}".encode(), key)


def _row_hash_v1(prev: str, values: dict[str, Any], key: bytes | None = None) -> str:
    """The MAC of a format-1 row (previous MAC and fields; no seq): `migrate` only."""
    return _mac((prev + _row_body(values)).encode("utf-8"), key)


def _norm(sql: str) -> str:
    """Trigger SQL compared modulo whitespace and schema qualification."""
    sql = re.sub(r'(?:"[^"]+"|\w+)\.(?=privlab_)', "", sql)
    return " ".join(sql.split())


def expected_triggers(dialect: str, table: str = _audit.name) -> dict[str, str]:
    """name -> the append-only trigger's full definition, as the catalog shows it
    (normalised)."""
    found = append_only_triggers(dialect, table, function="privlab_audit_append_only",
                                 message=_TRIGGER_MESSAGE)
    return {name: _norm(sql) if dialect == "sqlite" else sql for name, sql in found.items()}


def create_triggers(conn: Connection, table: str = _audit.name) -> None:
    """Make `table` append-only (the log, or the archive of a format-1 log)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(append_only_function("privlab_audit_append_only",
                                                  _PG_FUNCTION_BODY))
    for sql in append_only_triggers(conn.dialect.name, table,
                                    function="privlab_audit_append_only",
                                    message=_TRIGGER_MESSAGE).values():
        conn.exec_driver_sql(sql)
