"""Protect and results: the Protect page's public-only preview (schema and plan, no private
row), the release itself (charged to the ledger before it is computed, nothing charged or
kept on refusal), and each release's page and downloads (its files, or all in one zip)."""

from __future__ import annotations

import io
import zipfile
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response

from privlab.errors import BudgetExceededError, PrivlabError
from privlab.studio import protect as prot
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

#: The form fields of a release (and of the Protect page's query string).
PLAN_FIELDS = ("statistic", "column", "epsilon", "bins", "expected_rows", "by")
#: Media types of a release's files, by suffix (anything else: text/plain).
FILE_MEDIA = {"json": "application/json", "py": "text/x-python", "sh": "text/x-shellscript",
              "yaml": "application/yaml", "html": "text/html"}

router = APIRouter()


def default_plan(schema: Any) -> dict[str, str]:
    """What the Protect page previews before the user chose: the mean of the first numeric
    column (else a histogram of the first column) at epsilon 1."""
    cols = schema.released_columns()
    numeric = [c for c in cols if c.is_numeric]
    if numeric:
        return {"statistic": "mean", "column": numeric[0].name, "epsilon": "1"}
    return {"statistic": "histogram", "column": cols[0].name if cols else "", "epsilon": "1"}


@router.get("/protect", response_class=HTMLResponse)
def protect_page(request: Request, session: SessionDep) -> Response:
    q = dict(request.query_params)
    q.pop("token", None)
    preview = error = plan = None
    if session.schema is not None and not q.get("statistic"):
        q = default_plan(session.schema)
    if session.schema is not None:
        try:
            plan = prot.parse_plan(q)
            preview = prot.preview(session.schema, plan)
        except PrivlabError as exc:
            error = str(exc)
    return page(request, "protect.html.j2", q=q, plan=plan, preview=preview,
                error=error, statistics=prot.STATISTICS)


@router.post("/protect/release")
@in_worker
def protect_release(form: CheckedForm, session: SessionDep, config: ConfigDep,
                          ledger: LedgerDep) -> Response:
    fields = {k: form.get(k, "") for k in PLAN_FIELDS}
    again = "/protect?" + urlencode({k: v for k, v in fields.items() if v})
    if session.source is None or session.schema is None:
        session.flash("error", "choose data and a reviewed schema first")
        return back("/")
    try:
        plan = prot.parse_plan(fields)
        budget_for(ledger, config, session.source.principal)
        result, entry = prot.release(session.source.load(), session.schema, plan,
                                     ledger=ledger, principal=session.source.principal,
                                     source=session.source)
    except BudgetExceededError as exc:
        session.flash("error", f"budget exceeded: nothing was released ({exc})")
        return back(again)
    except PrivlabError as exc:
        session.flash("error", str(exc))
        return back(again)
    session.entry_ids.append(entry.entry_id)
    session.releases.append(result)
    session.flash("ok", f"released; epsilon {plan.epsilon:g} charged, "
                        f"{entry.remaining_epsilon:g} left for this data")
    return back(f"/results/{result.rid}")


def session_result(session: Session, rid: str) -> prot.Result | None:
    """One of this session's releases (another session's id finds nothing)."""
    return next((r for r in session.releases if r.rid == rid), None)


@router.get("/results", response_class=HTMLResponse)
def results_page(request: Request) -> Response:
    return page(request, "results.html.j2", result=None)


@router.get("/results/{rid}", response_class=HTMLResponse)
def result_page(request: Request, rid: str, session: SessionDep) -> Response:
    result = session_result(session, rid)
    if result is None:
        return page(request, "missing.html.j2", code=404, what="release")
    return page(request, "results.html.j2", result=result, files=prot.package_files(result),
                half_width=half_width(result.payload))


def half_width(payload: dict[str, Any]) -> str:
    """The 95% noise half-width in the CLI's words (`privlab release` prints the same): a
    mean's is approximate, from its noisy count and the public bounds."""
    from privlab.core.release import half_width_text

    if payload.get("half_width_words"):  # the registry's (variance, stddev)
        return str(payload["half_width_words"])
    return half_width_text(payload.get("confidence_interval_95"), payload.get("noise") or {},
                           payload.get("details"),
                           "gaussian" in str(payload["guarantee"].get("mechanism", "")))


@router.get("/results/{rid}/{name}")
def result_file(rid: str, name: str, session: SessionDep) -> Response:
    result = session_result(session, rid)
    if result is None:
        return PlainTextResponse("no such release in this session", status_code=404)
    files = prot.package_files(result)
    if name == f"privlab-release-{rid}.zip":
        return attachment(release_zip(rid, files), name, "application/zip")
    if name not in files:
        return PlainTextResponse("no such file", status_code=404)
    media = FILE_MEDIA.get(name.rsplit(".", 1)[-1], "text/plain")
    return attachment(files[name], name, media)


def release_zip(rid: str, files: dict[str, str]) -> bytes:
    """Every file of a release in one zip, under the folder `privlab-release-<rid>/`."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for fname, text in files.items():
            zf.writestr(f"privlab-release-{rid}/{fname}", text)
    return buf.getvalue()
