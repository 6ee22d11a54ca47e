"""Config validation, the example config, engine hardening and the audit log's integrity."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml
from gw_fixtures import SMALL_JOINS, SMALL_TABLES, analysts

from privlab.engines import DuckDBEngine, EngineError, PostgresEngine
from privlab.errors import InvalidInputError
from privlab.query.audit import AuditLog
from privlab.query.config import hash_key, load_config, new_key, parse_config
from privlab.query.demo import EXAMPLE_KEY, init_demo, render_config

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gateway.yaml"


def base() -> dict[str, Any]:
    return {"database": "data.duckdb", "ledger": "ledger.db",
            "tables": copy.deepcopy(SMALL_TABLES), "joins": list(SMALL_JOINS),
            "analysts": analysts()}


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda c: c["tables"]["people"]["columns"]["age"].update(bounds=[80, 18]),
     "tables.people.columns.age.bounds"),
    (lambda c: c["tables"]["people"]["columns"]["age"].update(bounds=[1.5, 3]),
     "tables.people.columns.age.bounds"),
    (lambda c: c["tables"]["people"]["columns"]["region"].update(bounds=[0, 1]),
     "tables.people.columns.region.bounds"),
    (lambda c: c["tables"]["people"]["columns"]["region"].update(domain=["a", 1]),
     "tables.people.columns.region.domain"),
    (lambda c: c["tables"]["people"]["columns"]["age"].update(type="decimal"),
     "tables.people.columns.age.type"),
    (lambda c: c["tables"]["people"].update(privacy_unit="nope"),
     "tables.people.privacy_unit"),
    (lambda c: c["tables"]["visits"].update(max_rows=0), "tables.visits.max_rows"),
    (lambda c: c["tables"]["people"].pop("privacy_unit") and
     c["tables"]["people"].update(max_rows=5), "tables.people.max_rows"),
    (lambda c: c["joins"].append({"left": "visits.amount", "right": "people.id"}),
     "joins[2]"),
    (lambda c: c["analysts"]["alice"].update(key_sha256="secret"),
     "analysts.alice.key_sha256"),
    (lambda c: c["analysts"]["alice"].update(key="pk_plain"), "analysts.alice"),
    (lambda c: c["analysts"]["alice"].update(epsilon=-1), "analysts.alice.epsilon"),
    (lambda c: c["analysts"]["bob"].update(tables=["secret"]), "analysts.bob.tables"),
    (lambda c: c["analysts"]["bob"].update(key_sha256=c["analysts"]["alice"]["key_sha256"]),
     "analysts"),
    (lambda c: c.update(limits={"burst": 0}), "limits.burst"),
    (lambda c: c.update(extra=1), "config"),
    (lambda c: c.update(database={"url": "data.duckdb", "threads": 0}), "database.threads"),
    (lambda c: c.update(database={"url": "data.duckdb", "threads": "4"}), "database.threads"),
    (lambda c: c["tables"]["people"]["columns"]["age"].update(bounds=[0, 1e16]),
     "tables.people.columns.age.bounds"),
    (lambda c: c["tables"]["visits"].update(min_epsilon_per_query=0),
     "tables.visits.min_epsilon_per_query"),
    (lambda c: c["tables"]["visits"].update(min_epsilon_per_query="0.1"),
     "tables.visits.min_epsilon_per_query"),
    (lambda c: c["tables"]["visits"].update(min_epsilon_per_query=20),
     "tables.visits.min_epsilon_per_query"),
    # a NaN or infinite group key could never be released as JSON; ints fit in 64 bits
    (lambda c: c["tables"]["visits"]["columns"]["amount"].update(domain=[1.0, float("nan")]),
     "tables.visits.columns.amount.domain"),
    (lambda c: c["tables"]["visits"]["columns"]["amount"].update(domain=[float("inf")]),
     "tables.visits.columns.amount.domain"),
    (lambda c: c["tables"]["people"]["columns"]["age"].update(domain=[20, 2**63]),
     "tables.people.columns.age.domain"),
])
def test_config_errors_name_the_field(mutate: Any, field: str) -> None:
    raw = base()
    mutate(raw)
    with pytest.raises(InvalidInputError) as info:
        parse_config(raw)
    assert str(info.value).startswith(field + ":"), str(info.value)
    assert "\n" not in str(info.value)


def test_duckdb_threads_default_to_one_per_query() -> None:
    assert parse_config(base()).threads == 1
    raw = base()
    raw["database"] = {"url": "data.duckdb", "threads": 4}
    assert parse_config(raw).threads == 4


def test_paths_are_relative_to_the_config_and_audit_defaults_to_the_ledger(
        tmp_path: Path) -> None:
    (tmp_path / "gateway.yaml").write_text(yaml.safe_dump(base()))
    cfg = load_config(tmp_path / "gateway.yaml")
    assert cfg.database == str(tmp_path / "data.duckdb")
    # one database: an answered query's charge and audit row share one commit
    assert cfg.audit_target == cfg.ledger
    # a log kept apart by an older privlab stays where it is
    (tmp_path / "ledger-audit.db").write_bytes(b"")
    assert cfg.audit_target == str(tmp_path / "ledger-audit.db")
    pg = parse_config({**base(), "ledger": "postgresql+psycopg://u@127.0.0.1/db"})
    assert pg.audit_target == "postgresql+psycopg://u@127.0.0.1/db"
    (tmp_path / "bad.yaml").write_text("tables: [unclosed")
    with pytest.raises(InvalidInputError, match="not valid YAML"):
        load_config(tmp_path / "bad.yaml")


def test_keys_are_random_and_only_their_hash_is_stored() -> None:
    a, b = new_key(), new_key()
    assert a != b and len(a) > 40 and hash_key(a) != hash_key(b)
    cfg = parse_config(base())
    assert cfg.analyst_by_key("pk_test_alice_0123456789").name == "alice"
    assert cfg.analyst_by_key("pk_test_alice_012345678") is None


def test_example_config_is_the_rendered_template() -> None:
    assert EXAMPLE.read_text() == render_config(hash_key(EXAMPLE_KEY))
    cfg = load_config(EXAMPLE)
    assert set(cfg.tables) == {"adult", "ratings", "movies"}
    assert cfg.tables["ratings"].privacy_unit == "userId"


def test_init_demo_builds_a_servable_gateway(tmp_path: Path) -> None:
    from privlab.query.gateway import Gateway

    path, key = init_demo(tmp_path / "demo")
    cfg = load_config(path)
    analyst = cfg.analyst_by_key(key)
    g = Gateway(cfg, rng=1)
    r = g.query(analyst, "SELECT r.rating, COUNT(*) FROM ratings r JOIN movies m "
                         "ON r.movieId = m.movieId WHERE m.genres LIKE '%Comedy%' "
                         "GROUP BY r.rating", 1.0)
    assert len(r["rows"]) == 10 and r["guarantee"]["neighbouring"] == "user"
    g.close()
    with pytest.raises(InvalidInputError, match="exists"):
        init_demo(tmp_path / "demo")


def test_min_epsilon_per_query_defaults_and_is_public() -> None:
    cfg = parse_config(base())
    assert cfg.tables["people"].min_epsilon_per_query == 0.01
    raw = base()
    raw["tables"]["people"]["min_epsilon_per_query"] = 0.2
    meta = parse_config(raw).tables["people"].public_metadata()
    assert meta["min_epsilon_per_query"] == 0.2


def test_declared_types_must_match_the_database(tmp_path: Path) -> None:
    """A text column declared int would make the engine cast every row, and a cast that
    fails on one row is an error that reveals it: refused at start-up, naming the field."""
    import duckdb

    from privlab.query.gateway import Gateway

    path = tmp_path / "typed.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t (id BIGINT, code VARCHAR, score DECIMAL(6, 2), ok BOOLEAN)")
    con.close()

    def cfg(code_type: str) -> Any:
        return parse_config({
            "database": str(path), "ledger": str(tmp_path / f"l-{code_type}.db"),
            "tables": {"t": {"columns": {"id": {"type": "int"}, "code": {"type": code_type},
                                         "score": {"type": "float", "bounds": [0, 100]},
                                         "ok": {"type": "bool"}}}},
            "analysts": analysts(bob_tables=("t",))})

    Gateway(cfg("text")).close()
    for wrong in ("int", "float", "bool"):
        with pytest.raises(InvalidInputError) as info:
            Gateway(cfg(wrong))
        assert str(info.value).startswith("tables.t.columns.code.type: declared " + wrong)
        assert "VARCHAR" in str(info.value)


def test_declared_types_must_match_on_postgres(pg_url: str, tmp_path: Path) -> None:
    from privlab.query.gateway import Gateway

    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE SCHEMA typed")
        conn.exec_driver_sql("CREATE TABLE typed.t (id INTEGER, code VARCHAR(20), "
                             "score NUMERIC(6, 2), ok BOOLEAN)")
    engine.dispose()

    def cfg(code_type: str) -> Any:
        return parse_config({
            "database": {"url": pg_url, "schema": "typed"},
            "ledger": str(tmp_path / f"l-{code_type}.db"),
            "tables": {"t": {"columns": {"id": {"type": "int"}, "code": {"type": code_type},
                                         "score": {"type": "float", "bounds": [0, 100]},
                                         "ok": {"type": "bool"}}}},
            "analysts": analysts(bob_tables=("t",))})

    Gateway(cfg("text")).close()
    with pytest.raises(InvalidInputError, match=r"^tables\.t\.columns\.code\.type: declared int "
                       r"but the database column is character varying"):
        Gateway(cfg("int"))


def test_duckdb_engine_is_read_only_sandboxed_and_interruptible(adult_duckdb: str) -> None:
    engine = DuckDBEngine(adult_duckdb, timeout_s=0.3)
    assert engine.run("SELECT COUNT(*) FROM adult")[0][0] == 30162
    for sql in ("SELECT * FROM read_csv('/etc/passwd')", "CREATE TABLE x (a INT)",
                "SET enable_external_access = true", "INSTALL httpfs",
                "SELECT SUM(a.range * b.range) FROM range(200000000) a, range(100) b"):
        with pytest.raises(EngineError) as info:
            engine.run(sql)
        assert "passwd" not in str(info.value)
    assert engine.run("SELECT 1")[0][0] == 1  # still usable after an interrupt
    engine.close()


def test_postgres_engine_is_read_only_with_a_timeout(adult_pg: str) -> None:
    engine = PostgresEngine(adult_pg, timeout_s=0.3)
    assert engine.run('SELECT COUNT(*) FROM "data"."adult"')[0][0] == 30162
    for sql in ("CREATE TABLE x (a INT)", "SELECT pg_sleep(3)",
                'DELETE FROM "data"."adult"'):
        with pytest.raises(EngineError):
            engine.run(sql)
    assert engine.run('SELECT COUNT(*) FROM "data"."adult"')[0][0] == 30162
    engine.close()


def test_audit_log_is_append_only_and_hash_chained(tmp_path: Path) -> None:
    log = AuditLog(str(tmp_path / "audit.db"))
    for i in range(3):
        log.record(f"q{i}", "released", analyst="alice", sql="SELECT 1", epsilon=0.1,
                   result={"rows": [[i]]})
    assert log.verify() == []
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'audit.db'}")
    with pytest.raises(sa.exc.DatabaseError, match="append-only"), engine.begin() as conn:
        conn.exec_driver_sql("UPDATE privlab_gateway_audit SET decision = 'refused'")
    with pytest.raises(sa.exc.DatabaseError, match="append-only"), engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM privlab_gateway_audit")
    with engine.begin() as conn:  # someone with file access drops the trigger and edits
        conn.exec_driver_sql("DROP TRIGGER privlab_gateway_audit_no_update")
        conn.exec_driver_sql("UPDATE privlab_gateway_audit SET result = '{\"rows\": [[9]]}' "
                             "WHERE query_id = 'q1'")
    problems = log.verify()
    assert problems[0].startswith("audit row 2: contents do not match its hash")
    assert problems[1:] == ["append-only trigger privlab_gateway_audit_no_update is missing "
                            "on privlab_gateway_audit"]
