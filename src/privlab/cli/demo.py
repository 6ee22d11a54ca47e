"""`privlab demo`: the README's main job on bundled data.

Runs, on UCI Adult: an attribute-level privacy assessment (which attributes and pairs
identify people, k-anonymity of a quasi-identifier set) and a set of DP releases charged
against a budget ledger, then writes `summary.json` and `report.html` into the output folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from privlab.cli.common import console, emit_json, to_json
from privlab.core import queries
from privlab.data.datasets import load_adult
from privlab.utils.atomic import atomic_write_text

DEMO_RELEASES = [
    # (statistic, column, options)
    ("count", "age", {}),
    ("mean", "age", {"bounds": (17, 90)}),
    ("mean", "hours-per-week", {"bounds": (1, 99)}),
    ("quantile", "age", {"bounds": (17, 90), "q": 0.5}),
    ("histogram", "sex", {"categories": ["Male", "Female"]}),
    ("histogram", "race", {"categories": ["White", "Black", "Asian-Pac-Islander",
                                          "Amer-Indian-Eskimo", "Other"]}),
]


def _true_value(frame: Any, stat: str, column: str, opts: dict) -> Any:
    col = frame[column]
    if stat == "count":
        return len(col)
    if stat == "mean":
        lo, hi = opts["bounds"]
        return float(col.clip(lo, hi).mean())
    if stat == "quantile":
        return float(col.quantile(opts["q"]))
    return [int((col == c).sum()) for c in opts["categories"]]


def _release(frame: Any, stat: str, column: str, opts: dict, epsilon: float, rng: Any):
    values = frame[column]
    if stat == "count":
        return queries.dp_count(values, epsilon, rng=rng)
    if stat == "mean":
        return queries.dp_mean(values.to_numpy(), opts["bounds"], epsilon, rng=rng)
    if stat == "quantile":
        return queries.dp_quantile(values.to_numpy(), opts["q"], opts["bounds"], epsilon, rng=rng)
    return queries.dp_histogram(values, epsilon, categories=opts["categories"], rng=rng)


def demo_cmd(
    out: Path = typer.Option(Path("privlab-demo"), "--out", help="Output folder."),
    epsilon: float = typer.Option(0.5, "--epsilon", help="Epsilon per release."),
    budget: float = typer.Option(5.0, "--budget", help="Total epsilon budget of the demo analyst."),
    seed: int = typer.Option(None, "--seed", help="Reproducible noise: for testing ONLY."),
    epsilons: str = typer.Option(None, "--epsilons", help="Also choose epsilon for a DP-SGD "
                                 "model on an Adult sample over this grid, e.g. 1,4,16."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Assess and release DP statistics of bundled UCI Adult; write a report."""
    from privlab.core.guarantee import check_epsilon
    from privlab.core.ledger import BudgetLedger
    from privlab.core.rng import make_rng

    check_epsilon(epsilon)
    check_epsilon(budget, "budget")
    out.mkdir(parents=True, exist_ok=True)
    frame = load_adult(drop_missing=True)
    rng = make_rng(seed)
    ledger = BudgetLedger(str(out / "budget.db"))
    ledger.set_budget("demo-analyst", budget)

    releases = []
    for stat, column, opts in DEMO_RELEASES:
        entry = ledger.charge("demo-analyst", epsilon, 0.0, description=f"demo {stat} {column}")
        result = _release(frame, stat, column, opts, epsilon, rng)
        releases.append({"statistic": stat, "column": column,
                         "true_value": _true_value(frame, stat, column, opts),
                         **result.to_dict(),
                         "remaining_epsilon": entry.remaining_epsilon})

    assessment, result = _assessment(frame, out)
    remaining = ledger.remaining("demo-analyst")[0]
    report = out / "report.html"
    _write_report(report, result, releases, budget, remaining)
    assessment["report"] = str(report)
    summary = {"dataset": "adult (rows with missing values dropped)", "rows": len(frame),
               "assessment": assessment, "releases": releases,
               "ledger": {"principal": "demo-analyst", "budget": budget,
                          "remaining_epsilon": remaining}}
    if epsilons is not None:
        summary["choose_epsilon"] = _choose_epsilon(frame, epsilons, out, seed)
    atomic_write_text(out / "summary.json", to_json(summary))
    if as_json:
        emit_json(summary)
        return
    table = Table("statistic", "column", "true", "released", "95% +-", "guarantee",
                  title="DP releases on UCI Adult (not the true values: those are shown only "
                        "because this is a demo on public data)")
    for r in releases:
        table.add_row(r["statistic"], r["column"], _short(r["true_value"]), _short(r["value"]),
                      _short(r["confidence_interval_95"]),
                      f"eps={r['guarantee']['epsilon']:g} {r['guarantee']['model']}")
    attr_table = Table("attribute", "distinct", "richness", "tier",
                       title="Which attributes identify people (seed 001 domain richness)")
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
    console.print(table)
    console.print(f"budget left: {summary['ledger']['remaining_epsilon']:g} of {budget:g}")
    if "choose_epsilon" in summary:
        ce = summary["choose_epsilon"]
        console.print(f"choose-epsilon (finance policy, {ce['rows']} Adult rows): eps* = "
                      f"{ce['chosen_epsilon']}; report {ce['report']}")
    console.print(f"wrote {out / 'summary.json'}"
                  + (f" and {assessment['report']}" if assessment.get("report") else ""))


DEMO_QIS = ["age", "education", "marital-status", "race", "sex", "native-country"]


def _assessment(frame: Any, out: Path) -> tuple[dict, Any]:
    """Seed 001's attribute-level assessment of Adult plus k/l/t on a usual QI set."""
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
                  remaining: float) -> None:
    """One page: the assessment sections, then the DP releases with their guarantees."""
    from privlab.assess.report import assessment_sections
    from privlab.report.html import Section, Table, write_page

    rows = [[r["statistic"], r["column"], _short(r["true_value"]), _short(r["value"]),
             _short(r["granularity"]), _short(r["confidence_interval_95"]),
             r["guarantee"]["mechanism"],
             f"epsilon={r['guarantee']['epsilon']:g}, delta={r['guarantee']['delta']:g}, "
             f"{r['guarantee']['model']}, {r['guarantee']['neighbouring']}"]
            for r in releases]
    releases_section = Section(
        title="DP releases (protect)",
        paragraphs=["Each statistic was charged to the demo analyst's budget in the ledger "
                    "before it was computed; the released value lies on the stated grid. True "
                    "values are shown only because this demo runs on public data."],
        facts={"budget (epsilon)": budget, "remaining (epsilon)": remaining,
               "composition": "sequential (sum of epsilons) in the ledger"},
        tables=[Table(["statistic", "column", "true", "released", "grid", "95% +-",
                       "mechanism", "guarantee"], rows)],
    )
    write_page(path, "privlab demo: UCI Adult", assessment_sections(result) + [releases_section],
               subtitle="assess -> protect on bundled data")


def _choose_epsilon(frame: Any, epsilons: str, out: Path, seed: int | None) -> dict:
    """A short epsilon selection (privlab.risk) on an Adult sample: small and quick by design."""
    from privlab.cli.common import parse_floats
    from privlab.risk import make_policy
    from privlab.risk.pipeline import PipelineConfig, choose_epsilon
    from privlab.risk.report import write_report

    cfg = PipelineConfig(epsilons=parse_floats(epsilons, "--epsilons") or [], attacks=("loss",),
                         epochs=5, lr=5e-3, max_rows=1500, seed=seed, public="adult")
    doc = choose_epsilon(frame, "salary", make_policy("finance"), cfg).to_dict()
    path = out / "choose_epsilon.html"
    write_report(doc, path, title="privlab demo: choosing epsilon on an Adult sample")
    return {"chosen_epsilon": doc["chosen_epsilon"], "reason": doc["reason"],
            "rows": doc["data"]["rows"], "report": str(path),
            "per_epsilon": [{"epsilon": r["epsilon"], "accuracy": r["accuracy"],
                             "risk_mean": r["risk_mean"], "risk_upper": r["risk_upper"]}
                            for r in doc["per_epsilon"]]}


def _short(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_cmd)
