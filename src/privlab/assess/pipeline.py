"""`assess()`: attribute-level privacy impact assessment of the PIA article, and privacy models.

Steps: encode every attribute once (missing-value policy applied and stated), domain richness
and tier per attribute, Apriori over the harmless-looking attributes for risky combinations,
and, when quasi-identifiers are given, k / l / t / delta-presence and re-identification risk.
Recommendations turn the numbers into actions (drop, generalize, protect with DP).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from privlab.assess.combinations import SetStats, risky_combinations
from privlab.assess.encode import EncodedTable, MissingPolicy, encode_table
from privlab.assess.models import SensitiveKind, evaluate_privacy
from privlab.assess.recommend import recommend
from privlab.assess.result import (  # re-exported: their import path before issue 31
    NOT_DP_REASON,
    Assessment,
    AttributeResult,
)
from privlab.assess.richness import (
    Thresholds,
    TierBounds,
    parse_thresholds,
    resolve_bounds,
)
from privlab.data.io import require_columns
from privlab.errors import InvalidInputError
from privlab.schema.model import Schema


def attribute_results(table: EncodedTable, bounds: TierBounds | None = None,
                      thresholds: Thresholds | None = None) -> tuple[list[AttributeResult],
                                                                     TierBounds]:
    """Richness, tier, unique share and k of every encoded attribute."""
    stats = {name: SetStats.from_counts((name,), col.counts(), table.n)
             for name, col in table.columns.items()}
    if bounds is None:
        bounds = resolve_bounds([s.richness for s in stats.values()],
                                thresholds or Thresholds())
    out = []
    for name, col in table.columns.items():
        s = stats[name]
        out.append(AttributeResult(name, col.kind, s.distinct, s.richness,
                                   bounds.tier(s.richness), s.unique_share, s.k,
                                   table.missing_by_column.get(name, 0), col.binned))
    return out, bounds


def assess_steps(max_combination_size: int, privacy_models: bool) -> int:
    """How many steps `assess` reports: encoding, richness, one per combination size (2 to
    the maximum; the search may stop earlier) and the privacy models. Fixed by the options."""
    return 2 + max(max_combination_size - 1, 0) + int(privacy_models)


def combination_progress(report: Callable[[str, int, int], None],
                         total: int) -> Callable[[int], None]:
    """Apriori's `on_level(size)` as a progress step: size s starts after s steps (encoding,
    richness and the s - 2 smaller sizes)."""
    return lambda size: report(f"risky combinations of {size} attributes", size, total)


def assess(frame: pd.DataFrame, *, attributes: Sequence[str] | None = None,
           quasi_identifiers: Sequence[str] | None = None, sensitive: str | None = None,
           thresholds: str | Thresholds | None = "thirds", max_combination_size: int = 2,
           missing: MissingPolicy = "value",
           bins: int | Mapping[str, int | Sequence[float]] | None = None,
           population: pd.DataFrame | None = None, sensitive_kind: SensitiveKind = "auto",
           recursive_l: int | None = None, risk_threshold: float = 0.2, target_k: int = 5,
           source: str = "<frame>",
           progress: Callable[[str, int, int], None] | None = None,
           schema: Schema | None = None, on_invalid: str = "refuse") -> Assessment:
    """Assess a table: per-attribute richness and tiers, risky combinations, privacy models.
    `progress(stage, done, total)` follows the `assess_steps` stages.

    With a declared `schema` the rows are conformed to it (`on_invalid`), its identifier and
    text columns are flagged as direct identifiers instead of assessed, and an int `bins`
    cuts each declared number over its declared bounds (privlab.assess.declared)."""
    total = assess_steps(max_combination_size, quasi_identifiers is not None)
    report = progress or (lambda _stage, _done, _total: None)
    if max_combination_size < 1:
        raise InvalidInputError(f"--max-combination-size must be >= 1, got "
                                f"{max_combination_size}")
    bounds_spec = parse_thresholds(thresholds)
    if sensitive is not None and quasi_identifiers is None:
        raise InvalidInputError("--sensitive needs --quasi-identifiers (the classes it is "
                                "measured in)")
    if attributes is not None:
        require_columns(frame, list(attributes), "attribute")
    schema_info = None
    direct: list[dict[str, str]] = []
    if schema is not None:
        frame, population, attributes, bins, schema_info, direct = _apply_schema(
            frame, population, schema, on_invalid, attributes, quasi_identifiers, sensitive,
            bins)
    report("encoding attributes", 0, total)
    table = encode_table(frame, attributes, missing=missing, bins=bins)
    report("domain richness", 1, total)
    attrs, bounds = attribute_results(table, thresholds=bounds_spec)
    if schema is not None and isinstance(bins, Mapping):
        attrs = [replace(a, declared_bins=tuple(b.labels())) if (b := bins.get(a.name))
                 is not None else a for a in attrs]
    warnings: list[str] = []
    if bounds.note:
        warnings.append(bounds.note)
    combos = risky_combinations(table, {a.name: a.tier for a in attrs}, bounds,
                                max_size=max_combination_size,
                                on_level=combination_progress(report, total))
    warnings.extend(combos.warnings)
    result = Assessment(source=source, rows_in=table.rows_in, rows_used=table.n,
                        missing_policy=missing, missing_statement=table.missing_statement(),
                        attributes=attrs, bounds=bounds, combinations=combos,
                        warnings=warnings, schema=schema_info, direct_identifiers=direct)
    if quasi_identifiers is not None:
        report("privacy models", total - 1, total)
        used = frame
        if table.kept is not None:
            used = frame.iloc[table.kept].reset_index(drop=True)
        result.privacy_models = evaluate_privacy(
            used, quasi_identifiers, sensitive, population=population,
            sensitive_kind=sensitive_kind, recursive_l=recursive_l,
            risk_threshold=risk_threshold, missing=missing)
    result.target_k = target_k
    result.recommendations = recommend(result, target_k=target_k)
    result.warnings.append("not differential privacy: " + NOT_DP_REASON)
    return result


def _apply_schema(frame: pd.DataFrame, population: pd.DataFrame | None, schema: Schema,
                  on_invalid: str, attributes: Sequence[str] | None,
                  qis: Sequence[str] | None, sensitive: str | None,
                  bins: int | Mapping[str, Any] | None) -> tuple[Any, ...]:
    """Conform the rows, set direct identifiers apart, and bin over the declared bounds."""
    from privlab.assess.declared import (
        conform_rows,
        declared_attributes,
        refuse_direct_roles,
        schema_summary,
    )
    from privlab.schema.conform import check_policy

    policy = check_policy(on_invalid)
    refuse_direct_roles(schema, attributes, qis, sensitive)
    rows_read = len(frame)
    frame = conform_rows(frame, schema, policy)
    if population is not None:
        population = conform_rows(population, schema, policy, "--population")
    direct, attributes, bins = declared_attributes(schema, [str(c) for c in frame.columns],
                                                   attributes, bins)
    info = schema_summary(schema, policy, rows_read, len(frame), direct)
    return frame, population, attributes, bins, info, direct
