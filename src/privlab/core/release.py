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
        dist = self.noise.get("distribution")
        scale = self.noise.get("scale")
        if dist is None or scale is None:
            return None
        alpha = 1 - level
        if dist == "discrete_laplace":
            g = self.granularity or 1.0
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

            extra = self.granularity or 0.0
            return float(norm.ppf(1 - alpha / 2) * scale + extra)
        return None

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
