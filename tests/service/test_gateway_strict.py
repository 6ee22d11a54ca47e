"""Strict requests and the OpenAPI contract: numbers are JSON numbers, no booleans, no
duplicate keys, delta bounded, every query parameter range-checked; every error a JSON 4xx
naming the field; the OpenAPI document states the security scheme and the real errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from gw_fixtures import KEY_A, small_config

from privlab.query.config import parse_config
from privlab.query.gateway import Gateway
from privlab.service import create_app

A = {"Authorization": f"Bearer {KEY_A}", "Content-Type": "application/json"}
COUNT = "SELECT COUNT(*) FROM people"


@pytest.fixture
def small(small_duckdb: str, tmp_path: Path) -> TestClient:
    return TestClient(create_app(gateway=Gateway(
        small_config(small_duckdb, str(tmp_path / "ledger.db"), epsilon=1.0), rng=3)))


def spent(c: TestClient) -> float:
    return c.get("/v1/budget", headers=A).json()["spent_epsilon"]


@pytest.mark.parametrize(("raw", "field"), [
    ('{"sql": "SELECT COUNT(*) FROM people", "epsilon": "0.5"}', "epsilon"),
    ('{"sql": "SELECT COUNT(*) FROM people", "epsilon": true}', "epsilon"),
    ('{"sql": "SELECT COUNT(*) FROM people", "epsilon": null}', "epsilon"),
    ('{"sql": "SELECT COUNT(*) FROM people", "epsilon": [0.5]}', "epsilon"),
    ('{"sql": "SELECT COUNT(*) FROM people"}', "epsilon"),
    ('{"sql": "SELECT COUNT(*) FROM people", "epsilon": NaN}', "NaN"),
    ('{"sql": "SELECT COUNT(*) FROM people", "epsilon": Infinity}', "Infinity"),
    ('{"sql": "SELECT COUNT(*) FROM people", "epsilon": 1e999}', "epsilon"),
    ('{"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.5, "delta": "0"}', "delta"),
    ('{"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.5, "delta": false}', "delta"),
    ('{"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.5, "mechanism": 1}', "mechanism"),
    ('{"sql": 1, "epsilon": 0.5}', "sql"),
    ('{"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.01, "epsilon": 0.9}', "duplicate"),
    ('{"sql": "SELECT 1", "sql": "SELECT COUNT(*) FROM people", "epsilon": 0.5}', "duplicate"),
    ('{"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.5, "extra": 1}', "extra"),
    ('[{"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.5}]', "JSON object"),
    ('{"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.5', "valid JSON"),
    ("[" * 5000 + "]" * 5000, "nested too deeply"),
    ('"\\ud800"', "JSON object"),
])
def test_bodies_are_parsed_strictly(small: TestClient, raw: str, field: str) -> None:
    r = small.post("/v1/queries", headers=A, content=raw.encode())
    assert r.status_code == 400, (raw[:80], r.status_code, r.text[:200])
    assert r.json()["error"] == "refused" and field in r.json()["reason"]
    assert spent(small) == 0


def test_integers_are_numbers_too(small: TestClient) -> None:
    r = small.post("/v1/queries", headers=A, content=b'{"sql": "SELECT COUNT(*) FROM people", '
                   b'"epsilon": 1, "delta": 0}')
    assert r.status_code == 200 and r.json()["epsilon_spent"] == 1.0


def test_delta_is_bounded_by_the_config(small_duckdb: str, tmp_path: Path) -> None:
    from gw_fixtures import SMALL_JOINS, SMALL_TABLES, analysts

    tables = {k: dict(v) for k, v in SMALL_TABLES.items()}
    tables["visits"]["public_size"] = 10_000
    cfg = parse_config({"database": small_duckdb, "ledger": str(tmp_path / "l.db"),
                        "tables": tables, "joins": SMALL_JOINS, "analysts": analysts(),
                        "limits": {"max_delta_per_query": 1e-3}})
    c = TestClient(create_app(gateway=Gateway(cfg, rng=1)))
    grouped = "SELECT city, COUNT(*) FROM visits GROUP BY city"
    r = c.post("/v1/queries", headers=A, json={"sql": grouped, "epsilon": 0.5, "delta": 2e-3})
    assert r.status_code == 400 and "limits.max_delta_per_query" in r.json()["reason"]
    r = c.post("/v1/queries", headers=A, json={"sql": grouped, "epsilon": 0.5, "delta": 1e-4})
    assert r.status_code == 400 and "tables.visits.public_size" in r.json()["reason"]
    assert spent(c) == 0
    r = c.post("/v1/queries", headers=A, json={"sql": grouped, "epsilon": 0.5, "delta": 5e-5})
    assert r.status_code == 200, r.text
    # the default cap is 1e-6
    assert parse_config({"database": small_duckdb, "ledger": "x.db", "tables": SMALL_TABLES,
                         "analysts": analysts()}).limits.max_delta_per_query == 1e-6


@pytest.mark.parametrize(("query", "field"), [
    ("before=9223372036854775808", "before"), ("before=-1", "before"), ("before=0", "before"),
    ("before=abc", "before"), ("before=1e3", "before"), ("limit=0", "limit"),
    ("limit=1001", "limit"), ("limit=99999999999999999999999", "limit"), ("limit=", "limit"),
])
def test_query_parameters_are_range_checked(small: TestClient, query: str, field: str) -> None:
    r = small.get(f"/v1/queries?{query}", headers=A)
    assert r.status_code == 400, (query, r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["error"] == "refused" and r.json()["reason"].startswith(
        f"invalid request: {field}:")


def test_extreme_but_valid_parameters_work(small: TestClient) -> None:
    r = small.get("/v1/queries?before=9223372036854775807&limit=1000", headers=A)
    assert r.status_code == 200 and r.json()["queries"] == []
    r = small.get("/v1/queries/" + "z" * 300, headers=A)
    assert r.status_code in (400, 404) and r.headers["content-type"].startswith(
        "application/json")


def test_openapi_contract(small: TestClient) -> None:
    doc = small.get("/openapi.json").json()
    schemes = doc["components"]["securitySchemes"]
    assert schemes["bearer"] == {"type": "http", "scheme": "bearer",
                                 "description": "Authorization: Bearer <API key>"}
    assert schemes["apiKey"]["in"] == "header" and schemes["apiKey"]["name"] == "X-API-Key"
    assert "Error" in doc["components"]["schemas"]
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    body = doc["paths"]["/v1/queries"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"]["$ref"].endswith("/QueryRequest")
    query_schema = doc["components"]["schemas"]["QueryRequest"]
    assert set(query_schema["properties"]) == {"sql", "epsilon", "delta", "mechanism"}
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            codes = set(op["responses"])
            assert "422" not in codes, (path, method)
            if path.startswith("/v1/"):
                assert op["security"] == [{"bearer": []}, {"apiKey": []}]
                assert {"400", "401", "429"} <= codes, (path, method, codes)
                for code in codes - {"200"}:
                    ref = op["responses"][code]["content"]["application/json"]["schema"]
                    assert ref == {"$ref": "#/components/schemas/Error"}
    post = set(doc["paths"]["/v1/queries"]["post"]["responses"])
    assert {"402", "411", "413", "500"} <= post
    assert "403" not in post  # a hidden table is refused like a missing one (400)
    assert "404" in doc["paths"]["/v1/queries/{query_id}"]["get"]["responses"]


def test_every_documented_error_is_real(small: TestClient) -> None:
    """Each error the document lists for POST /v1/queries can be produced, as JSON."""
    seen: dict[int, Any] = {}
    seen[400] = small.post("/v1/queries", headers=A, json={"sql": "SELECT *", "epsilon": 1})
    seen[401] = small.post("/v1/queries", json={"sql": COUNT, "epsilon": 0.5})
    small.post("/v1/queries", headers=A, json={"sql": COUNT, "epsilon": 1.0})
    seen[402] = small.post("/v1/queries", headers=A, json={"sql": COUNT, "epsilon": 0.5})
    seen[413] = small.post("/v1/queries", headers=A, content=b"{" + b" " * 20000 + b"}")
    for code, r in seen.items():
        assert r.status_code == code, (code, r.text)
        assert set(r.json()) == {"error", "reason"}


def test_the_408_and_503_the_document_lists_are_real(small_duckdb: str, tmp_path: Path) -> None:
    """POST /v1/queries documents 408 (the body did not arrive in time) and 503 (the audit
    log failed its integrity check): both are produced, as the JSON error."""
    import json

    import anyio

    gw = Gateway(small_config(small_duckdb, str(tmp_path / "ledger.db"),
                              limits={"body_timeout_s": 0.2}), rng=3)
    app = create_app(gateway=gw)
    doc = TestClient(app).get("/openapi.json").json()
    assert {"408", "503"} <= set(doc["paths"]["/v1/queries"]["post"]["responses"])
    sent: list[dict[str, Any]] = []

    async def never() -> dict[str, Any]:
        await anyio.sleep(30)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/queries", "query_string": b"",
             "headers": [(b"authorization", f"Bearer {KEY_A}".encode()),
                         (b"content-length", b"60")], "client": ("127.0.0.1", 5)}
    anyio.run(app, scope, never, send)
    assert sent[0]["status"] == 408 and (b"connection", b"close") in sent[0]["headers"]
    assert json.loads(sent[1]["body"])["error"] == "timeout"
    gw.audit.alarm = "audit log test: audit row 3 is missing"
    r = TestClient(app).post("/v1/queries", headers=A, json={"sql": COUNT, "epsilon": 0.5})
    assert r.status_code == 503 and r.json() == {"error": "unavailable", "reason": (
        "the audit log failed its integrity check; no query is answered until an operator "
        "investigates")}
    gw.audit.alarm = None
    assert spent(TestClient(app)) == 0
    gw.close()
