"""Synthetic data: the form with its public preview (MST's budget split and noise from the
schema, epsilon, delta and a guessed row count: no private row), and the start of a
`privlab synth` job on the reviewed schema (unchosen columns `--exclude`d, the privacy unit
kept, so the per-person bound, the delta policy and the guarantee are the CLI's): prepared
(data exported, schema written), then charged to the ledger, then queued (refused: nothing
charged, nothing started)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from privlab.errors import InvalidInputError, PrivlabError
from privlab.studio.routes.jobs import JobsDep, start_job
from privlab.studio.web import (
    CheckedForm,
    ConfigDep,
    LedgerDep,
    SessionDep,
    back,
    check_delta_policy,
    form_list,
    number,
    page,
)
from privlab.studio.workers import in_worker

SYNTH_METHODS = ("mst", "aim")
MAX_SYNTH_ROWS = 1_000_000

router = APIRouter()


@router.get("/synth", response_class=HTMLResponse)
def synth_page(request: Request, session: SessionDep, jobs: JobsDep) -> Response:
    """The form, and the budget split and noise preview of what it would run (public
    information only: the schema, epsilon, delta, a guessed row count); the session's jobs,
    those of an earlier run of the studio included."""
    jobs.restore(session)
    plan = preview = error = None
    if session.schema is not None:
        plan = synth_plan(session.schema, request.query_params)
        try:
            preview = plan_preview(session.schema, plan)
        except (PrivlabError, ValueError) as exc:
            error = str(exc)
    return page(request, "synth.html.j2", methods=SYNTH_METHODS, plan=plan,
                preview=preview, error=error)


def synth_plan(schema: Any, qp: Any) -> dict[str, Any]:
    """The plan the page shows, from its query string (defaults: MST over every released
    column, epsilon 1, delta 1e-6, 1000 rows)."""
    released = [c.name for c in schema.released_columns()]
    chosen = [c for c in form_list(qp, "columns") if c in released] or released
    return {"method": qp.get("method") or "mst", "columns": chosen,
            "epsilon": qp.get("epsilon") or "1", "delta": qp.get("delta") or "1e-6",
            "rows": qp.get("rows") or "1000", "expected_rows": qp.get("expected_rows") or "",
            "exclude": excluded_columns(schema, chosen)}


def plan_preview(schema: Any, plan: dict[str, Any]) -> Any:
    """`synth_preview` of the plan: computed from public facts only."""
    from privlab.core.guarantee import check_delta, check_epsilon
    from privlab.studio.synth_preview import synth_preview

    if plan["method"] not in SYNTH_METHODS:
        raise InvalidInputError(f"method: choose {' or '.join(SYNTH_METHODS)}")
    expected = plan["expected_rows"]
    return synth_preview(schema, plan["method"], plan["columns"],
                         check_epsilon(number(plan["epsilon"], "epsilon")),
                         check_delta(number(plan["delta"], "delta")),
                         int(number(expected, "expected rows")) if expected else None)


@router.post("/synth")
@in_worker
def synth_start(form: CheckedForm, session: SessionDep, config: ConfigDep, ledger: LedgerDep,
                jobs: JobsDep) -> Response:
    """Prepare the job (the data exported, the schema written: a full disk charges nothing),
    then charge the ledger, then queue it (refused: nothing charged, nothing started)."""
    if session.source is None or session.schema is None:
        session.flash("error", "choose data and a reviewed schema first")
        return back("/")
    schema = session.schema
    try:
        method, epsilon, delta, rows, columns = synth_request(form, schema)
    except PrivlabError as exc:
        session.flash("error", str(exc))
        return back("/synth")

    def prepare() -> Any:
        args = synth_args(data_file(session), schema, method, epsilon, delta, rows, columns)
        return jobs.prepare(session.folder, args,
                            f"Synthetic table: {method.upper()}, epsilon {epsilon:g}, "
                            f"delta {delta:g}, {rows} rows",
                            [("synthetic.csv", f"the synthetic table (CSV, {rows} rows)"),
                             ("result.json", "its guarantee and budget split (JSON)")],
                            stdout="result.json", files={"schema.yaml": schema.to_yaml()},
                            result="result.json")

    return start_job(session, jobs, prepare, "/synth", ledger=ledger, config=config,
                     charge=(epsilon, delta, f"studio: {method} synthetic table "
                                             f"({len(columns)} columns)"))


def synth_args(data: str, schema: Any, method: str, epsilon: float, delta: float, rows: int,
               columns: list[str]) -> list[str]:
    """The `privlab synth` command of the job: the reviewed schema (written as schema.yaml
    in the job's folder), every released column not chosen excluded; identifiers (the privacy
    unit's column among them) are the CLI's to handle, so a per-person schema stays per
    person."""
    args = ["synth", data, "--schema", "schema.yaml", "--method", method,
            "--epsilon", f"{epsilon!r}", "--delta", f"{delta!r}", "--rows", str(rows),
            "--out", "synthetic.csv", "--on-invalid", "coerce", "--json"]
    excluded = excluded_columns(schema, columns)
    return args + (["--exclude", ",".join(excluded)] if excluded else [])


def excluded_columns(schema: Any, columns: list[str]) -> list[str]:
    """The released columns of the schema that are not in `columns`."""
    return [c.name for c in schema.released_columns() if c.name not in columns]


def data_file(session: Any) -> str:
    """The file `privlab synth` reads: a workspace file or upload by its path; a bundled
    dataset exported once into the session's folder (as `privlab datasets export` would)."""
    source = session.source
    if source.kind != "bundled":
        return str(source.path)
    from privlab.utils.atomic import atomic_write_frame

    path = session.folder / "data" / f"{source.name}.csv"
    if not path.is_file():
        path.parent.mkdir(mode=0o700, exist_ok=True)
        atomic_write_frame(source.load(), path)
    return str(path)


def synth_request(form: Any, schema: Any) -> tuple[str, float, float, int, list[str]]:
    """(method, epsilon, delta, rows, columns) of the form, each checked, in that order;
    the columns default to every released column of the schema."""
    from privlab.core.guarantee import check_delta, check_epsilon

    method = str(form.get("method", ""))
    if method not in SYNTH_METHODS:
        raise InvalidInputError(f"method: choose {' or '.join(SYNTH_METHODS)}")
    epsilon = check_epsilon(number(form.get("epsilon"), "epsilon"))
    delta = check_delta(number(form.get("delta") or "1e-6", "delta"))
    if delta == 0:
        raise InvalidInputError("delta: the synthesizers need delta > 0, e.g. 1e-6")
    check_delta_policy(delta, schema)  # before anything is charged
    rows = int(number(form.get("rows"), "rows"))
    if not 1 <= rows <= MAX_SYNTH_ROWS:
        raise InvalidInputError(f"rows: between 1 and {MAX_SYNTH_ROWS:,}")
    released = [c.name for c in schema.released_columns()]
    columns = [c for c in form_list(form, "columns") if c in released] or released
    if any("," in c for c in excluded_columns(schema, columns)):
        raise InvalidInputError("columns: a column whose name has a comma cannot be left "
                                "out; keep it or rename it")
    if len(columns) < 1:
        raise InvalidInputError("columns: choose at least one column")
    return method, epsilon, delta, rows, columns
