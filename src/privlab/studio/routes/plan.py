"""The analysis-plan page: pick statistics over columns with weights and one total epsilon,
see the preview (from the declared schema alone: no row read, nothing charged), review only
the columns the plan uses, then "Run and download": `Analysis.run` charged once to the
studio's ledger, answered with the package (`privlab.studio.plan`)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response

from privlab.errors import BudgetExceededError, PrivlabError
from privlab.studio import plan as sp
from privlab.studio.protect import _is_bundled
from privlab.studio.sessions import Session
from privlab.studio.web import (
    CheckedForm,
    ConfigDep,
    LedgerDep,
    SessionDep,
    attachment,
    back,
    budget_for,
    page,
)
from privlab.studio.workers import in_worker

router = APIRouter()


def plan_columns(session: Session) -> list[str]:
    """The columns a plan may name: the reviewed schema's released ones, else (while a draft
    awaits review) the draft's, so the plan can say which few need review."""
    if session.schema is not None:
        return [c.name for c in session.schema.released_columns()]
    if session.draft is not None:
        return list(session.draft.names)
    return []


def stated(session: Session, q: dict[str, str]) -> tuple[Any, str | None]:
    """(the preview, or None; the one-line error, or None): public facts only."""
    if session.schema is None or not any(q.get(f"stat{i}") for i in range(sp.MAX_ROWS)):
        return None, None
    try:
        return sp.preview(sp.analysis_of(session.schema, q)), None
    except PrivlabError as exc:
        return None, str(exc)


@router.get("/plan", response_class=HTMLResponse)
def plan_page(request: Request, session: SessionDep) -> Response:
    q = sp.form_values(request.query_params)
    preview, error = stated(session, q)
    return page(request, "plan.html.j2", q=q, rows=sp.shown_rows(q), preview=preview,
                error=error, statistics=sp.STATISTICS, columns=plan_columns(session),
                by_columns=sp.by_columns(session.schema), mechanisms=sp.MECHANISMS,
                used=sp.columns_used(q), plans=session.plans)


@router.post("/plan/review")
def plan_review(form: CheckedForm, session: SessionDep) -> Response:
    """Review only the columns this plan uses; back to the plan once they are saved."""
    q = sp.form_values(form)
    review = session.review
    if session.draft is None or review is None:
        session.flash("error", "draft a schema first (Schema page)")
        return back("/schema")
    try:
        review.choose_columns("\n".join(sp.columns_used(q)))
    except PrivlabError as exc:
        session.flash("error", str(exc))
        return back("/plan?" + urlencode(q))
    session.plan_fields = q
    session.flash("ok", f"review the {len(review.used)} columns this plan uses (of "
                        f"{len(review.draft.columns)}); the others are declared text")
    return back("/schema")


@router.post("/plan/run")
@in_worker
def plan_run(form: CheckedForm, session: SessionDep, config: ConfigDep,
             ledger: LedgerDep) -> Response:
    q = sp.form_values(form)
    again = "/plan?" + urlencode(q)
    if session.source is None or session.schema is None:
        session.flash("error", "choose data and a reviewed schema first")
        return back("/")
    try:
        analysis = sp.analysis_of(session.schema, q)
    except PrivlabError:  # the plan page states why (its preview checks the same plan)
        return back(again)
    try:
        budget_for(ledger, config, session.source.principal)
        result = sp.run(analysis, session.source,
                        bundled=_is_bundled(session.schema, session.source),
                        ledger=ledger, principal=session.source.principal)
    except BudgetExceededError as exc:
        session.flash("error", f"budget exceeded: nothing was released ({exc})")
        return back(again)
    except PrivlabError as exc:
        session.flash("error", str(exc))
        return back(again)
    except OSError as exc:  # the file went away or is unreadable: read before the charge
        session.flash("error", f"data {session.source.label}: cannot be read "
                               f"({exc.strerror or exc}); nothing was charged")
        return back(again)
    if result.entry_id is not None:
        session.entry_ids.append(result.entry_id)
    session.plans.append(result)
    return attachment(result.zip_bytes(), result.zip_name, "application/zip")


@router.get("/plans/{rid}/{name}")
def plan_file(rid: str, name: str, session: SessionDep) -> Response:
    """A package of this session again (the zip, or one of its files)."""
    result = next((r for r in session.plans if r.rid == rid), None)
    if result is None:
        return PlainTextResponse("no such plan in this session", status_code=404)
    if name == result.zip_name:
        return attachment(result.zip_bytes(), name, "application/zip")
    if name not in result.files:
        return PlainTextResponse("no such file", status_code=404)
    return attachment(result.files[name], name, "application/json" if name.endswith(".json")
                      else "text/plain")
