"""FastAPI app over `privlab.query.Gateway`: the DP query service.

    POST /v1/queries        {"sql", "epsilon", "delta"?, "mechanism"?} -> noisy answer
    GET  /v1/queries        the caller's own history (audit rows), newest first
    GET  /v1/queries/{id}   one of the caller's queries (404 for another analyst's, as missing)
    GET  /v1/budget         the caller's budget (403 for another analyst's)
    GET  /v1/tables         public metadata of the tables the caller may query
    GET  /healthz           liveness
    GET  /openapi.json      the OpenAPI document (JSON only: no /docs or /redoc page, whose
                            Swagger UI / ReDoc scripts would load from a CDN into the page
                            where analysts paste their API key)

A pure-ASGI front door runs before any routing or body parsing: request size limit (413;
a body without Content-Length is refused with 411), API-key authentication for /v1 (401),
a per-analyst token-bucket rate limit (429 with Retry-After) and a deadline for the body
(408). The client address is the TCP peer; X-Forwarded-For is believed only from a proxy
listed in `trusted_proxies`. Errors are JSON `{"error": code, "reason": text}`; reasons
never quote data or database errors.
"""

import ipaddress
import json
import logging
import math
import os
import time
from typing import Any

from privlab import __version__
from privlab.errors import BudgetExceededError, InvalidInputError, PrivlabError
from privlab.query.audit import AuditLogBroken
from privlab.query.config import AnalystSpec, GatewayConfig, load_config
from privlab.query.gateway import Gateway, QueryFailed
from privlab.query.planner import QueryRefused

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
        await self.app(scope, receive, send)


class BadRequest(Exception):
    """A request refused before it reaches the gateway (HTTP 400, JSON, field named)."""


def _no_duplicates(items: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for k, _ in items:
        if k in seen:
            raise BadRequest(f"duplicate JSON key {k[:40]!r}: send each field once")
        seen.add(k)
    return dict(items)


def _no_constant(name: str) -> Any:
    raise BadRequest(f"{name} is not valid JSON; numbers must be finite")


QUERY_FIELDS = ("sql", "epsilon", "delta", "mechanism")


def parse_query_body(raw: bytes, max_sql_chars: int) -> dict[str, Any]:
    """The POST /v1/queries body, strictly: a JSON object without duplicate keys, `sql` a
    string, `epsilon` and `delta` JSON numbers (not strings, not booleans, finite),
    `mechanism` a string or null, nothing else. Raises `BadRequest` naming the field."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("the body must be UTF-8 JSON") from None
    try:
        body = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except BadRequest:
        raise
    except RecursionError:
        raise BadRequest("the JSON body is nested too deeply") from None
    except ValueError:
        raise BadRequest("the body is not valid JSON; send {\"sql\": ..., \"epsilon\": ...}") \
            from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object {\"sql\", \"epsilon\", \"delta\"?, "
                         "\"mechanism\"?}")
    unknown = sorted(set(body) - set(QUERY_FIELDS))
    if unknown:
        raise BadRequest(f"unknown field {unknown[0][:40]!r}; allowed: {', '.join(QUERY_FIELDS)}")
    sql = body.get("sql")
    if not isinstance(sql, str):
        raise BadRequest("sql: required, a JSON string")
    if len(sql) > max_sql_chars:
        raise BadRequest(f"sql: longer than the limit of {max_sql_chars} characters")
    for name, required in (("epsilon", True), ("delta", False)):
        value = body.get(name)
        if value is None and not required and name not in body:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BadRequest(f"{name}: {'required, ' if required else ''}a JSON number "
                             "(not a string, a boolean or null)")
        # an integer literal of 400 digits is a Python int that float() cannot convert
        if isinstance(value, int) and abs(value) > 10 ** 300:
            raise BadRequest(f"{name}: must be a finite number of at most 1e300")
        if not math.isfinite(float(value)) or abs(float(value)) > 1e300:
            raise BadRequest(f"{name}: must be a finite number")
    mechanism = body.get("mechanism")
    if mechanism is not None and not isinstance(mechanism, str):
        raise BadRequest("mechanism: a JSON string (laplace or gaussian) or null")
    return {"sql": sql, "epsilon": float(body["epsilon"]),
            "delta": float(body.get("delta", 0.0)), "mechanism": mechanism}


def _error_schema() -> dict[str, Any]:
    return {"type": "object", "required": ["error", "reason"], "additionalProperties": False,
            "properties": {"error": {"type": "string", "enum": sorted(STATUS)},
                           "reason": {"type": "string"}}}


def _responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI documentation of the error responses a route really sends."""
    text = {400: "refused: invalid request or query (JSON, names the field); uncharged",
            401: "missing or unknown API key", 402: "budget exceeded; uncharged",
            403: "the budget of someone else", 404: "no such query",
            405: "method not allowed", 408: "the body did not arrive within "
            "limits.body_timeout_s (connection closed)", 411: "POST without Content-Length",
            413: "body over limits.max_request_bytes",
            429: "rate limited or too many failed authentications (Retry-After)",
            500: "the ledger could not be charged (nothing computed) or the answer could not "
                 "be audited (withheld)",
            503: "the audit log failed its integrity check (tampered): nothing is answered"}
    return {c: {"description": text[c], "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/Error"}}}} for c in codes}


def create_app(config: GatewayConfig | str | os.PathLike[str] | None = None, *,
               gateway: Gateway | None = None, reconcile: bool = True) -> Any:
    """Build the ASGI app from a config (object or YAML path) or a ready `Gateway`.

    The steps, each checkable alone: the gateway, the FastAPI app with its error handlers,
    the service and metadata routes, the query routes, the corrected OpenAPI document, and
    the front door (size limit, authentication, rate limit, body deadline) wrapped around it.
    """
    from fastapi import FastAPI

    gw = _gateway_for(config, gateway, reconcile)
    app = FastAPI(title="privlab DP query gateway", version=__version__,
                  docs_url=None, redoc_url=None,  # no third-party script beside the API key
                  description="Aggregate SQL answered with differential privacy and "
                              "per-analyst budgets. Every error is JSON "
                              "{\"error\", \"reason\"}.",
                  lifespan=_closing(None if gateway is not None else gw))
    app.state.gateway = gw
    front = FrontDoor(app, gw)
    _add_error_handlers(app)
    _add_metadata_routes(app, gw)
    _add_query_routes(app, gw, front)
    _install_openapi(app, _query_request_model(gw.config.limits))
    front.fastapi = app  # type: ignore[attr-defined]
    return front


def _closing(gateway: Gateway | None) -> Any:
    """The app's lifespan: a gateway the app built from a config is closed at shutdown (one
    passed in stays its caller's to close)."""
    import contextlib

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> Any:
        try:
            yield
        finally:
            if gateway is not None:
                gateway.close()

    return lifespan


def _gateway_for(config: GatewayConfig | str | os.PathLike[str] | None,
                 gateway: Gateway | None, reconcile: bool) -> Gateway:
    """The ready gateway, or one built from the config (object or YAML path)."""
    if gateway is not None:
        return gateway
    if config is None:
        raise InvalidInputError("create_app needs a config or a gateway")
    cfg = config if isinstance(config, GatewayConfig) else load_config(config)
    return Gateway(cfg, reconcile=reconcile)


def _error(code: str, reason: str) -> Any:
    """The JSON error response `{"error", "reason"}` with the code's status."""
    from fastapi.responses import JSONResponse

    return JSONResponse({"error": code, "reason": reason}, status_code=STATUS[code])


def _analyst_of(request: Any) -> AnalystSpec:
    """The analyst the front door authenticated for this request."""
    return request.scope["state"]["analyst"]


def _add_error_handlers(app: Any) -> None:
    """Every error answers JSON: a bug (500, or 503 when the audit log is broken) without a
    traceback or database text, a validation error as 400, routing errors as 404 / 405."""
    from fastapi import Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
        # a bug must still answer JSON, without a traceback or database text
        log.error("unexpected %s in a request", type(exc).__name__, exc_info=exc)
        if isinstance(exc, AuditLogBroken):
            return _error("unavailable", UNAVAILABLE)
        return _error("failed", "the gateway could not process the request")

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for e in exc.errors():
            where = ".".join(str(p) for p in e.get("loc", ()) if p not in ("body", "query",
                                                                            "path"))
            problems.append(f"{where or 'request'}: {e.get('msg', 'invalid')}")
        return _error("refused", "invalid request: " + "; ".join(sorted(problems)[:3]))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "refused"}.get(exc.status_code, "refused")
        return JSONResponse({"error": code, "reason": str(exc.detail)},
                            status_code=exc.status_code)


_V1 = (400, 401, 429)  # what every /v1 route may answer (front door)


def _add_metadata_routes(app: Any, gw: Gateway) -> None:
    """GET /healthz, /v1/tables and /v1/budget (the caller's own budget only: 403)."""
    from fastapi import Query, Request

    @app.get("/healthz", tags=["service"])
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "version": __version__}

    @app.get("/v1/tables", tags=["metadata"], responses=_responses(*_V1))
    def tables(request: Request) -> dict[str, Any]:
        return gw.tables(_analyst_of(request))

    @app.get("/v1/budget", tags=["budget"], responses=_responses(*_V1, 403))
    def budget(request: Request, analyst: str | None = Query(
            None, max_length=200, description="must be the caller (403 otherwise)")) -> Any:
        me = _analyst_of(request)
        if analyst is not None and analyst != me.name:
            return _error("forbidden", "you may only read your own budget")
        return gw.budget(me)


def _answer(gw: Gateway, me: AnalystSpec, body: dict[str, Any]) -> Any:
    """One query through the gateway; each refusal maps to its JSON error code."""
    from fastapi.responses import Response

    try:
        # serialised by the gateway (inside its failure guard): sent as is
        return Response(gw.query_json(me, body["sql"], body["epsilon"], body["delta"],
                                      body["mechanism"]), media_type="application/json")
    except QueryRefused as exc:
        return _error("refused", str(exc))
    except BudgetExceededError as exc:
        return _error("budget_exceeded", str(exc))
    except AuditLogBroken:
        return _error("unavailable", UNAVAILABLE)
    except QueryFailed as exc:
        return _error("failed", str(exc))
    except PrivlabError:
        return _error("failed", "the gateway could not process the query")


def _add_query_routes(app: Any, gw: Gateway, front: FrontDoor) -> None:
    """POST /v1/queries (body parsed strictly; a bad body is audited like a refusal),
    GET /v1/queries (own history) and GET /v1/queries/{id} (own queries only: 404)."""
    from fastapi import Path, Query, Request
    from fastapi.concurrency import run_in_threadpool
    from fastapi.responses import Response

    limits = gw.config.limits

    @app.post("/v1/queries", tags=["queries"],
              responses=_responses(*_V1, 402, 408, 411, 413, 500, 503),
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": {
                      "$ref": "#/components/schemas/QueryRequest"}}}}})
    async def post_query(request: Request) -> Response:
        me = _analyst_of(request)
        try:
            body = parse_query_body(await request.body(), limits.max_sql_chars)
        except BadRequest as exc:  # audited like a refused query (capped: not a flood)
            await front._audit(front._client(request.scope), "refused", str(exc)[:250],
                               request.scope, analyst=me.name, kind=f"body:{me.name}")
            return _error("refused", str(exc))
        return await run_in_threadpool(_answer, gw, me, body)

    @app.get("/v1/queries", tags=["queries"], responses=_responses(*_V1))
    def list_queries(request: Request,
                     limit: int = Query(100, ge=1, le=1000, description="rows, newest first"),
                     before: int | None = Query(None, ge=1, le=2**63 - 1,
                                                description="only rows with seq < before")
                     ) -> Any:
        me = _analyst_of(request)
        return {"analyst": me.name, "queries": gw.history(me, limit, before)}

    @app.get("/v1/queries/{query_id}", tags=["queries"], responses=_responses(*_V1, 404))
    def get_query(request: Request, query_id: str = Path(..., max_length=200)) -> Any:
        me = _analyst_of(request)
        if len(query_id) > 64 or not query_id.isalnum() or not query_id.isascii():
            return _error("not_found", "no such query")
        rows = gw.audit.get(query_id)
        if not rows or any(r.analyst != me.name for r in rows):
            # one answer for "missing" and "someone else's": ids of others are not confirmed
            return _error("not_found", "no such query")
        return {"query_id": query_id, "events": [r.to_analyst_dict() for r in rows]}


def _query_request_model(limits: Any) -> Any:
    """The documented body of POST /v1/queries, with the configured limits (for the OpenAPI
    document only: the body itself is parsed strictly by `parse_query_body`)."""
    from pydantic import BaseModel, ConfigDict, Field

    class QueryRequest(BaseModel):
        """The documented body of POST /v1/queries (parsed strictly: `parse_query_body`)."""

        model_config = ConfigDict(extra="forbid", strict=True)
        sql: str = Field(..., max_length=limits.max_sql_chars,
                         description="SELECT of COUNT / SUM / AVG / MEDIAN / PERCENTILE_CONT "
                                     "over declared tables")
        epsilon: float = Field(..., gt=0, le=limits.max_epsilon_per_query,
                               description="privacy budget of this query (a JSON number; at "
                                           "least the queried tables' min_epsilon_per_query)")
        delta: float = Field(0.0, ge=0, le=limits.max_delta_per_query,
                             description="> 0 for partition selection or the gaussian "
                                         "mechanism (a JSON number)")
        mechanism: str | None = Field(None, description="laplace (default) or gaussian")

    return QueryRequest


def _install_openapi(app: Any, query_model: Any) -> None:
    """FastAPI's document, corrected: the API-key security schemes, the request body
    schema, the JSON error schema, and no 422 (validation errors are 400 here)."""
    from fastapi.openapi.utils import get_openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        doc = get_openapi(title=app.title, version=app.version, description=app.description,
                          routes=app.routes)
        comps = doc.setdefault("components", {})
        schemas = comps.setdefault("schemas", {})
        schemas["Error"] = _error_schema()
        schemas["QueryRequest"] = query_model.model_json_schema()
        for name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(name, None)
        comps["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer",
                       "description": "Authorization: Bearer <API key>"},
            "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}
        for path, ops in doc.get("paths", {}).items():
            for op in ops.values():
                op.get("responses", {}).pop("422", None)
                if path.startswith("/v1/"):
                    op["security"] = [{"bearer": []}, {"apiKey": []}]
        app.openapi_schema = doc
        return doc

    app.openapi = openapi  # type: ignore[method-assign]


def app_from_env() -> Any:
    """Factory for `uvicorn --factory` / several workers: config from PRIVLAB_GATEWAY_CONFIG."""
    path = os.environ.get("PRIVLAB_GATEWAY_CONFIG")
    if not path:
        raise InvalidInputError("PRIVLAB_GATEWAY_CONFIG is not set; use `privlab serve`")
    return create_app(path, reconcile=os.environ.get("PRIVLAB_GATEWAY_RECONCILE", "1") == "1")
