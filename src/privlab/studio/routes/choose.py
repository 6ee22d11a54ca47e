"""Choose epsilon: `privlab choose-epsilon` on Adult or a file with a reviewed schema, run as a
job (it trains models and attacks them at each candidate epsilon; it releases nothing, so
nothing is charged to the ledger). Like `train`, the job gets the session's reviewed schema as
`--schema schema.yaml`: the CLI refuses a user table without one (its features' ranges and
categories would otherwise be read from the rows)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from privlab.errors import InvalidInputError, PrivlabError
from privlab.studio.routes.jobs import JobsDep, start_job
from privlab.studio.web import CheckedForm, SessionDep, back, number, page

CHOOSE_POLICIES = ("finance", "medical", "recommender")

router = APIRouter()


@router.get("/choose", response_class=HTMLResponse)
def choose_page(request: Request) -> Response:
    return page(request, "choose.html.j2", policies=CHOOSE_POLICIES)


@router.post("/choose")
def choose_start(form: CheckedForm, session: SessionDep, jobs: JobsDep) -> Response:
    source = session.source
    if source is None or (source.kind == "bundled" and source.name != "adult"):
        session.flash("error", "choose Adult or a file first: choose-epsilon trains "
                               "models on a table with a label column")
        return back("/choose")
    try:
        options = choose_options(form)
        args, files = choose_command(source, session.schema, options)
    except (PrivlabError, ValueError) as exc:
        session.flash("error", str(exc))
        return back("/choose")
    title = (f"Choose epsilon: {options['model']} on {source.label}, "
             f"epsilons {options['epsilons']}")
    outputs = [("choose_epsilon.html", "the report (HTML)"), ("out.txt", "the summary (text)")]
    return start_job(session, jobs, lambda: jobs.prepare(session.folder, args, title, outputs,
                                                         files=files), "/choose")


def choose_command(source: Any, schema: Any, options: dict[str, str]
                   ) -> tuple[list[str], dict[str, str]]:
    """The `privlab choose-epsilon` arguments and the files written beside them: bundled
    Adult uses its own public preprocessing; any other table its reviewed schema, written
    into the job's folder as schema.yaml (values outside it coerced, as the model job does),
    and a label column (the CLI has no default for it)."""
    files: dict[str, str] = {}
    if source.kind == "bundled":
        data, schema_args = "adult", []
    else:
        if schema is None:
            raise InvalidInputError("schema: review this file's schema first (step 2): "
                                    "choose-epsilon encodes the features from its public "
                                    "ranges and categories")
        label = schema.column(options["target"]) if options["target"] else None
        if label is None or label.type != "categorical":
            raise InvalidInputError("target: choose the label column, a categorical column of "
                                    "the schema (the classes to predict)")
        data = str(source.path)
        files["schema.yaml"] = schema.to_yaml()
        schema_args = ["--schema", "schema.yaml", "--on-invalid", "coerce"]
    args = ["choose-epsilon", data, *schema_args, "--model", options["model"],
            "--policy", options["policy"], "--epsilons", options["epsilons"],
            "--seeds", options["seeds"], "--max-rows", options["max_rows"],
            "--attacks", "loss", "--shadow-models", "1", "--epochs", "2",
            "--report", "choose_epsilon.html"]
    if options["target"]:
        args += ["--target", options["target"]]
    return args, files


def choose_options(form: Any) -> dict[str, str]:
    """The form's options as `privlab choose-epsilon` arguments, each checked in turn
    (target, model, policy, epsilons, seeds 1-8, max rows 200-100,000)."""
    from privlab.core.guarantee import check_epsilon

    target = str(form.get("target") or "").strip()
    model = str(form.get("model") or "logreg")
    if model not in ("logreg", "mlp"):
        raise InvalidInputError("model: choose logreg or mlp")
    policy = str(form.get("policy") or "finance")
    if policy not in CHOOSE_POLICIES:
        raise InvalidInputError(f"policy: choose one of {', '.join(CHOOSE_POLICIES)}")
    epsilons = ",".join(f"{check_epsilon(number(e, 'epsilons')):g}" for e in
                        str(form.get("epsilons") or "").split(",") if e.strip())
    if not epsilons:
        raise InvalidInputError("epsilons: give a comma list, e.g. 1,4")
    seeds = int(number(form.get("seeds") or 2, "seeds"))
    max_rows = int(number(form.get("max_rows") or 5000, "max rows"))
    if not (1 <= seeds <= 8 and 200 <= max_rows <= 100_000):
        raise InvalidInputError("seeds: 1 to 8; max rows: 200 to 100,000")
    return {"target": target, "model": model, "policy": policy, "epsilons": epsilons,
            "seeds": str(seeds), "max_rows": str(max_rows)}
