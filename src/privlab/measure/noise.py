"""The noise of each statistic, planned from public inputs alone (no row read).

Each plan calls the same calibration the release will use (`laplace_plan`, `gaussian_plan`
in core/mechanisms.py), with the same sensitivity (core/sensitivity.py) and the same defaults
as the `dp_*` queries in core/queries.py, so the scale stated before the data is the scale
drawn; `Measurement.__call__` checks that it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from privlab.core import sensitivity as sens
from privlab.core.mechanisms import gaussian_plan, laplace_plan
from privlab.core.release import half_width
from privlab.errors import InvalidInputError


@dataclass(frozen=True)
class Noise:
    """One additive noise draw: distribution, scale and grid in the value's units."""

    mechanism: str  # laplace | geometric | gaussian
    distribution: str  # discrete_laplace | discrete_gaussian
    scale: float
    granularity: float
    sensitivity: float
    coordinates: int = 1
    epsilon: float = 0.0  # the budget this draw is calibrated for
    delta: float = 0.0
    integer: bool = False  # integer values on the unit grid (counts)

    def half_width(self, level: float = 0.95) -> float | None:
        """The noise's `level` half-width per coordinate (core/release.py's formula)."""
        return half_width({"distribution": self.distribution, "scale": self.scale},
                          self.granularity, level)

    def to_dict(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "distribution": self.distribution,
                "scale": self.scale, "granularity": self.granularity,
                "sensitivity": self.sensitivity, "coordinates": self.coordinates}


def additive(mechanism: str, sensitivity: float, epsilon: float, delta: float, *,
             integer: bool, coordinates: int = 1) -> Noise:
    """The noise `queries._additive` draws for these public inputs (one changed coordinate)."""
    if mechanism == "gaussian":
        g, _, sigma, _, _, _ = gaussian_plan(sensitivity, epsilon, delta, 1, coordinates,
                                             None, integer)
        return Noise("gaussian", "discrete_gaussian", sigma * g, g, sensitivity, coordinates,
                     epsilon, delta, integer)
    if mechanism == "geometric" and not integer:
        raise InvalidInputError("the geometric mechanism releases integers: use it for "
                                "count/histogram, or use laplace")
    g, _, _, steps = laplace_plan(sensitivity, epsilon, 1, None, integer)
    return Noise(mechanism, "discrete_laplace", steps * g, g, sensitivity, coordinates,
                 epsilon, 0.0, integer)


def count_noise(mechanism: str, epsilon: float, delta: float) -> Noise:
    """dp_count: sensitivity 1, integers; laplace on a count is the geometric."""
    mech = "geometric" if mechanism == "laplace" else mechanism
    return additive(mech, sens.count().for_mechanism(mech), epsilon, delta, integer=True)


def sum_noise(mechanism: str, bounds: tuple[float, float], epsilon: float,
              delta: float) -> Noise:
    """dp_sum: sensitivity max(|lo|, |hi|); geometric sums integers (integer bounds)."""
    integer = mechanism == "geometric"
    if integer and not all(float(b).is_integer() for b in bounds):
        raise InvalidInputError("geometric needs integer bounds LO:HI; use laplace")
    return additive(mechanism, sens.clamped_sum(bounds).for_mechanism(mechanism), epsilon,
                    delta, integer=integer)


def mean_noise(mechanism: str, bounds: tuple[float, float], epsilon: float,
               delta: float) -> tuple[Noise, Noise]:
    """dp_mean: a centred noisy sum and a noisy count, each at half the budget."""
    centre = (bounds[0] + bounds[1]) / 2
    sum_mech = "laplace" if mechanism == "geometric" else mechanism
    count_mech = "geometric" if mechanism != "gaussian" else "gaussian"
    half = sens.clamped_sum(bounds, centre=centre).for_mechanism(sum_mech)
    return (additive(sum_mech, half, epsilon / 2, delta / 2, integer=False),
            additive(count_mech, sens.count().for_mechanism(count_mech), epsilon / 2,
                     delta / 2, integer=True))


def histogram_noise(mechanism: str, bins: int, epsilon: float, delta: float) -> Noise:
    """dp_histogram: one changed count by 1 (L1 = L2 = 1), over `bins` public bins."""
    mech = "geometric" if mechanism == "laplace" else mechanism
    return additive(mech, sens.histogram().for_mechanism(mech), epsilon, delta, integer=True,
                    coordinates=bins)


__all__ = ["Noise", "additive", "count_noise", "histogram_noise", "mean_noise", "sum_noise"]
