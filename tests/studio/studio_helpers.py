"""Helpers of the studio tests (a uniquely named module: `from conftest import` is ambiguous
when several test folders run together): a client per browser session (it opened the
printed URL with the access token), the CSRF token of a
page, and a gateway config with a keyed audit log (built on tests/query's fixtures)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "query"))

from gw_fixtures import analysts  # noqa: E402

from privlab.testing.gateway import BASE, PERSONS, write_duckdb  # noqa: E402

AUDIT_TABLE = "privlab_gateway_audit"
def people_rows(n: int) -> str:
    """A people CSV of n rows (age 20-69, income 1000-1899: inside `PEOPLE_SCHEMA`)."""
    return "age,sex,city,income\n" + "".join(
        f"{20 + (i * 7) % 50},{['F', 'M'][i % 2]},{['Ankara', 'Izmir', 'Kyiv'][i % 3]},"
        f"{1000 + (i * 37) % 900}\n" for i in range(n))


PEOPLE_CSV = people_rows(60)


#: The people table's declared schema the studio tests upload beside their CSV.
PEOPLE_SCHEMA = """name: people
columns:
  age: {type: integer, bounds: [0, 100]}
  sex: {type: categorical, categories: [F, M]}
  city: {type: categorical, categories: [Ankara, Izmir, Kyiv]}
  income: {type: numeric, bounds: [0, 5000]}
"""


def make_client(config_or_app: Any, base_url: str = "http://127.0.0.1:8765") -> Any:
    """A browser session on a studio (a `StudioConfig`, or an app already made, for several
    sessions on one app): a TestClient that opened the printed URL, so it holds the access
    cookie and its own session (every studio has a token unless `no_token`)."""
    from fastapi.testclient import TestClient

    from privlab.studio import StudioConfig, create_app

    app = create_app(config_or_app) if isinstance(config_or_app, StudioConfig) \
        else config_or_app
    client = TestClient(app, base_url=base_url)
    token = app.state.config.token
    if token is not None:
        r = client.get("/", params={"token": token})
        assert r.status_code == 200 and "token=" not in str(r.url), r.text
    return client


def csrf_of(client: Any) -> str:
    page = client.get("/").text
    return re.search(r'name="csrf" value="([^"]+)"', page).group(1)


def gateway_config(folder: Path, n_rows: int = 4) -> Path:
    """A gateway config (DuckDB persons table, SQLite ledger and audit log) whose audit log
    holds `n_rows` rows, one a refusal, chained with an HMAC key beside the config."""
    import yaml

    from privlab.core.ledger import BudgetLedger
    from privlab.query.audit import AuditLog

    folder.mkdir(parents=True, exist_ok=True)
    db = write_duckdb(folder / "persons.duckdb", BASE)
    cfg = {"database": db, "ledger": str(folder / "ledger.db"),
           "audit": str(folder / "audit.db"), "tables": {"persons": PERSONS},
           "analysts": analysts(bob_tables=("persons",))}
    path = folder / "gateway.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    key = "ab" * 32
    (folder / "gateway.audit-key").write_text(key + "\n", encoding="utf-8")
    book = BudgetLedger(str(folder / "ledger.db"))
    book.set_budget("alice", 10.0, 1e-4)
    book.charge("alice", 0.5, description="SELECT COUNT(*) FROM persons")
    book.close()
    log = AuditLog(str(folder / "audit.db"), key=key.encode(),
                   checkpoint=folder / "gateway.audit-head.json")
    for i in range(n_rows - 1):
        log.record(f"q{i}", "released", analyst="alice", sql="SELECT COUNT(*) FROM persons",
                   epsilon=0.5, result={"rows": [[40 + i]]})
    log.record("q-refused", "refused", analyst="bob", sql="SELECT * FROM persons",
               reason="row-level reads are refused")
    log.close()
    return path


def tamper_audit(folder: Path, sql: str) -> None:
    """Edit the audit log behind the gateway's back (append-only triggers switched off)."""
    import sqlalchemy as sa

    engine = sa.create_engine(f"sqlite:///{folder / 'audit.db'}")
    with engine.begin() as conn:
        for op in ("update", "delete"):
            conn.exec_driver_sql(f"DROP TRIGGER {AUDIT_TABLE}_no_{op}")
        conn.exec_driver_sql(sql)
        for op in ("update", "delete"):
            conn.exec_driver_sql(
                f"CREATE TRIGGER {AUDIT_TABLE}_no_{op} BEFORE {op.upper()} ON {AUDIT_TABLE} "
                "BEGIN SELECT RAISE(ABORT, 'privlab audit log is append-only'); END")
    engine.dispose()


class Actions:
    """Counts what a person does in a browser test: clicks, typed entries, choices in a list,
    uploads (issue 31 counts the plan page's actions with it)."""

    def __init__(self, page: Any) -> None:
        self.page, self.n = page, 0

    def click(self, selector: str) -> None:
        self.n += 1
        self.page.click(selector)

    def fill(self, selector: str, text: str) -> None:
        self.n += 1
        self.page.fill(selector, text)

    def select(self, selector: str, value: str) -> None:
        self.n += 1
        self.page.select_option(selector, value)

    def upload(self, selector: str, path: Path) -> None:
        self.n += 1
        self.page.set_input_files(selector, str(path))
