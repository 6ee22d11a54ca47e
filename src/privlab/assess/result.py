"""What `privlab assess` returns: `Assessment` (every number it reports, `to_dict()` its JSON)
and `AttributeResult` (one attribute's richness, tier, unique share and k).

Why a module of its own: the in-memory assessment (`assess.pipeline`), the grouped one
(`assess.grouped`) and the recommendations (`assess.recommend`) all read or build these
results; keeping them below the three lets each import them without importing the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from privlab.assess.combinations import CombinationResult
from privlab.assess.encode import MissingPolicy
from privlab.assess.models import PrivacyModelReport
from privlab.assess.richness import TIER_MEANING, TierBounds
from privlab.core.guarantee import PrivacyGuarantee

NOT_DP_REASON = ("the assessment reports exact counts, richness and class details computed "
                 "from the raw records; keep it with the data controller, do not publish it")


@dataclass(frozen=True)
class AttributeResult:
    name: str
    kind: str
    distinct: int
    richness: float
    tier: str
    unique_share: float
    k: int
    missing: int
    binned: bool
    #: bin labels over the declared bounds (with a schema and --bin-numeric; public edges)
    declared_bins: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "kind": self.kind, "distinct": self.distinct,
               "richness": self.richness, "tier": self.tier,
               "tier_meaning": TIER_MEANING[self.tier], "unique_share": self.unique_share,
               "k": self.k, "missing": self.missing, "binned": self.binned}
        if self.declared_bins is not None:
            out["declared_bins"] = list(self.declared_bins)
        return out


@dataclass
class Assessment:
    """Everything `privlab assess` reports; `to_dict()` is its JSON."""

    source: str
    rows_in: int
    rows_used: int
    missing_policy: MissingPolicy
    missing_statement: str
    attributes: list[AttributeResult]
    bounds: TierBounds
    combinations: CombinationResult
    privacy_models: PrivacyModelReport | None = None
    recommendations: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    guarantee: PrivacyGuarantee = field(default_factory=lambda: PrivacyGuarantee.not_private(
        "privacy impact assessment", NOT_DP_REASON))
    #: groups smaller than this identify people (the k the recommendations aim for)
    target_k: int = 5
    #: with a declared schema: its name, fingerprint, policy and rows (see assess.declared)
    schema: dict[str, Any] | None = None
    #: declared identifier / text columns: not assessed, flagged "never publish"
    direct_identifiers: list[dict[str, str]] = field(default_factory=list)

    def attribute(self, name: str) -> AttributeResult:
        for a in self.attributes:
            if a.name == name:
                return a
        raise KeyError(name)

    @property
    def tiers(self) -> dict[str, str]:
        return {a.name: a.tier for a in self.attributes}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source,
            "rows_in": self.rows_in,
            "rows_used": self.rows_used,
            "missing_values": {"policy": self.missing_policy,
                               "statement": self.missing_statement},
            "attributes": [a.to_dict() for a in self.attributes],
            "thresholds": self.bounds.to_dict(),
            "combinations": [c.to_dict() for c in self.combinations.combinations],
            "combination_search": {
                "candidates": self.combinations.candidates,
                "max_size": self.combinations.max_size,
                "method": "Apriori over 'none'/'low' attributes; sets in 'hide' are not "
                          "extended; escalated = tier above every member's tier",
            },
            "recommendations": self.recommendations,
            "warnings": self.warnings,
            "guarantee": self.guarantee.to_dict(),
        }
        if self.privacy_models is not None:
            out["privacy_models"] = self.privacy_models.to_dict()
        if self.schema is not None:
            out["schema"] = self.schema
        return out


__all__ = ["NOT_DP_REASON", "Assessment", "AttributeResult"]
