"""Recommendations: turn richness tiers, escalations and privacy models into actions.

Actions are `drop` (a direct or near identifier), `generalize` (coarsen values, or use
`privlab anonymize`), `protect_dp` (publish statistics with differential privacy instead of
records) and `keep`. The rules are simple and stated in each reason, so a reviewer can check
them; they advise, they do not decide.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from privlab.assess.pipeline import Assessment

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


def recommend(result: Assessment, target_k: int = 5) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []
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
        elif a.tier == "hide":
            how = ("into ranges (bins)" if a.kind == "numeric"
                   else "by merging rare values into broader categories")
            recs.append({"target": [a.name], "action": "generalize",
                         "reason": f"richness {a.richness:.3f} is in the 'must be hidden' tier "
                                   f"({_pct(a.unique_share)} unique records): generalize it "
                                   f"{how}, suppress it, or publish only DP statistics"})
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
                                   f"{_pct(s.unique_share)} unique: do not release them "
                                   "together un-generalized"})
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
