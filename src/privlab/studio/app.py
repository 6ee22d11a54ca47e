"""The studio's FastAPI app: `create_app` wires the pieces together and holds no route.

Pages are rendered on the server (Jinja2, autoescaped); every state-changing request is a
POST carrying the session's CSRF token in a hidden field, checked against the session and
its cookie before anything happens (`web.checked_form`). Browser-supplied paths go through
`config.inside`. The guards every request passes are in `privlab.studio.guards`, what the
routes share in `privlab.studio.web`, the routes themselves in `privlab.studio.routes`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from privlab.studio.config import StudioConfig
from privlab.studio.guards import BodyLimit, allowed_hosts, session_guard
from privlab.studio.jobs import JobRunner
from privlab.studio.pages import internal_error
from privlab.studio.sessions import SessionStore
from privlab.studio.web import Forbidden, forbidden

#: Bytes a request body may carry beyond the upload limit (the form's other fields).
FORM_SLACK = 16_384


def create_app(config: StudioConfig) -> FastAPI:
    """The app for one workspace (see `StudioConfig`). What the routes share lives on
    `app.state`: `config`, `store` (the sessions), `ledger` (the budget ledger) and
    `allowed_hosts` (the Host names accepted, None for any), `jobs` (the job runner: its
    children are killed when the app shuts down)."""
    from privlab.core.ledger import BudgetLedger
    from privlab.studio.routes import ROUTERS

    ledger = BudgetLedger(str(config.ledger_path))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            try:
                app.state.jobs.shutdown()
            finally:
                ledger.close()  # the app's ledger is closed when the server shuts down

    app = FastAPI(title="privlab studio", docs_url=None, redoc_url=None, openapi_url=None,
                  lifespan=lifespan)
    app.state.config = config
    app.state.store = SessionStore(config.secret or b"", config.state_dir, config.token)
    app.state.ledger = ledger
    app.state.allowed_hosts = allowed_hosts(config)
    app.state.jobs = JobRunner(config.state_dir)
    # the whole body: the file plus the form's few small fields
    app.add_middleware(BodyLimit, limit=config.max_upload_bytes + FORM_SLACK,
                       stated=config.max_upload_bytes)
    app.mount("/static", StaticFiles(packages=[("privlab.studio", "static")]), name="static")
    # added last, so it runs first: Host, token and session before the body limit and routes
    app.middleware("http")(session_guard)
    app.add_exception_handler(Forbidden, forbidden)
    app.add_exception_handler(Exception, internal_error)  # a page, never a bare text 500
    for router in ROUTERS:
        app.include_router(router)
    return app
