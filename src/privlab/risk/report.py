"""HTML report of a choose-epsilon run: the answer, why, and the evidence behind it.

Built from the JSON document (`pipeline.result_dict`) so the page and the JSON cannot disagree.
Sections: the answer, curves (accuracy, attack AUC and risk with credible bands, composite
loss, Pareto frontier), per-epsilon table, guarantee and accountant, prior sensitivity, attack
settings, data summary, the `assess` results when given, notes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privlab.report.figures import figure_data_uri, new_figure, place_labels
from privlab.report.html import Image, Section, Table, write_page


def _mark(ax: Any, eps: float | None, label: str, color: str) -> None:
    if eps is not None:
        ax.axvline(eps, color=color, linestyle="--", linewidth=1.0, label=label)


def _accuracy_fig(doc: Mapping[str, Any]) -> str:
    rows = doc["per_epsilon"]
    eps = [r["epsilon"] for r in rows]
    fig = new_figure(7.0, 3.8)
    ax = fig.add_subplot()
    ax.plot(eps, [r["accuracy"] for r in rows], "o", color="#4a6fa5", label="measured (mean)")
    ax.plot(eps, [r["accuracy_smoothed"] for r in rows], "-", color="#4a6fa5",
            label="monotone fit")
    ax.errorbar(eps, [r["accuracy"] for r in rows], yerr=[r["accuracy_std"] for r in rows],
                fmt="none", ecolor="#999999")
    base = (doc.get("baseline") or {}).get("accuracy")
    if base is not None:
        ax.axhline(base, color="#555555", linestyle=":", label="non-private model")
    major = doc.get("majority_baseline") or {}
    if major.get("accuracy") is not None:
        ax.axhline(major["accuracy"], color="#b9770e", linestyle="--",
                   label=f"always predicting {major['majority_class']!r}")
    if doc["policy"].get("min_accuracy") is not None:
        ax.axhline(doc["policy"]["min_accuracy"], color="#c0392b", linestyle=":",
                   label="accuracy floor")
    _mark(ax, doc["chosen_epsilon"], "recommended epsilon", "#c0392b")
    ax.set_xscale("log")
    ax.set_xlabel("epsilon (log scale)")
    ax.set_ylabel("test accuracy")
    ax.set_title("Epsilon vs accuracy", fontsize=10)
    ax.legend(fontsize=7)
    return figure_data_uri(fig)


def _risk_fig(doc: Mapping[str, Any]) -> str:
    rows = doc["per_epsilon"]
    eps = [r["epsilon"] for r in rows]
    fig = new_figure(9.0, 3.8)
    ax1, ax2 = fig.subplots(1, 2)
    for a in doc["attack_weights"]:
        aucs = [r["attacks"][a].get("auc") for r in rows]
        if all(v is not None for v in aucs):
            ax1.plot(eps, aucs, "o-", label=a)
    base = (doc.get("baseline") or {}).get("auc") or {}
    for a, v in base.items():
        ax1.axhline(v, linestyle=":", linewidth=0.8, color="#555555")
        ax1.annotate(f"{a} no DP", xy=(eps[-1], v), fontsize=7, ha="right", va="bottom")
    ax1.axhline(0.5, color="#999999", linewidth=0.6)
    ax1.set_xscale("log")
    ax1.set_xlabel("epsilon (log scale)")
    ax1.set_ylabel("attack AUC")
    ax1.set_title("Attack AUC (0.5 = guessing)", fontsize=10)
    if ax1.get_legend_handles_labels()[0]:
        ax1.legend(fontsize=7)
    else:
        ax1.text(0.5, 0.6, "no AUC recorded", transform=ax1.transAxes, ha="center")
    ax2.fill_between(eps, [r["risk_lower"] for r in rows], [r["risk_upper"] for r in rows],
                     color="#e0a526", alpha=0.3,
                     label=f"{doc['credible_level']:.0%} credible band")
    ax2.plot(eps, [r["risk_mean"] for r in rows], "-", color="#c0392b",
             label="posterior mean (monotone)")
    ax2.plot(eps, [r["risk_mean_raw"] for r in rows], "o", color="#c0392b", label="raw mean")
    if doc["policy"].get("max_risk") is not None:
        ax2.axhline(doc["policy"]["max_risk"], color="#555555", linestyle=":", label="risk cap")
    _mark(ax2, doc["chosen_epsilon"], "recommended epsilon", "#c0392b")
    ax2.set_xscale("log")
    ax2.set_xlabel("epsilon (log scale)")
    ax2.set_ylabel("integral risk R (advantage)")
    ax2.set_title("Membership risk R(eps)", fontsize=10)
    ax2.legend(fontsize=7)
    return figure_data_uri(fig)


def _loss_fig(doc: Mapping[str, Any]) -> str:
    rows = doc["per_epsilon"]
    eps = [r["epsilon"] for r in rows]
    fig = new_figure(9.0, 3.8)
    ax1, ax2 = fig.subplots(1, 2)
    ax1.plot(eps, [r["loss_mean_rule"] for r in rows], "o-", label="L, posterior mean")
    ax1.plot(eps, [r["loss_risk_averse"] for r in rows], "s-", label="L, risk-averse")
    _mark(ax1, doc["mean_rule_epsilon"], "eps* mean rule", "#4a6fa5")
    _mark(ax1, doc["chosen_epsilon"], "recommended", "#c0392b")
    ax1.set_xscale("log")
    ax1.set_xlabel("epsilon (log scale)")
    ax1.set_ylabel("composite loss L")
    ax1.set_title(f"L = {doc['policy']['w_risk']:.2f} R + {doc['policy']['w_util']:.2f} U",
                  fontsize=10)
    ax1.legend(fontsize=7)
    r_ = [r["risk_mean"] for r in rows]
    u_ = [r["utility_loss"] for r in rows]
    ax2.scatter(r_, u_, color="#999999")
    front = sorted((r["risk_mean"], r["utility_loss"]) for r in rows if r["pareto"])
    ax2.plot([p[0] for p in front], [p[1] for p in front], "o-", color="#4c9a2a",
             label="Pareto frontier")
    place_labels(ax2, [(r["risk_mean"], r["utility_loss"]) for r in rows],
                 [f"{r['epsilon']:g}" for r in rows])
    ax2.set_xlabel("risk R (posterior mean)")
    ax2.set_ylabel("utility loss U")
    ax2.set_title("Risk vs utility loss (labels: epsilon)", fontsize=10)
    ax2.legend(fontsize=7)
    return figure_data_uri(fig)


#: Above this epsilon the report warns that the guarantee is weak.
WEAK_EPSILON = 8.0


def _best_attack(doc: Mapping[str, Any]) -> tuple[str, float, float] | None:
    """(attack, epsilon, success rate) of the attack that guessed best anywhere."""
    best = None
    for r in doc["per_epsilon"]:
        for a, s in r["attacks"].items():
            rate = s["successes"] / s["trials"] if s["trials"] else 0.5
            if best is None or rate > best[2]:
                best = (a, r["epsilon"], rate)
    return best


def _pairs(d: Mapping[str, Any] | None) -> str:
    """'a: 1,200; b: 300' instead of a raw dict on the page."""
    if not d:
        return ""
    return "; ".join(f"{str(k).replace('_', ' ')}: {v:,}" if isinstance(v, int)
                     else f"{str(k).replace('_', ' ')}: {v}" for k, v in d.items())


def plain_summary(doc: Mapping[str, Any], source: str = "") -> Section:
    """The first page, for people: what was released, what an attacker could learn, the
    recommendation and why, how sure we are. Rounded numbers, terms defined where used."""
    chosen = doc["chosen_epsilon"]
    unc = doc.get("uncertainty") or {}
    rows = {r["epsilon"]: r for r in doc["per_epsilon"]}
    data = doc.get("data") or {}
    settings = doc.get("settings") or {}
    what = (f"What was released: a {settings.get('model', 'machine-learning')} model that "
            f"predicts {data.get('target', 'the target')!s} from {data.get('rows', '?')} rows"
            + (f" of {source}" if source else "") + ", trained with DP-SGD (differentially "
            "private stochastic gradient descent: every person's influence on each training "
            "step is capped and hidden under random noise). Epsilon measures how much the "
            "model can reveal about any one person: smaller is more private; 1 or less is "
            "strong, above 8 is weak.")
    notes = " ".join(doc.get("notes", []))
    best = _best_attack(doc)
    if "at chance" in notes or best is None:
        learn = ("What an attacker could learn: we tried to tell, for individual people, "
                 "whether their record was used in training (a membership attack). Every "
                 "attack was at chance, about as good as a coin toss, at every epsilon. This "
                 "shows no measurable leak, but it does not prove safety: a stronger attacker "
                 "might do better, and only epsilon itself is a guarantee.")
    else:
        a, e, rate = best
        learn = (f"What an attacker could learn: we tried to tell, for individual people, "
                 f"whether their record was used in training (a membership attack). The "
                 f"strongest attack ({a}) was right {rate:.0%} of the time at epsilon {e:g}, "
                 "where a coin toss is right 50% of the time.")
    major = doc.get("majority_baseline") or {}
    base_text = (f" Always predicting the most common label ({major['majority_class']!r}) "
                 f"would be right {major['accuracy']:.0%} of the time: a model must beat that "
                 "to have learnt anything." if major.get("accuracy") is not None else "")
    if doc.get("learnt_nothing"):
        rec = ("Recommendation: none. The models learnt nothing useful, so their accuracy "
               f"cannot justify an epsilon: {doc['reason']}." + base_text)
    elif chosen is None:
        rec = ("Recommendation: none of the tried epsilons meets this policy's limits; "
               f"{doc['reason']}.")
    else:
        r = rows[chosen]
        top = max(doc["per_epsilon"], key=lambda x: x["accuracy"])
        rec = (f"Recommendation: use epsilon {chosen:g}. Its model is right "
               f"{r['accuracy']:.0%} of the time (the best tried: {top['accuracy']:.0%} at "
               f"epsilon {top['epsilon']:g}). Larger epsilons are not better by more than the "
               "measurements' own noise, so the more private choice is taken." + base_text)
    sure = ""
    cands = {c["epsilon"]: c for c in unc.get("candidates", [])}
    if chosen is not None and cands:
        iv = unc.get("interval")
        sure = (f"How sure we are: when the measurements are re-drawn within their noise, "
                f"epsilon {chosen:g} is the single best choice {cands[chosen]['prob_best']:.0%} "
                "of the time")
        if iv:
            sure += (f"; a re-run with other random seeds would recommend an epsilon from "
                     f"{iv[0]:g} to {iv[1]:g} (95% of re-runs).")
        else:
            sure += "."
    paras = [what, learn, rec] + ([sure] if sure else [])
    if chosen is not None and chosen > WEAK_EPSILON:
        paras.insert(0, f"WARNING: the recommended epsilon {chosen:g} is weak (above "
                        f"{WEAK_EPSILON:g}): it lets an attacker's confidence about any one "
                        "person grow a great deal. Consider a smaller epsilon or more data.")
    facts: dict[str, Any] = {"recommended epsilon": "none" if chosen is None else f"{chosen:g}"}
    if unc.get("interval"):
        facts["re-run range (95%)"] = f"{unc['interval'][0]:g} to {unc['interval'][1]:g}"
    if chosen is not None and chosen in rows:
        facts["accuracy at the recommendation"] = f"{rows[chosen]['accuracy']:.1%}"
    if major.get("accuracy") is not None:
        facts["majority-class baseline"] = (f"{major['accuracy']:.1%} (always "
                                            f"{major['majority_class']!r})")
    return Section("In plain words", paragraphs=paras, facts=facts, anchor="summary")


def write_report(doc: Mapping[str, Any], path: str | Path, *, title: str = "",
                 assess: Mapping[str, Any] | None = None, source: str = "") -> Path:
    """Write the report page for a result document; returns the path."""
    pol = doc["policy"]
    chosen = doc["chosen_epsilon"]
    answer = (f"Use epsilon = {chosen:g}." if chosen is not None
              else "No recommendation: the models learnt nothing (no better than the "
              "majority-class baseline)." if doc.get("learnt_nothing")
              else "No epsilon on this grid is acceptable under this policy.")
    rows = doc["per_epsilon"]
    by_eps = {r["epsilon"]: r for r in rows}
    g = (by_eps.get(chosen) or {}).get("guarantee") if chosen is not None else None
    facts: dict[str, Any] = {
        "recommended epsilon": "none acceptable" if chosen is None else chosen,
        "posterior-mean rule": "none acceptable" if doc["mean_rule_epsilon"] is None
        else doc["mean_rule_epsilon"],
        "policy": pol["name"], "w_risk": pol["w_risk"], "w_util": pol["w_util"],
        "credible level": doc["credible_level"],
        "risk cap": "none" if pol["max_risk"] is None else pol["max_risk"],
        "accuracy floor": "none" if pol["min_accuracy"] is None else pol["min_accuracy"],
        "prior": f"Beta({doc['prior']['alpha']:g}, {doc['prior']['beta']:g}) "
                 f"({doc['prior']['name']})",
        "training runs": doc["training_runs"],
    }
    if chosen is not None:
        r = by_eps[chosen]
        facts.update({"accuracy at eps*": r["accuracy"], "risk at eps* (mean)": r["risk_mean"],
                      f"risk at eps* ({doc['credible_level']:.0%} bound)": r["risk_upper"]})
    why = [doc["reason"], f"Posterior-mean rule: {doc['mean_rule_reason']}",
           f"Why these weights: {pol['why']}",
           "Risk is the membership advantage max(0, 2 theta - 1) of a balanced guess "
           "(0 = guessing, 1 = always right), theta the attack's success rate with a Beta "
           "posterior from its (successes, trials); the integral risk weights the attacks "
           f"{', '.join(f'{a} {w:.2f}' for a, w in doc['attack_weights'].items())}.",
           "The risk-averse point rule uses the upper credible bound; it never picks a "
           "larger epsilon than the posterior-mean rule. Curves are monotone fits, so one noisy "
           "grid point cannot decide the answer."]
    unc = doc.get("uncertainty") or {}
    if unc.get("candidates"):
        why.insert(1, "Uncertainty: " + unc.get("rule", "") + ". P(best) per epsilon: "
                   + ", ".join(f"{c['epsilon']:g}: {c['prob_best']:.0%}"
                               for c in unc["candidates"])
                   + f". The point rule alone (argmin of the loss) would pick "
                   f"{doc.get('argmin_epsilon')}.")
    sections = [plain_summary(doc, source),
                Section("Answer", paragraphs=[answer, *why], facts=facts)]
    sections.append(Section(
        "Curves", images=[
            Image(_accuracy_fig(doc), "epsilon vs accuracy",
                  "Test accuracy per epsilon (error bars: spread over seeds)."),
            Image(_risk_fig(doc), "epsilon vs attack AUC and risk",
                  "Attack AUC per attack, and the integral risk with its credible band."),
            Image(_loss_fig(doc), "composite loss and Pareto frontier",
                  "Composite loss under both rules; Pareto frontier of (risk, utility loss)."),
        ]))
    table_rows = []
    for r in rows:
        beat = r.get("better_than_baseline")
        table_rows.append([r["epsilon"], r["accuracy"], "-" if beat is None else
                           ("yes" if beat else "NO"), r["accuracy_std"], r["risk_mean"],
                           r["risk_lower"], r["risk_upper"], r["utility_loss"],
                           r["loss_mean_rule"], r["loss_risk_averse"],
                           "yes" if r["feasible_risk_averse"] else "no",
                           "yes" if r["pareto"] else "no"])
    hl = [i for i, r in enumerate(rows) if r["epsilon"] == chosen]
    att_rows = []
    for r in rows:
        for a, s in r["attacks"].items():
            att_rows.append([r["epsilon"], a, s["successes"], s["trials"], s["success_mean"],
                             s["risk_mean"], s["risk_lower"], s["risk_upper"],
                             "" if s.get("auc") is None else s["auc"]])
    sections.append(Section("Per epsilon", tables=[
        Table(["epsilon", "accuracy", "beats majority", "acc. std", "risk mean", "risk low",
               "risk high", "utility loss", "L (mean)", "L (risk-averse)", "acceptable", "Pareto"],
              table_rows, caption="Integral risk and composite loss per grid epsilon",
              highlight=hl),
        Table(["epsilon", "attack", "successes", "trials", "success rate (post. mean)",
               "risk mean", "risk low", "risk high", "AUC"], att_rows,
              caption="Beta posterior per attack")]))
    g_rows = []
    for r in rows:
        gd = r.get("guarantee") or {}
        g_rows.append([r["epsilon"], gd.get("epsilon", ""), gd.get("delta", ""),
                       gd.get("accountant", ""), gd.get("mechanism", "")])
    base = doc.get("baseline") or {}
    guar_par = ["Every model on the grid was trained with DP-SGD (Poisson sampling, per-example "
                "clipping, Gaussian noise calibrated by the accountant below); the guarantee is "
                "record-level (add/remove one record)."]
    if g:
        guar_par.append(f"At eps*: epsilon = {g.get('epsilon')}, delta = {g.get('delta')}, "
                        f"accountant {g.get('accountant')}.")
    if base:
        guar_par.append(f"The non-private baseline (accuracy {base.get('accuracy', 0):.3f}) "
                        f"is NOT private: {base.get('guarantee_text', '')}")
    sections.append(Section("Guarantee and accountant", paragraphs=guar_par, tables=[
        Table(["grid epsilon", "epsilon", "delta", "accountant", "mechanism"], g_rows)]))
    sens = doc["prior_sensitivity"]
    stable = len({(s["risk_averse_epsilon"]) for s in sens}) == 1
    sections.append(Section(
        "Prior sensitivity",
        paragraphs=["eps* recomputed under each named prior on the attack success rate. "
                    + ("The answer does not depend on the prior." if stable else
                       "The answer DEPENDS on the prior: more attack trials would settle it.")],
        tables=[Table(["prior", "alpha", "beta", "eps* (mean rule)", "eps* (risk-averse)"],
                      [[s["prior"], s["alpha"], s["beta"],
                        "none" if s["mean_rule_epsilon"] is None else s["mean_rule_epsilon"],
                        "none" if s["risk_averse_epsilon"] is None else s["risk_averse_epsilon"]]
                       for s in sens])]))
    st = doc["settings"]
    sections.append(Section("Attack and training settings", facts={
        "attacks": ", ".join(st.get("attacks", [])),
        "shadow models": st.get("shadow_models"), "LiRA models": st.get("lira_models"),
        "model": f"{st.get('model')} hidden {st.get('hidden')}", "epochs": st.get("epochs"),
        "batch size": st.get("batch_size"), "learning rate": st.get("lr"),
        "clip": st.get("clip"), "seeds": st.get("seeds"),
        "adaptive": doc["adaptive"], "grid": doc["grid"],
        "evaluated (in order)": doc["evaluated_order"]},
        paragraphs=["Members are the target's training rows, non-members as many held-out test "
                    "rows; decision thresholds are set on attacker-side data only. Attacks run "
                    "against the first seed's model; other seeds measure accuracy spread."]))
    data = doc["data"]
    sections.append(Section("Data", facts={
        "rows used": data.get("rows"), "target": data.get("target"),
        "classes (rows)": _pairs(data.get("class_counts")),
        "features (encoded)": data.get("features_encoded"),
        "split (rows)": _pairs(data.get("split"))}))
    if assess:
        attrs = [a for a in assess.get("attributes", []) if isinstance(a, Mapping)]
        recs = [r if isinstance(r, str) else
                f"{r.get('action', '')} {', '.join(map(str, r.get('target', [])))}: "
                f"{r.get('reason', '')}"
                for r in assess.get("recommendations", []) if isinstance(r, str | Mapping)]
        sections.append(Section(
            "Assessment (privlab assess)",
            facts={k: v for k, v in assess.items() if isinstance(v, str | int | float)},
            tables=[Table(["attribute", "distinct", "richness", "tier"],
                          [[a.get("name", ""), a.get("distinct", ""), a.get("richness", ""),
                            a.get("tier", "")] for a in attrs])] if attrs else [],
            items=recs))
    if doc["notes"]:
        sections.append(Section("Notes", items=list(doc["notes"])))
    return write_page(path, title or "Choosing epsilon", sections,
                      exact_values="accuracies, attack successes, AUCs, class and split "
                                   "counts",
                      subtitle=answer, meta={"policy": pol["name"],
                                             "chosen epsilon": chosen})
