"""The studio's FastAPI app: routes, the session / CSRF / token / size-limit guards.

Pages are rendered on the server (Jinja2, autoescaped); every state-changing request is a
POST carrying the session's CSRF token in a hidden field, checked against the session and
its cookie before anything happens. Browser-supplied paths go through `config.inside`."""

from __future__ import annotations

import hmac
import io
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from fastapi.staticfiles import StaticFiles

from privlab.errors import BudgetExceededError, InvalidInputError, PrivlabError
from privlab.studio import protect as prot
from privlab.studio.config import StudioConfig, inside, is_loopback, workspace_files
from privlab.studio.pages import render
from privlab.studio.sessions import (
    CSRF_COOKIE,
    SESSION_COOKIE,
    TOKEN_COOKIE,
    Session,
    SessionStore,
    csrf_ok,
)
from privlab.studio.sources import BUNDLED, Source, bundled, safe_upload_name

SYNTH_METHODS = ("mst", "aim")
MAX_SYNTH_ROWS = 1_000_000
CHOOSE_POLICIES = ("finance", "medical", "recommender")
#: Bytes a request body may carry beyond the upload limit (the form's other fields).
FORM_SLACK = 16_384


class _TooLarge(Exception):
    pass


class BodyLimit:
    """Refuse request bodies above `limit` bytes (413) by Content-Length and while reading,
    before any form parser buffers them."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await _too_large(self.limit)(scope, receive, send)
            return
        seen = 0
        started = False

        async def limited() -> Any:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge
            return message

        async def tracking_send(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited, tracking_send)
        except _TooLarge:
            if not started:
                await _too_large(self.limit)(scope, receive, send)


def _too_large(limit: int) -> Response:
    return PlainTextResponse(f"upload too large: the limit is {limit / 2**20:g} MB "
                             "(privlab studio --max-upload-mb)", status_code=413)


def create_app(config: StudioConfig) -> FastAPI:
    """The app for one workspace (see `StudioConfig`)."""
    from privlab.core.ledger import BudgetLedger

    app = FastAPI(title="privlab studio", docs_url=None, redoc_url=None, openapi_url=None)
    store = SessionStore(config.secret, config.state_dir)
    ledger = BudgetLedger(str(config.ledger_path))
    app.state.config, app.state.store, app.state.ledger = config, store, ledger
    allowed_hosts = None if not is_loopback(config.host) else {"127.0.0.1", "localhost",
                                                                  "[::1]", "::1"}
    # the whole body: the file plus the form's few small fields
    app.add_middleware(BodyLimit, limit=config.max_upload_bytes + FORM_SLACK)
    app.mount("/static", StaticFiles(packages=[("privlab.studio", "static")]), name="static")

    @app.middleware("http")
    async def guard(request: Request, call_next: Any) -> Response:
        if allowed_hosts is not None and _host_name(request) not in allowed_hosts:
            # a page on another site that resolves its name to 127.0.0.1 (DNS rebinding)
            return PlainTextResponse("unexpected Host header: open the studio at "
                                     "http://127.0.0.1", status_code=400)
        set_token = False
        if config.token is not None:
            given = request.query_params.get("token") or request.cookies.get(TOKEN_COOKIE) \
                or request.headers.get("x-privlab-token") or ""
            if not hmac.compare_digest(given.encode(), config.token.encode()):
                return PlainTextResponse("this studio needs its access token: open the URL "
                                         "printed by `privlab studio` (…/?token=…)",
                                         status_code=401)
            set_token = request.cookies.get(TOKEN_COOKIE) != config.token
        if request.url.path.startswith("/static/"):
            return _harden(await call_next(request))  # no session for the stylesheet
        session = store.get(request.cookies.get(SESSION_COOKIE))
        new = session is None
        if session is None:
            session = store.new()
        request.state.session = session
        response = await call_next(request)
        if new:
            response.set_cookie(SESSION_COOKIE, store.sign(session.sid), httponly=True,
                                samesite="strict", path="/")
        if new or request.cookies.get(CSRF_COOKIE) != session.csrf:
            response.set_cookie(CSRF_COOKIE, session.csrf, httponly=True, samesite="strict",
                                path="/")
        if set_token:
            response.set_cookie(TOKEN_COOKIE, config.token or "", httponly=True,
                                samesite="strict", path="/")
        return _harden(response)

    def sess(request: Request) -> Session:
        return request.state.session

    async def form_of(request: Request) -> Any:
        """The POSTed form after the CSRF check (403 and nothing done when it fails)."""
        form = await request.form(max_files=1, max_fields=2000)
        session = sess(request)
        if not csrf_ok(session, form.get("csrf"), request.cookies.get(CSRF_COOKIE)):
            raise _Forbidden
        return form

    class _Forbidden(Exception):
        pass

    @app.exception_handler(_Forbidden)
    async def _forbidden(request: Request, exc: Exception) -> Response:
        return PlainTextResponse("refused: missing or wrong CSRF token (reload the page and "
                                 "try again); nothing was changed", status_code=403)

    def page(request: Request, template: str, code: int = 200, **ctx: Any) -> HTMLResponse:
        session = sess(request)
        return HTMLResponse(render(template, session=session, config=config,
                                   messages=session.take_messages(),
                                   ledger=ledger_view(session), path=request.url.path, **ctx),
                            status_code=code)

    def back(url: str) -> RedirectResponse:
        return RedirectResponse(url, status_code=303)

    def ledger_view(session: Session) -> dict[str, Any] | None:
        if session.source is None:
            return None
        principal = session.source.principal
        budget_for(principal)
        st = ledger.status(principal)
        return {"principal": principal, "budget": float(st.budget_epsilon_exact),
                "spent": float(st.spent_epsilon_exact),
                "remaining": float(st.remaining_epsilon_exact),
                "remaining_delta": float(st.remaining_delta_exact),
                "entries": [e for e in ledger.history(principal)
                            if e.entry_id in session.entry_ids]}

    def budget_for(principal: str) -> None:
        if principal not in ledger.principals():
            ledger.set_budget(principal, config.budget_epsilon, config.budget_delta)

    # ------------------------------------------------------------------ home and data

    @app.get("/", response_class=HTMLResponse)
    def home(request: Request) -> Response:
        session = sess(request)
        uploads = sorted(p.name for p in (session.root / "uploads").glob("*")) \
            if (session.root / "uploads").is_dir() else []
        return page(request, "home.html.j2", bundled=BUNDLED,
                    files=workspace_files(config.workspace), uploads=uploads)

    @app.post("/data/select")
    async def select(request: Request) -> Response:
        form = await form_of(request)
        session = sess(request)
        kind = form.get("kind")
        try:
            if kind == "bundled":
                source = bundled(str(form.get("name")))
            elif kind == "workspace":
                path = inside(config.workspace, str(form.get("path", "")))
                if not path.is_file():
                    raise InvalidInputError(f"path {form.get('path')!r}: no such file in the "
                                            "workspace")
                source = Source("workspace", str(path.relative_to(config.workspace)), path)
            elif kind == "upload":
                path = inside(session.folder / "uploads", str(form.get("name", "")))
                if not path.is_file():
                    raise InvalidInputError("upload: no such file in this session")
                source = Source("upload", path.name, path)
            else:
                raise InvalidInputError("kind: choose a bundled dataset or a file")
        except PrivlabError as exc:
            session.flash("error", str(exc))
            return back("/")
        session.source, session.draft = source, None
        session.schema = None
        if source.bundled_schema is not None:
            from privlab.schema import bundled_schema

            session.schema = bundled_schema(source.bundled_schema)
        else:
            try:
                session.schema = _saved_schema(session, source)
            except PrivlabError as exc:  # e.g. a draft left beside the file
                session.flash("error", f"schema beside the file not used: {exc}")
        budget_for(source.principal)
        session.flash("ok", f"data: {source.label}")
        return back("/protect" if session.schema is not None else "/schema")

    @app.post("/data/upload")
    async def upload(request: Request) -> Response:
        form = await form_of(request)
        session = sess(request)
        item = form.get("file")
        if item is None or not hasattr(item, "filename") or not item.filename:
            session.flash("error", "file: choose a CSV or Parquet file to upload")
            return back("/")
        name = safe_upload_name(item.filename)
        if not name.lower().endswith((".csv", ".tsv", ".csv.gz", ".parquet", ".txt")):
            session.flash("error", f"file {name!r}: upload a .csv, .tsv or .parquet file")
            return back("/")
        folder = session.folder / "uploads"
        folder.mkdir(exist_ok=True)
        from privlab.utils.atomic import atomic_open

        data = await item.read()
        if len(data) > config.max_upload_bytes:
            session.flash("error", _too_large(config.max_upload_bytes).body.decode())
            return back("/")
        with atomic_open(folder / name, "wb", encoding=None) as fh:
            fh.write(data)
        session.flash("ok", f"uploaded {name} (only this session sees it)")
        return back("/")

    @app.post("/help")
    async def toggle_help(request: Request) -> Response:
        form = await form_of(request)
        session = sess(request)
        session.show_help = not session.show_help
        target = str(form.get("next") or "/")
        return back(target if target.startswith("/") and not target.startswith("//") else "/")

    # ------------------------------------------------------------------ schema

    def _schema_file(session: Session, source: Source) -> Path:
        stem = safe_upload_name(source.name).split(".")[0] or "data"
        return session.folder / "schemas" / f"{stem}.yaml"

    def _saved_schema(session: Session, source: Source) -> Any:
        """The schema reviewed in this session, else a reviewed one the curator put beside a
        workspace file (`people.csv` -> `people.schema.yaml`; drafts are refused)."""
        from privlab.schema import load_schema

        path = _schema_file(session, source)
        if path.is_file():
            return load_schema(path)
        if source.kind == "workspace" and source.path is not None:
            beside = source.path.parent / f"{source.path.name.split('.')[0]}.schema.yaml"
            if beside.is_file():
                inside(config.workspace, str(beside.relative_to(config.workspace.resolve())))
                return load_schema(beside)
        return None

    @app.get("/schema", response_class=HTMLResponse)
    def schema_page(request: Request) -> Response:
        from privlab.schema import COLUMN_TYPES

        return page(request, "schema.html.j2", types=COLUMN_TYPES, edits=None)

    @app.post("/schema/draft")
    async def schema_draft(request: Request) -> Response:
        await form_of(request)
        session = sess(request)
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

    @app.post("/schema/save")
    async def schema_save(request: Request) -> Response:
        form = await form_of(request)
        session = sess(request)
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

        path = _schema_file(session, session.source)
        path.parent.mkdir(exist_ok=True)
        atomic_write_text(path, schema.to_yaml())
        session.schema, session.draft = schema, None
        session.flash("ok", f"reviewed schema saved ({len(schema.columns)} columns, "
                            f"fingerprint {schema.fingerprint()}); it is now public")
        return back("/protect")

    @app.get("/schema/download")
    def schema_download(request: Request) -> Response:
        session = sess(request)
        if session.schema is None:
            return PlainTextResponse("no reviewed schema in this session", status_code=404)
        return _attachment(session.schema.to_yaml(), f"{session.schema.name}.yaml",
                           "application/yaml")

    # ------------------------------------------------------------------ protect

    @app.get("/protect", response_class=HTMLResponse)
    def protect_page(request: Request) -> Response:
        session = sess(request)
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

    @app.post("/protect/release")
    async def protect_release(request: Request) -> Response:
        form = await form_of(request)
        session = sess(request)
        fields = {k: form.get(k, "") for k in ("statistic", "column", "epsilon", "bins",
                                               "expected_rows", "by")}
        again = "/protect?" + urlencode({k: v for k, v in fields.items() if v})
        if session.source is None or session.schema is None:
            session.flash("error", "choose data and a reviewed schema first")
            return back("/")
        try:
            plan = prot.parse_plan(fields)
            budget_for(session.source.principal)
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

    # ------------------------------------------------------------------ results

    def _result(session: Session, rid: str) -> prot.Result | None:
        return next((r for r in session.releases if r.rid == rid), None)

    @app.get("/results", response_class=HTMLResponse)
    def results_page(request: Request) -> Response:
        return page(request, "results.html.j2", result=None)

    @app.get("/results/{rid}", response_class=HTMLResponse)
    def result_page(request: Request, rid: str) -> Response:
        result = _result(sess(request), rid)
        if result is None:
            return page(request, "missing.html.j2", code=404, what="release")
        return page(request, "results.html.j2", result=result,
                    files=prot.package_files(result))

    @app.get("/results/{rid}/{name}")
    def result_file(request: Request, rid: str, name: str) -> Response:
        result = _result(sess(request), rid)
        if result is None:
            return PlainTextResponse("no such release in this session", status_code=404)
        files = prot.package_files(result)
        if name == f"privlab-release-{rid}.zip":
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
                for fname, text in files.items():
                    zf.writestr(f"privlab-release-{rid}/{fname}", text)
            return Response(buf.getvalue(), media_type="application/zip", headers={
                "Content-Disposition": f'attachment; filename="privlab-release-{rid}.zip"'})
        if name not in files:
            return PlainTextResponse("no such file", status_code=404)
        media = {"json": "application/json", "py": "text/x-python", "sh": "text/x-shellscript",
                 "yaml": "application/yaml", "html": "text/html"
                 }.get(name.rsplit(".", 1)[-1], "text/plain")
        return _attachment(files[name], name, media)

    # ------------------------------------------------------------------ assess

    @app.get("/assess", response_class=HTMLResponse)
    def assess_page(request: Request) -> Response:
        return page(request, "assess.html.j2")

    @app.post("/assess")
    async def assess_run(request: Request) -> Response:
        form = await form_of(request)
        session = sess(request)
        if session.source is None:
            session.flash("error", "choose data first")
            return back("/")
        from privlab.assess import assess
        from privlab.assess.report import assessment_sections, plain_section
        from privlab.report import write_page

        qis = [q for q in (str(form.get("quasi_identifiers", "")).split(",")) if q.strip()]
        qis = [q.strip() for q in qis]
        sensitive = str(form.get("sensitive", "")).strip() or None
        try:
            size = int(str(form.get("max_combination_size") or 2))
            frame = session.source.load()
            attrs = None
            if session.schema is not None:
                attrs = [c.name for c in session.schema.released_columns()
                         if c.name in frame.columns]
            result = assess(frame, attributes=attrs, quasi_identifiers=qis or None,
                            sensitive=sensitive, max_combination_size=size,
                            source=session.source.label)
        except (PrivlabError, ValueError) as exc:
            session.flash("error", str(exc).splitlines()[0])
            return back("/assess")
        sections = [plain_section(result)] + assessment_sections(result)
        # the downloadable report is `privlab assess --report`'s page, from the same sections
        write_page(session.folder / "assessment.html", "Privacy impact assessment", sections,
                   subtitle=f"{result.source}: attribute-level richness, risky combinations "
                            "and privacy models", guarantee=result.guarantee)
        session.assessment = {"sections": sections,
                              "headline": result.guarantee.headline(),
                              "call": _assess_call(qis, sensitive, size)}
        return back("/assess#results")

    @app.get("/assess/report.html")
    def assess_report(request: Request) -> Response:
        path = sess(request).root / "assessment.html"
        if not path.is_file():
            return PlainTextResponse("no assessment in this session", status_code=404)
        return _attachment(path.read_text(encoding="utf-8"), "assessment.html", "text/html")

    # ------------------------------------------------------------------ synthetic data

    @app.get("/synth", response_class=HTMLResponse)
    def synth_page(request: Request) -> Response:
        """The form, and the budget split and noise preview of what it would run (public
        information only: the schema, epsilon, delta, a guessed row count)."""
        session = sess(request)
        qp = request.query_params
        plan = preview = error = None
        if session.schema is not None:
            released = [c.name for c in session.schema.released_columns()]
            chosen = [c for c in form_list(qp, "columns") if c in released] or released
            plan = {"method": qp.get("method") or "mst", "columns": chosen,
                    "epsilon": qp.get("epsilon") or "1", "delta": qp.get("delta") or "1e-6",
                    "rows": qp.get("rows") or "1000",
                    "expected_rows": qp.get("expected_rows") or ""}
            try:
                from privlab.core.guarantee import check_delta, check_epsilon
                from privlab.studio.synth_preview import synth_preview

                if plan["method"] not in SYNTH_METHODS:
                    raise InvalidInputError(f"method: choose {' or '.join(SYNTH_METHODS)}")
                expected = plan["expected_rows"]
                preview = synth_preview(
                    session.schema, plan["method"], chosen,
                    check_epsilon(_number(plan["epsilon"], "epsilon")),
                    check_delta(_number(plan["delta"], "delta")),
                    int(_number(expected, "expected rows")) if expected else None)
            except (PrivlabError, ValueError) as exc:
                error = str(exc)
        return page(request, "synth.html.j2", methods=SYNTH_METHODS, plan=plan,
                    preview=preview, error=error)

    @app.post("/synth")
    async def synth_start(request: Request) -> Response:
        form = await form_of(request)
        session = sess(request)
        if session.source is None or session.schema is None:
            session.flash("error", "choose data and a reviewed schema first")
            return back("/")
        from privlab.core.guarantee import check_delta, check_epsilon
        from privlab.studio.jobs import start_synth

        try:
            method = str(form.get("method", ""))
            if method not in SYNTH_METHODS:
                raise InvalidInputError(f"method: choose {' or '.join(SYNTH_METHODS)}")
            epsilon = check_epsilon(_number(form.get("epsilon"), "epsilon"))
            delta = check_delta(_number(form.get("delta") or "1e-6", "delta"))
            if delta == 0:
                raise InvalidInputError("delta: the synthesizers need delta > 0, e.g. 1e-6")
            _check_delta_policy(delta, session.schema)  # before anything is charged
            rows = int(_number(form.get("rows"), "rows"))
            if not 1 <= rows <= MAX_SYNTH_ROWS:
                raise InvalidInputError(f"rows: between 1 and {MAX_SYNTH_ROWS:,}")
            columns = [c for c in form_list(form, "columns")]
            released = [c.name for c in session.schema.released_columns()]
            columns = [c for c in columns if c in released] or released
            if len(columns) < 1:
                raise InvalidInputError("columns: choose at least one column")
            budget_for(session.source.principal)
            entry = ledger.charge(session.source.principal, epsilon, delta,
                                  description=f"studio: {method} synthetic table "
                                              f"({len(columns)} columns)")
        except BudgetExceededError as exc:
            session.flash("error", f"budget exceeded: nothing was started ({exc})")
            return back("/synth")
        except PrivlabError as exc:
            session.flash("error", str(exc))
            return back("/synth")
        session.entry_ids.append(entry.entry_id)
        job = start_synth(session.folder, source=session.source,
                          schema_dict=session.schema.to_dict(), method=method,
                          epsilon=epsilon, delta=delta, rows=rows, columns=columns)
        session.jobs[job.jid] = job
        return back(f"/jobs/{job.jid}")

    @app.get("/jobs/{jid}", response_class=HTMLResponse)
    def job_page(request: Request, jid: str) -> Response:
        job = sess(request).jobs.get(jid)
        if job is None:
            return page(request, "missing.html.j2", code=404, what="job")
        return page(request, "job.html.j2", job=job, job_status=job.status())

    @app.get("/jobs/{jid}/status")
    def job_status(request: Request, jid: str) -> Response:
        job = sess(request).jobs.get(jid)
        if job is None:
            return JSONResponse({"error": "no such job in this session"}, status_code=404)
        return JSONResponse(job.status())

    @app.post("/jobs/{jid}/cancel")
    async def job_cancel(request: Request, jid: str) -> Response:
        await form_of(request)
        job = sess(request).jobs.get(jid)
        if job is None:
            return PlainTextResponse("no such job in this session", status_code=404)
        job.cancel()
        sess(request).flash("ok", "job cancelled (its budget stays spent: the charge came "
                                  "first)")
        return back(f"/jobs/{jid}")

    @app.get("/jobs/{jid}/{name}")
    def job_file(request: Request, jid: str, name: str) -> Response:
        job = sess(request).jobs.get(jid)
        path = None if job is None else job.file(name)
        if path is None:
            return PlainTextResponse("no such file in this session", status_code=404)
        if not path.is_file() or job.status()["state"] != "done":
            return PlainTextResponse("the job has not finished", status_code=404)
        media = {"csv": "text/csv", "json": "application/json", "html": "text/html",
                 "txt": "text/plain", "pkl": "application/octet-stream"
                 }[name.rsplit(".", 1)[-1]]
        return _attachment(path.read_bytes(), name, media)

    # ------------------------------------------------------------------ choose epsilon

    @app.get("/choose", response_class=HTMLResponse)
    def choose_page(request: Request) -> Response:
        return page(request, "choose.html.j2", policies=CHOOSE_POLICIES)

    @app.post("/choose")
    async def choose_start(request: Request) -> Response:
        form = await form_of(request)
        session = sess(request)
        source = session.source
        if source is None or (source.kind == "bundled" and source.name != "adult"):
            session.flash("error", "choose Adult or a file first: choose-epsilon trains "
                                   "models on a table with a label column")
            return back("/choose")
        from privlab.studio.jobs import start_command

        try:
            target = str(form.get("target") or "").strip()
            model = str(form.get("model") or "logreg")
            if model not in ("logreg", "mlp"):
                raise InvalidInputError("model: choose logreg or mlp")
            policy = str(form.get("policy") or "finance")
            if policy not in CHOOSE_POLICIES:
                raise InvalidInputError(f"policy: choose one of {', '.join(CHOOSE_POLICIES)}")
            from privlab.core.guarantee import check_epsilon

            epsilons = ",".join(f"{check_epsilon(_number(e, 'epsilons')):g}" for e in
                                str(form.get("epsilons") or "").split(",") if e.strip())
            if not epsilons:
                raise InvalidInputError("epsilons: give a comma list, e.g. 1,4")
            seeds = int(_number(form.get("seeds") or 2, "seeds"))
            max_rows = int(_number(form.get("max_rows") or 5000, "max rows"))
            if not (1 <= seeds <= 8 and 200 <= max_rows <= 100_000):
                raise InvalidInputError("seeds: 1 to 8; max rows: 200 to 100,000")
        except (PrivlabError, ValueError) as exc:
            session.flash("error", str(exc))
            return back("/choose")
        data = "adult" if source.kind == "bundled" else str(source.path)
        args = ["choose-epsilon", data, "--model", model, "--policy", policy,
                "--epsilons", epsilons, "--seeds", str(seeds), "--max-rows", str(max_rows),
                "--attacks", "loss", "--shadow-models", "1", "--epochs", "2",
                "--report", "choose_epsilon.html"]
        if target:
            args += ["--target", target]
        job = start_command(session.folder, args,
                            f"Choose epsilon: {model} on {source.label}, epsilons {epsilons}",
                            [("choose_epsilon.html", "the report (HTML)"),
                             ("out.txt", "the summary (text)")])
        session.jobs[job.jid] = job
        return back(f"/jobs/{job.jid}")

    # ------------------------------------------------------------------ DP model

    @app.get("/model", response_class=HTMLResponse)
    def model_page(request: Request) -> Response:
        return page(request, "model.html.j2")

    @app.post("/model")
    async def model_start(request: Request) -> Response:
        form = await form_of(request)
        session = sess(request)
        source, schema = session.source, session.schema
        if source is None or schema is None or (source.kind == "bundled"
                                                and source.name != "adult"):
            session.flash("error", "choose Adult or a file with a reviewed schema first")
            return back("/model")
        from privlab.core.guarantee import check_delta, check_epsilon
        from privlab.studio.jobs import start_command

        try:
            target = str(form.get("target") or "")
            col = schema.column(target)
            if col.type != "categorical":
                raise InvalidInputError(f"target: {target!r} is {col.type}; choose a "
                                        "categorical column (the classes to predict)")
            model = str(form.get("model") or "logreg")
            if model not in ("logreg", "mlp"):
                raise InvalidInputError("model: choose logreg or mlp")
            epsilon = check_epsilon(_number(form.get("epsilon"), "epsilon"))
            delta = check_delta(_number(form.get("delta") or "1e-5", "delta"))
            _check_delta_policy(delta, schema)  # the one policy of `train`, before the charge
            budget_for(source.principal)
            entry = ledger.charge(source.principal, epsilon, delta,
                                  description=f"studio: DP {model} predicting {target}")
        except BudgetExceededError as exc:
            session.flash("error", f"budget exceeded: nothing was started ({exc})")
            return back("/model")
        except PrivlabError as exc:
            session.flash("error", str(exc))
            return back("/model")
        session.entry_ids.append(entry.entry_id)
        bundled_name = source.bundled_schema
        data = "adult" if source.kind == "bundled" else str(source.path)
        files = {} if bundled_name else {"schema.yaml": schema.to_yaml()}
        args = ["train", data, "--schema", bundled_name or "schema.yaml", "--target", target,
                "--model", model, "--epsilon", f"{epsilon!r}", "--delta", f"{delta!r}",
                "--on-invalid", "coerce", "--json", "--save", "model.pkl"]
        job = start_command(session.folder, args,
                            f"DP model: {model} predicting {target}, epsilon {epsilon:g}, "
                            f"delta {delta:g}",
                            [("result.json", "the guarantee, accuracies and noisy counts "
                                             "(JSON)"),
                             ("model.pkl", "the fitted model (pickle)")],
                            stdout_name="result.json", files=files)
        session.jobs[job.jid] = job
        return back(f"/jobs/{job.jid}")

    # ------------------------------------------------------------------ gateway

    @app.get("/gateway", response_class=HTMLResponse)
    def gateway_page(request: Request) -> Response:
        from privlab.studio.gateway_admin import overview

        view = error = None
        if config.gateway_config is not None:
            try:
                view = overview(config.gateway_config)
            except PrivlabError as exc:
                error = str(exc)
        return page(request, "gateway.html.j2", view=view, error=error,
                    check=sess(request).gateway_check)

    @app.post("/gateway/verify")
    async def gateway_verify(request: Request) -> Response:
        await form_of(request)
        session = sess(request)
        if config.gateway_config is None:
            session.flash("error", "start the studio with --gateway-config FILE")
            return back("/gateway")
        from privlab.studio.gateway_admin import verify

        try:
            session.gateway_check = verify(config.gateway_config)
        except PrivlabError as exc:
            session.flash("error", str(exc))
        return back("/gateway#verification")

    return app


def _harden(response: Response) -> Response:
    """Headers every response carries: no foreign script, style, frame or form target."""
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"
    return response


def _host_name(request: Request) -> str:
    """The Host header without its port ("[::1]" kept bracketed)."""
    host = request.headers.get("host") or ""
    if host.startswith("["):
        return host.split("]")[0] + "]"
    return host.rsplit(":", 1)[0]


def _attachment(content: str | bytes, filename: str, media: str) -> Response:
    return Response(content, media_type=media, headers={
        "Content-Disposition": f'attachment; filename="{filename}"'})


def _check_delta_policy(delta: float, schema: Any) -> None:
    """The CLI's one delta policy (`check_delta_strength`, as `train` and `synth` apply it in
    the job), checked before the ledger is charged so a refused job costs no budget; the
    studio offers no --allow-weak."""
    from privlab.core.delta_policy import check_delta_policy
    from privlab.schema.release import public_size_of

    check_delta_policy(delta, False, field="delta",
                       public_size=public_size_of(schema, None) if schema is not None else None,
                       remedy="or ask the data controller to accept a weak delta")


def _number(raw: Any, name: str) -> float:
    try:
        return float(str(raw).strip())
    except ValueError:
        raise InvalidInputError(f"{name}: type a number, got {raw!r}") from None


def form_list(form: Any, name: str) -> list[str]:
    """Every value of a repeated field (checkboxes), comma lists split too."""
    out: list[str] = []
    for raw in form.getlist(name):
        out += [c.strip() for c in str(raw).split(",") if c.strip()]
    return out


def default_plan(schema: Any) -> dict[str, str]:
    """What the Protect page previews before the user chose: the mean of the first numeric
    column (else a histogram of the first column) at epsilon 1."""
    cols = schema.released_columns()
    numeric = [c for c in cols if c.is_numeric]
    if numeric:
        return {"statistic": "mean", "column": numeric[0].name, "epsilon": "1"}
    return {"statistic": "histogram", "column": cols[0].name if cols else "", "epsilon": "1"}


def _assess_call(qis: list[str], sensitive: str | None, size: int) -> str:
    args = ["frame"]
    if qis:
        args.append(f"quasi_identifiers={qis!r}")
    if sensitive:
        args.append(f"sensitive={sensitive!r}")
    args.append(f"max_combination_size={size}")
    return f"privlab.assess.assess({', '.join(args)})"


def schema_from_form(form: dict[str, Any], base: Any) -> Any:
    """A reviewed Schema from the review form: every column must be ticked as reviewed."""
    from privlab.schema import parse_schema

    columns: dict[str, Any] = {}
    unreviewed = []
    for i, col in enumerate(base.columns):
        key = f"c{i}"
        if form.get(f"{key}_reviewed") != "on":
            unreviewed.append(col.name)
        kind = str(form.get(f"{key}_type", col.type))
        spec: dict[str, Any] = {"type": kind, "missing": form.get(f"{key}_missing") == "on"}
        if kind == "categorical":
            cats = [c.strip() for c in str(form.get(f"{key}_categories", "")).split(",")
                    if c.strip()]
            spec["categories"] = cats
            if form.get(f"{key}_other") == "on":
                spec["other"] = True
        if kind in ("integer", "numeric", "datetime"):
            lo, hi = str(form.get(f"{key}_lo", "")).strip(), str(form.get(f"{key}_hi", "")).strip()
            if kind == "integer":
                spec["bounds"] = [_int(lo, f"{col.name}: lower bound"),
                                  _int(hi, f"{col.name}: upper bound")]
            elif kind == "numeric":
                spec["bounds"] = [_number(lo, f"{col.name}: lower bound"),
                                  _number(hi, f"{col.name}: upper bound")]
            else:
                spec["bounds"] = [lo, hi]
        columns[col.name] = spec
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
        raw["max_rows_per_unit"] = _int(mrpu, "max rows per person")
    size = str(form.get("public_size") or "").strip()
    if size:
        raw["public_size"] = _int(size, "public row count")
    return parse_schema(raw, name=base.name)


def _int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InvalidInputError(f"{name}: type a whole number, got {text!r}") from None

