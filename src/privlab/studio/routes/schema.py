"""Schema review: draft a schema from the data (private until reviewed), choose the columns
the analyses use, review each of them a page at a time (`privlab.studio.review`), save the
reviewed schema (then public) and download it. A draft is never used for a release:
`saved_schema` refuses drafts left beside a workspace file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response

from privlab.errors import PrivlabError
from privlab.studio.config import StudioConfig, inside
from privlab.studio.review import PAGE, Review
from privlab.studio.sessions import Session
from privlab.studio.sources import Source, safe_upload_name
from privlab.studio.web import CheckedForm, SessionDep, attachment, back, page
from privlab.studio.workers import in_worker

router = APIRouter()


def schema_file(session: Session, source: Source) -> Path:
    """Where this session keeps the schema it reviewed for `source`: named after the source's
    ledger principal (hashed), so two files with one stem (a/people.csv, b/people.csv, an
    upload people.csv) never share a schema or its privacy unit; the stem keeps it readable."""
    import hashlib

    stem = safe_upload_name(source.name).split(".")[0] or "data"
    key = hashlib.sha256(source.principal.encode()).hexdigest()[:16]
    return session.folder / "schemas" / f"{stem}-{key}.yaml"


def saved_schema(session: Session, source: Source, config: StudioConfig) -> Any:
    """The schema reviewed in this session, else a reviewed one the curator put beside a
    workspace file (`people.csv` -> `people.schema.yaml`; drafts are refused)."""
    from privlab.schema import load_schema

    path = schema_file(session, source)
    if path.is_file():
        return load_schema(path)
    if source.kind == "workspace" and source.path is not None:
        beside = source.path.parent / f"{source.path.name.split('.')[0]}.schema.yaml"
        if beside.is_file():
            inside(config.workspace, str(beside.relative_to(config.workspace.resolve())))
            return load_schema(beside)
    return None


def current_review(session: Session) -> Review | None:
    """The review of the session's current draft (None without a draft)."""
    review = session.review
    if session.draft is None or review is None or review.draft != session.draft:
        return None
    return review


def review_page(request: Request, session: Session, page_no: int, code: int = 200,
                edits: dict[str, str] | None = None) -> Response:
    """The schema page; with a draft, one page of its used columns (with `edits`: the
    person's refused submission, shown again as typed)."""
    from privlab.schema import COLUMN_TYPES

    review = current_review(session)
    columns: list[tuple[str, Any, dict[str, Any]]] = []
    units: list[str] = []
    if review is not None:
        page_no = min(max(page_no, 0), review.pages - 1)
        columns = [(f"c{i}", col, review.values(i, col, edits))
                   for i, col in review.page_columns(page_no)]
        used = set(review.used)
        units = [c.name for c in review.draft.columns if c.name in used and (
            review.done.get(c.name) or {}).get("type", c.type) == "identifier"][:200]
    return page(request, "schema.html.j2", code=code, types=COLUMN_TYPES, review=review,
                page_no=page_no, columns=columns, units=units, per_page=PAGE,
                unit=(edits if edits is not None else review.unit if review else {}))


@router.get("/schema", response_class=HTMLResponse)
def schema_page(request: Request, session: SessionDep) -> Response:
    raw = request.query_params.get("page", "1")
    return review_page(request, session, int(raw) - 1 if raw.isdigit() else 0)


@router.post("/schema/draft")
@in_worker
def schema_draft(form: CheckedForm, session: SessionDep) -> Response:
    if session.source is None:
        session.flash("error", "choose data first")
        return back("/")
    from privlab.schema import draft_schema

    try:
        session.draft = draft_schema(session.source.load(),
                                     name=safe_upload_name(session.source.name).split(".")[0])
        session.review = Review.of(session.draft)
    except PrivlabError as exc:
        session.flash("error", str(exc))
    return back("/plan" if form.get("next") == "plan" else "/schema")


@router.post("/schema/columns")
@in_worker
def schema_columns(form: CheckedForm, session: SessionDep) -> Response:
    """The columns the analyses use (one per line; empty: all): only they are reviewed."""
    review = current_review(session)
    if review is None:
        session.flash("error", "draft a schema first")
        return back("/schema")
    try:
        review.choose_columns(str(form.get("used") or ""))
    except PrivlabError as exc:
        session.flash("error", str(exc))
        return back("/schema")
    session.flash("ok", f"{len(review.used)} of {len(review.draft.columns)} columns to review; "
                        "the others are declared text (never released)")
    return back("/schema")


@router.post("/schema/save")
@in_worker
def schema_save(request: Request, form: CheckedForm, session: SessionDep) -> Response:
    """One page of reviewed columns; once every used column is reviewed, the schema."""
    review = current_review(session)
    if review is None:
        session.flash("error", "draft a schema first")
        return back("/schema")
    raw = str(form.get("page") or "1")
    page_no = min(max(int(raw) - 1 if raw.isdigit() else 0, 0), review.pages - 1)
    try:
        review.accept_page(form, page_no)
        open_page = review.first_open_page()
        if open_page is not None:
            session.flash("ok", f"{len(review.done)} of {len(review.used)} columns reviewed")
            return back(f"/schema?page={open_page + 1}")
        schema = review.schema()
    except PrivlabError as exc:
        # shown again with the person's edits kept (nothing of this page saved)
        session.flash("error", str(exc))
        edits = {k: str(v) for k, v in form.items() if k != "csrf"}
        return review_page(request, session, page_no, code=400, edits=edits)
    from privlab.utils.atomic import atomic_write_text

    path = schema_file(session, session.source)
    path.parent.mkdir(exist_ok=True)
    atomic_write_text(path, schema.to_yaml())
    session.schema, session.draft, session.review = schema, None, None
    session.flash("ok", f"reviewed schema saved ({len(schema.columns)} columns, "
                        f"{len(review.used)} reviewed, fingerprint {schema.fingerprint()}); "
                        "it is now public")
    if session.plan_fields:  # reviewed for a plan: back to it, as it was typed
        from urllib.parse import urlencode

        fields, session.plan_fields = session.plan_fields, {}
        return back("/plan?" + urlencode(fields))
    return back("/protect")


@router.get("/schema/download")
def schema_download(session: SessionDep) -> Response:
    if session.schema is None:
        return PlainTextResponse("no reviewed schema in this session", status_code=404)
    return attachment(session.schema.to_yaml(), f"{session.schema.name}.yaml",
                      "application/yaml")
