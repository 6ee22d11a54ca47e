"""Anonymize: Mondrian multidimensional generalization to k-anonymity (optionally l-diversity),
with information-loss metrics; the output is re-checked with `privlab.assess`. Not DP."""

from privlab.anonymize.mondrian import AnonymizationResult, mondrian, verify

__all__ = ["AnonymizationResult", "mondrian", "verify"]
