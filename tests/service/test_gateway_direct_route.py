"""POST /v1/queries is served by the front door directly (issue 32: FastAPI's layers cost 9%
of the server's CPU per query). It must answer exactly as the FastAPI route it bypasses:
the same status, headers and body for a release, a refusal, a bad body and a bug, and
nothing of a bug's text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from gw_fixtures import KEY_A, small_config

from privlab.query.audit import AuditLogBroken
from privlab.query.gateway import Gateway
from privlab.service import create_app

COUNT = "SELECT COUNT(*) FROM people"


def _post(app: Any, body: bytes, *, analyst: Any = None) -> tuple[int, dict[bytes, bytes],
                                                                   bytes]:
    """One POST /v1/queries through `app` (the front door, or with `analyst` the bare
    FastAPI app as the front door would hand it the request)."""
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop() if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/v1/queries",
             "raw_path": b"/v1/queries", "query_string": b"", "root_path": "",
             "headers": [(b"host", b"t"), (b"authorization", f"Bearer {KEY_A}".encode()),
                         (b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())],
             "client": ("127.0.0.1", 5), "server": ("127.0.0.1", 80),
             "state": {} if analyst is None else {"analyst": analyst}}
    try:
        anyio.run(app, scope, receive, send)
    except Exception:  # Starlette re-raises a bug to the server after answering it
        if not sent:
            raise
    start = next(m for m in sent if m["type"] == "http.response.start")
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), payload


@pytest.fixture
def pair(small_duckdb: str, tmp_path: Path) -> Any:
    """Two apps over two gateways seeded alike: one answered by the front door's direct
    route, one by the FastAPI route."""
    apps = []
    for name in ("direct", "fastapi"):
        gw = Gateway(small_config(small_duckdb, str(tmp_path / f"{name}.db"), epsilon=5.0),
                     rng=11)
        apps.append((create_app(gateway=gw), gw))
    yield apps
    for _, gw in apps:
        gw.close()


def _both(pair: Any, body: bytes) -> tuple[Any, Any]:
    (front, gw_a), (other, gw_b) = pair
    analyst = gw_b.config.analysts["alice"]
    return _post(front, body), _post(other.fastapi, body, analyst=analyst)


def _without_ids(payload: bytes) -> Any:
    doc = json.loads(payload)
    if isinstance(doc, dict):
        doc.pop("query_id", None)
    return doc


@pytest.mark.parametrize("body", [
    json.dumps({"sql": COUNT, "epsilon": 0.5}).encode(),             # released
    json.dumps({"sql": "SELECT * FROM people", "epsilon": 0.5}).encode(),  # refused
    json.dumps({"sql": COUNT, "epsilon": 50.0}).encode(),            # over the budget
    b'{"sql": "SELECT COUNT(*) FROM people", "epsilon": "0.5"}',     # bad body
])
def test_the_direct_route_answers_as_the_fastapi_route(pair: Any, body: bytes) -> None:
    (status_a, headers_a, payload_a), (status_b, headers_b, payload_b) = _both(pair, body)
    assert status_a == status_b
    assert headers_a == headers_b
    assert _without_ids(payload_a) == _without_ids(payload_b)


def test_the_front_door_serves_the_query_without_the_fastapi_app(pair: Any) -> None:
    (front, _), _ = pair
    calls = []

    async def refuse_all(scope: Any, receive: Any, send: Any) -> None:
        calls.append(scope["path"])
        raise AssertionError("the FastAPI app was asked to answer a query")

    front.app = refuse_all
    status, _, payload = _post(front, json.dumps({"sql": COUNT, "epsilon": 0.5}).encode())
    assert status == 200 and "rows" in json.loads(payload) and calls == []


@pytest.mark.parametrize(("error", "status", "code"), [
    (RuntimeError("db text: secret row 42"), 500, "failed"),
    (AuditLogBroken("audit row 3 is missing"), 503, "unavailable"),
])
def test_a_bug_answers_json_without_its_text(pair: Any, monkeypatch: pytest.MonkeyPatch,
                                             error: Exception, status: int,
                                             code: str) -> None:
    def broken(*args: Any, **kwargs: Any) -> bytes:
        raise error

    body = json.dumps({"sql": COUNT, "epsilon": 0.5}).encode()
    for (_, gw) in pair:
        monkeypatch.setattr(gw, "query_json", broken)
    (status_a, headers_a, payload_a), (status_b, _, payload_b) = _both(pair, body)
    assert status_a == status_b == status
    assert json.loads(payload_a)["error"] == code and payload_a == payload_b
    assert b"secret" not in payload_a and b"row 3" not in payload_a
    assert headers_a[b"content-type"] == b"application/json"
