"""`AuditLog`: the gateway's append-only, hash-chained log of every query and its decision.

Appends are serialized (SQLite `BEGIN IMMEDIATE`; PostgreSQL an advisory transaction lock) to
keep the chain linear, and group-committed within a process. Before each append batch the
writer checks that the rows from the last head it saw (or the checkpoint's, if newer) to the
database's head are present, contiguous and intact (other writers' rows are expected; missing
or altered ones are not) and otherwise raises the alarm (`AuditLogBroken`, logged, sticky):
new rows never chain onto a truncated log. After every append the signed checkpoint moves
(`privlab.query.audit.checkpoint`). The database handling is `privlab.core.store`'s
(`synchronous = NORMAL`: see the package docstring).
"""

from __future__ import annotations

import json
import logging
import os
import weakref
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from privlab.core.group_commit import GroupCommit
from privlab.core.store import SqlStore, StoreOptions, database_url, pg_advisory_lock
from privlab.errors import PrivlabError
from privlab.query.audit.chain import (
    _AFTER_SQL,
    _ANCHOR_SQL,
    _FIELDS,
    _HEAD_SQL,
    _INSERT_SQL,
    _LOCK_ID,
    _PG_FUNCTION_BODY,
    _PG_LOCK_SQL,
    _ROW_COLUMNS,
    GENESIS,
    _audit,
    _meta,
    _metadata,
    _norm,
    _row_hash,
    create_triggers,
    expected_triggers,
)
from privlab.query.audit.checkpoint import (
    checkpoint_problem,
    parse_checkpoint,
    read_locked,
    write_checkpoint,
)
from privlab.query.audit.records import (
    FORMAT,
    AuditFormatError,
    AuditLogBroken,
    AuditRecord,
    _format_problem,
    row_values,
)
from privlab.utils.text import escape_nul

__all__ = ["AuditLog"]

log = logging.getLogger("privlab.gateway")
#: SQLite: WAL, `synchronous = NORMAL` (a committed row survives a process crash), 30 s busy
#: timeout; pools sized for a threaded gateway
_OPTIONS = StoreOptions(synchronous="NORMAL", busy_timeout_s=30.0,
                        sqlite_pool={"pool_size": 8, "max_overflow": 32},
                        postgresql_pool={"pool_size": 8, "max_overflow": 16})


class AuditLog(SqlStore):
    """`AuditLog(path_or_url)`: append with `record(...)`, read with `history` / `get`.
    `close()` (or `with`) releases its connections; one dropped unclosed warns."""

    def __init__(self, target: str, *, key: bytes | None = None,
                 checkpoint: str | os.PathLike[str] | None = None, create: bool = True) -> None:
        """`key`: the HMAC key of the chain (None: plain SHA-256, which detects edits but
        not an edit whose chain was recomputed); `checkpoint`: the file holding the signed
        head, apart from the database (None: none written or checked); `create=False`
        opens an existing log without creating anything (`exists` tells)."""
        url = database_url(target, setting="audit", example="audit.db")
        self._open_store(url, _OPTIONS, f"AuditLog({url.render_as_string(hide_password=True)!r})")
        self.key = key
        self.checkpoint = None if checkpoint is None else Path(checkpoint)
        # appends form one hash chain: this process's appends are group-committed, one
        # leader at a time (the database lock still orders them across processes); held
        # weakly, so a log dropped unclosed is collected (and warns) at once, not by the gc
        append_many = weakref.WeakMethod(self._append_many)
        self._appends = GroupCommit(lambda batch: append_many()(batch))  # type: ignore[misc]
        #: (seq, hash) of the newest row this process saw intact (None: none yet)
        self._seen: tuple[int, str] | None = None
        #: the checkpoint file's bytes and (seq, hash) as this process last read or wrote them
        self._cp_cache: tuple[bytes, tuple[int, str]] | None = None
        #: the checkpoint file's bytes and its two slots' seq as this process last wrote them
        self._cp_slots: tuple[bytes, tuple[int, int]] | None = None
        #: set when the log was found truncated or altered; every later append refuses
        self.alarm: str | None = None
        self.exists = True
        self.format = FORMAT
        #: [fd, pid] of the open checkpoint file (empty: not open), closed with the store
        self._cp_file = self._side_file
        try:
            self._open(create)
        except BaseException:
            self.close()  # a refused log holds nothing open
            raise

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
            pg_advisory_lock(conn, _LOCK_ID)
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
        create_triggers(conn)

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

    def _expected_triggers(self, table: str = _audit.name) -> dict[str, str]:
        return expected_triggers(self.dialect, table)

    def _store_error(self, exc: Exception) -> PrivlabError:
        return PrivlabError(f"audit log: database error ({type(exc).__name__})")

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
        setup = (_PG_LOCK_SQL,) if self.dialect == "postgresql" else ()
        with self._write_cursor(setup) as cur:
            seqs, prev = self.append_in(cur, rows, accept=accept)
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
            seqs.append(seq)
        # one driver call for the batch: each call gives up the GIL and waits to get it back,
        # inside the serialized write transaction (issue 32)
        if len(rows) == 1:
            cur.execute(_INSERT_SQL[self.dialect], rows[0])
        else:
            cur.executemany(_INSERT_SQL[self.dialect], rows)
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
        data = read_locked(self._checkpoint_fd())
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
        """Move the checkpoint to (seq, head) (`checkpoint.write_checkpoint`)."""
        written = write_checkpoint(self._checkpoint_fd(), seq, head, self.key, reset,
                                   self._cp_slots)
        if written is not None:
            # what the file now holds: the next append's check need not parse and verify it,
            # nor the next write parse its slots
            self._cp_cache = (written[0], (seq, head))
            self._cp_slots = written

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

    _parse_checkpoint = staticmethod(parse_checkpoint)

    def _checkpoint_problem(self, cp: dict[str, Any]) -> str | None:
        """What is wrong with the checkpoint record itself (None: sound and signed)."""
        return checkpoint_problem(cp, str(self.checkpoint), self.key)

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

