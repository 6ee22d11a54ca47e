"""Fixtures of the core tests: a fresh ledger database on each backend (the ledger's and the
store's tests)."""

from __future__ import annotations

import os
import uuid

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

PG_ENV = "PRIVLAB_TEST_POSTGRES_URL"


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request, tmp_path):
    """A fresh, empty database on each backend: a SQLite file, or a PostgreSQL schema of
    its own (dropped afterwards) when PRIVLAB_TEST_POSTGRES_URL is set."""
    if request.param == "sqlite":
        yield str(tmp_path / "ledger.db")
        return
    pytest.importorskip("psycopg", reason="PostgreSQL test: needs the postgres extra: "
                        "pip install -e '.[postgres]'")
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"PostgreSQL test: set {PG_ENV}=postgresql+psycopg://USER@HOST/DB "
                    "to run it (CI provides one)")
    schema = "privlab_test_" + uuid.uuid4().hex[:12]
    admin = sa.create_engine(base)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
    yield url.render_as_string(hide_password=False)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
    admin.dispose()
