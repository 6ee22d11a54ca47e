"""Abuse handling: failed authentications back off per client address, 401 and 429 are
audited compactly and rate-capped (no key material), refusals are logged compactly, and
oversized queries are refused before parsing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from gw_fixtures import KEY_A, small_config

from privlab.query.gateway import Gateway
from privlab.service import app as app_module
from privlab.service import create_app

A = {"Authorization": f"Bearer {KEY_A}"}
BAD = {"Authorization": "Bearer pk_wrong_key_that_must_not_be_logged"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def setup(small_duckdb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
          ) -> tuple[TestClient, Gateway, Clock]:
    clock = Clock()
    monkeypatch.setattr(app_module.time, "monotonic", clock.monotonic)
    gw = Gateway(small_config(small_duckdb, str(tmp_path / "ledger.db"), epsilon=5.0,
                              limits={"rate_per_second": 1, "burst": 3}), rng=2)
    return TestClient(create_app(gateway=gw)), gw, clock


def audit_rows(gw: Gateway, decision: str) -> list[Any]:
    return [r for r in gw.audit.all() if r.decision == decision]


def test_failed_authentication_backs_off_per_address(setup: Any) -> None:
    c, gw, clock = setup
    for _ in range(5):
        assert c.get("/v1/tables", headers=BAD).status_code == 401
    r = c.get("/v1/tables", headers=BAD)  # the 6th failure starts the backoff
    assert r.status_code == 401
    blocked = c.get("/v1/tables", headers=A)  # even a good key waits: nothing is looked up
    assert blocked.status_code == 429 and blocked.headers["retry-after"] == "2"
    assert blocked.json()["error"] == "rate_limited"
    clock.now += 2.5
    assert c.get("/v1/tables", headers=BAD).status_code == 401  # 7th: 4 s now
    assert c.get("/v1/tables", headers=A).headers["retry-after"] == "4"
    clock.now += 4.5
    assert c.get("/v1/tables", headers=A).status_code == 200  # success resets the count
    for _ in range(5):
        assert c.get("/v1/tables", headers=BAD).status_code == 401


def test_401_and_429_are_audited_compactly(setup: Any) -> None:
    c, gw, clock = setup
    for _ in range(4):
        c.get("/v1/budget", headers=BAD)
    rows = audit_rows(gw, "unauthenticated")
    assert len(rows) == 1  # one row per client and kind per 10 s
    assert "pk_wrong" not in str(rows[0]) and rows[0].analyst is None
    assert "client testclient" in rows[0].reason and "GET /v1/budget" in rows[0].reason
    clock.now += 11
    c.get("/v1/budget", headers={})
    rows = audit_rows(gw, "unauthenticated")
    assert len(rows) == 2 and "(+3 similar" in rows[1].reason and "no API key" in rows[1].reason
    # the per-analyst rate limit: burst 3
    codes = [c.get("/v1/tables", headers=A).status_code for _ in range(5)]
    assert codes == [200, 200, 200, 429, 429]
    limited = audit_rows(gw, "rate_limited")
    assert len(limited) == 1 and limited[0].analyst == "alice"
    assert all(len(r.reason or "") <= 300 for r in gw.audit.all())
    assert gw.audit.verify() == []


def test_refusals_are_logged_compactly(setup: Any) -> None:
    c, gw, clock = setup
    sql = "SELECT MAX(age) FROM people WHERE " + " OR ".join(["age > 1"] * 300)
    assert len(sql) < 4000
    r = c.post("/v1/queries", headers=A, json={"sql": sql, "epsilon": 0.5})
    assert r.status_code == 400
    row = audit_rows(gw, "refused")[-1]
    assert len(row.sql) < 300 and "sha256" in row.sql and f"[{len(sql)} chars" in row.sql
    short = "SELECT MAX(age) FROM people"
    c.post("/v1/queries", headers=A, json={"sql": short, "epsilon": 0.5})
    assert audit_rows(gw, "refused")[-1].sql == short


def test_too_many_tokens_is_refused_before_parsing(setup: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    c, gw, clock = setup

    def no_parser(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the parser ran")

    from sqlglot.dialects.dialect import Dialect

    monkeypatch.setattr(type(Dialect.get_or_raise("postgres")), "parser", no_parser)
    sql = "SELECT COUNT(*) FROM people WHERE age IN (" + ",".join(["1"] * 600) + ")"
    r = c.post("/v1/queries", headers=A, json={"sql": sql, "epsilon": 0.5})
    assert r.status_code == 400 and "limits.max_sql_tokens" in r.json()["reason"]
    deep = "SELECT COUNT(*) FROM people WHERE " + "(" * 70 + "age > 1" + ")" * 70
    r = c.post("/v1/queries", headers=A, json={"sql": deep, "epsilon": 0.5})
    assert r.status_code == 400 and "nested" in r.json()["reason"]
    assert c.get("/v1/budget", headers=A).json()["spent_epsilon"] == 0
