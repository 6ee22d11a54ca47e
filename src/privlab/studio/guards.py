"""The guards every request passes before a route sees it: the body-size limit (413 before
any form parser buffers the body), the Host check on loopback (DNS rebinding), the access
token (always, also on loopback: any local user can reach 127.0.0.1), the origin of every
state-changing request, the session cookie and its CSRF cookie, and the hardening headers of
every response.

The token is exchanged once: `GET /any/page?token=T` sets an HttpOnly, SameSite=Strict
cookie derived from T (never T itself) and redirects to the same page without it, so the
token leaves the address bar and the history. Each check is its own function so that it can
be read on its own; `session_guard` only chains them, in this order: Host, static files,
token exchange, token, origin, session."""

from __future__ import annotations

import hmac
from typing import Any
from urllib.parse import urlencode, urlsplit

from fastapi import Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from privlab.studio.config import StudioConfig, is_loopback
from privlab.studio.sessions import (
    CSRF_COOKIE,
    SESSION_COOKIE,
    TOKEN_COOKIE,
    Session,
    SessionStore,
    cookie_name,
)

#: The Host names a loopback studio answers to (anything else: a rebound DNS name).
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
#: Methods that change nothing (no origin check; a session is stored only after a change).
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Header a script may send instead of the cookie (`X-Privlab-Token: T`).
TOKEN_HEADER = "x-privlab-token"


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
    """Host, token, origin, then the browser's session attached to the request for the
    route; the session is stored after a request that may have changed it."""
    state = request.app.state
    config: StudioConfig = state.config
    store: SessionStore = state.store
    refusal = host_refusal(request, state.allowed_hosts)
    if refusal is not None:
        return refusal
    if request.url.path.startswith("/static/"):
        return harden(await call_next(request))  # the stylesheet and script: no session
    if config.token is not None and "token" in request.query_params:
        return harden(exchange(request, config.token, store))
    refusal = token_refusal(request, config.token, store) or origin_refusal(request)
    if refusal is not None:
        return harden(refusal)
    session = store.get(request.cookies.get(named(SESSION_COOKIE, request)))
    new = session is None
    if session is None:
        session = store.new()
    request.state.session = session
    response = await call_next(request)
    if request.method not in SAFE_METHODS and response.status_code < 400:
        store.save(session)
    else:
        store.touch(session)
    set_session_cookies(response, request, store.cookie_for(session) if new else None, session)
    return harden(response)


def exchange(request: Request, token: str, store: SessionStore) -> Response:
    """`?token=T` (a GET): on a match, the access cookie and the session cookie, then a
    redirect to the same page without the token; else 401. The browser's session: its own
    (a cookie for this token), one it had under an earlier token (a restart: `adopt`), or a
    new one. With a token, only a request that holds it (here, or its cookie) gets a
    session; and a session is stored only once it changes (`session_guard`)."""
    given = request.query_params.get("token") or ""
    if request.method not in SAFE_METHODS or \
            not hmac.compare_digest(given.encode(), token.encode()):
        return unauthorized()
    cookie = request.cookies.get(named(SESSION_COOKIE, request))
    session = store.get(cookie) or store.adopt(cookie) or store.new()
    rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
    target = request.url.path + ("?" + urlencode(rest) if rest else "")
    response = RedirectResponse(target, status_code=303)
    set_cookie(response, named(TOKEN_COOKIE, request), store.auth_cookie())
    set_session_cookies(response, request, store.cookie_for(session), session)
    return response


def unauthorized() -> Response:
    """The 401 of a request without the access token: no data, no cookie, no session."""
    return HTMLResponse(
        "<!doctype html><title>privlab studio: token needed</title><h1>This studio needs its "
        "access token</h1><p>Open the URL <code>privlab studio</code> printed "
        "(<code>http://127.0.0.1:PORT/?token=...</code>) in this browser.</p>",
        status_code=401)


def host_refusal(request: Request, allowed: frozenset[str] | None) -> Response | None:
    """400 for a Host header outside `allowed`: a page on another site that resolves its
    name to 127.0.0.1 (DNS rebinding)."""
    if allowed is not None and host_name(request) not in allowed:
        return PlainTextResponse("unexpected Host header: open the studio at "
                                 "http://127.0.0.1", status_code=400)
    return None


def token_refusal(request: Request, token: str | None, store: SessionStore) -> Response | None:
    """401 unless the request carries the access cookie (derived from the token) or the
    token in the X-Privlab-Token header, compared in constant time; None without a token."""
    if token is None:
        return None
    if store.auth_ok(request.cookies.get(named(TOKEN_COOKIE, request))):
        return None
    header = request.headers.get(TOKEN_HEADER) or ""
    if header and hmac.compare_digest(header.encode(), token.encode()):
        return None
    return unauthorized()


def origin_refusal(request: Request) -> Response | None:
    """403 for a state-changing request another page sent. `Sec-Fetch-Site` (set by the
    browser, no page can forge it) must say same-origin; an `Origin` must be this studio's
    exact host:port. A page on another port of 127.0.0.1 is same-site (SameSite=Strict
    cookies go with its forms) but never same-origin. `Origin: null` is what Chromium sends
    for the studio's own forms (its pages say Referrer-Policy: no-referrer), so it counts
    only beside a same-origin `Sec-Fetch-Site`. A request with neither header is not from a
    browser (it passed the token check)."""
    if request.method in SAFE_METHODS:
        return None
    site = request.headers.get("sec-fetch-site")
    origin = request.headers.get("origin")
    host = (request.headers.get("host") or "").lower()
    if site is not None and site not in ("same-origin", "none"):
        return cross_origin()
    if origin is not None and origin != "null" and urlsplit(origin).netloc.lower() != host:
        return cross_origin()
    if origin == "null" and site is None:
        return cross_origin()
    return None


def cross_origin() -> Response:
    return PlainTextResponse("refused: this request came from another web page (origin "
                             "check); nothing was changed", status_code=403)


def set_session_cookies(response: Response, request: Request, session_cookie: str | None,
                        session: Session) -> None:
    """The session cookie when one is issued (`session_cookie`), and the CSRF cookie
    whenever the browser's differs from its session's token."""
    if session_cookie is not None:
        set_cookie(response, named(SESSION_COOKIE, request), session_cookie)
    csrf_name = named(CSRF_COOKIE, request)
    if session_cookie is not None or request.cookies.get(csrf_name) != session.csrf:
        set_cookie(response, csrf_name, session.csrf)


def set_cookie(response: Response, name: str, value: str) -> None:
    """Every studio cookie: HttpOnly (no script reads it), SameSite=Strict, whole site."""
    response.set_cookie(name, value, httponly=True, samesite="strict", path="/")


def harden(response: Response) -> Response:
    """Headers every response carries: no foreign script, style, frame or form target."""
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"
    return response


def named(base: str, request: Request) -> str:
    """A cookie's name on this studio's port (`sessions.cookie_name`)."""
    return cookie_name(base, request.headers.get("host"))


def host_name(request: Request) -> str:
    """The Host header without its port ("[::1]" kept bracketed)."""
    host = request.headers.get("host") or ""
    if host.startswith("["):
        return host.split("]")[0] + "]"
    return host.rsplit(":", 1)[0]
