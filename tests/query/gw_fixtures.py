"""Fixtures and helpers shared by tests/query and tests/service (star-imported by their
conftest files): Adult and a small multi-row-per-person database in DuckDB, the same in
PostgreSQL when a server is reachable (see scripts/ci-postgres.sh)."""

from __future__ import annotations

import os
import uuid
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
