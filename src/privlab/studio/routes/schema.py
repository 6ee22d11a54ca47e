"""Schema review: draft a schema from the data (private until reviewed), review every
column in a form, save the reviewed schema (then public) and download it. A draft is never
used for a release: `saved_schema` refuses drafts left beside a workspace file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response

from privlab.errors import InvalidInputError, PrivlabError
from privlab.studio.config import StudioConfig, inside
from privlab.studio.sessions import Session
from privlab.studio.sources import Source, safe_upload_name
from privlab.studio.web import (
    CheckedForm,
    SessionDep,
    attachment,
    back,
    number,
    page,
    whole_number,
)
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


@router.get("/schema", response_class=HTMLResponse)
def schema_page(request: Request) -> Response:
    from privlab.schema import COLUMN_TYPES

    return page(request, "schema.html.j2", types=COLUMN_TYPES, edits=None)


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
    except PrivlabError as exc:
        session.flash("error", str(exc))
    return back("/schema")


@router.post("/schema/save")
@in_worker
def schema_save(request: Request, form: CheckedForm, session: SessionDep) -> Response:
    if session.draft is None and session.schema is None:
        session.flash("error", "draft a schema first")
        return back("/schema")
    base = session.draft if session.draft is not None else session.schema
    try:
        schema = schema_from_form(form, base)
    except PrivlabError as exc:
        # shown again with the person's edits kept (nothing saved)
        session.flash("error", str(exc))
        from privlab.schema import COLUMN_TYPES

        edits = {k: str(v) for k, v in form.items() if k != "csrf"}
        return page(request, "schema.html.j2", code=400, types=COLUMN_TYPES, edits=edits)
    from privlab.utils.atomic import atomic_write_text

    path = schema_file(session, session.source)
    path.parent.mkdir(exist_ok=True)
    atomic_write_text(path, schema.to_yaml())
    session.schema, session.draft = schema, None
    session.flash("ok", f"reviewed schema saved ({len(schema.columns)} columns, "
                        f"fingerprint {schema.fingerprint()}); it is now public")
    return back("/protect")


@router.get("/schema/download")
def schema_download(session: SessionDep) -> Response:
    if session.schema is None:
        return PlainTextResponse("no reviewed schema in this session", status_code=404)
    return attachment(session.schema.to_yaml(), f"{session.schema.name}.yaml",
                      "application/yaml")


def schema_from_form(form: Any, base: Any) -> Any:
    """A reviewed Schema from the review form: every column must be ticked as reviewed."""
    from privlab.schema import parse_schema

    columns = {col.name: column_spec(form, f"c{i}", col) for i, col in enumerate(base.columns)}
    unreviewed = [col.name for i, col in enumerate(base.columns)
                  if form.get(f"c{i}_reviewed") != "on"]
    if unreviewed:
        raise InvalidInputError(f"review every column before saving; not yet reviewed: "
                                f"{', '.join(unreviewed)} (tick 'reviewed' once its values are "
                                "public, documented ones)")
    raw: dict[str, Any] = {"name": base.name, "privacy_unit": str(form.get("privacy_unit")
                                                                    or "row"),
                           "columns": columns,
                           "description": str(form.get("description") or
                                              "reviewed in privlab studio")}
    mrpu = str(form.get("max_rows_per_unit") or "").strip()
    if mrpu:
        raw["max_rows_per_unit"] = whole_number(mrpu, "max rows per person")
    size = str(form.get("public_size") or "").strip()
    if size:
        raw["public_size"] = whole_number(size, "public row count")
    return parse_schema(raw, name=base.name)


def column_spec(form: Any, key: str, col: Any) -> dict[str, Any]:
    """One column's declaration from its row of the review form (fields `key`_type, ...)."""
    kind = str(form.get(f"{key}_type", col.type))
    spec: dict[str, Any] = {"type": kind, "missing": form.get(f"{key}_missing") == "on"}
    if kind == "categorical":
        cats = [c.strip() for c in str(form.get(f"{key}_categories", "")).split(",")
                if c.strip()]
        spec["categories"] = cats
        if form.get(f"{key}_other") == "on":
            spec["other"] = True
    if kind in ("integer", "numeric", "datetime"):
        spec["bounds"] = column_bounds(form, key, kind, col.name)
    return spec


def column_bounds(form: Any, key: str, kind: str, name: str) -> list[Any]:
    """A numeric or datetime column's declared [lower, upper] bounds, parsed by type."""
    lo, hi = str(form.get(f"{key}_lo", "")).strip(), str(form.get(f"{key}_hi", "")).strip()
    if kind == "integer":
        return [whole_number(lo, f"{name}: lower bound"),
                whole_number(hi, f"{name}: upper bound")]
    if kind == "numeric":
        return [number(lo, f"{name}: lower bound"), number(hi, f"{name}: upper bound")]
    return [lo, hi]
