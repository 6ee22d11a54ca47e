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

The app is wired here; its parts live beside it: the pure-ASGI front door
(`privlab.service.front_door`) runs before any routing or body parsing: request size limit (413;
a body without Content-Length is refused with 411), API-key authentication for /v1 (401),
a per-analyst token-bucket rate limit (429 with Retry-After) and a deadline for the body
(408). The client address is the TCP peer; X-Forwarded-For is believed only from a proxy
listed in `trusted_proxies`. Errors are JSON `{"error": code, "reason": text}`; reasons
never quote data or database errors. The POST body is parsed strictly
(`privlab.service.body`). POST /v1/queries is answered by the front door itself once its
checks passed (`FrontDoor.direct`), with the route's own code but without FastAPI's layers.
"""

import logging
import os
import time  # noqa: F401  (tests pace the front door's clock through `app.time`)
from typing import Any

from privlab import __version__
from privlab.errors import BudgetExceededError, InvalidInputError, PrivlabError
from privlab.query.audit import AuditLogBroken
from privlab.query.config import AnalystSpec, GatewayConfig, load_config
from privlab.query.gateway import Gateway, QueryFailed
from privlab.query.planner import QueryRefused
from privlab.service.body import QUERY_FIELDS as QUERY_FIELDS
from privlab.service.body import BadRequest, parse_query_body
from privlab.service.front_door import STATUS, UNAVAILABLE, FrontDoor

log = logging.getLogger("privlab.gateway")


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


def _bug(exc: Exception) -> Any:
    """A bug must still answer JSON, without a traceback or database text (503 when the
    audit log is broken)."""
    log.error("unexpected %s in a request", type(exc).__name__, exc_info=exc)
    if isinstance(exc, AuditLogBroken):
        return _error("unavailable", UNAVAILABLE)
    return _error("failed", "the gateway could not process the request")


def _analyst_of(request: Any) -> AnalystSpec:
    """The analyst the front door authenticated for this request (or ASGI scope)."""
    scope = request if isinstance(request, dict) else request.scope
    return scope["state"]["analyst"]


def _add_error_handlers(app: Any) -> None:
    """Every error answers JSON: a bug (500, or 503 when the audit log is broken) without a
    traceback or database text, a validation error as 400, routing errors as 404 / 405."""
    from fastapi import Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
        return _bug(exc)

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


class _Released:
    """A released answer's JSON, serialised by the gateway (inside its failure guard), as an
    ASGI response: the status, headers and bytes of Starlette's
    `Response(body, media_type="application/json")`, without building one per query (the
    front door's direct route, issue 32; the FastAPI route converts it, `as_response`)."""

    __slots__ = ("body",)

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-length", str(len(self.body)).encode("latin-1")),
            (b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": self.body})

    def as_response(self) -> Any:
        from fastapi.responses import Response

        return Response(self.body, media_type="application/json")


def _answer(gw: Gateway, me: AnalystSpec, body: dict[str, Any]) -> Any:
    """One query through the gateway; each refusal maps to its JSON error code."""
    try:
        return _Released(gw.query_json(me, body["sql"], body["epsilon"], body["delta"],
                                       body["mechanism"]))
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
    from anyio import to_thread
    from fastapi import Path, Query, Request
    from fastapi.responses import Response

    limits = gw.config.limits

    @app.post("/v1/queries", tags=["queries"],
              responses=_responses(*_V1, 402, 408, 411, 413, 500, 503),
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": {
                      "$ref": "#/components/schemas/QueryRequest"}}}}})
    async def post_query(request: Request) -> Response:
        # served by `direct_post_query` below; declared here for the OpenAPI document (it
        # answers alike if a request reaches it: tests/service/test_gateway_direct_route.py)
        response = await query_response(request.scope, await request.body())
        return response.as_response() if isinstance(response, _Released) else response

    async def query_response(scope: dict[str, Any], raw_body: bytes) -> Response:
        me = _analyst_of(scope)
        try:
            body = parse_query_body(raw_body, limits.max_sql_chars)
        except BadRequest as exc:  # audited like a refused query (capped: not a flood)
            await front._audit(front._client(scope), "refused", str(exc)[:250], scope,
                               analyst=me.name, kind=f"body:{me.name}")
            return _error("refused", str(exc))
        return await to_thread.run_sync(_answer, gw, me, body)

    async def direct_post_query(scope: dict[str, Any], receive: Any, send: Any) -> None:
        """POST /v1/queries straight from the front door (which authenticated the caller and
        read the whole body): the same response as the FastAPI route, without FastAPI's
        middleware, routing and dependency layers (9% of the server's CPU per COUNT query,
        issue 32). A bug answers as the app's exception handler would."""
        try:
            response = await query_response(scope, (await receive())["body"])
        except Exception as exc:
            response = _bug(exc)
        await response(scope, receive, send)

    front.direct[("POST", "/v1/queries")] = direct_post_query

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
