"""`privlab choose-epsilon DATA --target COL --model mlp [--policy P | --w-risk W] ...`.

Trains DP-SGD models over an epsilon grid (or adaptively, with a training budget), attacks
each, fits the Bayesian risk model and prints eps* with its justification; `--json` gives the
document described by `privlab/risk/schema/choose_epsilon.schema.json`, `--report` the HTML
page. DATA is a CSV / TSV / Parquet file or a bundled dataset name (adult, digits,
classification).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from privlab.cli.common import (
    check_column_options,
    check_delta_policy,
    console,
    emit_json,
    err_console,
    parse_floats,
    parse_list,
    warn_weak_epsilon,
)
from privlab.cli.options import AllowWeak, Json, OnInvalid, TestingRunSeed, option
from privlab.core.guarantee import PrivacyGuarantee
from privlab.errors import InvalidInputError

_BUNDLED = {"adult": "salary", "digits": "target", "classification": "target"}


def load_data(data: str, delimiter: str | None = None, infer: bool = False
              ) -> tuple[Any, str]:
    """A file (cells as text for the schema to type; `infer`: pandas' types, only without a
    schema, where the output is NOT DP), or a bundled dataset by name."""
    from privlab.data.datasets import load_dataset
    from privlab.data.io import read_table

    path = Path(data)
    if not path.exists() and data in _BUNDLED:
        opts = {"drop_missing": True} if data == "adult" else {}
        return load_dataset(data, **opts), f"bundled dataset {data!r}"
    return read_table(path, delimiter=delimiter, infer=infer), str(path)


def choose_epsilon_cmd(
    data: str = typer.Argument(..., help="CSV/TSV/Parquet file or bundled dataset name."),
    target: Annotated[str, option("label column", "Label column (default for bundled).")] = None,
    model: str = typer.Option("mlp", "--model", help="mlp or logreg."),
    policy: str = typer.Option(None, "--policy", help="medical | finance | recommender (default: "
                               "finance, or custom weights with --w-risk)."),
    w_risk: float = typer.Option(None, "--w-risk", help="Risk weight in [0, 1] (custom; default: "
                                 "the policy's); outside [0, 1] is refused (exit 2)."),
    max_risk: float = typer.Option(None, "--max-risk", help="Cap on the rule's risk in [0, 1] "
                                   "(default: the policy's, if any)."),
    min_accuracy: float = typer.Option(None, "--min-accuracy", help="Accuracy floor (default: the "
                                       "policy's, if any)."),
    level: float = typer.Option(None, "--level", help="Credible level of the risk-averse rule "
                                "(default: the policy's)."),
    epsilons: str = typer.Option("0.5,1,2,4,8,16", "--epsilons", help="Grid, comma list."),
    adaptive: bool = typer.Option(False, "--adaptive", help="Choose which eps to train next."),
    budget_runs: int = typer.Option(None, "--budget-runs", help="Adaptive: max grid points (>= 2; "
                                    "required with --adaptive, unused without it)."),
    attacks: str = typer.Option("loss,shadow", "--attacks", help="loss,shadow,lira."),
    attack_weights: str = typer.Option(None, "--attack-weights",
                                       help="Weights of the attacks in R, e.g. "
                                            "loss=1,shadow=2 (default: equal weights)."),
    seeds: int = typer.Option(4, "--seeds", help="Models per epsilon, trained at once: their "
                              "spread is the noise the recommendation accounts for."),
    epochs: int = typer.Option(10, "--epochs"),
    batch_size: int = typer.Option(64, "--batch-size"),
    lr: float = typer.Option(1e-3, "--lr"),
    clip: float = typer.Option(1.0, "--clip"),
    delta: Annotated[float, option("delta",
                                   "Delta of each DP model (default: min(1e-5, 1/(10 "
                                   "n))).")] = None,
    allow_weak: AllowWeak = False,
    shadow_models: int = typer.Option(4, "--shadow-models"),
    max_rows: int = typer.Option(None, "--max-rows", help="Use a random subset of N rows "
                                 "(default: all rows)."),
    prior: str = typer.Option("uniform", "--prior",
                              help="uniform | jeffreys | chance | pessimistic | A,B."),
    relative: bool = typer.Option(False, "--relative-utility",
                                  help="Utility loss relative to the non-private model."),
    w_stability: float = typer.Option(0.0, "--w-stability"),
    w_cost: float = typer.Option(0.0, "--w-cost"),
    seed: TestingRunSeed = None,
    report: Annotated[Path, option("report",
                                   "Write the HTML report here (default: no report).")] = None,
    pdf: bool = typer.Option(False, "--pdf", help="Also print the report to REPORT.pdf "
                             "(needs headless Chromium on PATH; exit 5 without it)."),
    assess_json: Path = typer.Option(None, "--assess-json",
                                     help="Output of `privlab assess --json` to "
                                          "include in the report (optional)."),
    delimiter: str = typer.Option(None, "--delimiter", help="Field delimiter "
                                  "(sniffed if unset)."),
    schema: Annotated[str, option("declared schema",
                                  "Declared public schema (bundled name or YAML/JSON file): "
                                  "feature ranges, categories and the classes. Required for your "
                                  "own table; default for a bundled dataset: its own.")] = None,
    on_invalid: OnInvalid = "refuse",
    as_json: Json = False,
) -> None:
    """Choose epsilon: train over a grid, attack, fit the risk model, pick eps*.

    The features are encoded from a declared schema (`--schema`, or the bundled dataset's),
    never from ranges or categories read from the rows; a user table without one is refused."""
    from privlab.risk.model import UtilityConfig, make_policy
    from privlab.risk.pipeline import PipelineConfig, choose_epsilon
    from privlab.risk.report import write_report

    if pdf and report is None:  # before any training
        raise InvalidInputError("--pdf prints the HTML report: give --report PATH.html too")
    if policy is None and w_risk is None:
        policy = "finance"
    pol = make_policy(policy, w_risk=w_risk, level=level, max_risk=max_risk,
                      min_accuracy=min_accuracy)
    grid = parse_floats(epsilons, "--epsilons") or []
    atk = parse_list(attacks, "--attacks") or []
    pr: Any = prior
    if "," in prior:
        p = parse_floats(prior, "--prior") or []
        if len(p) != 2:
            raise InvalidInputError(f"--prior must be a name or A,B, got {prior!r}")
        pr = (p[0], p[1])
    weights = _parse_weights(attack_weights)
    assessment = None
    if assess_json is not None:
        import json

        try:
            assessment = json.loads(Path(assess_json).read_text())
        except (OSError, ValueError) as exc:
            raise InvalidInputError(f"--assess-json: cannot read {assess_json}: {exc}") from None
        if not isinstance(assessment, dict):
            raise InvalidInputError("--assess-json: expected the JSON object of privlab assess")
    from privlab.schema import check_policy

    check_policy(on_invalid)
    bundled = data if (not Path(data).exists() and data in _BUNDLED) else None
    declared = _resolve_schema(schema, bundled)  # before the data is read: refuse early
    check_delta_policy(delta, allow_weak, declared)  # one delta policy in every command
    frame, source = load_data(data, delimiter, infer=declared is None)
    if target is None:
        if data not in _BUNDLED:
            raise InvalidInputError("--target is required: name the label column")
        target = _BUNDLED[data]
    # the column-naming option names a column of DATA (one line, exit 2), before any work
    check_column_options(frame, source, {"--target": target})
    cfg = PipelineConfig(epsilons=grid, adaptive=adaptive, budget_runs=budget_runs,
                         attacks=tuple(atk), attack_weights=weights, seeds=seeds,
                         model=model, epochs=epochs, batch_size=batch_size, lr=lr, clip=clip,
                         delta=delta, shadow_models=shadow_models, max_rows=max_rows, prior=pr,
                         seed=seed, schema=declared, on_invalid=on_invalid,
                         public="adult" if declared is None and bundled == "adult" else None)
    util = UtilityConfig(w_stability=w_stability, w_cost=w_cost)
    from privlab.cli.progress import reporter

    with reporter("choose-epsilon", as_json) as progress:
        result = choose_epsilon(frame, target, pol, cfg, util, relative_utility=relative,
                                progress=progress)
    doc = result.to_dict()
    doc["source"] = source
    guarantee = choice_guarantee(doc)
    doc["guarantee"] = guarantee.to_dict()
    if report is not None:
        write_report(doc, report, title=f"Choosing epsilon: {source}", assess=assessment,
                     source=source)
        doc["report"] = str(report)
        if pdf:
            from privlab.report.pdf import export_pdf

            doc["report_pdf"] = str(export_pdf(report, Path(report).with_suffix(".pdf")))
    if as_json:
        emit_json(doc)
        return
    console.print(f"[bold red]{escape(guarantee.headline())}[/bold red]",
                  highlight=False)
    chosen = doc["chosen_epsilon"]
    unc = doc.get("uncertainty") or {}
    iv = unc.get("interval")
    console.print(f"[bold]recommended epsilon: "
                  f"{_none_text(doc) if chosen is None else f'{chosen:g}'}[/bold]"
                  + (f" (a re-run would pick {iv[0]:g} to {iv[1]:g})"
                     if iv and chosen is not None else "")
                  + f"; {pol.name} policy; the point rule alone would pick "
                  f"{doc['argmin_epsilon']}", highlight=False)
    console.print(f"  {doc['reason']}")
    _print_baseline(doc)
    pb = {c["epsilon"]: c["prob_best"] for c in unc.get("candidates", [])}
    for r in doc["per_epsilon"]:
        console.print(f"  eps={r['epsilon']:<8g} accuracy {r['accuracy']:.3f}  risk "
                      f"{r['risk_mean']:.3f} [{r['risk_lower']:.3f}, {r['risk_upper']:.3f}]  "
                      f"P(best) {pb.get(r['epsilon'], 0.0):.0%}")
    if chosen is not None:
        warn_weak_epsilon(chosen, "the recommended epsilon")
    for n in doc["notes"]:
        err_console.print(f"note: {n}")
    if report is not None:
        console.print(f"  report: {report}")


def _none_text(doc: dict[str, Any]) -> str:
    """Why there is no recommendation, in two words on the headline."""
    return "none (the models learnt nothing)" if doc.get("learnt_nothing") else "none acceptable"


def _print_baseline(doc: dict[str, Any]) -> None:
    """The majority-class baseline beside the accuracies (exact, like them)."""
    from privlab.learn.baseline import no_better_text

    major = doc.get("majority_baseline")
    if not major:
        return
    console.print(f"  majority-class baseline: accuracy {major['accuracy']:.3f} by always "
                  f"predicting {major['majority_class']!r}", highlight=False)
    lost = [f"{r['epsilon']:g}" for r in doc["per_epsilon"]
            if r.get("better_than_baseline") is False]
    if lost:
        console.print(f"  [yellow]models at eps={', '.join(lost)} are "
                      f"{no_better_text(major['majority_class'])}[/yellow]", highlight=False)


#: Keys of the output that echo public settings; every other key is measured on the rows.
SETTINGS = ("rule", "policy", "utility", "prior", "credible_level", "attack_weights", "grid",
            "adaptive", "source", "report", "report_pdf")


def choice_guarantee(doc: dict[str, Any]) -> PrivacyGuarantee:
    """choose-epsilon is an evaluation for the data's curator, not a release: the models it
    trains are DP (each `per_epsilon[].guarantee` covers only their weights, which are never
    output), but their accuracies and attack results, and so the recommendation, are
    measured exactly on the rows. Every such key is named in `not_covered`."""
    measured = [k for k in doc if k not in SETTINGS and k != "guarantee"]
    return PrivacyGuarantee.not_private(
        "choose epsilon: DP models over a grid, attacked and scored on the input rows",
        "an evaluation for the data's curator: accuracies, attack results, risks and the "
        "recommended epsilon are computed exactly from the input rows; do not publish them",
    ).with_not_covered(*(f"{k} (measured exactly on the input rows)" for k in measured))


def _parse_weights(text: str | None) -> dict[str, float] | None:
    """'loss=1,shadow=2' -> {'loss': 1.0, 'shadow': 2.0}."""
    if not text:
        return None
    out = {}
    for part in text.split(","):
        name, sep, val = part.partition("=")
        try:
            if not sep:
                raise ValueError
            out[name.strip()] = float(val)
        except ValueError:
            raise InvalidInputError(f"--attack-weights must look like loss=1,shadow=2, got "
                                    f"{part!r}") from None
    return out


def _resolve_schema(schema: str | None, bundled: str | None) -> Any:
    """--schema, else the bundled dataset's schema (adult: its public preprocessing, None
    here), else a refusal: numeric ranges and categories read from a user's rows would leak."""
    from privlab.schema import bundled_schema, load_schema

    if schema is not None:
        return load_schema(schema)
    if bundled == "adult":
        return None  # the bundled Adult pipeline: public ranges and category lists
    if bundled is not None:
        return bundled_schema(bundled)
    raise InvalidInputError("choose-epsilon needs --schema NAME|FILE for your own table (the "
                            "features' public ranges and categories, and the classes); draft "
                            "one with `privlab schema draft DATA > schema.yaml` and review it: "
                            "ranges read from the rows are not private")


def register(app: typer.Typer) -> None:
    app.command("choose-epsilon")(choose_epsilon_cmd)
