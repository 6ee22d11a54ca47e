"""Gateway: the overview of the gateway named by `--gateway-config` (analysts, budgets,
history) and the verification of its audit log's hash chain, run on request."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from privlab.errors import PrivlabError
from privlab.studio.web import CheckedForm, ConfigDep, SessionDep, back, page
from privlab.studio.workers import in_worker

router = APIRouter()


@router.get("/gateway", response_class=HTMLResponse)
def gateway_page(request: Request, session: SessionDep, config: ConfigDep) -> Response:
    from privlab.studio.gateway_admin import overview

    view = error = None
    if config.gateway_config is not None:
        try:
            view = overview(config.gateway_config)
        except PrivlabError as exc:
            error = str(exc)
    return page(request, "gateway.html.j2", view=view, error=error,
                check=session.gateway_check)


@router.post("/gateway/verify")
@in_worker
def gateway_verify(form: CheckedForm, session: SessionDep, config: ConfigDep) -> Response:
    if config.gateway_config is None:
        session.flash("error", "start the studio with --gateway-config FILE")
        return back("/gateway")
    from privlab.studio.gateway_admin import verify

    try:
        session.gateway_check = verify(config.gateway_config)
    except PrivlabError as exc:
        session.flash("error", str(exc))
    return back("/gateway#verification")
