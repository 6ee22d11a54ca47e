"""Rendering: the studio's Jinja2 templates (autoescaped, strict) and their filters, and the
page of an unexpected error."""

from __future__ import annotations

import functools
import html
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from privlab.report.html import make_environment


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = make_environment("privlab.studio")
    env.filters["num"] = lambda v: "" if v is None else f"{v:.4g}"
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


async def internal_error(request: Request, exc: Exception) -> Response:
    """An unexpected failure answered as a page (JSON for a job's status poll), never a bare
    text 500: what failed in one line, that charges made stay in the ledger, a way back.
    Self-contained, so it renders even when what broke was the templates or the session."""
    line = (str(exc).strip().splitlines() or [""])[0][:300]
    what = f"{type(exc).__name__}: {line}" if line else type(exc).__name__
    if request.url.path.endswith("/status"):
        return JSONResponse({"error": f"internal error: {what}"}, status_code=500)
    body = ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>privlab studio: internal error</title>"
            "<link rel=\"stylesheet\" href=\"/static/studio.css\"></head><body><main>"
            "<h1>Something went wrong</h1>"
            f"<p class=\"error\">internal error: {html.escape(what)}</p>"
            "<p>Nothing was released by this request. A charge it made before failing stays "
            "in the ledger (the budget may over-count, never under-count); the budget shown "
            "on each page is the ledger's.</p>"
            "<p><a href=\"/\">Back to the studio</a></p></main></body></html>")
    return HTMLResponse(body, status_code=500)
