"""The guards every request passes before a route sees it: the body-size limit (413 before
any form parser buffers the body), the Host check on loopback (DNS rebinding), the access
token, the session cookie and its CSRF cookie, and the hardening headers of every response.

Each check is its own function so that it can be read on its own; `session_guard` only
chains them, in this order: Host, token, (static files need no session), session."""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response

from privlab.studio.config import StudioConfig, is_loopback
from privlab.studio.sessions import (
    CSRF_COOKIE,
    SESSION_COOKIE,
    TOKEN_COOKIE,
    Session,
    SessionStore,
)

#: The Host names a loopback studio answers to (anything else: a rebound DNS name).
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})


class _TooLarge(Exception):
    pass


class BodyLimit:
    """Refuse request bodies above `limit` bytes (413) by Content-Length and while reading,
    before any form parser buffers them."""

    def __init__(self, app: Any, limit: int, stated: int | None = None) -> None:
        # `stated`: the upload limit the form states (the body may carry a few fields more)
        self.app, self.limit, self.stated = app, limit, stated or limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await too_large(self.stated)(scope, receive, send)
            return
        seen = 0
        started = False

        async def limited() -> Any:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge
            return message

        async def tracking_send(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited, tracking_send)
        except _TooLarge:
            if not started:
                await too_large(self.stated)(scope, receive, send)


def upload_limit_text(limit: int) -> str:
    """The upload limit as the upload form and every refusal state it."""
    return f"{limit / 2**20:.3g} MB"


def too_large_text(limit: int) -> str:
    return (f"upload too large: the limit is {upload_limit_text(limit)} (privlab studio "
            "--max-upload-mb); nothing was uploaded")


def too_large(limit: int) -> Response:
    """The 413 page: the limit the form states, and the way back to it."""
    from privlab.studio.pages import render

    return HTMLResponse(render("error.html.j2", title="Upload too large",
                               message=too_large_text(limit), back="/",
                               back_label="Back to the data page"), status_code=413)


def allowed_hosts(config: StudioConfig) -> frozenset[str] | None:
    """The Host names accepted: the loopback names when listening on loopback, else any
    (a studio on another interface is guarded by its token instead)."""
    return LOOPBACK_HOSTS if is_loopback(config.host) else None


async def session_guard(request: Request, call_next: Any) -> Response:
    """Host, token, then the browser's session attached to the request for the route."""
    state = request.app.state
    config: StudioConfig = state.config
    refusal = host_refusal(request, state.allowed_hosts) or token_refusal(request, config.token)
    if refusal is not None:
        return refusal
    set_token = config.token is not None and request.cookies.get(TOKEN_COOKIE) != config.token
    if request.url.path.startswith("/static/"):
        return harden(await call_next(request))  # no session for the stylesheet
    store: SessionStore = state.store
    session = store.get(request.cookies.get(SESSION_COOKIE))
    new = session is None
    if session is None:
        session = store.new()
    request.state.session = session
    response = await call_next(request)
    set_session_cookies(response, request, store.sign(session.sid) if new else None, session)
    if set_token:
        response.set_cookie(TOKEN_COOKIE, config.token or "", httponly=True,
                            samesite="strict", path="/")
    return harden(response)


def host_refusal(request: Request, allowed: frozenset[str] | None) -> Response | None:
    """400 for a Host header outside `allowed`: a page on another site that resolves its
    name to 127.0.0.1 (DNS rebinding)."""
    if allowed is not None and host_name(request) not in allowed:
        return PlainTextResponse("unexpected Host header: open the studio at "
                                 "http://127.0.0.1", status_code=400)
    return None


def token_refusal(request: Request, token: str | None) -> Response | None:
    """401 unless the request carries the access token (query, cookie or header), compared
    in constant time; None when the studio has no token."""
    if token is None:
        return None
    given = request.query_params.get("token") or request.cookies.get(TOKEN_COOKIE) \
        or request.headers.get("x-privlab-token") or ""
    if not hmac.compare_digest(given.encode(), token.encode()):
        return PlainTextResponse("this studio needs its access token: open the URL "
                                 "printed by `privlab studio` (…/?token=…)", status_code=401)
    return None


def set_session_cookies(response: Response, request: Request, signed_sid: str | None,
                        session: Session) -> None:
    """The signed session cookie for a new session (`signed_sid`), and the CSRF cookie
    whenever the browser's differs from its session's token."""
    if signed_sid is not None:
        response.set_cookie(SESSION_COOKIE, signed_sid, httponly=True, samesite="strict",
                            path="/")
    if signed_sid is not None or request.cookies.get(CSRF_COOKIE) != session.csrf:
        response.set_cookie(CSRF_COOKIE, session.csrf, httponly=True, samesite="strict",
                            path="/")


def harden(response: Response) -> Response:
    """Headers every response carries: no foreign script, style, frame or form target."""
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"
    return response


def host_name(request: Request) -> str:
    """The Host header without its port ("[::1]" kept bracketed)."""
    host = request.headers.get("host") or ""
    if host.startswith("["):
        return host.split("]")[0] + "]"
    return host.rsplit(":", 1)[0]
