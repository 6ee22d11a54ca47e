"""Domain richness (the attribute-based PIA article, Eq. 2) and the three privacy tiers.

K_i = 1 - sum_j (|v_ij| / n)^2 is the Gini impurity of attribute i's value distribution: near 1
when values are nearly unique (identifying), near 0 when one value dominates. Tiers split
[K_min, K_max] into thirds by default (the PIA article), or use thresholds an administrator sets:
relative fractions of that range, or absolute values such as 0.75.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from privlab.errors import InvalidInputError

TIERS = ("none", "low", "hide")
TIER_MEANING = {
    "none": "no hiding needed",
    "low": "low-level hiding",
    "hide": "must be hidden",
}
TIER_RANK = {t: i for i, t in enumerate(TIERS)}


def richness_from_counts(counts: np.ndarray, n: int | None = None) -> float:
    """Gini domain richness of a value-count vector (zeros allowed)."""
    counts = np.asarray(counts)
    n = int(counts.sum()) if n is None else int(n)
    if n <= 0:
        raise InvalidInputError("richness needs at least one record")
    sq = float(np.dot(counts.astype(np.float64), counts.astype(np.float64)))
    return 1.0 - sq / (float(n) * float(n))


@dataclass(frozen=True)
class Thresholds:
    """How K values map to tiers: `none` if K < low, `low` if low <= K < high, else `hide`.

    `mode` is "thirds" (the PIA article), "relative" (fractions of [K_min, K_max]) or "absolute".
    """

    mode: Literal["thirds", "relative", "absolute"] = "thirds"
    a: float = 1 / 3
    b: float = 2 / 3

    def __post_init__(self) -> None:
        for v in (self.a, self.b):
            if not (math.isfinite(v) and 0.0 <= v <= 1.0):
                raise InvalidInputError(f"thresholds must lie in [0, 1], got {self.a}, {self.b}")
        if self.a > self.b:
            raise InvalidInputError(f"thresholds must be LOW <= HIGH, got {self.a}, {self.b}")

    def bounds(self, kmin: float, kmax: float) -> tuple[float, float, str | None]:
        """(low, high, note): the absolute cut points for these attributes."""
        if self.mode == "absolute":
            return self.a, self.b, None
        kr = kmax - kmin
        if kr <= 1e-12:
            note = ("all attributes have the same richness, so relative tiers are undefined; "
                    "fell back to absolute thirds of [0, 1]")
            return 1 / 3, 2 / 3, note
        return kmin + self.a * kr, kmin + self.b * kr, None

    def describe(self) -> str:
        if self.mode == "thirds":
            return "thirds of [K_min, K_max] (the attribute-based PIA article)"
        if self.mode == "relative":
            return f"relative: {self.a:g} and {self.b:g} of [K_min, K_max]"
        return f"absolute: {self.a:g}, {self.b:g}"


def parse_thresholds(text: str | Thresholds | None) -> Thresholds:
    """'thirds' | 'LOW,HIGH' (absolute) | 'HIGH' (absolute, two tiers) | 'rel:A,B'."""
    if text is None:
        return Thresholds()
    if isinstance(text, Thresholds):
        return text
    t = text.strip().lower()
    if t in ("thirds", "paper", "default"):
        return Thresholds()
    mode: Literal["relative", "absolute"] = "absolute"
    if t.startswith("rel:") or t.startswith("relative:"):
        mode = "relative"
        t = t.split(":", 1)[1]
    parts = [p.strip() for p in t.split(",") if p.strip()]
    try:
        nums = [float(p) for p in parts]
    except ValueError:
        raise InvalidInputError(f"--thresholds must be 'thirds', 'LOW,HIGH', 'HIGH' or "
                                f"'rel:A,B', got {text!r}") from None
    if len(nums) == 1:
        nums = [nums[0], nums[0]]
    if len(nums) != 2:
        raise InvalidInputError(f"--thresholds takes one or two numbers, got {text!r}")
    return Thresholds(mode=mode, a=nums[0], b=nums[1])


def assign_tier(k: float, low: float, high: float) -> str:
    """The PIA article's labelling rule with cut points low <= high."""
    if k < low:
        return "none"
    if k < high:
        return "low"
    return "hide"


@dataclass(frozen=True)
class TierBounds:
    """Cut points resolved for one assessment."""

    thresholds: Thresholds
    kmin: float
    kmax: float
    low: float
    high: float
    note: str | None = None

    def tier(self, k: float) -> str:
        return assign_tier(k, self.low, self.high)

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.low, self.high
        out: dict[str, Any] = {
            "mode": self.thresholds.mode,
            "description": self.thresholds.describe(),
            "kmin": self.kmin,
            "kmax": self.kmax,
            "low": lo,
            "high": hi,
            "tiers": {
                "none": f"[{min(self.kmin, lo):.3f}, {lo:.3f})",
                "low": f"[{lo:.3f}, {hi:.3f})",
                "hide": f"[{hi:.3f}, {max(self.kmax, hi):.3f}]",
            },
            "meaning": TIER_MEANING,
        }
        if self.note:
            out["note"] = self.note
        return out


def resolve_bounds(values: list[float], thresholds: Thresholds) -> TierBounds:
    kmin, kmax = float(min(values)), float(max(values))
    low, high, note = thresholds.bounds(kmin, kmax)
    return TierBounds(thresholds, kmin, kmax, low, high, note)
