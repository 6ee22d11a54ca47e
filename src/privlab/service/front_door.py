"""`FrontDoor`: the pure-ASGI layer that runs before any routing or body parsing.

Request size limit (413; a body without Content-Length is refused with 411), API-key
authentication for /v1 (401) with a back-off per client address after failed attempts, a
per-analyst token-bucket rate limit (429 with Retry-After) and a deadline for the body (408).
Errors are JSON `{"error": code, "reason": text}` (`STATUS` maps codes to HTTP statuses).
"""

import ipaddress
import json
import logging
import math
import time
from typing import Any

from privlab.query.gateway import Gateway

log = logging.getLogger("privlab.gateway")
STATUS = {"refused": 400, "unauthorized": 401, "budget_exceeded": 402, "forbidden": 403,
          "not_found": 404, "timeout": 408, "length_required": 411, "too_large": 413,
          "rate_limited": 429, "header_too_large": 431, "failed": 500, "unavailable": 503}
UNAVAILABLE = ("the audit log failed its integrity check; no query is answered until an "
               "operator investigates")


def _error_body(code: str, reason: str) -> bytes:
    return json.dumps({"error": code, "reason": reason}).encode("utf-8")


async def _send_error(send: Any, code: str, reason: str,
                      headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = _error_body(code, reason)
    if code in ("timeout", "too_large", "length_required"):  # the body was not read
        headers = [*(headers or []), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": STATUS[code],
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())] + (headers or [])})
    await send({"type": "http.response.body", "body": body})


class _Bucket:
    __slots__ = ("tokens", "stamp")

    def __init__(self, tokens: float) -> None:
        self.tokens = tokens
        self.stamp = time.monotonic()


class _Failures:
    __slots__ = ("count", "last", "blocked_until")

    def __init__(self) -> None:
        self.count = 0
        self.last = 0.0
        self.blocked_until = 0.0


AUTH_BACKOFF_MAX_S = 300.0
AUTH_FAILURE_MEMORY_S = 900.0
AUDIT_EVERY_S = 10.0  # at most one audit row per client and kind of refusal per period
_MAX_TRACKED = 10_000


class FrontDoor:
    """Size limit, authentication and rate limiting before the app sees the request.

    Failed authentications are counted per client address: after `limits.max_failed_auth`
    the address waits 2, 4, 8, ... seconds (at most 300) before a key is even looked at
    (429 with Retry-After). 401, 429 and request-level refusals (411, 413, 408, a body that
    is not the strict JSON) are written to the audit log without any key material, at most
    one row per client and kind every 10 s (the row says how many similar ones it stands
    for), so a flood cannot fill the log. The client address is the TCP peer, or, when the
    peer is one of `trusted_proxies`, the right-most X-Forwarded-For entry that is not a
    trusted proxy (a client-supplied header cannot rotate its way past the back-off).
    """

    def __init__(self, app: Any, gateway: Gateway) -> None:
        self.app = app
        self.gateway = gateway
        self.limits = gateway.config.limits
        self._trusted = tuple(ipaddress.ip_network(n) for n in gateway.config.trusted_proxies)
        self._trusted_cache: dict[str, bool] = {}
        self._buckets: dict[str, _Bucket] = {}
        self._failures: dict[str, _Failures] = {}
        self._audit_marks: dict[tuple[str, str], list[float]] = {}
        #: (method, path) -> an ASGI handler served here, after the checks, instead of by
        #: the app (the query route: `privlab.service.app`)
        self.direct: dict[tuple[str, str], Any] = {}

    def _is_trusted(self, address: str) -> bool:
        known = self._trusted_cache.get(address)
        if known is None:
            try:
                ip = ipaddress.ip_address(address)
                known = any(ip in net for net in self._trusted)
            except ValueError:
                known = False
            if len(self._trusted_cache) > _MAX_TRACKED:
                self._trusted_cache.clear()
            self._trusted_cache[address] = known
        return known

    def _client(self, scope: dict[str, Any]) -> str:
        """The real client address (see the class docstring)."""
        client = scope.get("client")
        peer = str(client[0]) if client else "unknown"
        if not self._trusted or not self._is_trusted(peer):
            return peer[:64]
        hops = b",".join(v for k, v in scope.get("headers") or () if k == b"x-forwarded-for")
        for hop in reversed(hops.decode("latin-1").split(",")):
            hop = hop.strip()
            if hop and not self._is_trusted(hop):
                return hop[:64]
        return peer[:64]

    def _backoff(self, client: str) -> float:
        """Seconds this address must still wait after repeated failed authentications."""
        f = self._failures.get(client)
        if f is None:
            return 0.0
        return max(0.0, f.blocked_until - time.monotonic())

    def _auth_failed(self, client: str) -> None:
        now = time.monotonic()
        if len(self._failures) > _MAX_TRACKED:
            self._failures.clear()
        f = self._failures.setdefault(client, _Failures())
        if now - f.last > AUTH_FAILURE_MEMORY_S:
            f.count = 0
        f.count += 1
        f.last = now
        excess = f.count - self.limits.max_failed_auth
        if excess > 0:
            f.blocked_until = now + min(2.0 ** excess, AUTH_BACKOFF_MAX_S)

    async def _audit(self, client: str, decision: str, reason: str, scope: dict[str, Any],
                     analyst: str | None = None, kind: str | None = None) -> None:
        """Record a front-door refusal (401 / 429 / 4xx), compactly and rate-capped per
        client address and `kind` (default: the decision)."""
        now = time.monotonic()
        if len(self._audit_marks) > _MAX_TRACKED:
            self._audit_marks.clear()
        mark = self._audit_marks.setdefault((client, kind or decision), [0.0, 0])
        if now - mark[0] < AUDIT_EVERY_S:
            mark[1] += 1
            return
        suppressed, mark[0], mark[1] = int(mark[1]), now, 0
        where = f"{scope.get('method', '?')} {str(scope.get('path', ''))[:100]}"
        text = f"{reason}; client {client}; {where}"
        if suppressed:
            text += f" (+{suppressed} similar in the previous {AUDIT_EVERY_S:g} s)"
        import uuid

        from anyio import to_thread

        def write() -> None:
            try:
                self.gateway.audit.record(uuid.uuid4().hex, decision, analyst=analyst,
                                          reason=text[:300])
            except Exception:  # the refusal stands even if it cannot be recorded
                log.exception("audit of a front-door refusal failed")

        await to_thread.run_sync(write)

    def _key(self, headers: dict[bytes, bytes]) -> str | None:
        auth = headers.get(b"authorization", b"").decode("latin-1").strip()
        if auth.lower().startswith("bearer "):
            return auth[7:].strip() or None
        key = headers.get(b"x-api-key", b"").decode("latin-1").strip()
        return key or None

    def _allow(self, analyst: str) -> float:
        """0 when allowed, else seconds until a token is available."""
        rate, burst = self.limits.rate_per_second, float(self.limits.burst)
        bucket = self._buckets.get(analyst)
        if bucket is None:
            bucket = self._buckets[analyst] = _Bucket(burst)
        now = time.monotonic()
        bucket.tokens = min(burst, bucket.tokens + (now - bucket.stamp) * rate)
        bucket.stamp = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / rate

    async def refuse(self, scope: dict[str, Any], send: Any, code: str, reason: str,
                     analyst: str | None = None) -> None:
        """A request-level refusal: audited (capped, kind = the error code), then sent."""
        await self._audit(self._client(scope), "refused", f"{STATUS[code]} {reason[:200]}",
                          scope, analyst=analyst, kind=f"refused:{code}")
        await _send_error(send, code, reason)

    async def _read_body(self, receive: Any, scope: dict[str, Any], send: Any) -> Any:
        """The whole body, read within `limits.body_timeout_s` (a client that announces a
        body and never sends it is answered 408 and its connection closed), replayed to
        the app; None when refused or disconnected."""
        import anyio

        chunks, size, more = [], 0, True
        with anyio.move_on_after(self.limits.body_timeout_s):
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.limits.max_request_bytes:
                    await self.refuse(scope, send, "too_large", "request bodies are limited "
                                      f"to {self.limits.max_request_bytes} bytes")
                    return None
                chunks.append(chunk)
                more = message.get("more_body", False)
        if more:
            await self.refuse(scope, send, "timeout", "the request body did not arrive within "
                              f"limits.body_timeout_s ({self.limits.body_timeout_s:g} s)")
            return None
        pending = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replay() -> Any:
            return pending.pop() if pending else await receive()

        return replay

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        method = scope.get("method", "GET")
        has_body = method in ("POST", "PUT", "PATCH")
        if has_body:
            length = headers.get(b"content-length")
            if length is None:
                await self.refuse(scope, send, "length_required", "send a Content-Length "
                                  "header")
                return
            try:
                n = int(length)
            except ValueError:
                await self.refuse(scope, send, "refused", "Content-Length is not a number")
                return
            if n > self.limits.max_request_bytes:
                await self.refuse(scope, send, "too_large", f"request bodies are limited to "
                                  f"{self.limits.max_request_bytes} bytes")
                return
        path = scope.get("path", "")
        if path.startswith("/v1/") or path == "/v1":
            client = self._client(scope)
            wait = self._backoff(client)
            if wait > 0:
                await self._audit(client, "rate_limited", "429 after repeated failed "
                                  "authentications", scope)
                await _send_error(send, "rate_limited", "too many failed authentications from "
                                  "this address; retry later",
                                  [(b"retry-after", str(max(1, math.ceil(wait))).encode())])
                return
            key = self._key(headers)
            analyst = None if key is None else self.gateway.config.analyst_by_key(key)
            if analyst is None:
                self._auth_failed(client)
                await self._audit(client, "unauthenticated", "401 " + (
                    "no API key" if key is None else "unknown API key"), scope)
                await _send_error(send, "unauthorized", "missing or unknown API key (send "
                                  "Authorization: Bearer <key>)",
                                  [(b"www-authenticate", b"Bearer")])
                return
            self._failures.pop(client, None)
            wait = self._allow(analyst.name)
            if wait > 0:
                await self._audit(client, "rate_limited", "429 request rate over "
                                  "limits.rate_per_second", scope, analyst=analyst.name)
                await _send_error(send, "rate_limited", "too many requests; slow down",
                                  [(b"retry-after", str(max(1, math.ceil(wait))).encode())])
                return
            scope.setdefault("state", {})["analyst"] = analyst
        if has_body:
            receive = await self._read_body(receive, scope, send)
            if receive is None:
                return
        direct = self.direct.get((method, path))
        if direct is not None and "analyst" in scope.get("state", {}):
            await direct(scope, receive, send)
            return
        await self.app(scope, receive, send)
