"""Tamper-evidence of the gateway's audit log (SQLite and PostgreSQL): a keyed HMAC chain
with the key outside the database, a signed head checkpoint in a file apart from the log,
append-only triggers; `privlab audit-log verify`, the start-up check of `privlab serve`,
`--accept-broken-audit-log`, and `serve --check` writing nothing."""

from __future__ import annotations

import importlib.util
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml
from gw_fixtures import DEFAULT_PG_URL, _pg_reachable, analysts

from privlab.cli.main import main
from privlab.query.audit import AuditLog, _row_hash
from privlab.testing.gateway import BASE, PERSONS, write_duckdb

KEY = b"k" * 40
TABLE = "privlab_gateway_audit"
FIELDS = ("query_id", "created_at", "analyst", "sql", "epsilon", "delta", "decision", "reason",
          "ledger_entry_id", "epsilon_spent", "delta_spent", "result")


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh audit database: a SQLite file, or a PostgreSQL database of its own."""
    if request.param == "sqlite":
        yield str(tmp_path / "audit.db")
        return
    required = os.environ.get("PRIVLAB_TEST_POSTGRES_URL")
    pytest.importorskip("psycopg", reason="PostgreSQL tests need the postgres extra: "
                        "pip install -e '.[postgres]'")
    base = required or DEFAULT_PG_URL
    problem = _pg_reachable(base)
    if problem is not None:
        if required:
            pytest.fail(f"PRIVLAB_TEST_POSTGRES_URL is set but unreachable ({problem})")
        pytest.skip(f"no PostgreSQL at {DEFAULT_PG_URL} ({problem}): run "
                    "PRIVLAB_TEST_POSTGRES_URL=<url> scripts/ci-postgres.sh")
    name = f"privlab_audit_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    yield base.rsplit("/", 1)[0] + "/" + name
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.dispose()


def tamper(target: str, *statements: str) -> None:
    """Run SQL behind the gateway's back, with the append-only triggers switched off."""
    url = target if "://" in target else f"sqlite:///{target}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        if "://" in target:
            conn.exec_driver_sql(f"ALTER TABLE {TABLE} DISABLE TRIGGER USER")
        else:
            conn.exec_driver_sql(f"DROP TRIGGER {TABLE}_no_update")
            conn.exec_driver_sql(f"DROP TRIGGER {TABLE}_no_delete")
        for sql in statements:
            conn.exec_driver_sql(sql)
        if "://" in target:
            conn.exec_driver_sql(f"ALTER TABLE {TABLE} ENABLE TRIGGER USER")
        else:
            for op in ("update", "delete"):
                conn.exec_driver_sql(
                    f"CREATE TRIGGER {TABLE}_no_{op} BEFORE {op.upper()} ON {TABLE} BEGIN "
                    "SELECT RAISE(ABORT, 'privlab audit log is append-only'); END")
    engine.dispose()


def rows(target: str) -> list[dict[str, Any]]:
    url = target if "://" in target else f"sqlite:///{target}"
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        out = [dict(r._mapping) for r in
               conn.exec_driver_sql(f"SELECT * FROM {TABLE} ORDER BY seq").all()]
    engine.dispose()
    return out


def filled(target: str, tmp_path: Path, n: int = 5) -> AuditLog:
    log = AuditLog(target, key=KEY, checkpoint=tmp_path / "head.json")
    for i in range(n):
        log.record(f"q{i}", "released", analyst="alice", sql=f"SELECT {i}", epsilon=0.1,
                   result={"rows": [[i]]})
    assert log.verify() == []
    return log


def test_intact_log_verifies_and_the_checkpoint_is_signed(target: str, tmp_path: Path) -> None:
    log = filled(target, tmp_path)
    cp = log.read_checkpoint()
    assert cp is not None and cp["seq"] == rows(target)[-1]["seq"] and len(cp["mac"]) == 64
    assert (tmp_path / "head.json").stat().st_size == 512  # two fixed slots, in place
    # a damaged checkpoint is reported, not ignored
    data = bytearray((tmp_path / "head.json").read_bytes())
    data[3] = ord("#")
    (tmp_path / "head.json").write_bytes(bytes(data))
    assert "damaged or edited" in log.verify()[0]
    (tmp_path / "head.json").write_bytes(b"")
    log.record("q9", "released", analyst="alice", sql="SELECT 9", epsilon=0.1)
    assert log.verify() == []
    assert log.head()[0] == 6 and log.missing_triggers() == []
    # another key (or none) does not verify a keyed chain
    assert AuditLog(target, key=b"x" * 40).verify()[0].startswith("audit row ")
    log.close()


def test_concurrent_appends_are_group_committed_into_one_chain(target: str,
                                                                 tmp_path: Path) -> None:
    """Appends from many threads share transactions (group commit) and still form one
    verifiable chain with every row, each caller getting its own sequence number."""
    import threading
    import time

    log = AuditLog(target, key=KEY, checkpoint=tmp_path / "head.json")
    chain = log._append_chain

    def slow_disk(batch: list[dict[str, Any]]) -> list[int]:
        time.sleep(0.005)  # a slow commit: the other threads queue meanwhile
        return chain(batch)

    log._append_chain = slow_disk  # type: ignore[method-assign]
    seqs: list[int] = []
    lock = threading.Lock()

    def work(t: int) -> None:
        for i in range(25):
            seq = log.record(f"t{t}-{i}", "released", analyst=f"a{t}", sql=f"SELECT {i}",
                             epsilon=0.1, result={"rows": [[t, i]]})
            with lock:
                seqs.append(seq)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stored = rows(target)
    assert len(stored) == 200 and sorted(seqs) == [r["seq"] for r in stored]
    assert {r["query_id"] for r in stored} == {f"t{t}-{i}" for t in range(8) for i in range(25)}
    assert log._appends.requests == 200 and log._appends.batches < 200
    assert log.verify() == [] and log.read_checkpoint()["seq"] == stored[-1]["seq"]
    log.close()


def test_a_failing_row_fails_only_its_own_caller(target: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """If a batch fails, its rows are retried one by one: the bad row's caller gets the
    error, the others are appended and the chain stays intact."""
    from privlab.errors import PrivlabError

    log = AuditLog(target, key=KEY, checkpoint=tmp_path / "head.json")
    chain = log._append_chain

    def picky(batch: list[dict[str, Any]]) -> list[int]:
        if any(v["query_id"] == "bad" for v in batch):
            raise PrivlabError("audit log: database error (DataError)")
        return chain(batch)

    monkeypatch.setattr(log, "_append_chain", picky)
    batch = [{"query_id": q, "created_at": "2026-11-25T00:00:00+00:00", "analyst": "a",
              "sql": None, "epsilon": None, "delta": None, "decision": "refused",
              "reason": None, "ledger_entry_id": None, "epsilon_spent": None,
              "delta_spent": None, "result": None} for q in ("ok1", "bad", "ok2")]
    results = log._append_many(batch)
    assert isinstance(results[1], PrivlabError)
    assert [r["query_id"] for r in rows(target)] == ["ok1", "ok2"]
    assert results[0] == rows(target)[0]["seq"] and results[2] == rows(target)[1]["seq"]
    assert log.verify() == []
    log.close()


def test_edit_is_detected(target: str, tmp_path: Path) -> None:
    log = filled(target, tmp_path)
    seq = rows(target)[2]["seq"]
    tamper(target, f"UPDATE {TABLE} SET reason = 'nothing to see' WHERE seq = {seq}")
    assert log.verify()[0] == f"audit row {seq}: contents do not match its HMAC (edited)"


def test_edit_with_the_chain_recomputed_is_detected(target: str, tmp_path: Path) -> None:
    """The attacker edits row 3 and recomputes every later hash, as the unkeyed chain
    allows; without the key the HMACs cannot be recomputed."""
    log = filled(target, tmp_path)
    all_rows = rows(target)
    all_rows[2]["result"] = '{"rows": [[999]]}'
    prev = all_rows[1]["hash"]
    statements = []
    for r in all_rows[2:]:
        h = _row_hash(prev, {k: r[k] for k in FIELDS}, None, seq=r["seq"])
        result = r["result"].replace("'", "''")
        statements.append(f"UPDATE {TABLE} SET result = '{result}', prev_hash = '{prev}', "
                          f"hash = '{h}' WHERE seq = {r['seq']}")
        prev = h
    tamper(target, *statements)
    assert log.verify()[0] == \
        f"audit row {all_rows[2]['seq']}: contents do not match its HMAC (edited)"


def test_deleting_the_newest_rows_is_detected(target: str, tmp_path: Path) -> None:
    log = filled(target, tmp_path)
    all_rows = rows(target)
    tamper(target, f"DELETE FROM {TABLE} WHERE seq > {all_rows[2]['seq']}")
    assert log.verify()[0] == (f"audit rows after row {all_rows[2]['seq']} are missing: the "
                               f"checkpoint {tmp_path / 'head.json'} records head row "
                               f"{all_rows[-1]['seq']}")
    # rewriting the checkpoint to the shorter head needs the key
    (tmp_path / "head.json").write_text(json.dumps(
        {"seq": all_rows[2]["seq"], "hash": all_rows[2]["hash"], "mac": "0" * 64}))
    assert "signature invalid" in log.verify()[0]


def test_reordering_is_detected(target: str, tmp_path: Path) -> None:
    log = filled(target, tmp_path)
    a, b = rows(target)[1:3]
    cols = [c for c in (*FIELDS, "prev_hash", "hash")]

    def assign(r: dict[str, Any]) -> str:
        def lit(v: Any) -> str:
            return "NULL" if v is None else "'" + str(v).replace("'", "''") + "'" \
                if isinstance(v, str) else repr(v)
        return ", ".join(f"{c} = {lit(r[c])}" for c in cols)

    tamper(target, f"UPDATE {TABLE} SET {assign(b)} WHERE seq = {a['seq']}",
           f"UPDATE {TABLE} SET {assign(a)} WHERE seq = {b['seq']}")
    assert log.verify()[0] == (f"audit row {a['seq']}: does not follow the row before it in "
                               "the chain (a row was deleted, inserted or reordered)")


def test_missing_triggers_are_detected(target: str, tmp_path: Path) -> None:
    log = filled(target, tmp_path)
    url = target if "://" in target else f"sqlite:///{target}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        if "://" in target:
            conn.exec_driver_sql(f"DROP TRIGGER {TABLE}_no_truncate ON {TABLE}")
        else:
            conn.exec_driver_sql(f"DROP TRIGGER {TABLE}_no_delete")
    engine.dispose()
    missing = f"{TABLE}_no_truncate" if "://" in target else f"{TABLE}_no_delete"
    assert log.verify() == [f"append-only trigger {missing} is missing on {TABLE}"]


# --------------------------------------------------------------------------- the CLI

def write_config(tmp_path: Path, audit: str) -> Path:
    db = write_duckdb(tmp_path / "persons.duckdb", BASE)
    cfg = {"database": db, "ledger": str(tmp_path / "ledger.db"), "audit": audit,
           "tables": {"persons": PERSONS}, "analysts": analysts(bob_tables=("persons",))}
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def test_cli_verify_serve_check_and_start_up(target: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    import uvicorn

    started: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: started.append(app))
    config = write_config(tmp_path, target)
    key_file = tmp_path / "gateway.audit-key"
    head = tmp_path / "gateway.audit-head.json"
    # --check on a fresh config creates nothing: no key, no checkpoint, no audit rows
    assert main(["serve", "--config", str(config), "--check", "--json"]) == 0
    assert not key_file.exists() and not head.exists()
    assert "audit log not created yet" in capsys.readouterr().out
    # the first start creates the key (mode 0600) beside the config and serves
    assert main(["serve", "--config", str(config)]) == 0 and len(started) == 1
    assert key_file.stat().st_mode & 0o777 == 0o600
    log = AuditLog(target, key=key_file.read_text().strip().encode(), checkpoint=head)
    for i in range(3):
        log.record(f"q{i}", "released", analyst="alice", sql="SELECT 1", epsilon=0.1)
    n_rows = len(rows(target))
    assert main(["serve", "--config", str(config), "--check"]) == 0
    assert len(rows(target)) == n_rows  # --check wrote no audit row
    capsys.readouterr()
    assert main(["audit-log", "verify", "--config", str(config), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["keyed"] and report["rows"] == n_rows
    # tamper: verify names the row (exit 4), serve and --check refuse to start
    seq = rows(target)[1]["seq"]
    tamper(target, f"UPDATE {TABLE} SET sql = 'SELECT 2' WHERE seq = {seq}")
    assert main(["audit-log", "verify", "--config", str(config)]) == 4
    assert f"audit row {seq}: contents do not match its HMAC" in capsys.readouterr().err
    assert main(["serve", "--config", str(config)]) == 4 and len(started) == 1
    assert f"audit row {seq}" in capsys.readouterr().err
    assert main(["serve", "--config", str(config), "--check"]) == 4
    # accepting it starts, and the acceptance is itself in the log
    assert main(["serve", "--config", str(config), "--accept-broken-audit-log"]) == 0
    assert len(started) == 2
    accepted = [r for r in rows(target) if r["decision"] == "broken_log_accepted"]
    assert len(accepted) == 1 and f"audit row {seq}" in accepted[0]["reason"]


# ------------------------------------------------ issue 22: truncation after later appends

def test_renumbering_seq_is_detected(target: str, tmp_path: Path) -> None:
    """seq is under the MAC: renumbering every row but the checkpointed last one (which
    verified before, since only the links and the head were checked) now fails."""
    log = filled(target, tmp_path)
    last = rows(target)[-1]["seq"]
    tamper(target, f"UPDATE {TABLE} SET seq = seq - 100 WHERE seq < {last}")
    problems = log.verify()
    assert problems and problems[0].startswith("audit row"), problems
    log.close()


def test_a_gap_in_seq_is_detected(target: str, tmp_path: Path) -> None:
    log = filled(target, tmp_path)
    tamper(target, f"UPDATE {TABLE} SET seq = seq + 10 WHERE seq = {rows(target)[-1]['seq']}")
    assert "are missing (a gap in seq" in log.verify()[0]
    log.close()


def gateway_app(target: str, small_duckdb: str, tmp_path: Path) -> Any:
    from gw_fixtures import small_config

    from privlab.query.gateway import Gateway
    from privlab.service import create_app

    cfg = small_config(small_duckdb, str(tmp_path / "ledger.db"), audit=target,
                       audit_key_file=str(tmp_path / "gw.audit-key"),
                       audit_checkpoint=str(tmp_path / "gw.audit-head.json"))
    return create_app(gateway=Gateway(cfg, rng=1))


def test_deleting_the_newest_rows_then_querying_keeps_failing(
        target: str, small_duckdb: str, tmp_path: Path) -> None:
    """Issue 22: drop the trigger, delete the 5 newest rows, recreate it; 6 more queries
    through the running gateway used to chain onto the shorter log until `verify` passed
    again. Now the first append sees that the head it wrote is gone: the gateway answers
    503 (JSON) from then on, appends nothing, and `verify` keeps failing; a fresh writer
    (another worker, a restart) refuses too, from the signed checkpoint."""
    from fastapi.testclient import TestClient
    from gw_fixtures import KEY_A

    from privlab.query.audit import AuditLogBroken

    app = gateway_app(target, small_duckdb, tmp_path)
    client = TestClient(app)
    auth = {"Authorization": f"Bearer {KEY_A}"}
    body = {"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.1}
    for _ in range(8):
        assert client.post("/v1/queries", headers=auth, json=body).status_code == 200
    before = rows(target)
    tamper(target, f"DELETE FROM {TABLE} WHERE seq > {before[-6]['seq']}")
    key = (tmp_path / "gw.audit-key").read_text().strip().encode()
    checker = AuditLog(target, key=key, checkpoint=tmp_path / "gw.audit-head.json")
    assert "are missing" in checker.verify()[0]
    statuses = []
    for _ in range(6):
        r = client.post("/v1/queries", headers=auth, json=body)
        statuses.append(r.status_code)
        assert r.headers["content-type"] == "application/json"
        assert r.json()["error"] == "unavailable"
    assert statuses == [503] * 6
    assert len(rows(target)) == len(before) - 5  # nothing chained onto the truncated log
    assert "are missing" in checker.verify()[0]
    assert app.gateway.audit.alarm is not None
    # a writer that never saw the old head (a second worker, a restart) refuses as well
    with pytest.raises(AuditLogBroken, match="missing or altered"):
        checker.record("x", "refused", analyst="alice", sql="SELECT 1")
    assert len(rows(target)) == len(before) - 5
    # `serve --accept-broken-audit-log`: the acceptance is chained onto the truncated head
    # (a plain append would be refused, as above), and the log never verifies clean again
    seq = checker.accept_broken("y", "started with --accept-broken-audit-log: rows missing")
    assert rows(target)[-1]["seq"] == seq and rows(target)[-1]["decision"] == \
        "broken_log_accepted"
    problems = checker.verify()
    assert problems and f"audit row {seq}: the gateway was started on a broken log" in \
        problems[0]
    checker.record("z", "refused", analyst="alice", sql="SELECT 1")  # appends go on
    assert checker.verify() == problems
    checker.close()
    app.gateway.close()


def test_other_writers_rows_are_expected_altered_ones_are_not(target: str,
                                                              tmp_path: Path) -> None:
    """Two workers / hosts share one log (separate checkpoint files): each one's rows are
    checked, not refused, by the other; an edited row of the other stops the next append."""
    from privlab.query.audit import AuditLogBroken

    a = AuditLog(target, key=KEY, checkpoint=tmp_path / "a.json")
    b = AuditLog(target, key=KEY, checkpoint=tmp_path / "b.json")
    for i in range(4):
        a.record(f"a{i}", "released", analyst="alice", sql="SELECT 1", epsilon=0.1)
        for j in range(i):
            b.record(f"b{i}{j}", "refused", analyst="bob", sql="SELECT 2")
    assert a.verify() == [] and b.verify() == []
    assert [r["seq"] for r in rows(target)] == list(range(1, 11))
    b.record("b-last", "refused", analyst="bob", sql="SELECT 3")
    tamper(target, f"UPDATE {TABLE} SET reason = 'edited' WHERE query_id = 'b-last'")
    with pytest.raises(AuditLogBroken, match="contents do not match"):
        a.record("a-next", "released", analyst="alice", sql="SELECT 1", epsilon=0.1)
    assert a.alarm is not None and len(rows(target)) == 11
    a.close()
    b.close()


def test_trigger_bodies_are_verified(target: str, tmp_path: Path) -> None:
    """A trigger kept by name but rewritten to let rows go (a WHEN clause, another event
    list, a function that returns OLD) is reported; names alone passed before."""
    log = filled(target, tmp_path)
    url = target if "://" in target else f"sqlite:///{target}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        if "://" in target:
            conn.exec_driver_sql(
                "CREATE OR REPLACE FUNCTION privlab_audit_append_only() RETURNS trigger AS $$ "
                "BEGIN RETURN OLD; END; $$ LANGUAGE plpgsql")
        else:
            conn.exec_driver_sql(f"DROP TRIGGER {TABLE}_no_delete")
            conn.exec_driver_sql(
                f"CREATE TRIGGER {TABLE}_no_delete BEFORE DELETE ON {TABLE} WHEN 0 BEGIN "
                "SELECT RAISE(ABORT, 'privlab audit log is append-only'); END")
    problems = log.verify()
    assert problems and all("was altered" in p for p in problems), problems
    if "://" in target:
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "CREATE OR REPLACE FUNCTION privlab_audit_append_only() RETURNS trigger AS $$ "
                "BEGIN RAISE EXCEPTION 'privlab audit log is append-only'; END; $$ "
                "LANGUAGE plpgsql")
            conn.exec_driver_sql(f"DROP TRIGGER {TABLE}_append_only ON {TABLE}")
            conn.exec_driver_sql(
                f"CREATE TRIGGER {TABLE}_append_only BEFORE UPDATE ON {TABLE} FOR EACH ROW "
                "EXECUTE FUNCTION privlab_audit_append_only()")
        assert log.verify() == [f"append-only trigger {TABLE}_append_only on {TABLE} was "
                                "altered (definition differs)"]
    engine.dispose()
    log.close()


def make_v1_log(target: str, checkpoint: Path, n: int = 4) -> list[str]:
    """A log as privlab wrote it before formats: no meta table, seq not under the MAC."""
    from privlab.query.audit import (
        GENESIS,
        _audit,
        _checkpoint_mac,
        _row_hash_v1,
    )

    url = target if "://" in target else f"sqlite:///{target}"
    engine = sa.create_engine(url)
    hashes, prev = [], GENESIS
    with engine.begin() as conn:
        _audit.create(conn)
        for i in range(1, n + 1):
            values = {k: None for k in FIELDS} | {
                "query_id": f"old{i}", "created_at": "2026-11-01T00:00:00+00:00",
                "analyst": "alice", "sql": f"SELECT {i}", "decision": "released"}
            prev = _row_hash_v1(prev, values, KEY)
            conn.execute(sa.insert(_audit).values(seq=i, prev_hash=hashes[-1] if hashes
                                                  else GENESIS, hash=prev, **values))
            hashes.append(prev)
    engine.dispose()
    checkpoint.write_text(json.dumps({"seq": n, "hash": prev,
                                      "mac": _checkpoint_mac(KEY, n, prev)}).ljust(255) + "\n")
    return hashes


def test_old_format_is_refused_then_migrated(target: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from privlab.query.audit import ARCHIVE_V1, AuditFormatError

    config = write_config(tmp_path, target)
    head = tmp_path / "gateway.audit-head.json"
    monkeypatch.setenv("PRIVLAB_AUDIT_KEY", KEY.decode())
    hashes = make_v1_log(target, head)
    with pytest.raises(AuditFormatError, match="privlab audit-log migrate"):
        AuditLog(target, key=KEY, checkpoint=head)
    assert main(["audit-log", "verify", "--config", str(config)]) == 4
    assert "format 1" in capsys.readouterr().err
    if importlib.util.find_spec("fastapi") is not None:
        assert main(["serve", "--config", str(config), "--check"]) == 4
        assert "privlab audit-log migrate" in capsys.readouterr().err
    else:  # a core-only install: serve needs the server extra (exit 5 with the command)
        assert main(["serve", "--config", str(config), "--check"]) == 5
        assert "pip install" in capsys.readouterr().err
    assert main(["audit-log", "migrate", "--config", str(config), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["archived_rows"] == 4 and report["archived_head_hash"] == hashes[-1]
    assert main(["audit-log", "verify", "--config", str(config)]) == 0
    new_rows = rows(target)
    assert [r["decision"] for r in new_rows] == ["log_migrated"]
    assert hashes[-1] in new_rows[0]["reason"] and new_rows[0]["seq"] == 1
    url = target if "://" in target else f"sqlite:///{target}"
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        assert conn.exec_driver_sql(f"SELECT COUNT(*) FROM {ARCHIVE_V1}").scalar() == 4
    with pytest.raises(sa.exc.DBAPIError, match="append-only"), engine.begin() as conn:
        conn.exec_driver_sql(f"DELETE FROM {ARCHIVE_V1}")  # the archive stays protected
    engine.dispose()
    # migrating twice is refused (exit 2), nothing changed
    assert main(["audit-log", "migrate", "--config", str(config)]) == 2  # already format 2


def test_a_worker_sees_truncation_of_rows_another_worker_checkpointed(target: str,
                                                                      tmp_path: Path) -> None:
    """Workers on one host share the checkpoint file: rows another worker appended and
    checkpointed, then deleted, are missed by a check from this worker's own last append
    alone (the rest is contiguous); the checkpoint's head is checked too."""
    from privlab.query.audit import AuditLogBroken

    a = AuditLog(target, key=KEY, checkpoint=tmp_path / "head.json")
    b = AuditLog(target, key=KEY, checkpoint=tmp_path / "head.json")
    a.record("a0", "released", analyst="alice", sql="SELECT 1", epsilon=0.1)
    for i in range(3):
        b.record(f"b{i}", "refused", analyst="bob", sql="SELECT 2")
    tamper(target, f"DELETE FROM {TABLE} WHERE query_id IN ('b1', 'b2')")
    with pytest.raises(AuditLogBroken, match="missing or altered"):
        a.record("a1", "released", analyst="alice", sql="SELECT 1", epsilon=0.1)
    assert [r["query_id"] for r in rows(target)] == ["a0", "b0"]
    a.close()
    b.close()
