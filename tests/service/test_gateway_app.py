"""HTTP layer: authentication, isolation, limits, error codes and hostile input (TestClient)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
from fastapi.testclient import TestClient
from gw_fixtures import HOSTILE, KEY_A, KEY_B, adult_cfg, small_config

from privlab.query.gateway import Gateway
from privlab.service import create_app

A = {"Authorization": f"Bearer {KEY_A}"}
B = {"Authorization": f"Bearer {KEY_B}"}


def client_for(cfg: Any, rng: int | None = 3) -> TestClient:
    return TestClient(create_app(gateway=Gateway(cfg, rng=rng)))


@pytest.fixture
def small(small_duckdb: str, tmp_path: Path) -> TestClient:
    return client_for(small_config(small_duckdb, str(tmp_path / "ledger.db"), epsilon=1.0))


NO_RATE_LIMIT = {"rate_per_second": 1e6, "burst": 1_000_000}


@pytest.fixture(scope="module")
def adult_pair(adult_duckdb: str, tmp_path_factory: pytest.TempPathFactory
               ) -> tuple[TestClient, TestClient]:
    """Two gateways over different data (all of Adult; its first 100 rows)."""
    d = tmp_path_factory.mktemp("pair")
    few = d / "few.duckdb"
    con = duckdb.connect(str(few))
    con.execute(f"ATTACH '{adult_duckdb}' AS src (READ_ONLY)")
    con.execute("CREATE TABLE adult AS SELECT * FROM src.adult LIMIT 100")
    con.close()
    # these gateways answer long hostile lists as fast as the machine allows: no rate limit
    # (a quiet machine otherwise hits the default 50/s with burst 100 and gets 429s)
    full = client_for(adult_cfg(adult_duckdb, str(d / "l1.db"), epsilon=1000.0,
                                limits=NO_RATE_LIMIT))
    small_ = client_for(adult_cfg(str(few), str(d / "l2.db"), epsilon=1000.0,
                                  limits=NO_RATE_LIMIT))
    return full, small_


def test_health_and_openapi_need_no_key(small: TestClient) -> None:
    assert small.get("/healthz").json()["status"] == "ok"
    doc = small.get("/openapi.json").json()
    assert {"/v1/queries", "/v1/budget", "/v1/tables"} <= set(doc["paths"])


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer nope"},
                                     {"Authorization": "Bearer ' OR 1=1 --"},
                                     {"X-API-Key": "x" * 5000}, {"Authorization": KEY_A}])
def test_unknown_keys_get_401_everywhere(small: TestClient, headers: dict[str, str]) -> None:
    for method, path in (("GET", "/v1/tables"), ("GET", "/v1/budget"), ("GET", "/v1/queries"),
                         ("POST", "/v1/queries"), ("GET", "/v1/queries/abc")):
        r = small.request(method, path, headers=headers,
                          json={"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.1})
        assert r.status_code == 401 and r.json()["error"] == "unauthorized"
        assert r.headers["www-authenticate"] == "Bearer"


def test_query_answer_shape(small: TestClient) -> None:
    r = small.post("/v1/queries", headers=A, json={
        "sql": "SELECT region, COUNT(*) AS n, AVG(age) FROM people GROUP BY region",
        "epsilon": 0.5})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["columns"] == ["region", "n", "avg_age"]
    assert [row[0] for row in body["rows"]] == ["north", "south", "east"]
    assert body["guarantee"]["epsilon"] == 0.5 and body["guarantee"]["neighbouring"] == "user"
    assert body["column_info"][1]["confidence_interval_95"] > 0
    assert body["remaining_budget"] == {"epsilon": 0.5, "delta": 1e-4}
    assert body["epsilon_spent"] == 0.5
    # X-API-Key works too
    r = small.get("/v1/budget", headers={"X-API-Key": KEY_A})
    assert r.json()["remaining_epsilon"] == 0.5 and r.json()["analyst"] == "alice"


def test_isolation_between_analysts(small: TestClient) -> None:
    qid = small.post("/v1/queries", headers=A, json={"sql": "SELECT COUNT(*) FROM people",
                                                     "epsilon": 0.1}).json()["query_id"]
    assert small.get(f"/v1/queries/{qid}", headers=A).json()["events"][0]["decision"] == \
        "released"
    r = small.get(f"/v1/queries/{qid}", headers=B)
    missing = small.get("/v1/queries/" + "0" * 32, headers=B)
    # another analyst's query reads exactly like a missing one (ids are not confirmed)
    assert r.status_code == missing.status_code == 404 and r.json() == missing.json()
    assert small.get("/v1/budget?analyst=alice", headers=B).status_code == 403
    assert small.get("/v1/budget?analyst=bob", headers=B).status_code == 200
    assert small.get("/v1/queries", headers=B).json()["queries"] == []
    assert len(small.get("/v1/queries", headers=A).json()["queries"]) == 1
    r = small.post("/v1/queries", headers=B, json={"sql": "SELECT COUNT(*) FROM visits",
                                                   "epsilon": 0.1})
    missing = small.post("/v1/queries", headers=B, json={"sql": "SELECT COUNT(*) FROM visitz",
                                                         "epsilon": 0.1})
    # a table bob may not query reads exactly like a missing one (names are not confirmed)
    assert r.status_code == missing.status_code == 400
    assert r.json() == {**missing.json(), "reason": missing.json()["reason"].replace(
        "'visitz'", "'visits'")}
    assert [t["name"] for t in small.get("/v1/tables", headers=B).json()["tables"]] == ["people"]
    assert small.get("/v1/queries/00000000000000000000000000000000", headers=A).status_code == 404
    assert small.get("/v1/queries/1' OR '1'='1", headers=A).status_code == 404


def test_tables_show_public_metadata_only(small: TestClient) -> None:
    doc = small.get("/v1/tables", headers=A).json()
    visits = next(t for t in doc["tables"] if t["name"] == "visits")
    assert visits["privacy_unit"] == "person_id" and visits["max_rows_per_unit"] == 3
    assert visits["columns"]["amount"] == {"type": "float", "nullable": True, "bounds": [0, 100]}
    assert {"left": "visits.person_id", "right": "people.id"} in doc["joins"]
    text = str(doc)
    assert "key_sha256" not in text and "ledger" not in text


def test_budget_exceeded_is_402_and_charges_nothing(small: TestClient) -> None:
    ok = small.post("/v1/queries", headers=A, json={"sql": "SELECT COUNT(*) FROM people",
                                                    "epsilon": 1.0})
    assert ok.status_code == 200
    r = small.post("/v1/queries", headers=A, json={"sql": "SELECT COUNT(*) FROM people",
                                                   "epsilon": 0.01})
    assert r.status_code == 402 and r.json()["error"] == "budget_exceeded"
    assert small.get("/v1/budget", headers=A).json()["spent_epsilon"] == 1.0


@pytest.mark.parametrize("body", [
    {"sql": "SELECT COUNT(*) FROM people"},
    {"epsilon": 0.1},
    {"sql": "SELECT COUNT(*) FROM people", "epsilon": "1; DROP TABLE people"},
    {"sql": "SELECT COUNT(*) FROM people", "epsilon": -1},
    {"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.1, "delta": "0 OR 1=1"},
    {"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.1, "delta": 1.5},
    {"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.1, "mechanism": "laplace'; DROP --"},
    {"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.1, "admin": True},
    {"sql": ["SELECT COUNT(*) FROM people"], "epsilon": 0.1},
    {"sql": 42, "epsilon": 0.1},
    b'{"sql": "SELECT COUNT(*) FROM people", "epsilon": 1e999}',
    b'{"sql": "SELECT COUNT(*) FROM people", "epsilon": NaN}',
    b'{"sql": "SELECT COUNT(*) FROM people", "epsilon": Infinity, "delta": 0}',
])
def test_injection_in_every_field_is_refused(small: TestClient, body: Any) -> None:
    if isinstance(body, bytes):
        r = small.post("/v1/queries", headers={**A, "Content-Type": "application/json"},
                       content=body)
    else:
        r = small.post("/v1/queries", headers=A, json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"] == "refused"
    assert small.get("/v1/budget", headers=A).json()["spent_epsilon"] == 0.0


def test_not_json_and_wrong_methods(small: TestClient) -> None:
    r = small.post("/v1/queries", headers={**A, "Content-Type": "application/json"},
                   content=b"{not json")
    assert r.status_code == 400
    assert small.get("/v1/queries?limit=abc", headers=A).status_code == 400
    assert small.get("/v1/queries?limit=100000", headers=A).status_code == 400
    assert small.delete("/v1/queries", headers=A).status_code == 405


def test_request_size_limits(small_duckdb: str, tmp_path: Path) -> None:
    c = client_for(small_config(small_duckdb, str(tmp_path / "l.db"),
                                limits={"max_request_bytes": 2000, "max_sql_chars": 500}))
    big = {"sql": "SELECT COUNT(*) FROM people WHERE age > 1" + " AND age > 1" * 300,
           "epsilon": 0.1}
    r = c.post("/v1/queries", headers=A, json=big)
    assert r.status_code == 413 and r.json()["error"] == "too_large"
    r = c.post("/v1/queries", headers=A,
               json={"sql": "SELECT COUNT(*) FROM people WHERE age > 1" + " AND age > 1" * 60,
                     "epsilon": 0.1})
    assert r.status_code == 400  # under the byte limit, over the SQL length limit

    def chunks():
        yield b'{"sql": "SELECT COUNT(*) FROM people", '
        yield b'"epsilon": 0.1}'

    r = c.post("/v1/queries", headers=A, content=chunks())
    assert r.status_code == 411


def test_rate_limit_per_analyst(small_duckdb: str, tmp_path: Path) -> None:
    c = client_for(small_config(small_duckdb, str(tmp_path / "l.db"),
                                limits={"rate_per_second": 0.5, "burst": 3}))
    codes = [c.get("/v1/budget", headers=A).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    r = c.get("/v1/budget", headers=A)
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    assert c.get("/v1/budget", headers=B).status_code == 200  # bob has his own bucket


def test_hostile_inputs_get_identical_answers_on_different_data(
        adult_pair: tuple[TestClient, TestClient]) -> None:
    """Every hostile query is refused with a 400 whose body does not depend on the data."""
    full, few = adult_pair
    for sql, reason in HOSTILE:
        if reason is None:
            continue
        body = {"sql": sql, "epsilon": 1.0}
        r1 = full.post("/v1/queries", headers=A, json=body)
        r2 = few.post("/v1/queries", headers=A, json=body)
        assert r1.status_code in (400, 413), (sql, r1.text)
        assert (r1.status_code, r1.json()) == (r2.status_code, r2.json()), sql
    for c in (full, few):
        assert c.get("/v1/budget", headers=A).json()["spent_epsilon"] == 0.0


def test_hostile_inputs_are_refused_alike_on_postgresql(
        adult_pair: tuple[TestClient, TestClient], adult_pg: str) -> None:
    """The same hostile list over HTTP to a gateway on PostgreSQL (data and ledger): refused
    with the same answer as on DuckDB, nothing charged, nothing executed (no pg_sleep)."""
    import time
    import uuid

    suffix = "_" + uuid.uuid4().hex[:8]
    pg = client_for(adult_cfg(adult_pg, adult_pg, schema="data", epsilon=1000.0,
                              suffix=suffix, limits=NO_RATE_LIMIT))
    key = {"Authorization": f"Bearer {KEY_A}{suffix}"}
    duck, _ = adult_pair
    started = time.monotonic()
    for sql, reason in HOSTILE:
        if reason is None:
            continue
        body = {"sql": sql, "epsilon": 1.0}
        r_pg = pg.post("/v1/queries", headers=key, json=body)
        r_duck = duck.post("/v1/queries", headers=A, json=body)
        assert r_pg.status_code in (400, 413), (sql, r_pg.text)
        assert (r_pg.status_code, r_pg.json()) == (r_duck.status_code, r_duck.json()), sql
    assert time.monotonic() - started < 30  # pg_sleep(5) / pg_sleep(10) never ran
    assert pg.get("/v1/budget", headers=key).json()["spent_epsilon"] == 0.0
    # injection through the query string of the read endpoints: refused or empty, never 500
    for path in ("/v1/queries?before=1%3B%20DROP%20TABLE%20adult",
                 "/v1/queries?limit=1%20OR%201%3D1",
                 "/v1/budget?analyst=alice%27%20OR%20%271%27%3D%271"):
        r = pg.get(path, headers=key)
        assert r.status_code in (400, 403, 422), (path, r.status_code, r.text)
        assert "adult" not in r.text.lower() or "drop" not in r.text.lower()


def test_group_by_a_unique_column_is_refused_not_answered(
        adult_pair: tuple[TestClient, TestClient]) -> None:
    full, _ = adult_pair
    for sql in ("SELECT fnlwgt, COUNT(*) FROM adult GROUP BY fnlwgt",
                "SELECT age, capital-gain FROM adult",
                'SELECT "capital-gain", COUNT(*) FROM adult GROUP BY "capital-gain"'):
        r = full.post("/v1/queries", headers=A, json={"sql": sql, "epsilon": 1.0,
                                                      "delta": 1e-5})
        assert r.status_code == 400


def test_engine_errors_are_generic(small_duckdb: str, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    gw = Gateway(small_config(small_duckdb, str(tmp_path / "l.db")), rng=1)
    c = TestClient(create_app(gateway=gw))

    def fail(*_a: Any, **_k: Any) -> Any:
        from privlab.engines import EngineError

        raise EngineError("Conversion Error: Could not convert string 'Ankara' to INT64")

    monkeypatch.setattr(gw.engine, "run", fail)
    r = c.post("/v1/queries", headers=A, json={"sql": "SELECT COUNT(*) FROM people",
                                               "epsilon": 0.1})
    # answered like a success, from the data-independent fallback; nothing of the error
    assert r.status_code == 200 and "Ankara" not in r.text and "Conversion" not in r.text
    assert r.json()["epsilon_spent"] == 0.1 and len(r.json()["rows"]) == 1


def test_no_api_docs_page_loads_a_third_party_script(small: TestClient) -> None:
    """FastAPI's /docs and /redoc pull Swagger UI / ReDoc from a CDN at a floating version,
    without integrity, into the page where an analyst pastes an API key: they are off; the
    OpenAPI document itself (plain JSON, no script) stays."""
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        r = small.get(path)
        assert r.status_code in (401, 404), path
        assert "cdn.jsdelivr.net" not in r.text and "<script" not in r.text, path
    assert small.get("/openapi.json").status_code == 200
