"""`Release`: a released value together with its grid, its noise and its guarantee."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privlab.core.guarantee import PrivacyGuarantee


@dataclass(frozen=True)
class Release:
    """What a mechanism returns. `value` lies on the grid `granularity * Z` when granularity
    is set; `noise` describes the noise added (distribution and scale in the value's units)."""

    value: Any
    guarantee: PrivacyGuarantee
    granularity: float | None = None
    noise: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    def confidence_interval(self, level: float = 0.95) -> float | None:
        """Half-width w with P[|noise| <= w] >= level (None for non-additive mechanisms)."""
        return half_width(self.noise, self.granularity, level)

    def to_dict(self) -> dict[str, Any]:
        value = self.value
        if isinstance(value, np.ndarray):
            value = value.tolist()
        elif isinstance(value, np.generic):
            value = value.item()
        return {
            "value": value,
            "granularity": self.granularity,
            "noise": self.noise,
            "confidence_interval_95": self.confidence_interval(0.95),
            "guarantee": self.guarantee.to_dict(),
            **({"details": self.details} if self.details else {}),
        }


def half_width(noise: dict[str, Any], granularity: float | None,
               level: float = 0.95) -> float | None:
    """Half-width w with P[|noise| <= w] >= level, from the noise's description alone (so a
    measurement states it before any row is read); None for non-additive mechanisms."""
    dist = noise.get("distribution")
    scale = noise.get("scale")
    if dist is None or scale is None:
        return None
    alpha = 1 - level
    if dist == "discrete_laplace":
        g = granularity or 1.0
        t = scale / g  # scale in grid steps
        a = math.exp(-1 / t)
        if a == 0.0:  # the noise is 0 with probability 1 - 2e-300 or more
            return 0.0
        # P[|X| >= k] = 2 a^k / (1 + a) for k >= 1; smallest k with that <= alpha, minus 1.
        k = math.ceil(math.log(alpha * (1 + a) / 2) / math.log(a))
        return max(k - 1, 0) * g
    if dist in ("laplace",):
        return scale * math.log(1 / alpha)
    if dist in ("discrete_gaussian", "gaussian"):
        from scipy.stats import norm

        extra = granularity or 0.0
        return float(norm.ppf(1 - alpha / 2) * scale + extra)
    return None


def ratio_half_width(noise: dict, details: dict, gaussian: bool) -> dict[str, float] | None:
    """95% half-widths of a mean's noisy sum and noisy count, and of the mean itself (one
    function for `privlab release` and the studio, so both print one figure).

    The mean's is approximate, (sum hw + (hi - lo)/2 count hw) / noisy count: it uses only the
    released noisy count and the public bounds (post-processing, nothing more is read).
    """
    lo_hi = details.get("clamped_to")
    count = details.get("noisy_count")
    if "sum_scale" not in noise or not lo_hi or count is None:
        return None
    z = 1.959964 if gaussian else math.log(20)  # N(0,1) / Laplace two-sided 95% quantile
    sum_hw, count_hw = z * float(noise["sum_scale"]), z * float(noise["count_scale"])
    mean_hw = (sum_hw + (lo_hi[1] - lo_hi[0]) / 2 * count_hw) / max(float(count), 1.0)
    return {"sum": sum_hw, "count": count_hw, "mean": mean_hw}


def half_width_text(width: float | None, noise: dict, details: dict | None = None,
                    gaussian: bool = False) -> str:
    """The 95% noise half-width, or in words why a mechanism has none."""
    if width is not None:
        return f"{width:.4g}"
    if noise.get("distribution") == "ratio":
        hw = ratio_half_width(noise, details or {}, gaussian)
        if hw is not None:
            return (f"about {hw['mean']:.4g} (a ratio of a noisy sum and a noisy count: noisy sum "
                    f"\u00b1 {hw['sum']:.4g}, noisy count \u00b1 {hw['count']:.4g}; the mean's "
                    f"half-width divides by the noisy count)")
        return ("none in closed form (a ratio of a noisy sum and a noisy count; see the noise "
                "scales in --json)")
    return "none (the exponential mechanism picks a value; it adds no additive noise)"
