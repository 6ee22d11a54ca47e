"""Shared checks for the choose-epsilon documents: the answer re-derived from the document."""

from __future__ import annotations

from typing import Any

import pytest


def recompute_choice(doc: dict[str, Any]) -> float | None:
    """The epsilon the document's own rule picks from the per-candidate numbers it reports.

    risk_averse: smallest epsilon with the least loss among the feasible rows, None when no
    row is feasible. stable_one_se: among the candidates meeting the policy's constraints in
    `policy.level` of the draws (all, without constraints), the smallest epsilon whose
    expected loss is within one standard error of the least expected loss.
    """
    rows = doc["per_epsilon"]
    feasible = [r for r in rows if r["feasible_risk_averse"]]
    argmin = None
    if feasible:
        best = min(r["loss_risk_averse"] for r in feasible)
        argmin = next(r["epsilon"] for r in feasible if r["loss_risk_averse"] <= best + 1e-12)
    assert doc["argmin_epsilon"] == argmin
    if doc["rule"] == "risk_averse":
        return argmin
    policy, cands = doc["policy"], doc["uncertainty"]["candidates"]
    constrained = policy["max_risk"] is not None or policy["min_accuracy"] is not None
    ok = [c for c in cands if not constrained or c["feasible_prob"] >= policy["level"]]
    if not ok:
        return None
    best = min(c["expected_loss"] for c in ok)
    return next(c["epsilon"] for c in ok
                if c["expected_loss"] - best <= c["loss_gap_se"] + 1e-12)


@pytest.fixture
def expected_choice():
    return recompute_choice
