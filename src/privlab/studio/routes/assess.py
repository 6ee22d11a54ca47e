"""Assess: re-identification risk of the chosen data (`privlab.assess`), shown on the page
and kept as `privlab assess --report`'s page for download, with the call that reruns it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response

from privlab.errors import PrivlabError
from privlab.studio.sessions import Session
from privlab.studio.web import CheckedForm, SessionDep, attachment, back, page
from privlab.studio.workers import in_worker

router = APIRouter()


@router.get("/assess", response_class=HTMLResponse)
def assess_page(request: Request) -> Response:
    return page(request, "assess.html.j2")


@router.post("/assess")
@in_worker
def assess_run(form: CheckedForm, session: SessionDep) -> Response:
    if session.source is None:
        session.flash("error", "choose data first")
        return back("/")
    from privlab.assess.report import ASSESSMENT_EXACT, assessment_sections, plain_section
    from privlab.report import write_page

    qis = [q for q in (str(form.get("quasi_identifiers", "")).split(",")) if q.strip()]
    qis = [q.strip() for q in qis]
    sensitive = str(form.get("sensitive", "")).strip() or None
    try:
        size = int(str(form.get("max_combination_size") or 2))
        result = run_assessment(session, qis, sensitive, size)
    except (PrivlabError, ValueError) as exc:
        session.flash("error", str(exc).splitlines()[0])
        return back("/assess")
    sections = [plain_section(result)] + assessment_sections(result)
    # the downloadable report is `privlab assess --report`'s page, from the same sections
    write_page(session.folder / "assessment.html", "Privacy impact assessment", sections,
               exact_values=ASSESSMENT_EXACT,
               subtitle=f"{result.source}: attribute-level richness, risky combinations "
                        "and privacy models", guarantee=result.guarantee)
    session.assessment = {"sections": sections,
                          "headline": result.guarantee.headline(),
                          "call": assess_call(qis, sensitive, size, schema_call(session))}
    return back("/assess#results")


def run_assessment(session: Session, qis: list[str], sensitive: str | None, size: int) -> Any:
    """`privlab.assess.assess` on the session's data, with its schema when it has one (as
    `privlab assess --schema`: the declared types decide each column's treatment, identifier
    and text columns are flagged as direct identifiers instead of assessed, and a value
    outside the schema is refused with one line naming its column)."""
    from privlab.assess import assess

    frame = session.source.load()
    return assess(frame, quasi_identifiers=qis or None, sensitive=sensitive,
                  max_combination_size=size, source=session.source.label,
                  schema=session.schema, on_invalid="refuse")


@router.get("/assess/report.html")
def assess_report(session: SessionDep) -> Response:
    path = session.root / "assessment.html"
    if not path.is_file():
        return PlainTextResponse("no assessment in this session", status_code=404)
    return attachment(path.read_text(encoding="utf-8"), "assessment.html", "text/html")


def schema_call(session: Session) -> str | None:
    """How the rerun names the session's schema: the bundled one by name, else the reviewed
    schema saved as schema.yaml; None without a schema."""
    if session.schema is None:
        return None
    from privlab.studio.protect import _is_bundled

    if session.source is not None and _is_bundled(session.schema, session.source):
        return f"privlab.schema.bundled_schema({session.source.bundled_schema!r})"
    return "privlab.schema.load_schema('schema.yaml')"


def assess_call(qis: list[str], sensitive: str | None, size: int,
                schema: str | None = None) -> str:
    """The library call that reruns the assessment (shown beside the results)."""
    args = ["frame"]
    if schema is not None:
        args.append(f"schema={schema}")
    if qis:
        args.append(f"quasi_identifiers={qis!r}")
    if sensitive:
        args.append(f"sensitive={sensitive!r}")
    args.append(f"max_combination_size={size}")
    return f"privlab.assess.assess({', '.join(args)})"
