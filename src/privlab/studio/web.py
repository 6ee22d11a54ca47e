"""What every studio route shares, handed to it as FastAPI dependencies read from `app.state`
(set once by `privlab.studio.app.create_app`) instead of closures over the app: the
workspace's config and budget ledger, the browser's session (attached by
`privlab.studio.guards.session_guard`), the CSRF-checked form, and the page / redirect /
download helpers. A route module can then be read, and checked, on its own."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.datastructures import FormData

from privlab.core.ledger import BudgetLedger
from privlab.errors import InvalidInputError
from privlab.studio.config import StudioConfig
from privlab.studio.pages import render
from privlab.studio.sessions import CSRF_COOKIE, Session, cookie_name, csrf_ok


class Forbidden(Exception):
    """A state-changing request whose CSRF token is missing or wrong (answered 403)."""


async def forbidden(request: Request, exc: Exception) -> Response:
    """The 403 of a refused CSRF check: the route never ran, so nothing changed."""
    return PlainTextResponse("refused: missing or wrong CSRF token (reload the page and "
                             "try again); nothing was changed", status_code=403)


async def current_session(request: Request) -> Session:
    """The browser's own session (the guard attached it before any route runs)."""
    return request.state.session


async def current_config(request: Request) -> StudioConfig:
    return request.app.state.config


async def current_ledger(request: Request) -> BudgetLedger:
    """The workspace's one budget ledger: every charge goes through it, atomically."""
    return request.app.state.ledger


async def checked_form(request: Request) -> FormData:
    """The POSTed form after the CSRF check (403 and nothing done when it fails)."""
    form = await request.form(max_files=1, max_fields=2000)
    cookie = request.cookies.get(cookie_name(CSRF_COOKIE, request.headers.get("host")))
    if not csrf_ok(request.state.session, form.get("csrf"), cookie):
        raise Forbidden
    return form


SessionDep = Annotated[Session, Depends(current_session)]
ConfigDep = Annotated[StudioConfig, Depends(current_config)]
LedgerDep = Annotated[BudgetLedger, Depends(current_ledger)]
#: A state-changing route's form: the route runs only once its CSRF token checked out.
CheckedForm = Annotated[FormData, Depends(checked_form)]


def page(request: Request, template: str, code: int = 200, **ctx: Any) -> HTMLResponse:
    """A page with what every page shows: the flash messages and this data's budget."""
    session: Session = request.state.session
    config: StudioConfig = request.app.state.config
    return HTMLResponse(render(template, session=session, config=config,
                               messages=session.take_messages(),
                               ledger=ledger_view(request.app.state.ledger, config, session),
                               path=request.url.path, **ctx),
                        status_code=code)


def back(url: str) -> RedirectResponse:
    """Post/redirect/get: a 303 to the page that shows the outcome."""
    return RedirectResponse(url, status_code=303)


def ledger_view(ledger: BudgetLedger, config: StudioConfig,
                session: Session) -> dict[str, Any] | None:
    """The chosen data's budget, and the charges this session made (not other sessions').
    Read-only (a page is a GET): a source the ledger does not know yet shows the budget it
    will get at its first charge (`budget_for`)."""
    if session.source is None:
        return None
    principal = session.source.principal
    if principal not in ledger.principals():
        return {"principal": principal, "budget": config.budget_epsilon, "spent": 0.0,
                "remaining": config.budget_epsilon, "remaining_delta": config.budget_delta,
                "entries": []}
    st = ledger.status(principal)
    return {"principal": principal, "budget": float(st.budget_epsilon_exact),
            "spent": float(st.spent_epsilon_exact),
            "remaining": float(st.remaining_epsilon_exact),
            "remaining_delta": float(st.remaining_delta_exact),
            "entries": [e for e in ledger.history(principal)
                        if e.entry_id in session.entry_ids]}


def budget_for(ledger: BudgetLedger, config: StudioConfig, principal: str) -> None:
    """Give a data source its budget (`--budget-epsilon`) the first time it is used."""
    if principal not in ledger.principals():
        ledger.set_budget(principal, config.budget_epsilon, config.budget_delta)


def attachment(content: str | bytes, filename: str, media: str) -> Response:
    return Response(content, media_type=media, headers={
        "Content-Disposition": f'attachment; filename="{filename}"'})


def check_delta_policy(delta: float, schema: Any) -> None:
    """The CLI's one delta policy (`privlab.core.delta_policy`, as `train` and `synth` apply
    it in the job), checked before the ledger is charged so a refused job costs no budget; the
    studio offers no --allow-weak, so its refusal names none."""
    from privlab.core.delta_policy import check_delta_policy as policy
    from privlab.schema.release import public_size_of

    policy(delta, False, field="delta",
           public_size=public_size_of(schema, None) if schema is not None else None,
           remedy="or ask the data controller to accept a weak delta")


def number(raw: Any, name: str) -> float:
    """A form field as a float, or the one-line error naming the field."""
    try:
        return float(str(raw).strip())
    except ValueError:
        raise InvalidInputError(f"{name}: type a number, got {raw!r}") from None


def whole_number(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InvalidInputError(f"{name}: type a whole number, got {text!r}") from None


def form_list(form: Any, name: str) -> list[str]:
    """Every value of a repeated field (checkboxes), comma lists split too."""
    out: list[str] = []
    for raw in form.getlist(name):
        out += [c.strip() for c in str(raw).split(",") if c.strip()]
    return out
