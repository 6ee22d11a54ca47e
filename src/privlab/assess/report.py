"""The HTML report of an assessment: richness chart by tier (like the PIA article's Figures 1-2),
combinations, privacy models, recommendations. Built on the shared `privlab.report` page."""

from __future__ import annotations

from pathlib import Path

from privlab.assess.recommend import group_words, identifies_alone, share_words
from privlab.assess.result import Assessment
from privlab.assess.richness import TIER_MEANING
from privlab.report import Image, Section, Table, bar_chart, fmt, pct, write_page

MAX_COMBINATION_BARS = 40
#: What an assessment page shows exactly (its NOT-DP banner, report.html).
ASSESSMENT_EXACT = "row and distinct counts, unique shares, k"


def assessment_sections(result: Assessment) -> list[Section]:
    b = result.bounds
    attrs = result.attributes
    summary_items = []
    for tier in ("hide", "low", "none"):
        names = [a.name for a in attrs if a.tier == tier]
        summary_items.append(f"{TIER_MEANING[tier]} ({tier}): {', '.join(names) or 'none'}")
    escalated = [c for c in result.combinations.combinations if c.escalated]
    summary_items.append(f"escalated combinations: {len(escalated)} of "
                         f"{len(result.combinations.combinations)} examined")
    if result.direct_identifiers:
        summary_items.insert(0, "direct identifiers (declared in the schema; not assessed, "
                                "never publish them): " + ", ".join(
                                    f"{d['name']} ({d['type']})"
                                    for d in result.direct_identifiers))
    sections = [Section(
        "Summary",
        paragraphs=[f"Missing values: {result.missing_statement}.",
                    "Richness K = 1 - sum_j (|v_j| / n)^2 (the Gini index of the attribute's "
                    "values): near 1 when values are nearly unique (identifying), near 0 when "
                    "one value dominates."],
        facts={"records used": result.rows_used, "records read": result.rows_in,
               "attributes": len(attrs), "thresholds": b.thresholds.describe(),
               "low cut": round(b.low, 4), "high cut": round(b.high, 4),
               **({"declared schema": f"{result.schema['name']} "
                                      f"({result.schema['fingerprint']})"}
                  if result.schema is not None else {})},
        items=summary_items + [w for w in result.warnings
                               if not w.startswith("not differential privacy")],
    )]
    chart = bar_chart([a.name for a in attrs], [a.richness for a in attrs],
                      categories=[a.tier for a in attrs], ylim=(0, 1.08),
                      ylabel="domain richness K", title="Attributes and privacy tiers",
                      hlines=[(b.low, f"low {b.low:.3f}"), (b.high, f"high {b.high:.3f}")])
    sections.append(Section(
        "Domain richness",
        images=[Image(chart, "bar chart of domain richness per attribute, coloured by tier",
                      "Horizontal hatching: no hiding needed; vertical: low-level hiding; "
                      "solid: must be hidden.")],
        tables=[Table(["attribute", "kind", "distinct", "richness", "tier", "unique share",
                       "k", "missing"],
                      [[a.name, a.kind + (" (binned)" if a.binned else ""), a.distinct,
                        a.richness, a.tier, pct(a.unique_share, 2), a.k, a.missing]
                       for a in attrs],
                      caption="Per-attribute richness, tier, share of records unique on the "
                              "attribute and its k (smallest value count)")],
    ))
    combos = sorted(result.combinations.combinations,
                    key=lambda c: (not c.escalated, -c.stats.richness))
    combo_rows = [[" + ".join(c.attributes), c.stats.richness, c.tier,
                   ", ".join(c.member_tiers), "yes: DO NOT PUBLISH" if c.escalated else "no",
                   pct(c.stats.unique_share, 2), c.stats.k, c.stats.distinct] for c in combos]
    combo_images = []
    if combos:
        top = combos[:MAX_COMBINATION_BARS]
        combo_images.append(Image(
            bar_chart([" + ".join(c.attributes) for c in top], [c.stats.richness for c in top],
                      categories=[c.tier for c in top], ylim=(0, 1.08),
                      ylabel="joint richness", title="Attribute combinations",
                      hlines=[(b.low, "low"), (b.high, "high")], value_labels=len(top) <= 25),
            "bar chart of joint richness of attribute combinations"))
    cand = result.combinations.candidates
    sections.append(Section(
        "Risky combinations",
        paragraphs=[f"Apriori over the {len(cand)} attributes tagged 'none' or 'low' "
                    f"({', '.join(cand) or '-'}), up to {result.combinations.max_size} "
                    "attributes per set. A set is escalated when its joint richness falls in a "
                    "higher tier than every member; sets in 'hide' are not extended. Unique "
                    "share and k show what richness alone misses."],
        images=combo_images,
        tables=[Table(["attributes", "richness", "tier", "member tiers", "escalated",
                       "unique share", "k", "distinct"], combo_rows,
                      highlight=[i for i, c in enumerate(combos) if c.escalated])]
        if combo_rows else [],
        items=[] if combo_rows else ["fewer than two candidate attributes: nothing to combine"],
    ))
    pm = result.privacy_models
    if pm is not None:
        facts = {"quasi-identifiers": ", ".join(pm.qis), "equivalence classes": pm.classes,
                 "k (k-anonymity)": pm.k}
        if pm.sensitive is not None:
            facts.update({"sensitive attribute": pm.sensitive, "distinct l": pm.l_distinct,
                          "entropy l": round(pm.entropy_l, 4),
                          f"recursive (c, l={pm.recursive_l}): c": pm.recursive_c,
                          "t (t-closeness)": round(pm.t, 6), "t distance": pm.t_distance})
        if pm.delta is not None:
            facts.update({"delta-presence min": pm.delta.delta_min,
                          "delta-presence max": pm.delta.delta_max})
        risk = pm.risk
        risk_rows = []
        for who in ("prosecutor", "journalist"):
            r = risk[who]
            risk_rows.append([who, r["highest"], r["average"], pct(r["records_at_highest_risk"]),
                              pct(r["records_above_threshold"]), r.get("note", "")])
        risk_rows.append(["marketer", "", risk["marketer"]["average"], "", "",
                          risk["marketer"].get("note", "")])
        detail = pm.details.head(pm.detail_rows)
        sections.append(Section(
            "Privacy models",
            paragraphs=[f"Share of records unique on the quasi-identifiers: "
                        f"{pct(risk['unique_share'], 2)}. None of these models is differential "
                        "privacy; they describe this table's exposure to linkage."],
            facts=facts,
            tables=[Table(["attacker", "highest risk", "average risk", "records at highest",
                           f"records above {risk['threshold']:g}", "note"], risk_rows,
                          caption="Re-identification risk"),
                    Table(list(detail.columns),
                          [[fmt(v) if isinstance(v, float) else v for v in row]
                           for row in detail.itertuples(index=False)],
                          caption=f"Riskiest {len(detail)} of {pm.classes} equivalence classes "
                                  "(smallest first, then largest t)")],
        ))
    sections.append(Section(
        "Recommendations",
        tables=[Table(["action", "attributes", "reason"],
                      [[r["action"], ", ".join(r["target"]), r["reason"]]
                       for r in result.recommendations])],
        paragraphs=["drop: identifies people on its own; generalize: coarsen values or run "
                    "`privlab anonymize`; protect_dp: publish DP statistics instead of records; "
                    "keep: no action on its own."],
    ))
    return sections


#: How many of the riskiest combinations the plain-language section names.
PLAIN_COMBINATIONS = 6


def plain_section(result: Assessment) -> Section:
    """The first section, for people: what was measured, what an attacker could learn (with
    DO NOT PUBLISH beside the riskiest attributes and combinations), how sure we are; rounded
    numbers and every term defined where it is used."""
    attrs = result.attributes
    combos = result.combinations.combinations
    what = (f"What was measured: how well each of the {len(attrs)} attributes (columns) of "
            f"{result.source} identifies a person on its own, and how well harmless-looking "
            f"attributes do together (sets of up to {result.combinations.max_size}), over "
            f"{result.rows_used} records. Richness, from 0 to 1, is near 1 when almost every "
            "record has its own value (like a name) and near 0 when one value dominates. The "
            "unique share is the share of people who are the only one with their value: "
            "anyone who knows that value about them finds their record.")
    tk = result.target_k
    # identifying: a group smaller than target_k, whatever the richness tier (a column with
    # one person holding a rare value is tier "none" by richness, yet singles them out)
    alone = sorted((a for a in attrs if identifies_alone(a.k, tk)),
                   key=lambda a: (-a.unique_share, a.k))
    varied = [a for a in attrs if a.tier == "hide" and not identifies_alone(a.k, tk)]
    rank = {"hide": 0, "low": 1, "none": 2}
    escalated = sorted((c for c in combos if c.escalated),
                       key=lambda c: (rank.get(c.tier, 3), -c.stats.unique_share))
    risky = [c for c in escalated if identifies_alone(c.stats.k, tk)]
    broad = [c for c in escalated if not identifies_alone(c.stats.k, tk)]
    learn = "What an attacker could learn: "
    if result.direct_identifiers:
        learn += ("the declared schema marks these columns as direct identifiers, so they "
                  "were not assessed: " + "; ".join(
                      f"{d['name']} ({d['type']}, DO NOT PUBLISH)"
                      for d in result.direct_identifiers) + ". ")
    if alone:
        learn += ("these attributes identify people on their own: "
                  + "; ".join(f"{a.name} (richness {a.richness:.2f}, "
                              f"{group_words(a.unique_share, a.k, tk)}, DO NOT PUBLISH)"
                              for a in alone) + ". ")
    if varied:
        learn += ("These attributes are varied (richness tier 'must be hidden') but do not "
                  "identify anyone on their own: "
                  + "; ".join(f"{a.name} (richness {a.richness:.2f}, "
                              f"{group_words(a.unique_share, a.k, tk)})" for a in varied)
                  + "; they matter in combination with other attributes. ")
    if risky:
        shown = risky[:PLAIN_COMBINATIONS]
        learn += ("These combinations identify people although each attribute alone looks "
                  "harmless: " + "; ".join(
                      f"{' + '.join(c.attributes)} (richness {c.stats.richness:.2f}, "
                      f"{group_words(c.stats.unique_share, c.stats.k, tk)}, DO NOT PUBLISH)"
                      for c in shown)
                  + (f"; and {len(risky) - len(shown)} more in the table below"
                     if len(risky) > len(shown) else "") + ". ")
    if broad:
        learn += (f"{len(broad)} more combination{'s are' if len(broad) > 1 else ' is'} "
                  f"varied but every group holds at least {tk} people (table below). ")
    if not alone and not risky:
        learn += ("no attribute and no examined combination singles anyone out (every group "
                  f"holds at least {tk} people); records can still be linked on attributes "
                  "this assessment did not examine.")
    learn = learn.rstrip()
    paras = [what, learn]
    pm = result.privacy_models
    if pm is not None:
        risk = pm.risk
        paras.append(
            f"On {', '.join(pm.qis)} together (the quasi-identifiers: facts an attacker may "
            f"already know about someone), {share_words(risk['unique_share'])} of people are "
            f"unique and the smallest group of look-alikes has {pm.k} "
            f"{'person' if pm.k == 1 else 'people'} (k-anonymity k = {pm.k}): "
            f"an attacker who knows those facts about someone picks out their record with a "
            f"chance of up to {risk['prosecutor']['highest']:.0%}.")
    paras.append(
        "How sure we are: these are exact counts on this table, not estimates, so there is "
        "no sampling noise in them. They describe this table only: another sample of the same "
        "people can give other numbers, and an attacker who knows more facts than the "
        "combinations examined here can do better. The tiers depend on the chosen cut points: "
        f"{result.bounds.thresholds.describe()}. None of this is differential privacy: it "
        "measures exposure, it does not protect anyone.")
    facts = {"records assessed": result.rows_used,
             "attributes that identify people on their own": len(alone),
             "risky combinations (DO NOT PUBLISH)": len(risky)}
    if risky:
        facts["highest unique share of a combination"] = share_words(
            max(c.stats.unique_share for c in risky))
    return Section("In plain words", paragraphs=paras, facts=facts, anchor="plain-words")


def write_assessment_report(result: Assessment, path: str | Path) -> Path:
    """Write the assessment as one self-contained HTML page (atomically), plain words first."""
    return write_page(path, "Privacy impact assessment",
                      [plain_section(result)] + assessment_sections(result),
                      exact_values=ASSESSMENT_EXACT,
                      subtitle=f"{result.source}: attribute-level richness, risky "
                               "combinations and privacy models",
                      guarantee=result.guarantee)
