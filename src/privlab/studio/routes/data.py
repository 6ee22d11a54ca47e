"""Home and data: the data picker (bundled, workspace file, this session's uploads), the
upload itself (limited in size, refused when it holds no row, kept owner-only in the
session's own folder), the help toggle and forgetting the session."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.datastructures import FormData

from privlab.errors import InvalidInputError, PrivlabError
from privlab.studio.config import (
    DATA_SUFFIXES,
    StudioConfig,
    inside,
    private_dir,
    private_file,
    workspace_files,
)
from privlab.studio.guards import too_large_text, upload_limit_text
from privlab.studio.routes.schema import saved_schema
from privlab.studio.sessions import SESSION_COOKIE, Session, cookie_name
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
    uploads = sorted(p.name for p in (session.root / "uploads").glob("*")
                     if not p.name.startswith(".")) \
        if (session.root / "uploads").is_dir() else []
    return page(request, "home.html.j2", bundled=BUNDLED,
                files=workspace_files(config.workspace), uploads=uploads,
                upload_limit=upload_limit_text(config.max_upload_bytes))


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
    if form.get("next") == "plan":  # the plan page; with a draft, its columns say what to review
        return back("/plan")
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
    data = item.file.read()
    if len(data) > config.max_upload_bytes:
        session.flash("error", too_large_text(config.max_upload_bytes))
        return back("/")
    folder = private_dir(session.folder / "uploads")  # 0700: private rows
    problem = store_upload(folder, name, data)  # reads the table: in this worker thread
    if problem is not None:
        session.flash("error", problem)
        return back("/")
    session.flash("ok", f"uploaded {name} (only this session sees it)")
    return back("/")


@router.post("/session/forget")
def forget(request: Request, form: CheckedForm, session: SessionDep) -> Response:
    """Delete this session and its folder (uploads, schemas, results, job outputs): the
    explicit removal; otherwise only age removes a session (`sessions.MAX_AGE_S`)."""
    request.app.state.store.delete(session)
    response = back("/")
    response.delete_cookie(cookie_name(SESSION_COOKIE, request.headers.get("host")), path="/")
    return response


def store_upload(folder: Path, name: str, data: bytes) -> str | None:
    """Keep the upload as `folder/name` if it reads as a table with a header and a row, else
    keep nothing and return why, naming the file as uploaded (not where the studio put it):
    an empty or header-only file failed later, with the session folder in the message."""
    import os
    import secrets

    from privlab.data.io import read_table
    from privlab.utils.atomic import atomic_open

    staged = folder / f".staged-{secrets.token_hex(4)}-{name}"  # same suffix: same reader
    try:
        with atomic_open(staged, "wb", encoding=None) as fh:
            fh.write(data)
        try:
            read_table(staged)
        except InvalidInputError as exc:
            why = str(exc).replace(str(staged), repr(name))
            return f"file {name!r}: not uploaded: " + (
                why if str(folder) not in why else "it cannot be read as a table")
        private_file(staged)  # 0600 before it gets its name
        os.replace(staged, folder / name)
        return None
    finally:
        staged.unlink(missing_ok=True)


@router.post("/help")
def toggle_help(form: CheckedForm, session: SessionDep) -> Response:
    session.show_help = not session.show_help
    target = str(form.get("next") or "/")
    return back(target if target.startswith("/") and not target.startswith("//") else "/")
