"""Demo databases and configs for the gateway: UCI Adult in DuckDB or PostgreSQL.

Used by `examples/gateway.yaml`, the benchmark and the tests. Adult's public metadata
(category lists, ranges) follows the dataset's published description (`adult.names`), not
the data: bounds and domains a data owner could state without looking at the records.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from privlab.errors import InvalidInputError

ADULT_COLUMNS: dict[str, dict[str, Any]] = {
    "age": {"type": "int", "bounds": [17, 90], "nullable": False},
    "workclass": {"type": "text", "nullable": False, "domain": [
        "Federal-gov", "Local-gov", "Private", "Self-emp-inc", "Self-emp-not-inc", "State-gov",
        "Without-pay", "Never-worked"]},
    "fnlwgt": {"type": "int", "bounds": [0, 1_500_000], "nullable": False},
    "education": {"type": "text", "nullable": False, "domain": [
        "Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th", "HS-grad",
        "Some-college", "Assoc-voc", "Assoc-acdm", "Bachelors", "Masters", "Prof-school",
        "Doctorate"]},
    "education-num": {"type": "int", "bounds": [1, 16], "nullable": False,
                      "domain": list(range(1, 17))},
    "marital-status": {"type": "text", "nullable": False, "domain": [
        "Divorced", "Married-AF-spouse", "Married-civ-spouse", "Married-spouse-absent",
        "Never-married", "Separated", "Widowed"]},
    "occupation": {"type": "text", "nullable": False, "domain": [
        "Adm-clerical", "Armed-Forces", "Craft-repair", "Exec-managerial", "Farming-fishing",
        "Handlers-cleaners", "Machine-op-inspct", "Other-service", "Priv-house-serv",
        "Prof-specialty", "Protective-serv", "Sales", "Tech-support", "Transport-moving"]},
    "relationship": {"type": "text", "nullable": False, "domain": [
        "Husband", "Not-in-family", "Other-relative", "Own-child", "Unmarried", "Wife"]},
    "race": {"type": "text", "nullable": False, "domain": [
        "Amer-Indian-Eskimo", "Asian-Pac-Islander", "Black", "Other", "White"]},
    "sex": {"type": "text", "nullable": False, "domain": ["Female", "Male"]},
    "capital-gain": {"type": "int", "bounds": [0, 100_000], "nullable": False},
    "capital-loss": {"type": "int", "bounds": [0, 5_000], "nullable": False},
    "hours-per-week": {"type": "int", "bounds": [1, 99], "nullable": False},
    "native-country": {"type": "text", "nullable": False, "partition_selection": True},
    "salary": {"type": "text", "nullable": False, "domain": ["<=50K", ">50K"]},
}


def adult_frame() -> Any:
    """Adult without missing values (30,162 rows), as shipped in privlab."""
    from privlab.data.datasets import load_adult

    return load_adult(drop_missing=True)


def load_adult_duckdb(path: str | Path, table: str = "adult") -> Path:
    """Write Adult into a new DuckDB file (replacing `table` if present)."""
    import duckdb

    path = Path(path)
    frame = adult_frame()
    con = duckdb.connect(str(path))
    try:
        con.register("adult_frame", frame)
        con.execute(f'CREATE OR REPLACE TABLE "{table}" AS SELECT * FROM adult_frame')
    finally:
        con.close()
    return path


def load_adult_postgres(url: str, schema: str = "public", table: str = "adult") -> None:
    """Create `schema.table` in PostgreSQL and COPY Adult into it."""
    import sqlalchemy as sa

    frame = adult_frame()
    types = {c: ("BIGINT" if spec["type"] == "int" else "DOUBLE PRECISION"
                 if spec["type"] == "float" else "TEXT") for c, spec in ADULT_COLUMNS.items()}
    cols = ", ".join(f'"{c}" {types[c]}' for c in frame.columns)
    engine = sa.create_engine(_pg(url))
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            conn.exec_driver_sql(f'DROP TABLE IF EXISTS "{schema}"."{table}"')
            conn.exec_driver_sql(f'CREATE TABLE "{schema}"."{table}" ({cols})')
            buffer = io.StringIO()
            frame.to_csv(buffer, index=False, header=False)
            raw = conn.connection.driver_connection
            names = ", ".join(f'"{c}"' for c in frame.columns)
            with raw.cursor() as cur, \
                    cur.copy(f'COPY "{schema}"."{table}" ({names}) FROM STDIN WITH (FORMAT csv)'
                             ) as copy:
                copy.write(buffer.getvalue())
    finally:
        engine.dispose()


def _pg(url: str) -> str:
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url[len("postgresql://"):]
    if not url.startswith("postgresql"):
        raise InvalidInputError(f"not a PostgreSQL URL: {url!r}")
    return url


def adult_config(database: str, ledger: str, analysts: dict[str, dict[str, Any]], *,
                 schema: str | None = None, audit: str | None = None,
                 limits: dict[str, Any] | None = None, table: str = "adult") -> dict[str, Any]:
    """A gateway config (as a dict) exposing Adult; `analysts` maps names to
    {"key_sha256": ..., "epsilon": ..., "delta": ...}."""
    db: dict[str, Any] = {"url": database}
    if schema:
        db["schema"] = schema
    cfg: dict[str, Any] = {
        "database": db, "ledger": ledger,
        "tables": {table: {"description": "UCI Adult census extract; one row per person",
                           "columns": ADULT_COLUMNS}},
        "analysts": analysts,
    }
    if audit:
        cfg["audit"] = audit
    if limits:
        cfg["limits"] = limits
    return cfg
