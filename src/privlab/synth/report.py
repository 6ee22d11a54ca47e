"""HTML report of a synthetic release: guarantee, budget lines, domain, evaluation, assess."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from privlab.core.guarantee import PrivacyGuarantee
from privlab.synth.base import Synthesizer

#: The exact values a report with an evaluation shows (its NOT-DP banner, report.html).
EVALUATION_EXACT = "the evaluation (fidelity, accuracy, privacy checks)"


def _domain_rows(synth: Synthesizer) -> list[list[Any]]:
    rows = []
    for c in synth.domain.columns if synth.domain else ():
        if c.kind == "categorical":
            what = f"{len(c.categories)} categories" + (" + <other>" if c.other else "")
        else:
            d = c.to_dict()
            what = f"[{d['bounds'][0]:g}, {d['bounds'][1]:g}] in {c.bins} bins"
        rows.append([c.name, c.kind, what, c.size, c.source])
    return rows


def write_synth_report(path: str | Path, synth: Synthesizer, *, rows: int, out: str,
                       evaluation: dict[str, Any] | None = None,
                       guarantee: PrivacyGuarantee | None = None) -> Path:
    """Write the report with `privlab.report.write_page` (atomic). `guarantee`: the release's
    (the synthesizer's, plus what the caller adds to `not_covered`, e.g. the evaluation).
    The fit time is not shown: it grows with the number of private rows."""
    from privlab.report import Section, Table, fmt, write_page

    g = guarantee or synth.guarantee
    sections = [Section(
        "Release",
        paragraphs=[g.headline(), g.describe(), f"{rows:,} synthetic rows written to {out}."],
        facts={"method": synth.method,
               "epsilon": fmt(g.epsilon, 4) if math.isfinite(g.epsilon) else "inf",
               "delta": fmt(g.delta, 3) if math.isfinite(g.epsilon) else "-",
               "domain": synth.declaration.name},
        items=list(g.notes),
    )]
    budget_rows = [[b["step"], fmt(b.get("rho")) if "rho" in b else "",
                    fmt(b.get("epsilon")) if "epsilon" in b else "",
                    fmt(b.get("delta"), 3) if b.get("delta") else "", b.get("detail", "")]
                   for b in synth.budget_lines()]
    sections.append(Section(
        "Privacy budget",
        paragraphs=["Every step that touched the data, with its cost. zCDP steps add up in "
                    "rho; the total converts to (epsilon, delta) as stated above."],
        tables=[Table(["step", "rho (zCDP)", "epsilon", "delta", "detail"], budget_rows)]))
    sections.append(Section(
        "Domain", paragraphs=["Declared values are public; estimated ones were measured with "
                              "part of the budget."],
        tables=[Table(["column", "type", "values", "codes", "source"], _domain_rows(synth))]))
    if synth.warnings:
        sections.append(Section("Warnings", items=list(synth.warnings)))
    if evaluation:
        f = evaluation["fidelity"]
        facts = {"1-way TVD (mean / max)": f"{fmt(f['tvd_1way_mean'])} / "
                                           f"{fmt(f['tvd_1way_max'])}",
                 "2-way TVD (mean / max)": f"{fmt(f['tvd_2way_mean'])} / "
                                           f"{fmt(f['tvd_2way_max'])}",
                 "Cramer's V |diff| mean": fmt(f["cramers_v_abs_diff_mean"]),
                 "Pearson |diff| mean": fmt(f["pearson_abs_diff_mean"])}
        tables = [Table(["pair", "TVD"], [[k, fmt(v)] for k, v in f["tvd_2way_worst"].items()],
                        caption="Worst 2-way marginals")]
        ml = evaluation.get("ml_utility")
        if ml:
            facts.update({
                "accuracy, trained on real": fmt(ml["train_real_accuracy"]),
                "accuracy, trained on synthetic": fmt(ml["train_synthetic_accuracy"]),
                "majority-class baseline": f"{fmt(ml['majority_class_accuracy'])} (always "
                                           f"{ml['majority_class']!r})",
                "trained on synthetic vs the baseline": ml["train_synthetic_verdict"],
                "trained on real vs the baseline": ml["train_real_verdict"]})
        pv = evaluation.get("privacy")
        if pv:
            rc = pv["rare_copies"]
            facts.update({
                "median DCR synthetic / holdout": f"{fmt(pv['dcr_synthetic_to_train']['median'])}"
                                                  f" / {fmt(pv['dcr_holdout_to_train']['median'])}",
                "copies of unique records (synthetic / holdout rate)":
                    f"{fmt(rc['synthetic_copy_rate'], 4)} / {fmt(rc['holdout_match_rate'], 4)}",
                "membership-inference AUC": fmt(pv["membership_inference"]["auc"])})
        paragraphs = ["This evaluation reads the real records: it is NOT differentially "
                      "private. Keep it with the data controller."]
        if "skipped" in evaluation:
            paragraphs.append(evaluation["skipped"])
        sections.append(Section("Evaluation (not private)", paragraphs=paragraphs,
                                facts=facts, tables=tables))
        a = evaluation.get("assess")
        if a and "attributes" in a:
            # no recommendations: generalising a column of a DP table adds no protection
            sections.append(Section(
                "Assessment of the synthetic table", paragraphs=[a["note"]],
                tables=[Table(["attribute", "tier", "richness", "unique share", "k"],
                              [[r["name"], r["tier"], fmt(r["richness"]),
                                fmt(r["unique_share"], 4), r["k"]] for r in a["attributes"]])]))
    sections.insert(0, plain_section(synth, g, rows=rows, evaluation=evaluation))
    return write_page(path, "Synthetic data release", sections,
                      exact_values=EVALUATION_EXACT if evaluation else None,
                      subtitle=f"privlab synth --method {synth.method}", guarantee=g)


def plain_section(synth: Synthesizer, g: PrivacyGuarantee, *, rows: int,
                  evaluation: dict[str, Any] | None) -> Any:
    """The first section, for people: what was released, what an attacker could learn, how
    useful the table is (beside the majority-class baseline), how sure we are."""
    from privlab.report import Section

    eps = g.epsilon
    strength = ("strong" if eps <= 1 else "moderate" if eps <= 8 else "weak")
    what = (f"What was released: {rows:,} synthetic rows made by {synth.method.upper()} from "
            "statistics of the real table measured with differential privacy. No row is a real "
            "person's record. Epsilon measures how much the release can reveal about any one "
            f"person: smaller is more private; 1 or less is strong, above 8 is weak. Here "
            f"epsilon = {eps:.3g} ({strength})."
            if math.isfinite(eps) else
            f"What was released: {rows:,} synthetic rows made by {synth.method.upper()} WITHOUT "
            "differential privacy: a baseline for comparison, never for release.")
    unit = ("one person (all of their rows)" if g.neighbouring == "user" else
            "one row (a person with several rows is protected less: each row counts once)")
    learn = ("What an attacker could learn: whatever they do with the table, their confidence "
             f"about {unit}, its presence or values, grows by at most the factor e^epsilon "
             f"allowed by the guarantee, except with probability delta = {g.delta:.2g}. The "
             "table needs no further generalisation or suppression: coarsening a DP table "
             "adds no protection, it only loses detail."
             if math.isfinite(eps) else
             "What an attacker could learn: this baseline has no privacy guarantee; its rows "
             "may reveal real records.")
    paras = [what, learn]
    ml = (evaluation or {}).get("ml_utility")
    if ml:
        syn, base = ml["train_synthetic_accuracy"], ml["majority_class_accuracy"]
        verdict = ("better than" if ml["train_synthetic_better_than_baseline"]
                   else "NO better than")
        paras.append(
            f"How useful it is: a model trained on the synthetic rows predicts "
            f"{ml['target']} correctly {syn:.0%} of the time on real rows it never saw "
            f"(trained on the real rows: {ml['train_real_accuracy']:.0%}); always predicting "
            f"the most common value ({ml['majority_class']!r}) is right {base:.0%} of the "
            f"time, so the synthetic-trained model is {verdict} that baseline.")
    paras.append(
        "How sure we are: the privacy promise is a proof about the method, not a "
        "measurement; it holds whatever the data. The utility figures"
        + (" above" if ml else "") + " are measured on one sample and one run: another run "
        "gives other numbers. The evaluation (when present) reads the real records and is "
        "not private: keep it with the data controller.")
    facts = {"synthetic rows": f"{rows:,}", "method": synth.method,
             "epsilon": f"{eps:.3g}" if math.isfinite(eps) else "none (not private)"}
    return Section("In plain words", paragraphs=paras, facts=facts, anchor="plain-words")
