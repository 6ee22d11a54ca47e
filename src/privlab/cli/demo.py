"""`privlab demo`: the README's main job on bundled data.

Runs, on UCI Adult: an attribute-level privacy assessment (which attributes and pairs
identify people, k-anonymity of a quasi-identifier set), a set of DP releases charged
against a budget ledger, and a short epsilon selection for a DP-SGD model (train per epsilon,
attack with loss / shadow / LiRA, Bayesian risk model, finance policy), then writes
`summary.json`, `report.html` and `choose_epsilon.html` into the output folder. The epsilon
step needs the `ml` extra (torch); without it the demo says so and skips that step only.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from privlab.cli.common import console, emit_json, to_json, warn_weak_epsilon
from privlab.cli.options import Json, TestingSeed, option
from privlab.data.datasets import load_adult
from privlab.errors import InvalidInputError
from privlab.utils.atomic import atomic_write_text

DEMO_GRID = "0.5,1,2,4,8,16"
DEMO_ATTACKS = ("loss", "shadow", "lira")
#: Models trained per epsilon (all at once, stacked): their spread is the accuracy noise that
#: the choice's uncertainty carries, and the loss attack averages over them.
DEMO_SEEDS = 8


def _demo_releases() -> list[tuple[str, str, dict[str, Any]]]:
    """(statistic, column, options) of the demo's releases: bounds and categories read from
    the bundled public Adult schema (`privlab schema show adult`), never written here."""
    from privlab.schema import bundled_schema

    adult = bundled_schema("adult")

    def bounds(col: str) -> tuple[int, int]:
        lo, hi = adult.column(col).bounds  # type: ignore[misc]
        return int(lo), int(hi)

    return [
        ("count", "age", {}),
        ("mean", "age", {"bounds": bounds("age")}),
        ("mean", "hours-per-week", {"bounds": bounds("hours-per-week")}),
        ("quantile", "age", {"bounds": bounds("age"), "q": 0.5}),
        ("histogram", "sex", {"categories": list(adult.column("sex").categories)}),
        ("histogram", "race", {"categories": list(adult.column("race").categories)}),
        ("stddev", "hours-per-week", {"bounds": bounds("hours-per-week")}),
    ]


DEMO_RELEASES = _demo_releases()


DEMO_LEDGER = "budget.db"
DEMO_PRINCIPAL = "demo-analyst"
#: Files of one demo run that a later run without the epsilon step (or without --pdf) must not
#: leave behind as if they were its own.
EPSILON_STEP_FILES = ("choose_epsilon.html", "choose_epsilon.pdf")


def _check_demo_ledger(path: Path) -> None:
    """A ledger at the demo's path is replaced only if it is a demo ledger (its only principal
    is the demo analyst): a user's ledger in that folder is never overwritten."""
    from privlab.core.ledger import BudgetLedger

    if not path.exists():
        return
    with BudgetLedger(str(path), create=False) as old:
        principals = old.principals()
    if principals and principals != [DEMO_PRINCIPAL]:
        raise InvalidInputError(f"--out {path.parent}: its {path.name} is not a demo ledger "
                                f"(principals {', '.join(principals[:5])}); give the demo "
                                "its own folder")


def _fresh_demo_ledger(path: Path, budget: float) -> bool:
    """A new ledger for this run, moved over the old one in one rename: each run of the demo
    starts from its full budget, so re-running it just works. Returns whether an old demo
    ledger was replaced."""
    from privlab.core.ledger import replace_with_fresh_ledger

    return replace_with_fresh_ledger(path, {DEMO_PRINCIPAL: budget})


def _drop_stale_outputs(out: Path, chosen: dict | None, pdf: bool) -> None:
    """Remove an earlier run's epsilon-step report when this run made none, and earlier PDFs
    when this run prints none, so that the folder holds one run's outputs only."""
    made = chosen is not None and "skipped" not in chosen
    for name in EPSILON_STEP_FILES:
        stale = (not made) or (name.endswith(".pdf") and not pdf)
        if stale:
            (out / name).unlink(missing_ok=True)
    if not pdf:
        (out / "report.pdf").unlink(missing_ok=True)


def _inputs(stat: str, opts: dict, epsilon: float) -> Any:
    """The public inputs of one demo release for its registry definition."""
    from privlab.measure import stats

    cats = tuple(opts["categories"]) if "categories" in opts else None
    bounds = tuple(float(b) for b in opts["bounds"]) if "bounds" in opts else None
    return stats.Inputs(bounds, cats, cats, None, False, stats.get(stat).default_mechanism,
                        epsilon, 0.0, opts.get("q", 0.5))


def _true_value(frame: Any, stat: str, column: str, opts: dict) -> Any:
    """The exact value (NOT private, printed beside the noisy one), by the registry."""
    from privlab.measure import stats

    return stats.get(stat).exact(frame[column], _inputs(stat, opts, 1.0))


def _release(frame: Any, stat: str, column: str, opts: dict, epsilon: float, rng: Any):
    """One demo release, by the statistic's one definition in the registry."""
    from privlab.measure import stats

    return stats.get(stat).release(frame[column], _inputs(stat, opts, epsilon), rng)


def demo_cmd(
    out: Annotated[Path, option("output file", "Output folder.")] = Path("privlab-demo"),
    epsilon: Annotated[float, option("epsilon", "Epsilon per release.")] = 0.5,
    budget: float = typer.Option(5.0, "--budget", help="Total epsilon budget of the demo analyst."),
    seed: TestingSeed = None,
    epsilons: str = typer.Option(DEMO_GRID, "--epsilons", help="Epsilon grid of the "
                                 "choose-epsilon step on an Adult sample; 'none' skips it."),
    pdf: bool = typer.Option(False, "--pdf", help="Also print the reports to PDF (needs "
                             "headless Chromium on PATH; exit 5 without it)."),
    as_json: Json = False,
) -> None:
    """Assess and release DP statistics of bundled UCI Adult; write a report."""
    from privlab.core.guarantee import check_epsilon
    from privlab.core.ledger import BudgetLedger
    from privlab.core.rng import make_rng

    check_epsilon(epsilon)
    check_epsilon(budget, "budget")
    warn_weak_epsilon(epsilon)
    if pdf:
        from privlab.report.pdf import find_browser

        if find_browser() is None:  # refuse before an expensive run, not after it
            from privlab.errors import MissingExtraError

            raise MissingExtraError("--pdf needs headless Chromium on PATH: install Debian's "
                                    "chromium package (apt-get install chromium)")
    if out.exists() and not out.is_dir():
        raise InvalidInputError(f"--out {out} is a file; give a folder (it is created if "
                                "missing)")
    needed = epsilon * len(DEMO_RELEASES)
    if needed > budget + 1e-12:  # refuse before anything is written or charged
        from privlab.errors import BudgetExceededError

        raise BudgetExceededError(f"--budget {budget:g}: the demo's {len(DEMO_RELEASES)} "
                                  f"releases at --epsilon {epsilon:g} need {needed:g}; raise "
                                  "--budget or lower --epsilon")
    _check_demo_ledger(out / DEMO_LEDGER)
    out.mkdir(parents=True, exist_ok=True)
    frame = load_adult(drop_missing=True)
    rng = make_rng(seed)
    replaced = _fresh_demo_ledger(out / DEMO_LEDGER, budget)
    if not as_json:
        console.print(("replaced the previous demo ledger: " if replaced else "")
                      + f"started a fresh demo ledger {out / DEMO_LEDGER} (budget {budget:g} "
                      f"for {DEMO_PRINCIPAL})")
    from privlab.cli.progress import reporter

    ledger = BudgetLedger(str(out / DEMO_LEDGER))
    try:
        # the demo's steps, fixed by the options: each release, the assessment, the epsilon step,
        # the report and the PDFs (each phase has its own display: the tables print in between)
        run_ce = epsilons.strip().lower() != "none"
        total = len(DEMO_RELEASES) + 1 + int(run_ce) + 1 + int(pdf)
        releases = []
        with reporter("demo", as_json) as report:
            for i, (stat, column, opts) in enumerate(DEMO_RELEASES):
                report(f"DP release {stat} {column}", i, total)
                entry = ledger.charge(DEMO_PRINCIPAL, epsilon, 0.0,
                                      description=f"demo {stat} {column}")
                result = _release(frame, stat, column, opts, epsilon, rng)
                result = dataclasses.replace(result, guarantee=_demo_guarantee(result.guarantee,
                                                                               stat, column))
                releases.append({"statistic": stat, "column": column,
                                 "true_value": _true_value(frame, stat, column, opts),
                                 **result.to_dict(),
                                 "remaining_epsilon": entry.remaining_epsilon})
            report("assessment", len(DEMO_RELEASES), total)
            assessment, result = _assessment(frame, out)
        remaining = ledger.remaining(DEMO_PRINCIPAL)[0]
    finally:
        ledger.close()
    if not as_json:  # show what exists now; the epsilon step takes a while
        _print_assessment(assessment)
        _print_releases(releases, budget, remaining)
    chosen = None
    if run_ce:
        with reporter("demo", as_json) as step:
            step("choose-epsilon", len(DEMO_RELEASES) + 1, total)
        chosen = _choose_epsilon_step(frame, epsilons, out, seed, show=not as_json)
    _drop_stale_outputs(out, chosen, pdf)
    report = out / "report.html"
    with reporter("demo", as_json) as step:
        step("writing the report", total - 1 - int(pdf), total)
        _write_report(report, result, releases, budget, remaining, chosen)
        if not pdf:
            step("done", total, total)
    assessment["report"] = str(report)
    summary = {"dataset": "adult (rows with missing values dropped)", "rows": len(frame),
               "assessment": assessment, "releases": releases,
               "ledger": {"principal": DEMO_PRINCIPAL, "budget": budget,
                          "remaining_epsilon": remaining, "path": str(out / DEMO_LEDGER),
                          "fresh": True, "replaced_previous": replaced},
               "not_protected": DEMO_NOT_PROTECTED}
    if chosen is not None:
        summary["choose_epsilon"] = chosen
    if pdf:
        from privlab.report.pdf import export_pdf

        with reporter("demo", as_json) as step:
            step("printing the PDFs", total - 1, total)
            summary["pdf"] = [str(export_pdf(report, report.with_suffix(".pdf")))]
            if chosen is not None and chosen.get("report"):
                ce_html = Path(chosen["report"])
                summary["pdf"].append(str(export_pdf(ce_html, ce_html.with_suffix(".pdf"))))
            step("done", total, total)
    atomic_write_text(out / "summary.json", to_json(summary))
    if as_json:
        emit_json(summary)
        return
    ce = summary.get("choose_epsilon")
    if ce and "skipped" in ce:
        console.print(f"choose-epsilon skipped: {ce['skipped']}")
    elif ce:
        chosen = ce["chosen_epsilon"]
        iv = ce.get("interval")
        console.print(f"[bold]choose-epsilon[/bold] (finance policy, DP-SGD MLP on {ce['rows']} "
                      f"Adult rows, {ce['models_per_epsilon']} models per epsilon, attacks "
                      f"{', '.join(ce['attacks'])}): recommended epsilon "
                      f"{'none acceptable' if chosen is None else f'{chosen:g}'}"
                      + (f" (a re-run would pick {iv[0]:g} to {iv[1]:g})" if iv else ""))
        console.print(f"  {ce['reason']}")
        for r in ce["per_epsilon"]:
            p = ce["prob_best"].get(f"{r['epsilon']:g}", 0.0)
            console.print(f"  eps={r['epsilon']:<5g} accuracy {r['accuracy']:.3f}  membership "
                          f"risk {r['risk_mean']:.3f} (bound {r['risk_upper']:.3f})  "
                          f"P(best) {p:.0%}")
        for n in ce.get("notes", []):
            console.print(f"  note: {n}")
        if chosen is not None:
            warn_weak_epsilon(chosen, "the recommended epsilon")
        console.print(f"  report {ce['report']}")
    console.print(f"wrote {out / 'summary.json'}"
                  + (f" and {assessment['report']}" if assessment.get("report") else ""))


DEMO_QIS = ["age", "education", "marital-status", "race", "sex", "native-country"]


def _print_assessment(assessment: dict) -> None:
    attr_table = Table("attribute", "distinct", "richness", "tier",
                       title="Which attributes identify people (domain richness)")
    for a in assessment["attributes"]:
        attr_table.add_row(a["name"], str(a["distinct"]), f"{a['richness']:.3f}", a["tier"])
    console.print(attr_table)
    for c in assessment["escalated_combinations"]:
        console.print(f"escalated: {' + '.join(c['attributes'])} -> richness "
                      f"{c['richness']:.3f} ({c['tier']})")
    pm = assessment.get("privacy_models") or {}
    if pm:
        risk = pm["reidentification_risk"]
        console.print(f"on quasi-identifiers {', '.join(DEMO_QIS)}: k = {pm['k_anonymity']['k']}, "
                      f"{risk['unique_share']:.1%} of records unique, average prosecutor risk "
                      f"{risk['prosecutor']['average']:.3f}")


#: Fields of the demo's summary that are exact statistics of the rows (docs/guarantees.md):
#: shown because the demo runs on public data, to compare the noisy values with the truth.
DEMO_NOT_PROTECTED = [
    "rows (exact row count)",
    "releases[].true_value (exact value of each statistic, to compare with the noisy one)",
    "assessment (exact re-identification risk assessment; see its guarantee)",
    "choose_epsilon (accuracies and attack results measured on the rows; an evaluation)",
]


#: Named in each demo release's `not_covered`: the record carries the exact statistic beside
#: the noisy one, so that record is not a DP release (is_dp false), in JSON and HTML alike.
TRUE_VALUE_NOT_COVERED = ("true_value (the exact statistic, printed beside the noisy value "
                          "to compare them: the demo runs on public data)")


def _demo_guarantee(g: Any, stat: str, column: str) -> Any:
    """The release's guarantee as the demo's output record states it: the noisy value is
    covered, the exact `true_value` printed beside it is not (so is_dp is false)."""
    return (g.with_covers(f"value: the noisy {stat} of {column!r} and its details")
            .with_not_covered(TRUE_VALUE_NOT_COVERED))


def _guarantee_text(g: dict) -> str:
    """One cell: the claim on the noisy value and that the true value beside it is exact."""
    return (f"value: epsilon={g['epsilon']:g}, delta={g['delta']:g}, {g['model']}, "
            f"{g['neighbouring']}; is_dp {str(g['is_dp']).lower()} (not covered: true value)")


def _print_releases(releases: list[dict], budget: float, remaining: float) -> None:
    table = Table("statistic", "column", "true", "released", "95% +-", "guarantee",
                  title="DP releases on UCI Adult (not the true values: those are shown only "
                        "because this is a demo on public data)")
    for r in releases:
        table.add_row(r["statistic"], r["column"], _short(r["true_value"]), _short(r["value"]),
                      _short(r["confidence_interval_95"]),
                      f"eps={r['guarantee']['epsilon']:g} {r['guarantee']['model']} *")
    console.print(table)
    console.print("* the epsilon covers the released value only; each row as printed is NOT "
                  "differentially private (is_dp false): its true value is exact and named in "
                  "its guarantee's not_covered")
    console.print(f"budget left: {remaining:g} of {budget:g}")


def _assessment(frame: Any, out: Path) -> tuple[dict, Any]:
    """The attribute-level assessment of Adult (domain richness of each attribute and pair)
    plus k-anonymity, l-diversity and t-closeness on a usual quasi-identifier set."""
    from privlab.assess import assess

    result = assess(frame, attributes=[c for c in frame.columns if c != "salary"],
                    quasi_identifiers=DEMO_QIS, sensitive="occupation",
                    max_combination_size=2, source="UCI Adult (complete rows)")
    data = result.to_dict()
    return {"attributes": data["attributes"], "thresholds": data["thresholds"],
            "escalated_combinations": [c for c in data["combinations"] if c.get("escalated")],
            "privacy_models": data.get("privacy_models"),
            "recommendations": data["recommendations"],
            "guarantee": data["guarantee"]}, result


def _write_report(path: Path, result: Any, releases: list[dict], budget: float,
                  remaining: float, chosen: dict | None = None) -> None:
    """One page: the assessment sections, the DP releases, and the epsilon step's summary."""
    from privlab.assess.report import assessment_sections
    from privlab.report.html import Section, Table, write_page

    rows = [[r["statistic"], r["column"], _short(r["true_value"]), _short(r["value"]),
             _short(r["granularity"]), _short(r["confidence_interval_95"]),
             r["guarantee"]["mechanism"], _guarantee_text(r["guarantee"])]
            for r in releases]
    releases_section = Section(
        title="DP releases (protect)",
        paragraphs=["Each statistic was charged to the demo analyst's budget in the ledger "
                    "before it was computed; the released value lies on the stated grid. True "
                    "values are shown only because this demo runs on public data: each row's "
                    "guarantee covers its released value and names the true value in "
                    "not_covered, so a row as printed here is NOT differentially private "
                    "(is_dp false)."],
        facts={"budget (epsilon)": budget, "remaining (epsilon)": remaining,
               "composition": "sequential (sum of epsilons) in the ledger"},
        tables=[Table(["statistic", "column", "true", "released", "grid", "95% +-",
                       "mechanism", "guarantee"], rows)],
    )
    assessed = result.to_dict()
    sections = [_plain_section(assessed, releases, budget, remaining, chosen)]
    sections += assessment_sections(result) + [releases_section]
    if chosen is not None:
        sections.append(_choose_epsilon_section(chosen))
    write_page(path, "privlab demo: UCI Adult", sections,
               exact_values="the assessment's counts and shares, each statistic's true "
                            "value",
               subtitle="assess -> protect -> audit -> choose epsilon on bundled data")


def _plain_section(assessed: dict, releases: list[dict], budget: float, remaining: float,
                   chosen: dict | None) -> Any:
    """The first page, for people: what was released, what an attacker could learn, the
    recommended epsilon and why, how sure we are, and what must not be published."""
    from privlab.report.html import Section

    eps = ", ".join(f"{e:g}" for e in sorted({r["guarantee"]["epsilon"] for r in releases}))
    what = (f"What was released: {len(releases)} statistics of UCI Adult (a public census "
            f"extract) with differential privacy, each at epsilon {eps}, "
            f"{budget - remaining:g} of the analyst's budget of {budget:g} in all. Epsilon "
            "measures how much a release can reveal about any one person: smaller is more "
            "private; 1 or less is strong, above 8 is weak. Each released number carries random "
            "noise; the 95% column says how far it may be from the truth.")
    pm = assessed.get("privacy_models") or {}
    risk = (pm.get("reidentification_risk") or {})
    hide = [a["name"] for a in assessed.get("attributes", []) if a.get("tier") == "hide"]
    danger = [" + ".join(c["attributes"]) for c in assessed.get("combinations", [])
              if c.get("escalated")]
    learn = "What an attacker could learn from the raw table: "
    if risk:
        learn += (f"{risk.get('unique_share', 0):.0%} of people are the only one with their "
                  "combination of age, education, marital status, race, sex and country, so "
                  "anyone who knows those facts about them finds their row. ")
    if hide or danger:
        learn += ("Do not publish these attributes or combinations, even de-identified: "
                  + "; ".join([f"{h} (DO NOT PUBLISH)" for h in hide]
                              + [f"{d} (DO NOT PUBLISH)" for d in danger][:8]) + ".")
    paras = [what, learn]
    if chosen and "skipped" not in chosen:
        ce = chosen["chosen_epsilon"]
        iv = chosen.get("interval")
        if ce is None:
            paras.append("Model training: no epsilon on the tried grid meets the policy.")
        else:
            p = chosen.get("prob_best", {}).get(f"{ce:g}", 0.0)
            paras.append(
                f"Recommended epsilon for training a model on this data: {ce:g}. Larger "
                "epsilons did not give an accuracy gain that the measurements can tell apart "
                "from noise, so the more private choice is taken. How sure we are: re-drawing "
                f"the measurements within their noise, {ce:g} is the single best choice "
                f"{p:.0%} of the time"
                + (f"; a re-run with other random seeds would recommend an epsilon from "
                   f"{iv[0]:g} to {iv[1]:g} (95% of re-runs)." if iv else "."))
            if ce > 8:
                paras.insert(0, f"WARNING: the recommended epsilon {ce:g} is weak (above 8).")
        for n in chosen.get("notes", []):
            if "at chance" in n:
                paras.append("Every membership attack (guessing whether a person's record was "
                             "used in training) was at chance, no better than a coin toss: no "
                             "measurable leak, though a stronger attacker might do better.")
    return Section("In plain words", paragraphs=paras, anchor="summary")


def _choose_epsilon_section(chosen: dict) -> Any:
    """The epsilon step in brief; the full evidence is in choose_epsilon.html."""
    from privlab.report.html import Section, Table

    if "skipped" in chosen:
        return Section(title="Choosing epsilon", paragraphs=[f"Skipped: {chosen['skipped']}"])
    eps = chosen["chosen_epsilon"]
    rows = [[f"{r['epsilon']:g}", f"{r['accuracy']:.3f}", f"{r['risk_mean']:.3f}",
             f"{r['risk_upper']:.3f}",
             f"epsilon={r['guarantee']['epsilon']:.4g}, delta={r['guarantee']['delta']:.2g}, "
             f"{r['guarantee']['accountant']}"] for r in chosen["per_epsilon"]]
    return Section(
        title="Choosing epsilon (audit -> choose epsilon)",
        paragraphs=[f"DP-SGD MLP on {chosen['rows']} Adult rows, one model per epsilon, attacked "
                    f"with {', '.join(chosen['attacks'])}; {chosen['policy']} policy.",
                    chosen["reason"],
                    "The full report (curves, credible bands, Pareto frontier, prior "
                    "sensitivity) is choose_epsilon.html in this folder."],
        facts={"chosen epsilon": "none acceptable" if eps is None else eps},
        tables=[Table(["epsilon", "test accuracy", "membership risk (mean)",
                       "risk (95% bound)", "guarantee"], rows)],
    )


def _choose_epsilon_step(frame: Any, epsilons: str, out: Path, seed: int | None,
                         show: bool) -> dict:
    """The epsilon step with a progress bar, or why it was skipped (no torch installed)."""
    from privlab.cli.common import parse_floats

    grid = parse_floats(epsilons, "--epsilons") or []
    try:
        import opacus  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        return {"skipped": "torch/opacus are not installed; install the ml extra "
                           "(pip install torch==2.13.0 && pip install -e '.[ml]') to choose "
                           "epsilon, or pass --epsilons none"}
    from privlab.cli.progress import reporter

    with reporter("choose-epsilon", as_json=not show) as progress:
        return _choose_epsilon(frame, grid, out, seed, progress=progress)


def _choose_epsilon(frame: Any, grid: list[float], out: Path, seed: int | None,
                    attacks: tuple[str, ...] = DEMO_ATTACKS, max_rows: int = 6000,
                    progress: Any = None) -> dict:
    """A short epsilon selection (privlab.risk) on an Adult sample: small and quick by design."""
    from privlab.risk import make_policy
    from privlab.risk.pipeline import PipelineConfig, choose_epsilon
    from privlab.risk.report import write_report

    cfg = PipelineConfig(epsilons=grid, attacks=attacks, epochs=8, lr=5e-3, max_rows=max_rows,
                         seed=seed, public="adult", seeds=DEMO_SEEDS)
    doc = choose_epsilon(frame, "salary", make_policy("finance"), cfg,
                         progress=progress).to_dict()
    path = out / "choose_epsilon.html"
    write_report(doc, path, title="privlab demo: choosing epsilon on an Adult sample",
                 source="the bundled UCI Adult census data")
    unc = doc.get("uncertainty") or {}
    return {"chosen_epsilon": doc["chosen_epsilon"], "reason": doc["reason"],
            "interval": unc.get("interval"), "argmin_epsilon": doc.get("argmin_epsilon"),
            "prob_best": {f"{c['epsilon']:g}": c["prob_best"]
                          for c in unc.get("candidates", [])},
            "prob_recommended": {f"{c['epsilon']:g}": c.get("prob_recommended")
                                 for c in unc.get("candidates", [])},
            "notes": list(doc["notes"]), "models_per_epsilon": DEMO_SEEDS,
            "policy": "finance", "attacks": list(attacks),
            "rows": doc["data"]["rows"], "report": str(path),
            "per_epsilon": [{"epsilon": r["epsilon"], "accuracy": r["accuracy"],
                             "risk_mean": r["risk_mean"], "risk_upper": r["risk_upper"],
                             "guarantee": r["guarantee"]}
                            for r in doc["per_epsilon"]]}


def _short(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_cmd)
