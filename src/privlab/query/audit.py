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

Durability: SQLite runs in WAL mode with `synchronous=NORMAL` (a committed row survives a
process crash; a power cut may lose the newest rows). Charges are never lost that way: the
budget ledger commits with `synchronous=FULL` before anything is computed, and on start-up
the gateway re-adds any charged query missing here as `charged_outcome_unknown`.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import hmac
import json
import logging
import os
import re
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine, make_url

from privlab.core.dbapi import write_transaction
from privlab.core.group_commit import GroupCommit
from privlab.core.writer_lock import WriterLock, sqlite_file
from privlab.errors import InvalidInputError, PrivlabError, UnsafeConfigurationError
from privlab.utils.closing import Closing
from privlab.utils.text import escape_nul

#: "denied" is no longer written (a hidden table is refused like a missing one); it stays so
#: rows of older logs still read
DECISIONS = ("released", "released_fallback", "refused", "denied", "budget_exceeded", "error",
             "charged_outcome_unknown", "unauthenticated", "rate_limited",
             "broken_log_accepted", "log_migrated")
_LOCK_ID = 7275829177
FORMAT = 2
ARCHIVE_V1 = "privlab_gateway_audit_v1"
log = logging.getLogger("privlab.gateway")

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


def row_values(query_id: str, decision: str, *, analyst: str | None = None,
               sql: str | None = None, epsilon: Any = None, delta: Any = None,
               reason: str | None = None, ledger_entry_id: int | None = None,
               epsilon_spent: float | None = None, delta_spent: float | None = None,
               result: dict[str, Any] | None = None) -> dict[str, Any]:
    """One audit row's fields as stored (what `AuditLog.record` and `append_in` take)."""
    if decision not in DECISIONS:
        raise InvalidInputError(f"decision must be one of {DECISIONS}, got {decision!r}")
    return {
        "query_id": query_id, "created_at": datetime.now(UTC).isoformat(),
        "analyst": escape_nul(analyst), "sql": escape_nul(sql),
        "epsilon": _number_text(epsilon), "delta": _number_text(delta),
        "decision": decision, "reason": escape_nul(reason),
        "ledger_entry_id": ledger_entry_id,
        "epsilon_spent": epsilon_spent, "delta_spent": delta_spent,
        "result": None if result is None else json.dumps(result, default=str,
                                                         allow_nan=False),
    }


@dataclass(frozen=True)
class AuditRecord:
    seq: int
    query_id: str
    created_at: str
    analyst: str | None
    sql: str | None
    epsilon: str | None
    delta: str | None
    decision: str
    reason: str | None
    ledger_entry_id: int | None
    epsilon_spent: float | None
    delta_spent: float | None
    result: dict[str, Any] | None
    hash: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id, "created_at": self.created_at, "sql": self.sql,
            "epsilon": _as_float(self.epsilon), "delta": _as_float(self.delta),
            "decision": self.decision, "reason": self.reason,
            "ledger_entry_id": self.ledger_entry_id, "epsilon_spent": self.epsilon_spent,
            "delta_spent": self.delta_spent, "result": self.result, "seq": self.seq,
        }

    def to_analyst_dict(self) -> dict[str, Any]:
        """What the analyst who sent the query may see. A `released_fallback` row (the
        engine failed after the charge and the mechanism ran on the empty result) reads as
        `released` without a reason: whether the engine failed must not be observable,
        since a failure could in principle depend on the data (see privlab.query.gateway)."""
        out = self.to_dict()
        if self.decision == "released_fallback":
            out["decision"], out["reason"] = "released", None
        return out


_SLOT = 256  # bytes per checkpoint slot


def _read_slots(data: bytes) -> list[Any]:
    """The two checkpoint slots: a dict, None (empty) or "invalid"."""
    out: list[Any] = []
    for i in range(2):
        chunk = data[i * _SLOT:(i + 1) * _SLOT].strip(b" \n\x00")
        if not chunk:
            out.append(None)
            continue
        try:
            item = json.loads(chunk)
            int(item["seq"]), str(item["hash"])
            out.append(item)
        except (ValueError, KeyError, TypeError):
            out.append("invalid")
    return out


class AuditLogBroken(UnsafeConfigurationError):
    """The audit log failed verification (edited, reordered, truncated, unprotected)."""


class AuditFormatError(UnsafeConfigurationError):
    """The audit log was written in an older format (see the module docstring)."""


def _format_problem(version: int) -> str:
    return (f"format {version} (written before seq and the previous row's MAC were under the "
            f"MAC; this privlab writes format {FORMAT}): run `privlab audit-log migrate "
            "--config <gateway.yaml>` (verifies it, keeps it as table "
            f"{ARCHIVE_V1}, starts a format-{FORMAT} log)")


def _as_float(text: str | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:  # "out of range" (see _number_text)
        return None


def _number_text(value: Any) -> str | None:
    """A requested epsilon / delta as stored: a float's repr, or for a value no float can
    hold (an integer of 400 digits from a library caller) a marker, never an exception."""
    if value is None:
        return None
    try:
        return repr(float(value))
    except (OverflowError, ValueError, TypeError):
        return "out of range"


def _mac(data: bytes, key: bytes | None) -> str:
    if key is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def _row_body(values: dict[str, Any]) -> str:
    """The row's fields as canonical JSON (sorted keys, no spaces): what both formats MAC."""
    return json.dumps({k: values.get(k) for k in _FIELDS}, sort_keys=True, default=str,
                      separators=(",", ":"))


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


def _checkpoint_mac(key: bytes | None, seq: int, head: str) -> str | None:
    if key is None:
        return None
    return hmac.new(key, f"privlab-audit-head:{seq}:{head}".encode(), hashlib.sha256).hexdigest()


def _url(target: str) -> URL:
    if "://" in target:
        try:
            url = make_url(target)
        except Exception:
            raise InvalidInputError(f"audit: {target!r} is not a valid database URL") from None
    else:
        path = Path(target).expanduser().resolve()
        if not path.parent.is_dir():
            raise InvalidInputError(f"audit: directory {path.parent} does not exist")
        url = URL.create("sqlite", database=str(path))
    if url.get_backend_name() not in ("sqlite", "postgresql"):
        raise InvalidInputError("audit: use a SQLite path or a postgresql+psycopg:// URL")
    if url.get_backend_name() == "postgresql" and url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    return url


def _release(engine: Engine, writer_lock: WriterLock | None, cp_file: list[int]) -> None:
    """Close an audit log's checkpoint file, pooled connections and writer lock file."""
    if cp_file and cp_file[1] == os.getpid():
        os.close(cp_file[0])
    cp_file.clear()
    engine.dispose()
    if writer_lock is not None:
        writer_lock.close()


class AuditLog(Closing):
    """`AuditLog(path_or_url)`: append with `record(...)`, read with `history` / `get`.
    `close()` (or `with`) releases its connections; one dropped unclosed warns."""

    def __init__(self, target: str, *, key: bytes | None = None,
                 checkpoint: str | os.PathLike[str] | None = None, create: bool = True) -> None:
        """`key`: the HMAC key of the chain (None: plain SHA-256, which detects edits but
        not an edit whose chain was recomputed); `checkpoint`: the file holding the signed
        head, apart from the database (None: none written or checked); `create=False`
        opens an existing log without creating anything (`exists` tells)."""
        self.url = _url(target)
        self.dialect = self.url.get_backend_name()
        self.key = key
        self.checkpoint = None if checkpoint is None else Path(checkpoint)
        self._pid = os.getpid()
        db_file = sqlite_file(self.url.database) if self.dialect == "sqlite" else None
        self._writer_lock = None if db_file is None else WriterLock(db_file)
        self._engine = self._make_engine()
        # appends form one hash chain: this process's appends are group-committed, one
        # leader at a time (the database lock still orders them across processes); held
        # weakly, so a log dropped unclosed is collected (and warns) at once, not by the gc
        append_many = weakref.WeakMethod(self._append_many)
        self._appends = GroupCommit(lambda batch: append_many()(batch))  # type: ignore[misc]
        #: (seq, hash) of the newest row this process saw intact (None: none yet)
        self._seen: tuple[int, str] | None = None
        #: the checkpoint file's bytes and (seq, hash) as this process last read or wrote them
        self._cp_cache: tuple[bytes, tuple[int, str]] | None = None
        #: set when the log was found truncated or altered; every later append refuses
        self.alarm: str | None = None
        self.exists = True
        self.format = FORMAT
        #: [fd, pid] of the open checkpoint file (empty: not open)
        self._cp_file: list[int] = []
        self._arm()
        try:
            self._open(create)
        except BaseException:
            self.close()  # a refused log holds nothing open
            raise

    def _arm(self) -> None:
        """Connections (and the checkpoint file) may be open from now until `close()`."""
        self._hold(functools.partial(_release, self._engine, self._writer_lock, self._cp_file),
                   f"AuditLog({self.describe()!r})")

    def _open(self, create: bool) -> None:
        """Read (and with `create`, create) the log's tables and format."""
        if not create:
            if self.dialect == "sqlite" and not Path(self.url.database or "").is_file():
                self.exists = False
                return
            with self._transaction(read_only=True) as conn:
                self.exists = sa.inspect(conn).has_table(_audit.name)
                if self.exists:
                    self.format = self._read_format(conn)
            return
        with self._transaction() as conn:
            if self.dialect == "postgresql":
                conn.execute(_PG_LOCK)
            if not sa.inspect(conn).has_table(_audit.name):
                self._create(conn)
            else:
                self.format = self._read_format(conn)
        if self.format != FORMAT:
            raise AuditFormatError(f"audit log {self.describe()}: "
                                   f"{_format_problem(self.format)}")

    def _create(self, conn: Connection) -> None:
        _metadata.create_all(conn, tables=[_audit, _meta], checkfirst=True)
        conn.execute(sa.delete(_meta))
        conn.execute(sa.insert(_meta).values(name="format", value=str(FORMAT)))
        self._triggers(conn)

    @staticmethod
    def _read_format(conn: Connection) -> int:
        """The log's format: 1 when it has no meta table (written before formats)."""
        if not sa.inspect(conn).has_table(_meta.name):
            return 1
        value = conn.execute(sa.select(_meta.c.value).where(_meta.c.name == "format")
                             ).scalar_one_or_none()
        try:
            return int(value) if value is not None else 1
        except ValueError:
            return 0

    def _make_engine(self) -> Engine:
        if self.dialect != "sqlite":
            return sa.create_engine(self.url, pool_pre_ping=True, pool_size=8, max_overflow=16)
        engine = sa.create_engine(self.url, connect_args={"timeout": 30.0}, pool_size=8,
                                  max_overflow=32)

        @sa.event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            try:
                cur.execute("PRAGMA busy_timeout = 30000")
                cur.execute("PRAGMA journal_mode = WAL")
                cur.execute("PRAGMA synchronous = NORMAL")
            finally:
                cur.close()

        @sa.event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            read_only = conn.get_execution_options().get("privlab_read_only", False)
            conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

        return engine

    def _expected_triggers(self, table: str = _audit.name) -> dict[str, str]:
        """name -> the trigger's full definition, as the catalog shows it (normalised)."""
        if self.dialect == "sqlite":
            return {f"{table}_no_{op.lower()}": _norm(
                f"CREATE TRIGGER {table}_no_{op.lower()} BEFORE {op} ON {table} BEGIN SELECT "
                f"RAISE(ABORT, '{_TRIGGER_MESSAGE}'); END") for op in ("UPDATE", "DELETE")}
        return {
            f"{table}_append_only": f"CREATE TRIGGER {table}_append_only BEFORE DELETE OR "
            f"UPDATE ON {table} FOR EACH ROW EXECUTE FUNCTION privlab_audit_append_only()",
            f"{table}_no_truncate": f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON "
            f"{table} FOR EACH STATEMENT EXECUTE FUNCTION privlab_audit_append_only()"}

    def _triggers(self, conn: Connection, table: str = _audit.name) -> None:
        if self.dialect == "postgresql":
            conn.exec_driver_sql(
                "CREATE OR REPLACE FUNCTION privlab_audit_append_only() RETURNS trigger AS $$"
                f"{_PG_FUNCTION_BODY}$$ LANGUAGE plpgsql")
        for sql in self._expected_triggers(table).values():
            conn.exec_driver_sql(sql)

    def _engine_now(self) -> Engine:
        """The engine, with the parent's pooled connections dropped after a fork."""
        if os.getpid() != self._pid:
            self._engine.dispose(close=False)
            self._pid = os.getpid()
        if self.closed:  # used again after close(): it reconnects, so close it again later
            self._arm()
        return self._engine

    @contextmanager
    def _transaction(self, read_only: bool = False) -> Iterator[Connection]:
        writer = contextlib.nullcontext() if read_only or self._writer_lock is None \
            else self._writer_lock.held()
        try:
            with writer, self._engine_now().connect() as conn:
                if read_only:
                    conn = conn.execution_options(privlab_read_only=True)
                with conn.begin():
                    yield conn
        except sa.exc.SQLAlchemyError as exc:
            raise PrivlabError(f"audit log: database error ({type(exc).__name__})") from exc

    def record(self, query_id: str, decision: str, *, analyst: str | None = None,
               sql: str | None = None, epsilon: Any = None, delta: Any = None,
               reason: str | None = None, ledger_entry_id: int | None = None,
               epsilon_spent: float | None = None, delta_spent: float | None = None,
               result: dict[str, Any] | None = None) -> int:
        """Append one row; returns its sequence number."""
        if self.alarm is not None:
            raise AuditLogBroken(self.alarm)
        values = row_values(
            query_id, decision, analyst=analyst, sql=sql, epsilon=epsilon, delta=delta,
            reason=reason, ledger_entry_id=ledger_entry_id, epsilon_spent=epsilon_spent,
            delta_spent=delta_spent, result=result)
        seq: int = self._appends.submit(values)
        return seq

    def _append_many(self, batch: list[dict[str, Any]]) -> list[int | BaseException]:
        """Append rows in ONE transaction, each chained to the one before (the leader of a
        group commit calls this; alone, a row pays what it always did). If the batch
        fails, each row is retried alone, so one bad row fails only its own caller."""
        try:
            return list(self._append_chain(batch))
        except PrivlabError:
            if len(batch) == 1:
                raise
        results: list[int | BaseException] = []
        for values in batch:
            try:
                results.extend(self._append_chain([values]))
            except PrivlabError as exc:
                results.append(exc)
        return results

    def accept_broken(self, query_id: str, reason: str) -> int:
        """Record that the operator started on a log that fails verification (`serve
        --accept-broken-audit-log`): the `broken_log_accepted` row is chained onto the
        database's head as it is now, and this writer and the checkpoint re-anchor on it.
        A normal append would refuse, rightly, when the newest rows were deleted (its tail
        check anchors on the checkpoint); the acceptance is the one explicit way past that,
        and `verify` reports every acceptance row from then on, so the log never verifies
        as intact again."""
        values = {"query_id": query_id, "created_at": datetime.now(UTC).isoformat(),
                  "analyst": None, "sql": None, "epsilon": None, "delta": None,
                  "decision": "broken_log_accepted", "reason": escape_nul(reason),
                  "ledger_entry_id": None, "epsilon_spent": None, "delta_spent": None,
                  "result": None}
        self.alarm = None
        return self._append_chain([values], accept=True)[0]

    def _append_chain(self, batch: list[dict[str, Any]], accept: bool = False) -> list[int]:
        if self.alarm is not None:
            raise AuditLogBroken(self.alarm)
        rows = [dict(values) for values in batch]  # a failed try leaves the inputs clean
        engine = self._engine_now()
        setup = (_PG_LOCK_SQL,) if self.dialect == "postgresql" else ()
        try:
            with write_transaction(engine, writer=self._writer_lock,
                                   setup=setup) as cur:
                seqs, prev = self.append_in(cur, rows, accept=accept)
        except engine.dialect.dbapi.Error as exc:
            raise PrivlabError(f"audit log: database error ({type(exc).__name__})") from exc
        self.appended(seqs[-1], prev, reset=accept)
        return seqs

    def append_in(self, cur: Any, rows: list[dict[str, Any]], *, accept: bool = False
                  ) -> tuple[list[int], str]:
        """Chain `rows` (filled in place with seq and MACs) onto the head inside an open
        write transaction `cur` that holds this log's lock (SQLite's write lock; PostgreSQL
        the advisory lock `pg_lock_sql()`): the caller may be another writer's transaction
        on the same database (`privlab.query.commit`: the charge and its audit row in one
        commit). Returns (sequence numbers, the last MAC); call `appended` after COMMIT."""
        if self.alarm is not None:
            raise AuditLogBroken(self.alarm)
        seqs: list[int] = []
        seq, prev = self._raw_head(cur) if accept else self._check_tail(cur)
        for values in rows:
            seq += 1
            values["seq"] = seq
            values["prev_hash"] = prev
            values["hash"] = prev = _row_hash(prev, values, self.key, seq=seq)
            cur.execute(_INSERT_SQL[self.dialect], values)
            seqs.append(seq)
        return seqs, prev

    def appended(self, seq: int, head: str, *, reset: bool = False) -> None:
        """After the COMMIT of `append_in`: remember the head and move the checkpoint."""
        self._seen = (seq, head)
        if self.checkpoint is not None:
            self._write_checkpoint(seq, head, reset=reset)

    @staticmethod
    def pg_lock_sql() -> str:
        """The statement that serializes appends on PostgreSQL (a transaction lock)."""
        return _PG_LOCK_SQL

    def _check_tail(self, cur: Any) -> tuple[int, str]:
        """(seq, hash) of the database's head, after checking (inside the append's locked
        transaction) that the rows from the newest head this process knows, its own last
        append or the signed checkpoint, to the head are there, contiguous and intact.
        Anything else raises the alarm: new rows must not chain onto a truncated log."""
        anchor = self._seen
        cp = self._checkpoint_anchor()
        if cp is not None and (anchor is None or cp[0] > anchor[0]):
            anchor = cp
        if anchor is None:
            cur.execute(_HEAD_SQL)
            tail = cur.fetchall()
            if not tail:
                return 0, GENESIS
            row = dict(zip(_ROW_COLUMNS, tail[0], strict=True))
            if _row_hash(row["prev_hash"], row, self.key, seq=int(row["seq"])) != row["hash"]:
                self._raise_alarm(f"audit row {row['seq']}: contents do not match its MAC")
            return int(row["seq"]), str(row["hash"])
        cur.execute(_ANCHOR_SQL[self.dialect], (anchor[0],))
        found = cur.fetchall()
        if not found or int(found[0][0]) != anchor[0] or found[0][1] != anchor[1]:
            self._raise_alarm(f"audit row {anchor[0]}, already seen as the head, is missing "
                              "or altered (newest rows deleted or rewritten)")
        seq, prev = anchor
        if len(found) == 1:
            return seq, prev
        cur.execute(_AFTER_SQL[self.dialect], (anchor[0],))
        for values in cur.fetchall():
            row = dict(zip(_ROW_COLUMNS, values, strict=True))
            if int(row["seq"]) != seq + 1 or row["prev_hash"] != prev:
                self._raise_alarm(f"audit rows after row {seq} are not contiguous (rows "
                                  "deleted, inserted or renumbered)")
            if _row_hash(prev, row, self.key, seq=seq + 1) != row["hash"]:
                self._raise_alarm(f"audit row {seq + 1}: contents do not match its MAC")
            seq, prev = seq + 1, str(row["hash"])
        return seq, prev

    @staticmethod
    def _raw_head(cur: Any) -> tuple[int, str]:
        """(seq, hash) of the newest row as it stands, unchecked (only `accept_broken`)."""
        cur.execute(_HEAD_SQL)
        tail = cur.fetchall()
        if not tail:
            return 0, GENESIS
        row = dict(zip(_ROW_COLUMNS, tail[0], strict=True))
        return int(row["seq"]), str(row["hash"])

    def _raise_alarm(self, problem: str) -> None:
        """Refuse every later append and say so loudly: the log was tampered with."""
        self.alarm = (f"audit log {self.describe()}: {problem}; refusing to append (run "
                      "`privlab audit-log verify`)")
        log.critical("AUDIT LOG ALARM: %s", self.alarm)
        raise AuditLogBroken(self.alarm)

    def _checkpoint_anchor(self) -> tuple[int, str] | None:
        """The signed checkpoint's (seq, hash), None if there is none; a damaged or forged
        checkpoint raises the alarm."""
        if self.checkpoint is None:
            return None
        fd = self._checkpoint_fd()
        fcntl.flock(fd, fcntl.LOCK_SH)
        try:
            data = os.pread(fd, 2 * _SLOT + 1, 0)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        cached = self._cp_cache
        if cached is not None and cached[0] == data:  # unchanged since last read or write
            return cached[1]
        cp = self._parse_checkpoint(data)
        if cp is None:
            return None
        problem = self._checkpoint_problem(cp)
        if problem is not None:
            self._raise_alarm(problem)
        anchor = (int(cp["seq"]), str(cp["hash"]))
        self._cp_cache = (data, anchor)
        return anchor

    # -- checkpoints ------------------------------------------------------------------------

    def _checkpoint_fd(self) -> int:
        """The checkpoint file, open for reading and writing (reopened after a fork: a
        shared open file would share its lock with the parent)."""
        held = self._cp_file
        if not held or held[1] != os.getpid():
            assert self.checkpoint is not None
            if self.closed:
                self._arm()
            held[:] = [os.open(self.checkpoint, os.O_RDWR | os.O_CREAT, 0o600), os.getpid()]
        return held[0]

    def _write_checkpoint(self, seq: int, head: str, reset: bool = False) -> None:
        """Record (seq, hash) of the newest row in the checkpoint file, signed with the key;
        never moves it backwards (several processes append to one log), except on `reset`
        (`accept_broken`: the head the checkpoint names is gone), which writes both slots.

        Two fixed-size slots written in place (`pwrite`, the older slot each time) under an
        exclusive `flock`: a rename per append costs milliseconds on some filesystems,
        this costs microseconds, and a torn write leaves the other slot intact."""
        fd = self._checkpoint_fd()
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            data = os.pread(fd, 2 * _SLOT, 0)
            slots = _read_slots(data)
            seqs = [int(x["seq"]) if isinstance(x, dict) and "seq" in x else -1 for x in slots]
            if max(seqs) >= seq and not reset:
                return
            record = json.dumps({"seq": seq, "hash": head,
                                 "mac": _checkpoint_mac(self.key, seq, head)})
            line = record.ljust(_SLOT - 1).encode("utf-8")[:_SLOT - 1] + b"\n"
            offsets = (0, _SLOT) if reset else (_SLOT * (0 if seqs[0] <= seqs[1] else 1),)
            content = bytearray(data.ljust(2 * _SLOT if reset else offsets[0] + _SLOT,
                                           b"\x00"))
            for offset in offsets:
                os.pwrite(fd, line, offset)
                content[offset:offset + _SLOT] = line
            # what the file now holds: the next append's check need not parse and verify it
            self._cp_cache = (bytes(content), (seq, head))
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def read_checkpoint(self) -> dict[str, Any] | None:
        """The newest slot of the checkpoint (None: no checkpoint; {"invalid": True}: a slot
        that is not a checkpoint record, i.e. damaged or edited)."""
        if self.checkpoint is None or not self.checkpoint.is_file():
            return None
        try:
            data = self.checkpoint.read_bytes()
        except OSError:
            return {"invalid": True}
        return self._parse_checkpoint(data)

    @staticmethod
    def _parse_checkpoint(data: bytes) -> dict[str, Any] | None:
        if not data.strip():
            return None
        slots = _read_slots(data)
        if any(x == "invalid" for x in slots) or len(data) > 2 * _SLOT:
            return {"invalid": True}
        valid = [x for x in slots if isinstance(x, dict)]
        return max(valid, key=lambda x: int(x["seq"])) if valid else None

    def _checkpoint_problem(self, cp: dict[str, Any]) -> str | None:
        """What is wrong with the checkpoint record itself (None: sound and signed)."""
        name = str(self.checkpoint)
        if cp.get("invalid"):
            return f"checkpoint {name}: damaged or edited (not a checkpoint record)"
        try:
            seq, head = int(cp["seq"]), str(cp["hash"])
        except (KeyError, TypeError, ValueError):
            return f"checkpoint {name}: unreadable"
        if self.key is not None and not hmac.compare_digest(
                str(cp.get("mac")), _checkpoint_mac(self.key, seq, head) or ""):
            return (f"checkpoint {name}: signature invalid (edited, or written with another "
                    "key)")
        return None

    @staticmethod
    def _record(row: Any) -> AuditRecord:
        return AuditRecord(
            seq=int(row.seq), query_id=row.query_id, created_at=row.created_at,
            analyst=row.analyst, sql=row.sql, epsilon=row.epsilon, delta=row.delta,
            decision=row.decision, reason=row.reason,
            ledger_entry_id=None if row.ledger_entry_id is None else int(row.ledger_entry_id),
            epsilon_spent=row.epsilon_spent, delta_spent=row.delta_spent,
            result=None if row.result is None else json.loads(row.result), hash=row.hash)

    def history(self, analyst: str, limit: int = 100, before: int | None = None
                ) -> list[AuditRecord]:
        """The analyst's own rows, newest first."""
        q = sa.select(_audit).where(_audit.c.analyst == analyst)
        if before is not None:
            q = q.where(_audit.c.seq < before)
        q = q.order_by(_audit.c.seq.desc()).limit(max(1, min(int(limit), 1000)))
        with self._transaction(read_only=True) as conn:
            return [self._record(r) for r in conn.execute(q).all()]

    def get(self, query_id: str) -> list[AuditRecord]:
        with self._transaction(read_only=True) as conn:
            rows = conn.execute(sa.select(_audit).where(_audit.c.query_id == query_id)
                                .order_by(_audit.c.seq)).all()
        return [self._record(r) for r in rows]

    def query_ids(self) -> set[str]:
        with self._transaction(read_only=True) as conn:
            return set(conn.execute(sa.select(_audit.c.query_id)).scalars())

    def all(self) -> list[AuditRecord]:
        with self._transaction(read_only=True) as conn:
            return [self._record(r) for r in
                    conn.execute(sa.select(_audit).order_by(_audit.c.seq)).all()]

    def verify(self) -> list[str]:
        """Check the log; returns the problems found, the first bad row first (empty:
        intact). Detects an edited row (its hash / HMAC), an edit with the chain
        recomputed (HMAC, given the key), a deleted, inserted, renumbered or reordered row
        (a gap in `seq`, the chain links), deleted newest rows and an edited checkpoint
        (the signed checkpoint's row must be present with the same MAC), and missing,
        disabled or altered append-only triggers (their full definitions)."""
        if not self.exists:
            return ["the audit log does not exist"]
        if self.format != FORMAT:
            return [_format_problem(self.format)]
        problems: list[str] = []
        accepted: list[str] = []
        prev, expected = GENESIS, 1
        rows_by_seq: dict[int, str] = {}
        last_seq = None
        with self._transaction(read_only=True) as conn:
            rows = conn.execute(sa.select(_audit).order_by(_audit.c.seq)).all()
        what = "HMAC" if self.key is not None else "hash"
        for r in rows:
            seq = int(r.seq)
            values = {k: getattr(r, k) for k in _FIELDS}
            if seq != expected:
                problems.append(f"audit rows {expected} to {seq - 1} are missing (a gap in "
                                "seq: rows deleted or renumbered)" if seq > expected else
                                f"audit row {seq}: out of sequence (renumbered)")
                break
            if r.prev_hash != prev:
                problems.append(f"audit row {seq}: does not follow the row before it in the "
                                "chain (a row was deleted, inserted or reordered)")
                break
            if _row_hash(prev, values, self.key, seq=seq) != r.hash:
                problems.append(f"audit row {seq}: contents do not match its {what} (edited"
                                + (")" if self.key is not None else
                                   ", or the log predates the audit key)"))
                break
            prev, expected = r.hash, seq + 1
            rows_by_seq[seq] = r.hash
            last_seq = seq
            if r.decision == "broken_log_accepted":
                # the damage before it (e.g. deleted newest rows) no longer shows in the
                # chain once a row follows it: the log stays broken, and says where
                accepted.append(f"audit row {seq}: the gateway was started on a broken log "
                                f"here ({r.reason})")
        if not problems:
            problems += self._check_checkpoint(rows_by_seq, last_seq)
        problems += accepted + self.trigger_problems()
        if not problems:
            self._seen = None if last_seq is None else (last_seq, rows_by_seq[last_seq])
        return problems

    def _check_checkpoint(self, rows: dict[int, str], last_seq: int | None) -> list[str]:
        cp = self.read_checkpoint()
        if cp is None:
            return []
        name = str(self.checkpoint)
        problem = self._checkpoint_problem(cp)
        if problem is not None:
            return [problem]
        seq, head = int(cp["seq"]), str(cp["hash"])
        if seq not in rows:
            after = "the start" if last_seq is None else f"row {last_seq}"
            return [f"audit rows after {after} are missing: the checkpoint {name} records "
                    f"head row {seq}"]
        if rows[seq] != head:
            return [f"audit row {seq}: differs from the checkpointed head ({name})"]
        return []

    def missing_triggers(self) -> list[str]:
        """Names of the append-only triggers that should exist (enabled) and do not."""
        return sorted(self._trigger_state()[0])

    def trigger_problems(self) -> list[str]:
        """Missing or disabled append-only triggers, and triggers whose definition (or,
        on PostgreSQL, whose function's body) is not the one the gateway created: a
        trigger kept by name but rewritten to let a DELETE through protects nothing."""
        missing, altered = self._trigger_state()
        return ([f"append-only trigger {t} is missing on {_audit.name}" for t in
                 sorted(missing)]
                + [f"append-only trigger {t} on {_audit.name} was altered ({why})"
                   for t, why in sorted(altered.items())])

    def _trigger_state(self) -> tuple[set[str], dict[str, str]]:
        """(missing or disabled trigger names, {altered trigger name: what})."""
        table = _audit.name
        expected = self._expected_triggers()
        altered: dict[str, str] = {}
        with self._transaction(read_only=True) as conn:
            if self.dialect == "sqlite":
                found = dict(conn.exec_driver_sql(
                    "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND "
                    "tbl_name = ?", (table,)).all())
                for name, sql in found.items():
                    if name in expected and _norm(sql or "") != expected[name]:
                        altered[name] = "definition differs"
            else:
                rows = conn.exec_driver_sql(
                    "SELECT t.tgname, pg_get_triggerdef(t.oid), p.prosrc, l.lanname "
                    "FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid "
                    "JOIN pg_language l ON l.oid = p.prolang WHERE t.tgrelid = "
                    "to_regclass(%(t)s) AND NOT t.tgisinternal AND t.tgenabled IN ('O', 'A')",
                    {"t": table}).all()
                found = {}
                for name, definition, body, lang in rows:
                    found[name] = definition
                    if name not in expected:
                        continue
                    if _norm(definition) != expected[name]:
                        altered[name] = "definition differs"
                    elif lang != "plpgsql" or _norm(body) != _norm(_PG_FUNCTION_BODY):
                        altered[name] = "its function privlab_audit_append_only was replaced"
        return set(expected) - set(found), altered

    def head(self) -> tuple[int, int | None]:
        """(number of rows, newest sequence number)."""
        with self._transaction(read_only=True) as conn:
            n, last = conn.execute(sa.select(sa.func.count(), sa.func.max(_audit.c.seq))).one()
        return int(n), None if last is None else int(last)

    def require_intact(self) -> None:
        """Raise `AuditLogBroken` naming the first problem."""
        problems = self.verify()
        if problems:
            raise AuditLogBroken(f"audit log {self.describe()}: {problems[0]}")

    def describe(self) -> str:
        return self.url.render_as_string(hide_password=True)

    def close(self) -> None:
        """Release its connections and checkpoint file (it reopens them if used again)."""
        super().close()


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
            if old.dialect == "postgresql":
                conn.execute(_PG_LOCK)
            for index in sa.inspect(conn).get_indexes(_audit.name):
                conn.exec_driver_sql(f'DROP INDEX IF EXISTS "{index["name"]}"')
            on = "" if old.dialect == "sqlite" else f" ON {_audit.name}"
            for name in old._expected_triggers():
                conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}{on}")
            conn.exec_driver_sql(f"ALTER TABLE {_audit.name} RENAME TO {ARCHIVE_V1}")
            old._triggers(conn, ARCHIVE_V1)  # the archive stays append-only
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
