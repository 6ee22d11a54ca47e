"""Issue 22, the HTTP edge of a live gateway (uvicorn on 127.0.0.1, as `privlab serve` runs
it): no spoofable client address, deadlines for the request head and body, a bounded head,
a connection cap, and every hostile request a JSON 4xx that is audited (capped)."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gw_fixtures import KEY_A, serve_on_loopback, small_config

from privlab.query.gateway import Gateway
from privlab.service import create_app


@pytest.fixture
def make_live(small_duckdb: str, tmp_path: Path) -> Iterator[Any]:
    """make_live(**config) -> (app, host, port) of a gateway served on loopback."""
    stack: list[Any] = []

    def make(log_level: str = "warning", **extra: Any) -> tuple[Any, str, int]:
        ledger = tmp_path / f"ledger{len(stack)}.db"
        app = create_app(gateway=Gateway(small_config(small_duckdb, str(ledger), **extra),
                                         rng=5))
        ctx = serve_on_loopback(app, log_level=log_level)
        url = ctx.__enter__()
        stack.append((ctx, app))
        host, port = url.rsplit("/", 1)[1].split(":")
        return app, host, int(port)

    yield make
    for ctx, app in stack:
        ctx.__exit__(None, None, None)
        app.gateway.close()


def request(host: str, port: int, method: str, path: str, headers: dict[str, str],
            body: bytes | None = None) -> tuple[int, dict[str, Any], dict[str, str]]:
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request(method, path, body=body, headers=headers)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    assert r.getheader("content-type") == "application/json", (r.status, data[:200])
    return r.status, json.loads(data), dict(r.getheaders())


def raw_exchange(host: str, port: int, data: bytes, wait: float) -> bytes:
    """Send `data` on a raw socket and read until the server closes it or `wait` passes."""
    s = socket.create_connection((host, port), timeout=wait)
    try:
        with contextlib.suppress(OSError):  # refused and closed while we still sent
            s.sendall(data)
        out = b""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except OSError:  # timeout or reset
                break
            if not chunk:
                break
            out += chunk
        return out
    finally:
        s.close()


def json_status(response: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = response.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in head.lower(), response[:300]
    return int(head.split()[1]), json.loads(body)


def front_door_rows(app: Any) -> list[Any]:
    return [r for r in app.gateway.audit.all() if r.decision in ("unauthenticated",
                                                                 "rate_limited")]


def test_rotating_forwarded_for_does_not_bypass_the_backoff(make_live: Any) -> None:
    """uvicorn's defaults believed X-Forwarded-For from loopback: a rotating header got a
    fresh address per request (401 x N, never 429) and an audit row each. Now the peer is
    the address unless the config names the proxy."""
    app, host, port = make_live(limits={"max_failed_auth": 3})
    statuses = []
    for i in range(12):
        status, body, _ = request(host, port, "GET", "/v1/budget", {
            "Authorization": "Bearer wrong", "X-Forwarded-For": f"203.0.113.{i}",
            "X-Real-IP": f"198.51.100.{i}", "Forwarded": f"for=192.0.2.{i}"})
        statuses.append(status)
    # max_failed_auth failures, one more that crosses the limit, then 429 only
    assert statuses[:4] == [401] * 4 and set(statuses[4:]) == {429}, statuses
    rows = front_door_rows(app)
    assert len(rows) <= 2 and all("client 127.0.0.1;" in r.reason for r in rows), rows


def test_forwarded_for_is_believed_from_a_trusted_proxy_only(make_live: Any) -> None:
    """With `trusted_proxies: [127.0.0.1]` (nginx on the same host) the client is the
    right-most X-Forwarded-For hop the proxy appended, not what the client prepended."""
    app, host, port = make_live(limits={"max_failed_auth": 2},
                                trusted_proxies=["127.0.0.1"])
    spoofed = []
    for i in range(6):  # one real client behind the proxy, rotating a forged left part
        status, _, _ = request(host, port, "GET", "/v1/budget", {
            "Authorization": "Bearer wrong",
            "X-Forwarded-For": f"10.9.9.{i}, 198.51.100.7"})
        spoofed.append(status)
    assert spoofed[:3] == [401] * 3 and set(spoofed[3:]) == {429}, spoofed
    # another real client behind the same proxy is not locked out by the first one
    status, _, _ = request(host, port, "GET", "/v1/budget", {
        "Authorization": f"Bearer {KEY_A}", "X-Forwarded-For": "198.51.100.8"})
    assert status == 200
    assert any("client 198.51.100.7;" in r.reason for r in front_door_rows(app))


def test_a_body_that_never_arrives_is_cut_after_the_deadline(make_live: Any) -> None:
    """40 connections announce a body and never send it: each is answered 408 (JSON) and
    closed after limits.body_timeout_s, instead of staying open indefinitely."""
    _, host, port = make_live(limits={"body_timeout_s": 0.5})
    head = (f"POST /v1/queries HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY_A}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n").encode()
    socks = [socket.create_connection((host, port), timeout=5) for _ in range(40)]
    start = time.monotonic()
    for s in socks:
        s.sendall(head)
    answers = []
    for s in socks:
        data = b""
        while True:
            chunk = s.recv(65536)  # raises TimeoutError (test fails) if never answered
            if not chunk:
                break
            data += chunk
        answers.append(json_status(data))
        s.close()
    assert time.monotonic() - start < 5
    assert {status for status, _ in answers} == {408}
    assert all(body["error"] == "timeout" for _, body in answers)
    # a head that never ends is cut too
    status, body = json_status(raw_exchange(host, port, b"GET /healthz HTTP/1.1\r\nX-A: 1",
                                            wait=5))
    assert status == 408 and "head" in body["reason"]


def test_a_huge_header_is_refused(make_live: Any) -> None:
    _, host, port = make_live()
    big = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (8 << 20) + b"\r\n\r\n"
    status, body = json_status(raw_exchange(host, port, big, wait=10))
    assert status == 431 and body["error"] == "header_too_large"
    # malformed HTTP is a JSON 400 too, and the server still answers
    status, body = json_status(raw_exchange(host, port, b"NOT HTTP AT ALL\r\n\r\n", wait=5))
    assert status == 400 and body["error"] == "refused"
    assert request(host, port, "GET", "/healthz", {})[0] == 200


def test_a_head_over_the_limit_in_one_read_is_refused(make_live: Any) -> None:
    """Regression: the head was measured per received chunk only while it was incomplete,
    so a head over the limit that arrived whole in one read (4 KiB against a 2 KiB limit,
    or 60 KiB against the default 16 KiB) was served. The parser's own pieces are counted
    now; heads under the limit, pipelined in one read, are each answered."""
    app, host, port = make_live(limits={"max_header_bytes": 2048})
    big = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 4096 + b"\r\n\r\n"
    status, body = json_status(raw_exchange(host, port, big, wait=5))
    assert status == 431 and "(2048 bytes)" in body["reason"]
    line = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 1500 + b"\r\n\r\n"
    answers = raw_exchange(host, port, line * 3, wait=2)
    assert answers.count(b"HTTP/1.1 200") == 3, answers[:300]
    _, host, port = make_live()  # the default limit, 16 KiB
    big = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 60_000 + b"\r\n\r\n"
    status, body = json_status(raw_exchange(host, port, big, wait=5))
    assert status == 431 and body["error"] == "header_too_large"


def test_connections_over_the_cap_get_a_json_503(make_live: Any) -> None:
    _, host, port = make_live(limits={"max_connections": 3})
    held = [socket.create_connection((host, port), timeout=5) for _ in range(3)]
    time.sleep(0.2)
    status, body = json_status(raw_exchange(host, port, b"", wait=5))
    assert status == 503 and body["error"] == "unavailable"
    for s in held:
        s.close()


def test_limits_hold_when_uvicorn_wraps_the_app(make_live: Any) -> None:
    """Under `--log-level trace` uvicorn wraps the front door in its message logger; the
    protocol read `limits` off the wrapper only, found none and served the defaults (1000
    connections, 16 KiB heads) instead of the configured ones."""
    _, host, port = make_live(log_level="trace", limits={"max_connections": 3,
                                                          "max_header_bytes": 2048})
    big = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
    status, body = json_status(raw_exchange(host, port, big, wait=5))
    assert status == 431 and "(2048 bytes)" in body["reason"]
    held = [socket.create_connection((host, port), timeout=5) for _ in range(3)]
    time.sleep(0.2)
    status, body = json_status(raw_exchange(host, port, b"", wait=5))
    assert status == 503 and body["error"] == "unavailable"
    for s in held:
        s.close()


def test_an_app_without_gateway_limits_is_refused(make_live: Any) -> None:
    """The limits come from the front door through any chain of `.app` wrappers; an app that
    carries none is refused with a one-line error, never served with default limits."""
    from uvicorn.middleware.message_logger import MessageLoggerMiddleware

    from privlab.errors import UnsafeConfigurationError
    from privlab.service.http import limits_of

    app, _, _ = make_live(limits={"max_connections": 7})
    assert limits_of(MessageLoggerMiddleware(MessageLoggerMiddleware(app))) is app.limits
    assert limits_of(app).max_connections == 7

    async def bare(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("never called")

    for plain in (bare, MessageLoggerMiddleware(bare)):
        with pytest.raises(UnsafeConfigurationError, match="carries no gateway limits"):
            limits_of(plain)


def test_hostile_bodies_are_json_4xx_and_audited(make_live: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """An integer literal of 401 digits, a lone surrogate in the SQL (whose refusal's audit
    insert used to raise), invalid JSON, a duplicate key, a wrong type: each a JSON 400,
    nothing charged, each refusal audited (the body-level ones capped per client)."""
    import privlab.service.front_door as front_door  # the refusals' audit cap lives there

    app, host, port = make_live()
    auth = {"Authorization": f"Bearer {KEY_A}", "Content-Type": "application/json"}
    count = '"SELECT COUNT(*) FROM people"'
    bodies = {
        "big_int": b'{"sql": ' + count.encode() + b', "epsilon": 1' + b"0" * 400 + b"}",
        "surrogate": b'{"sql": "SELECT COUNT(*) FROM people WHERE name = \'\\ud800\'", '
                     b'"epsilon": 0.5}',
        "invalid": b'{"sql": ' + count.encode() + b', "epsilon": ',
        "duplicate": b'{"sql": ' + count.encode() + b', "epsilon": 0.1, "epsilon": 9}',
        "wrong_type": b'{"sql": ' + count.encode() + b', "epsilon": "0.5"}',
    }
    for name, body in bodies.items():
        status, answer, _ = request(host, port, "POST", "/v1/queries", auth, body)
        assert status == 400 and answer["error"] == "refused", (name, answer)
    refused = [r for r in app.gateway.audit.all() if r.decision == "refused"]
    assert any(r.sql is not None and "\\ud800" in r.sql for r in refused)  # recorded, escaped
    body_rows = [r for r in refused if r.sql is None]
    assert len(body_rows) == 1 and "epsilon" in body_rows[0].reason  # capped: 1 per 10 s
    monkeypatch.setattr(front_door, "AUDIT_EVERY_S", 0.0)
    for name in ("invalid", "duplicate", "wrong_type"):
        request(host, port, "POST", "/v1/queries", auth, bodies[name])
    reasons = [r.reason for r in app.gateway.audit.all() if r.decision == "refused"
               and r.sql is None][1:]
    assert len(reasons) == 3 and "not valid JSON" in reasons[0]
    assert "duplicate" in reasons[1] and "epsilon" in reasons[2]
    assert app.gateway.budget(app.gateway.config.analysts["alice"])["spent_epsilon"] == 0
