"""Risky combinations (the PIA article, section 3.2): Apriori over the harmless-looking attributes.

Attributes tagged "no hiding needed" / "low-level hiding" are combined level by level; the
support of a set is its joint value counts and its joint richness uses them. A set that lands
in a higher tier than each of its members is *escalated*. A set in the `hide` tier is not
extended (every superset refines its partition, so it can only be richer: Apriori's
anti-monotone pruning). Beyond the PIA article every set also reports the share of records unique
on it and its k (smallest class), which richness alone misses.

All sets are counted from one table of the distinct candidate tuples with their counts (a
data cube's base cuboid), so the full data is scanned once however many sets are examined.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations as iter_combinations
from typing import Any

import numpy as np

from privlab.assess.encode import EncodedTable, combine_codes, distinct_tuples
from privlab.assess.richness import TIER_RANK, TierBounds, richness_from_counts


@dataclass(frozen=True)
class SetStats:
    """Counting facts about one attribute set's joint values."""

    attributes: tuple[str, ...]
    distinct: int
    richness: float
    unique_share: float
    k: int
    max_support: int

    @classmethod
    def from_counts(cls, attributes: Sequence[str], counts: np.ndarray, n: int) -> SetStats:
        counts = counts[counts > 0]
        return cls(
            attributes=tuple(attributes),
            distinct=int(len(counts)),
            richness=richness_from_counts(counts, n),
            unique_share=float(counts[counts == 1].sum()) / n,
            k=int(counts.min()),
            max_support=int(counts.max()),
        )


@dataclass(frozen=True)
class Combination:
    """An attribute set with its tier and whether combining escalated it."""

    stats: SetStats
    tier: str
    member_tiers: tuple[str, ...]
    escalated: bool

    @property
    def attributes(self) -> tuple[str, ...]:
        return self.stats.attributes

    def to_dict(self) -> dict[str, Any]:
        s = self.stats
        return {
            "attributes": list(s.attributes),
            "size": len(s.attributes),
            "richness": s.richness,
            "tier": self.tier,
            "member_tiers": list(self.member_tiers),
            "escalated": self.escalated,
            "unique_share": s.unique_share,
            "k": s.k,
            "distinct": s.distinct,
            "max_support": s.max_support,
        }


@dataclass
class CombinationResult:
    combinations: list[Combination]
    candidates: list[str]
    max_size: int
    warnings: list[str] = field(default_factory=list)


class _Cube:
    """Distinct tuples of the candidate attributes with their counts (the base cuboid)."""

    def __init__(self, table: EncodedTable, attributes: Sequence[str]) -> None:
        cols = sorted((table[a] for a in attributes), key=lambda c: c.card)
        parts, counts = distinct_tuples([c.codes for c in cols], [c.card for c in cols])
        self.weights = counts.astype(np.float64)
        self.codes = dict(zip((c.name for c in cols), parts, strict=True))
        self.cards = {c.name: c.card for c in cols}
        self.n = table.n

    def counts(self, attributes: Sequence[str]) -> np.ndarray:
        g, n_groups = combine_codes([self.codes[a] for a in attributes],
                                    [self.cards[a] for a in attributes])
        return np.rint(np.bincount(g, weights=self.weights, minlength=n_groups)).astype(np.int64)


def risky_combinations(table: EncodedTable, tiers: dict[str, str], bounds: TierBounds,
                       max_size: int = 2, candidate_tiers: Sequence[str] = ("none", "low"),
                       max_sets: int = 20000,
                       on_level: Callable[[int], None] | None = None) -> CombinationResult:
    """Apriori over attributes in `candidate_tiers`, up to sets of `max_size` attributes
    (`on_level(size)` is called as each size starts: for a progress display)."""
    candidates = [a for a in table.columns if tiers.get(a) in candidate_tiers]
    if max_size < 2 or len(candidates) < 2:
        return CombinationResult([], candidates, max_size)
    cube = _Cube(table, candidates)
    return apriori(candidates, tiers, bounds, max_size, max_sets,
                   lambda sets: {s: SetStats.from_counts(s, cube.counts(s), table.n)
                                 for s in sets}, on_level)


def apriori(candidates: list[str], tiers: dict[str, str], bounds: TierBounds, max_size: int,
            max_sets: int, stats_for: Callable[[list[tuple[str, ...]]],
                                               Mapping[tuple[str, ...], SetStats]],
            on_level: Callable[[int], None] | None = None) -> CombinationResult:
    """The Apriori search shared by every counting engine: `stats_for(sets)` returns the
    statistics of each candidate set of one level (in memory, DuckDB or Spark);
    `on_level(size)` is called before each level is counted."""
    result = CombinationResult([], candidates, max_size)
    if max_size < 2 or len(candidates) < 2:
        return result
    kept: set[tuple[str, ...]] = {(a,) for a in candidates}
    order = {a: i for i, a in enumerate(candidates)}
    level = sorted(kept, key=lambda s: order[s[0]])
    for size in range(2, max_size + 1):
        proposals = [s for s in _join(level, order)
                     if all(sub in kept for sub in iter_combinations(s, size - 1))]
        if not proposals:
            break
        if len(proposals) > max_sets:
            result.warnings.append(f"stopped at {size - 1}-attribute sets: {len(proposals):,} "
                                   f"candidate {size}-sets exceed the limit of {max_sets:,}")
            break
        if on_level is not None:
            on_level(size)
        stats = stats_for(proposals)
        next_level = []
        for s in proposals:
            tier = bounds.tier(stats[s].richness)
            member = tuple(tiers[a] for a in s)
            escalated = TIER_RANK[tier] > max(TIER_RANK[t] for t in member)
            result.combinations.append(Combination(stats[s], tier, member, escalated))
            if tier != "hide":
                kept.add(s)
                next_level.append(s)
        level = next_level
        if not level:
            break
    return result


def _join(level: list[tuple[str, ...]], order: dict[str, int]) -> list[tuple[str, ...]]:
    """Apriori candidate generation: join sets that share all but their last attribute."""
    level = sorted(level, key=lambda s: [order[a] for a in s])
    out = []
    for i, a in enumerate(level):
        for b in level[i + 1:]:
            if a[:-1] != b[:-1]:
                break
            out.append(a + (b[-1],))
    return out
