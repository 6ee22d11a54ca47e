"""Home and data: the data picker (bundled, workspace file, this session's uploads), the
upload itself (limited in size, kept in the session's own folder) and the help toggle."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.datastructures import FormData

from privlab.errors import InvalidInputError, PrivlabError
from privlab.studio.config import DATA_SUFFIXES, StudioConfig, inside, workspace_files
from privlab.studio.guards import too_large
from privlab.studio.routes.schema import saved_schema
from privlab.studio.sessions import Session
from privlab.studio.sources import (
    BUNDLED,
    Source,
    bundled,
    safe_upload_name,
    upload_content_id,
)
from privlab.studio.web import (
    CheckedForm,
    ConfigDep,
    LedgerDep,
    SessionDep,
    back,
    budget_for,
    page,
)

router = APIRouter()


@router.get("/", response_class=HTMLResponse)
def home(request: Request, session: SessionDep, config: ConfigDep) -> Response:
    uploads = sorted(p.name for p in (session.root / "uploads").glob("*")) \
        if (session.root / "uploads").is_dir() else []
    return page(request, "home.html.j2", bundled=BUNDLED,
                files=workspace_files(config.workspace), uploads=uploads)


@router.post("/data/select")
def select(form: CheckedForm, session: SessionDep, config: ConfigDep,
                 ledger: LedgerDep) -> Response:
    try:
        source = chosen_source(form, session, config)
    except PrivlabError as exc:
        session.flash("error", str(exc))
        return back("/")
    adopt(session, source, config)
    budget_for(ledger, config, source.principal)
    session.flash("ok", f"data: {source.label}")
    return back("/protect" if session.schema is not None else "/schema")


def chosen_source(form: FormData, session: Session, config: StudioConfig) -> Source:
    """The data the form names: a bundled dataset, a file inside the workspace, or one of
    this session's own uploads (never another session's)."""
    kind = form.get("kind")
    if kind == "bundled":
        return bundled(str(form.get("name")))
    if kind == "workspace":
        path = inside(config.workspace, str(form.get("path", "")))
        if not path.is_file():
            raise InvalidInputError(f"path {form.get('path')!r}: no such file in the "
                                    "workspace")
        return Source("workspace", str(path.relative_to(config.workspace)), path)
    if kind == "upload":
        path = inside(session.folder / "uploads", str(form.get("name", "")))
        if not path.is_file():
            raise InvalidInputError("upload: no such file in this session")
        return Source("upload", path.name, path, upload_content_id(path, config.state_dir))
    raise InvalidInputError("kind: choose a bundled dataset or a file")


def adopt(session: Session, source: Source, config: StudioConfig) -> None:
    """Make `source` the session's data, with its public schema when there is one (bundled,
    reviewed in this session, or reviewed beside the file); any draft is dropped."""
    session.source, session.draft = source, None
    session.schema = None
    if source.bundled_schema is not None:
        from privlab.schema import bundled_schema

        session.schema = bundled_schema(source.bundled_schema)
        return
    try:
        session.schema = saved_schema(session, source, config)
    except PrivlabError as exc:  # e.g. a draft left beside the file
        session.flash("error", f"schema beside the file not used: {exc}")


@router.post("/data/upload")
def upload(form: CheckedForm, session: SessionDep, config: ConfigDep) -> Response:
    item = form.get("file")
    if item is None or not hasattr(item, "filename") or not item.filename:
        session.flash("error", "file: choose a CSV or Parquet file to upload")
        return back("/")
    name = safe_upload_name(item.filename)
    if not name.lower().endswith(DATA_SUFFIXES):  # the readers refuse what does not parse
        session.flash("error", f"file {name!r}: upload a .csv, .tsv or .parquet file")
        return back("/")
    folder = session.folder / "uploads"
    folder.mkdir(exist_ok=True)
    from privlab.utils.atomic import atomic_open

    data = item.file.read()
    if len(data) > config.max_upload_bytes:
        session.flash("error", too_large(config.max_upload_bytes).body.decode())
        return back("/")
    with atomic_open(folder / name, "wb", encoding=None) as fh:
        fh.write(data)
    session.flash("ok", f"uploaded {name} (only this session sees it)")
    return back("/")


@router.post("/help")
def toggle_help(form: CheckedForm, session: SessionDep) -> Response:
    session.show_help = not session.show_help
    target = str(form.get("next") or "/")
    return back(target if target.startswith("/") and not target.startswith("//") else "/")
