"""Fixtures and helpers shared by tests/query and tests/service (star-imported by their
conftest files): Adult and a small multi-row-per-person database in DuckDB, the same in
PostgreSQL when a server is reachable (see scripts/ci-postgres.sh)."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from privlab.query.config import hash_key, parse_config
from privlab.query.demo import adult_config, load_adult_duckdb, load_adult_postgres

DEFAULT_PG_URL = "postgresql+psycopg://privlab:privlab@127.0.0.1:5433/privlab_test"

# A small database with several rows per person (user-level DP), a private-private join
# on the unit and a public lookup table.
PEOPLE = [(i, 20 + (i * 7) % 50, ["north", "south"][i % 2]) for i in range(1, 41)]
VISITS = [(p, ["Ankara", "Izmir", "Kyiv"][(p + j) % 3], float((p * 13 + j * 5) % 100))
          for p in range(1, 41) for j in range(1 + p % 6)]
# person 1 is a heavy contributor: 50 extra visits of amount 100 (bounded to max_rows)
VISITS += [(1, "Kyiv", 100.0)] * 50
CITIES = [("Ankara", "TR"), ("Izmir", "TR"), ("Kyiv", "UA")]

SMALL_TABLES: dict[str, Any] = {
    "people": {"privacy_unit": "id", "max_rows": 1, "columns": {
        "id": {"type": "int"},
        "age": {"type": "int", "bounds": [18, 80], "nullable": False},
        "region": {"type": "text", "domain": ["north", "south", "east"]},
    }},
    "visits": {"privacy_unit": "person_id", "max_rows": 3, "columns": {
        "person_id": {"type": "int"},
        "city": {"type": "text", "domain": ["Ankara", "Izmir", "Kyiv"],
                 "partition_selection": True},
        "amount": {"type": "float", "bounds": [0, 100]},
    }},
    "cities": {"public": True, "columns": {
        "city": {"type": "text"},
        "country": {"type": "text", "domain": ["TR", "UA"]},
    }},
}
SMALL_JOINS = [{"left": "visits.person_id", "right": "people.id"},
               {"left": "visits.city", "right": "cities.city"}]

KEY_A, KEY_B = "pk_test_alice_0123456789", "pk_test_bob_9876543210"


def _fill_small(execute: Any) -> None:
    execute("CREATE TABLE people (id BIGINT, age BIGINT, region TEXT)")
    execute("CREATE TABLE visits (person_id BIGINT, city TEXT, amount DOUBLE PRECISION)")
    execute("CREATE TABLE cities (city TEXT, country TEXT)")


@pytest.fixture(scope="session")
def adult_duckdb(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(load_adult_duckdb(tmp_path_factory.mktemp("adult") / "adult.duckdb"))


@pytest.fixture(scope="session")
def small_duckdb(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("small") / "small.duckdb"
    con = duckdb.connect(str(path))
    _fill_small(con.execute)
    con.executemany("INSERT INTO people VALUES (?, ?, ?)", PEOPLE)
    con.executemany("INSERT INTO visits VALUES (?, ?, ?)", VISITS)
    con.executemany("INSERT INTO cities VALUES (?, ?)", CITIES)
    con.close()
    return str(path)


def _pg_reachable(url: str) -> str | None:
    import sqlalchemy as sa

    try:
        engine = sa.create_engine(url, connect_args={"connect_timeout": 2})
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
        engine.dispose()
        return None
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
        return f"{type(exc).__name__}"


@pytest.fixture(scope="session")
def pg_url() -> Any:
    """A fresh PostgreSQL database for this test session (dropped at the end)."""
    import sqlalchemy as sa

    required = os.environ.get("PRIVLAB_TEST_POSTGRES_URL")
    pytest.importorskip("psycopg", reason="PostgreSQL tests need the postgres extra: "
                        "pip install -e '.[postgres]'")
    base = required or DEFAULT_PG_URL
    problem = _pg_reachable(base)
    if problem is not None:
        if required:
            pytest.fail(f"PRIVLAB_TEST_POSTGRES_URL is set but no PostgreSQL answers there "
                        f"({problem}); run scripts/ci-postgres.sh first")
        pytest.skip(f"no PostgreSQL at {DEFAULT_PG_URL} ({problem}): run "
                    "PRIVLAB_TEST_POSTGRES_URL=<url> scripts/ci-postgres.sh (root) or set "
                    "PRIVLAB_TEST_POSTGRES_URL to a server you own")
    name = f"privlab_t_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    url = base.rsplit("/", 1)[0] + "/" + name
    yield url
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.dispose()


@pytest.fixture(scope="session")
def adult_pg(pg_url: str) -> str:
    load_adult_postgres(pg_url, schema="data")
    return pg_url


@pytest.fixture(scope="session")
def small_pg(pg_url: str) -> str:
    import sqlalchemy as sa

    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE SCHEMA IF NOT EXISTS small")
        conn.exec_driver_sql("SET search_path TO small")
        _fill_small(conn.exec_driver_sql)
        conn.exec_driver_sql("INSERT INTO people VALUES (%s, %s, %s)", PEOPLE)
        conn.exec_driver_sql("INSERT INTO visits VALUES (%s, %s, %s)", VISITS)
        conn.exec_driver_sql("INSERT INTO cities VALUES (%s, %s)", CITIES)
    engine.dispose()
    return pg_url


def analysts(epsilon: float = 10.0, delta: float = 1e-4, suffix: str = "",
             bob_tables: tuple[str, ...] = ("people",)) -> dict[str, Any]:
    return {f"alice{suffix}": {"key_sha256": hash_key(KEY_A + suffix), "epsilon": epsilon,
                               "delta": delta},
            f"bob{suffix}": {"key_sha256": hash_key(KEY_B + suffix), "epsilon": epsilon,
                             "delta": delta, "tables": list(bob_tables)}}


def small_config(database: str, ledger: str, schema: str | None = None,
                 epsilon: float = 10.0, suffix: str = "", **extra: Any) -> Any:
    db: dict[str, Any] = {"url": database}
    if schema:
        db["schema"] = schema
    raw = {"database": db, "ledger": ledger, "tables": SMALL_TABLES, "joins": SMALL_JOINS,
           "analysts": analysts(epsilon, suffix=suffix), **extra}
    return parse_config(raw)


def adult_cfg(database: str, ledger: str, schema: str | None = None, epsilon: float = 10.0,
              suffix: str = "", **kw: Any) -> Any:
    return parse_config(adult_config(database, ledger,
                                     analysts(epsilon, suffix=suffix, bob_tables=("adult",)),
                                     schema=schema, **kw))


@pytest.fixture(params=["duckdb", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """Where the data and the ledger live: DuckDB + SQLite ledger, or PostgreSQL for both."""
    suffix = "_" + uuid.uuid4().hex[:8]
    if request.param == "duckdb":
        return {"name": "duckdb", "adult": request.getfixturevalue("adult_duckdb"),
                "small": request.getfixturevalue("small_duckdb"), "adult_schema": None,
                "small_schema": None, "ledger": str(tmp_path / "ledger.db"), "suffix": suffix}
    url = request.getfixturevalue("pg_url")
    request.getfixturevalue("adult_pg")
    request.getfixturevalue("small_pg")
    return {"name": "postgres", "adult": url, "small": url, "adult_schema": "data",
            "small_schema": "small", "ledger": url, "suffix": suffix}



ADULT_ANALYST_KEYS = [f"pk_live_analyst_{i}_key" for i in range(8)]


def live_adult_config(database: str, ledger: str, n: int, budget: float) -> Any:
    """Adult with `n` analysts of budget `budget` (keys ADULT_ANALYST_KEYS[:n]) and a spare
    analyst (key ADULT_ANALYST_KEYS[n]) with epsilon 1; no practical rate limit."""
    people = {f"analyst{i}": {"key_sha256": hash_key(ADULT_ANALYST_KEYS[i]), "epsilon": budget}
              for i in range(n)}
    people[f"analyst{n}"] = {"key_sha256": hash_key(ADULT_ANALYST_KEYS[n]), "epsilon": 1.0}
    return parse_config(adult_config(database, ledger, people,
                                     limits={"rate_per_second": 100000, "burst": 100000,
                                             "max_epsilon_per_query": 5}))

# Hostile or unsupported queries and the reason each is refused (a regex); None: accepted
# (a harmless literal). Used by the planner tests and, over HTTP, by the service tests.
HOSTILE = [
    # row-level reads
    ("SELECT * FROM adult", "row-level"),
    ("SELECT age FROM adult", "row-level"),
    ("SELECT age, COUNT(*) FROM adult", "row-level"),
    ("SELECT MAX(age) FROM adult", "extreme row value"),
    ("SELECT MIN(fnlwgt) FROM adult", "extreme row value"),
    # stacked statements and comments
    ("SELECT COUNT(*) FROM adult; DROP TABLE adult", "stacked"),
    ("SELECT COUNT(*) FROM adult; SELECT * FROM adult", "stacked"),
    ("SELECT COUNT(*) FROM adult -- trailing comment", "comments"),
    ("SELECT COUNT(*) FROM adult /* x */ WHERE age > 3", "comments"),
    ("SELECT COUNT(*) FROM adult WHERE sex = 'Male' --' OR 1=1", "comments"),
    ("SELECT COUNT(*) FROM adult WHERE sex = 'Male' OR 1=1 --'", "comments"),
    ("SELECT COUNT(*) FROM adult WHERE sex = 'x' OR 1=1", "at least one column"),
    ("SELECT COUNT(*) FROM adult WHERE sex = 'Male'' OR '1'='1", "tokeniz|not valid"),
    # statements other than SELECT
    ("DROP TABLE adult", "only SELECT"),
    ("INSERT INTO adult (age) VALUES (1)", "only SELECT"),
    ("UPDATE adult SET age = 1", "only SELECT"),
    ("DELETE FROM adult", "only SELECT"),
    ("COPY adult TO '/tmp/x.csv'", "only SELECT|not valid"),
    ("ATTACH '/tmp/x.db' AS x", "only SELECT|not valid"),
    ("PRAGMA database_list", "only SELECT|not valid"),
    ("SET statement_timeout = 0", "only SELECT|not valid"),
    ("EXPLAIN SELECT COUNT(*) FROM adult", "only SELECT|not valid"),
    ("CALL pg_sleep(1)", "only SELECT|not valid"),
    ("SELECT COUNT(*) FROM adult UNION SELECT COUNT(*) FROM adult", "only SELECT"),
    ("WITH x AS (SELECT * FROM adult) SELECT COUNT(*) FROM x", "WITH"),
    # time and side channels
    ("SELECT pg_sleep(10)", "FROM is required|not supported"),
    ("SELECT COUNT(*) FROM adult WHERE pg_sleep(5) IS NULL", "applies to a column"),
    ("SELECT COUNT(*) FROM adult WHERE age > (SELECT 1 FROM pg_sleep(5))", "sub-quer|not "
     "supported"),
    ("SELECT COUNT(*), pg_sleep(1) FROM adult", "not supported"),
    ("SELECT COUNT(*) FROM adult WHERE sex = repeat('a', 100000000)", "not supported"),
    # system tables and files
    ("SELECT COUNT(*) FROM pg_catalog.pg_class", "schema-qualified"),
    ("SELECT COUNT(*) FROM information_schema.tables", "schema-qualified"),
    ("SELECT COUNT(*) FROM pg_user", "not declared"),
    ("SELECT COUNT(*) FROM pg_shadow", "not declared"),
    ("SELECT COUNT(*) FROM sqlite_master", "not declared"),
    ("SELECT COUNT(*) FROM duckdb_tables()", "declared table name only"),
    ("SELECT COUNT(*) FROM read_csv('/etc/passwd')", "declared table name only"),
    ("SELECT COUNT(*) FROM '/etc/passwd'", "declared table name only|not valid|not declared"),
    ("SELECT COUNT(*) FROM main.adult", "schema-qualified"),
    ("SELECT COUNT(*) FROM adult TABLESAMPLE (10)", "modifiers|not supported"),
    ("SELECT COUNT(*) FROM (SELECT * FROM adult) AS t", "declared table name only"),
    # row values through GROUP BY, errors and sub-queries
    ("SELECT fnlwgt, COUNT(*) FROM adult GROUP BY fnlwgt", "no public domain"),
    ("SELECT age, COUNT(*) FROM adult GROUP BY age", "no public domain"),
    ("SELECT COUNT(*) FROM adult GROUP BY 1", "column names only"),
    ("SELECT COUNT(*) FROM adult GROUP BY ROLLUP (sex)", "column names only|ROLLUP"),
    ("SELECT COUNT(*) FROM adult GROUP BY age + 0", "column names only"),
    ("SELECT COUNT(*) FROM adult WHERE CAST(workclass AS INT) = 1", "CAST"),
    ("SELECT COUNT(*) FROM adult WHERE 1 / (age - 39) > 0", "DIV|not supported"),
    ("SELECT COUNT(*) FROM adult WHERE age * 100000000000 > 1", "MUL|not supported"),
    ("SELECT COUNT(*) FROM adult WHERE sex = 1", "type mismatch"),
    ("SELECT COUNT(*) FROM adult WHERE age = 'abc'", "type mismatch"),
    ("SELECT COUNT(*) FROM adult WHERE sex > age", "type mismatch"),
    ("SELECT COUNT(*) FROM adult WHERE age LIKE '3%'", "text columns"),
    ("SELECT COUNT(*) FROM adult WHERE age IN (SELECT age FROM adult)", "sub-quer|literals"),
    ("SELECT COUNT(*) FROM adult WHERE EXISTS (SELECT 1 FROM adult)", "sub-quer"),
    ("SELECT COUNT(*) FROM adult WHERE age = NULL", "IS NULL"),
    ("SELECT COUNT(DISTINCT fnlwgt) FROM adult", "privacy unit"),
    ("SELECT SUM(DISTINCT age) FROM adult", "DISTINCT"),
    ("SELECT SUM(workclass) FROM adult", "numeric column"),
    ("SELECT SUM(age + 1) FROM adult", "column name"),
    ("SELECT SUM(COUNT(*)) FROM adult", "column name"),
    ("SELECT COUNT(*) FILTER (WHERE age > 30) FROM adult", "FILTER"),
    ("SELECT AVG(age) OVER () FROM adult", "window"),
    ("SELECT COUNT(*) FROM adult HAVING COUNT(*) > 10", "HAVING"),
    ("SELECT DISTINCT sex FROM adult", "DISTINCT"),
    ("SELECT COUNT(*) FROM adult LIMIT (SELECT 1)", "LIMIT"),
    ("SELECT COUNT(*) FROM adult ORDER BY age", "ORDER BY"),
    ("SELECT COUNT(*) FROM adult a JOIN adult b ON a.age = b.age", "twice"),
    ("SELECT COUNT(*) FROM adult, people", "ON a.col = b.col|comma"),
    ("SELECT COUNT(*) FROM visits LEFT JOIN people ON visits.person_id = people.id",
     "INNER JOIN"),
    ("SELECT COUNT(*) FROM adult WHERE age > 1e999", "finite"),
    ("SELECT COUNT(*) FROM adult WHERE age > 99999999999999999999999", "64 bits"),
    ("SELECT PERCENTILE_CONT(1.5) WITHIN GROUP (ORDER BY age) FROM adult", r"\[0, 1\]"),
    # LIKE patterns ending in their escape character (a PostgreSQL error oracle)
    ("SELECT COUNT(*) FROM adult WHERE sex LIKE 'Ma\\'", "escape character"),
    ("SELECT COUNT(*) FROM adult WHERE sex ILIKE 'ma\\'", "escape character"),
    ("SELECT COUNT(*) FROM adult WHERE sex NOT LIKE '\\'", "escape character"),
    ("SELECT COUNT(*) FROM adult WHERE sex LIKE 'Ma#' ESCAPE '#'", "escape character"),
    ("SELECT COUNT(*) FROM adult WHERE sex LIKE 'Ma' ESCAPE ''", "ESCAPE takes one"),
    # unicode tricks
    ("SELECT COUNT(*) FROM \u0430dult", "not declared"),  # Cyrillic a
    ("SELECT COUNT(*) FROM adult WHERE \u0430ge > 3", "not declared"),
    ("SELECT COUNT(*) FROM adult\u200b", "U\\+200B"),  # zero-width space
    ("SELECT COUNT(*) FROM adult WHERE sex = 'Male\u202e'", "U\\+202E"),  # RTL override
    ("SELECT COUNT(*) FROM adult\x00; DROP TABLE adult", "U\\+0000"),
    ("\uff33\uff25\uff2c\uff25\uff23\uff34 COUNT(*) FROM adult", "not valid|tokeniz|only"),
    ("SELECT COUNT(*) FROM adult WHERE sex = 'M\u0430le'", None),  # a literal: just a filter
    # huge or deep
    ("SELECT COUNT(*) FROM adult WHERE age > 1" + " AND age > 1" * 400, "longer"),
    ("SELECT COUNT(*) FROM adult WHERE " + "(" * 80 + "age > 1" + ")" * 80, "nested"),
    ("SELECT COUNT(*) FROM adult WHERE age IN (" + ",".join(["1"] * 1200) + ")",
     "IN lists|max_sql_tokens"),
    ("", "empty"),
    ("   ", "empty"),
]



@contextlib.contextmanager
def serve_on_loopback(app: Any, backlog: int = 2048,
                      log_level: str = "warning") -> Iterator[str]:
    """Run the ASGI `app` under uvicorn in a thread on a free 127.0.0.1 port; yields its
    base URL and stops the server on exit (`log_level="trace"` makes uvicorn wrap the app
    in its message logger)."""
    import socket
    import threading
    import time

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    from privlab.service.http import uvicorn_options

    # the gateway runs with the settings `privlab serve` gives uvicorn
    gateway = getattr(app, "gateway", None)
    options = uvicorn_options(gateway.config) if gateway is not None else {}
    server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, access_log=False,
                                           backlog=backlog, **options))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
