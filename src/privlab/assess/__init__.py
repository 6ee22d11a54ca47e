"""Assess: which attributes and combinations identify people (the attribute-based PIA
article) and how the privacy models (k-anonymity, l-diversity, t-closeness, delta-presence)
and re-identification risk read on a quasi-identifier set (the review "Differential Privacy in
Deep Learning"; both in docs/references.md). None of this is differential privacy."""

from privlab.assess.combinations import Combination, SetStats, risky_combinations
from privlab.assess.encode import EncodedTable, combine_codes, encode_column, encode_table
from privlab.assess.models import (
    DeltaPresence,
    Grouping,
    PrivacyModelReport,
    delta_presence,
    entropy_l_diversity,
    evaluate_privacy,
    k_anonymity,
    l_diversity,
    recursive_cl_diversity,
    reidentification_risk,
    t_closeness,
)
from privlab.assess.pipeline import Assessment, AttributeResult, assess
from privlab.assess.richness import (
    TIER_MEANING,
    TIERS,
    Thresholds,
    assign_tier,
    parse_thresholds,
    richness_from_counts,
)

__all__ = [
    "TIERS", "TIER_MEANING", "Assessment", "AttributeResult", "Combination", "DeltaPresence",
    "EncodedTable", "Grouping", "PrivacyModelReport", "SetStats", "Thresholds", "assess",
    "assign_tier", "combine_codes", "delta_presence", "encode_column", "encode_table",
    "entropy_l_diversity", "evaluate_privacy", "k_anonymity", "l_diversity",
    "parse_thresholds", "recursive_cl_diversity", "reidentification_risk",
    "richness_from_counts", "risky_combinations", "t_closeness",
]
