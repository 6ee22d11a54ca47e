"""Recommendations: turn richness tiers, escalations and privacy models into actions.

Actions are `drop` (a direct or near identifier), `generalize` (coarsen values, or use
`privlab anonymize`), `protect_dp` (publish statistics with differential privacy instead of
records) and `keep`. The rules are simple and stated in each reason, so a reviewer can check
them; they advise, they do not decide.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from privlab.assess.result import Assessment

#: A `hide` attribute acts as an identifier when at least this share of records is unique on
#: it, or when its richness is at least NEAR_UNIQUE_RICHNESS (almost every pair of records
#: differs on it).
NEAR_UNIQUE_SHARE = 0.25
NEAR_UNIQUE_RICHNESS = 0.99
ORDER = {"drop": 0, "protect_dp": 1, "generalize": 2, "keep": 3}


def _pct(x: float) -> str:
    if 0 < x < 0.001:
        return "<0.1%"
    return f"{100 * x:.1f}%"


def identifies_alone(k: int, target_k: int) -> bool:
    """A value shared by fewer than `target_k` records singles those people out, whatever the
    richness tier says: richness measures how varied a column is, k how small its smallest
    group is."""
    return k < target_k


def group_words(unique_share: float, k: int, target_k: int) -> str:
    """'12% of people unique', 'no one unique, but groups as small as 3', or 'no one unique,
    every value shared by at least 139': the exposure in words that never contradict k."""
    if unique_share > 0:
        return f"{share_words(unique_share)} of people unique"
    if identifies_alone(k, target_k):
        return f"no one unique, but groups as small as {k}"
    return f"no one unique, every value shared by at least {k}"


def share_words(x: float) -> str:
    """A share of people, rounded for people: "none", "under 1%", or whole percent."""
    if x <= 0:
        return "none"
    return "under 1%" if x < 0.01 else f"{x:.0%}"


def recommend(result: Assessment, target_k: int = 5) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []
    for d in result.direct_identifiers:
        recs.append({"target": [d["name"]], "action": "drop",
                     "reason": f"{d['meaning']} in the declared schema: a direct identifier, "
                               "not assessed; never publish it (drop it, or keep it apart as "
                               "a pseudonym key)"})
    pm = result.privacy_models
    sensitive = pm.sensitive if pm is not None else None
    for a in result.attributes:
        if a.tier == "hide" and (a.unique_share >= NEAR_UNIQUE_SHARE
                                 or a.richness >= NEAR_UNIQUE_RICHNESS):
            recs.append({"target": [a.name], "action": "drop",
                         "reason": f"richness {a.richness:.3f} and {_pct(a.unique_share)} of "
                                   "records are unique on it: it identifies people on its own; "
                                   "drop it or replace it with a pseudonym kept apart"})
        elif a.name == sensitive:
            recs.append({"target": [a.name], "action": "protect_dp",
                         "reason": f"sensitive attribute (tier {a.tier}): publish counts or "
                                   "means of it with differential privacy (privlab release) "
                                   "rather than record-level values"})
        elif a.tier == "hide" and not identifies_alone(a.k, target_k):
            recs.append({"target": [a.name], "action": "generalize",
                         "reason": f"richness {a.richness:.3f} is in the 'must be hidden' tier, "
                                   f"but no record is unique on it and every value is shared by "
                                   f"at least {a.k} records (k = {a.k}): it does not identify "
                                   "anyone on its own; it does in combination with other "
                                   "attributes, so coarsen it before releasing it with them"})
        elif a.tier == "hide":
            how = ("into ranges (bins)" if a.kind == "numeric"
                   else "by merging rare values into broader categories")
            recs.append({"target": [a.name], "action": "generalize",
                         "reason": f"richness {a.richness:.3f} is in the 'must be hidden' tier "
                                   f"({_pct(a.unique_share)} unique records, k = {a.k}): "
                                   f"generalize it {how}, suppress it, or publish only DP "
                                   "statistics"})
        elif identifies_alone(a.k, target_k):
            how = ("top- or bottom-code its extreme values" if a.kind == "numeric"
                   else "merge its rare values into broader categories")
            recs.append({"target": [a.name], "action": "generalize",
                         "reason": f"richness {a.richness:.3f} (tier {a.tier}) looks harmless, "
                                   f"but its rarest value is held by {a.k} record"
                                   f"{'' if a.k == 1 else 's'} (k = {a.k} < {target_k}; "
                                   f"{_pct(a.unique_share)} unique): anyone who knows that "
                                   f"value finds them; {how}"})
        elif a.tier == "low":
            recs.append({"target": [a.name], "action": "generalize",
                         "reason": f"richness {a.richness:.3f}: low-level hiding; generalize "
                                   "lightly or restrict access, and watch its combinations"})
        else:
            recs.append({"target": [a.name], "action": "keep",
                         "reason": f"richness {a.richness:.3f}: no hiding needed on its own"})
    for c in result.combinations.combinations:
        if c.escalated:
            s = c.stats
            recs.append({"target": list(s.attributes), "action": "generalize",
                         "reason": f"together they reach richness {s.richness:.3f} (tier "
                                   f"{c.tier}, members {', '.join(c.member_tiers)}); k = {s.k}, "
                                   f"{_pct(s.unique_share)} unique: "
                                   + ("do not release them together un-generalized"
                                      if identifies_alone(s.k, target_k) else
                                      "no small group yet, but the combination is varied: "
                                      "one more known attribute may single people out")})
    if pm is not None:
        qis = list(pm.qis)
        unique = pm.risk.get("unique_share", 0.0)
        if pm.k < target_k:
            recs.append({"target": qis, "action": "generalize",
                         "reason": f"k = {pm.k} on the quasi-identifiers ({_pct(unique)} of "
                                   f"records unique): run `privlab anonymize --k {target_k}` "
                                   "(Mondrian) before release"})
        if pm.l_distinct is not None and pm.l_distinct < 2:
            recs.append({"target": [pm.sensitive], "action": "protect_dp",
                         "reason": "some class has a single sensitive value (attribute "
                                   "disclosure): anonymize with --l 2 or more, or release only "
                                   "DP aggregates"})
    recs.sort(key=lambda r: ORDER[r["action"]])
    return recs
