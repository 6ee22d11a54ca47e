"""Jobs (synthesizers, DP models, choose-epsilon runs in child processes): a job's page, its
status as JSON for the page's progress bar, cancel, and its files once done. A job is looked
up in the browser's own session only (in memory, else its record in the session's folder: a
job of an earlier run of the studio shows how it ended). `start_job` is how the job routes
start one: prepared, then charged, then queued."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response

from privlab.core.ledger import BudgetLedger
from privlab.errors import BudgetExceededError, PrivlabError
from privlab.studio.config import StudioConfig
from privlab.studio.jobs import CommandJob, JobRunner
from privlab.studio.sessions import Session
from privlab.studio.web import CheckedForm, SessionDep, attachment, back, budget_for, page

#: Media types of a job's files, by suffix (a job offers no other kind).
JOB_MEDIA = {"csv": "text/csv", "json": "application/json", "html": "text/html",
             "txt": "text/plain", "pkl": "application/octet-stream"}

router = APIRouter()


def current_jobs(request: Request) -> JobRunner:
    """The studio's one job runner (`app.state.jobs`): its queue is shared by every session."""
    return request.app.state.jobs


JobsDep = Annotated[JobRunner, Depends(current_jobs)]


def start_job(session: Session, jobs: JobRunner, prepare: Any, again: str, *,
              ledger: BudgetLedger | None = None, config: StudioConfig | None = None,
              charge: tuple[float, float, str] | None = None) -> Response:
    """Prepare, then charge, then queue: `prepare()` returns the prepared job (its folder,
    inputs and record; it exports data first where needed). A failure there (a full disk)
    charges nothing and leaves nothing behind, so a retry is free; only then is `charge`
    (epsilon, delta, description) charged to the data's budget, and the job queued. Every
    outcome is a redirect to a page: the job's, or `again` with the reason."""
    try:
        job: CommandJob = prepare()
    except (OSError, PrivlabError) as exc:
        session.flash("error", f"the job could not be prepared ({exc}); nothing was charged "
                               "and nothing started")
        return back(again)
    entry_id = None
    if charge is not None and ledger is not None and config is not None:
        try:
            budget_for(ledger, config, session.source.principal)
            entry = ledger.charge(session.source.principal, charge[0], charge[1],
                                  description=charge[2])
        except BudgetExceededError as exc:
            jobs.discard(job)
            session.flash("error", f"budget exceeded: nothing was started ({exc})")
            return back(again)
        except (OSError, PrivlabError) as exc:
            jobs.discard(job)
            session.flash("error", f"nothing was charged and nothing started ({exc})")
            return back(again)
        session.entry_ids.append(entry.entry_id)
        entry_id = entry.entry_id
    session.jobs[job.jid] = job
    jobs.submit(job, entry_id)
    return back(f"/jobs/{job.jid}")


@router.get("/jobs/{jid}", response_class=HTMLResponse)
def job_page(request: Request, jid: str, session: SessionDep, jobs: JobsDep) -> Response:
    job = jobs.find(session, jid)
    if job is None:
        return page(request, "missing.html.j2", code=404, what="job")
    return page(request, "job.html.j2", job=job, job_status=job.status())


@router.get("/jobs/{jid}/status")
def job_status(jid: str, session: SessionDep, jobs: JobsDep) -> Response:
    job = jobs.find(session, jid)
    if job is None:
        return JSONResponse({"error": "no such job in this session"}, status_code=404)
    return JSONResponse(job.status())


@router.post("/jobs/{jid}/cancel")
def job_cancel(jid: str, form: CheckedForm, session: SessionDep, jobs: JobsDep) -> Response:
    job = jobs.find(session, jid)
    if job is None:
        return PlainTextResponse("no such job in this session", status_code=404)
    if job.status()["state"] not in ("queued", "starting", "running"):
        session.flash("error", "the job has already ended; nothing to cancel")
        return back(f"/jobs/{jid}")
    job.cancel()
    session.flash("ok", "job cancelled (its budget stays spent: the charge came first)")
    return back(f"/jobs/{jid}")


@router.get("/jobs/{jid}/{name}")
def job_file(jid: str, name: str, session: SessionDep, jobs: JobsDep) -> Response:
    job = jobs.find(session, jid)
    path = None if job is None else job.file(name)
    if path is None:
        return PlainTextResponse("no such file in this session", status_code=404)
    if not path.is_file() or job.status()["state"] != "done":
        return PlainTextResponse("the job has not finished", status_code=404)
    return attachment(path.read_bytes(), name, JOB_MEDIA[name.rsplit(".", 1)[-1]])
