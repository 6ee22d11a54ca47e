"""DP model: `privlab train` on Adult or a file with a reviewed schema, run as a job, its
prepared, then its epsilon and delta charged to the ledger, then queued (refused: nothing
started)."""

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
    number,
    page,
)
from privlab.studio.workers import in_worker

router = APIRouter()


@router.get("/model", response_class=HTMLResponse)
def model_page(request: Request) -> Response:
    return page(request, "model.html.j2")


@router.post("/model")
@in_worker
def model_start(form: CheckedForm, session: SessionDep, config: ConfigDep, ledger: LedgerDep,
                jobs: JobsDep) -> Response:
    source, schema = session.source, session.schema
    if source is None or schema is None or (source.kind == "bundled"
                                            and source.name != "adult"):
        session.flash("error", "choose Adult or a file with a reviewed schema first")
        return back("/model")
    try:
        target, model, epsilon, delta = model_request(form, schema)
    except PrivlabError as exc:
        session.flash("error", str(exc))
        return back("/model")
    bundled_name = source.bundled_schema
    data = "adult" if source.kind == "bundled" else str(source.path)
    files = {} if bundled_name else {"schema.yaml": schema.to_yaml()}
    args = ["train", data, "--schema", bundled_name or "schema.yaml", "--target", target,
            "--model", model, "--epsilon", f"{epsilon!r}", "--delta", f"{delta!r}",
            "--on-invalid", "coerce", "--json", "--save", "model.pkl"]

    def prepare() -> Any:
        return jobs.prepare(session.folder, args,
                            f"DP model: {model} predicting {target}, epsilon {epsilon:g}, "
                            f"delta {delta:g}",
                            [("result.json", "the guarantee, accuracies and noisy counts "
                                             "(JSON)"),
                             ("model.pkl", "the fitted model (pickle)")],
                            stdout="result.json", files=files, result="result.json")

    return start_job(session, jobs, prepare, "/model", ledger=ledger, config=config,
                     charge=(epsilon, delta, f"studio: DP {model} predicting {target}"))


def model_request(form: Any, schema: Any) -> tuple[str, str, float, float]:
    """(target, model, epsilon, delta) of the form, each checked in that order: the target
    must be a categorical column of the schema (the classes to predict)."""
    from privlab.core.guarantee import check_delta, check_epsilon

    target = str(form.get("target") or "")
    col = schema.column(target)
    if col.type != "categorical":
        raise InvalidInputError(f"target: {target!r} is {col.type}; choose a "
                                "categorical column (the classes to predict)")
    model = str(form.get("model") or "logreg")
    if model not in ("logreg", "mlp"):
        raise InvalidInputError("model: choose logreg or mlp")
    epsilon = check_epsilon(number(form.get("epsilon"), "epsilon"))
    delta = check_delta(number(form.get("delta") or "1e-5", "delta"))
    check_delta_policy(delta, schema)  # the one policy of `train`, before the charge
    return target, model, epsilon, delta
