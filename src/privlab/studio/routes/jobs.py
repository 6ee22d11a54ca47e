"""Jobs (synthesizers, DP models, choose-epsilon runs in child processes): a job's page, its
status as JSON for the page's progress bar, cancel, and its files once done. A job is looked
up in the browser's own session only."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response

from privlab.studio.web import CheckedForm, SessionDep, attachment, back, page

#: Media types of a job's files, by suffix (a job offers no other kind).
JOB_MEDIA = {"csv": "text/csv", "json": "application/json", "html": "text/html",
             "txt": "text/plain", "pkl": "application/octet-stream"}

router = APIRouter()


@router.get("/jobs/{jid}", response_class=HTMLResponse)
def job_page(request: Request, jid: str, session: SessionDep) -> Response:
    job = session.jobs.get(jid)
    if job is None:
        return page(request, "missing.html.j2", code=404, what="job")
    return page(request, "job.html.j2", job=job, job_status=job.status())


@router.get("/jobs/{jid}/status")
def job_status(jid: str, session: SessionDep) -> Response:
    job = session.jobs.get(jid)
    if job is None:
        return JSONResponse({"error": "no such job in this session"}, status_code=404)
    return JSONResponse(job.status())


@router.post("/jobs/{jid}/cancel")
async def job_cancel(jid: str, form: CheckedForm, session: SessionDep) -> Response:
    job = session.jobs.get(jid)
    if job is None:
        return PlainTextResponse("no such job in this session", status_code=404)
    job.cancel()
    session.flash("ok", "job cancelled (its budget stays spent: the charge came first)")
    return back(f"/jobs/{jid}")


@router.get("/jobs/{jid}/{name}")
def job_file(jid: str, name: str, session: SessionDep) -> Response:
    job = session.jobs.get(jid)
    path = None if job is None else job.file(name)
    if path is None:
        return PlainTextResponse("no such file in this session", status_code=404)
    if not path.is_file() or job.status()["state"] != "done":
        return PlainTextResponse("the job has not finished", status_code=404)
    return attachment(path.read_bytes(), name, JOB_MEDIA[name.rsplit(".", 1)[-1]])
