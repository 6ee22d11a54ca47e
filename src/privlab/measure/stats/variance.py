"""Variance and standard deviation of bounded values: a noisy count, a noisy centred sum and
a noisy centred sum of squares, each at a third of the budget (sequential composition).

Derivation (add/remove one row; docs/guarantees.md, "Variance"). Values are clamped to the
public [lo, hi] and centred, y = fl(x - c) with c = fl((lo + hi) / 2); by monotone rounding
|y| <= d = max(|fl(lo - c)|, |fl(hi - c)|) (about (hi - lo) / 2), so one row moves the count
by 1, the sum of y by at most d, and the sum of fl(y * y) by at most fl(d * d), bounded above
by d^2 rounded up. Then var = Q/n - (S/n)^2 with n = max(noisy count, 1), clipped to
[0, d^2] (values in [lo, hi] have variance at most ((hi - lo) / 2)^2) and rounded onto a
power-of-two grid: post-processing of three grid-valued releases. The standard deviation is
its square root (post-processing of the same three releases, the same budget).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from privlab.core import queries
from privlab.core import sensitivity as sens
from privlab.core.guarantee import PrivacyGuarantee
from privlab.core.release import Release
from privlab.core.rng import SEEDED_NOTE, RngLike, is_seeded, make_rng
from privlab.core.samplers import power_of_two_at_most
from privlab.measure import noise as nz
from privlab.measure.stats.base import Inputs, Statistic, clamped, draw


def square_bound(bounds: tuple[float, float]) -> tuple[float, float, float]:
    """(centre c, d, d^2 rounded up): |fl(x - c)| <= d and fl(y * y) <= the third."""
    lo, hi = sens.check_bounds(bounds)
    centre = (lo + hi) / 2
    d = float(sens.clamped_sum((lo, hi), centre=centre).l1)
    exact = Fraction(d) ** 2
    d2 = float(exact)
    if Fraction(d2) < exact:
        d2 = math.nextafter(d2, math.inf)
    return centre, d, d2


def _on_grid(value: float, top: float) -> tuple[float, float]:
    """`value` in [0, top] rounded onto the grid 2^floor(log2(top / 2^20)), staying inside."""
    g = power_of_two_at_most(top / 2**20)
    k = min(max(round(value / g), 0), math.floor(top / g))
    return k * g, g


class Variance(Statistic):
    name = "variance"
    words = ("the spread of the values (their variance), from a noisy count, a noisy sum and "
             "a noisy sum of squares")
    accountant = "sequential composition of 3 releases"
    root = False  # the standard deviation takes the square root
    sql_functions = ("variance", "variancepop")  # VARIANCE, VAR_SAMP, VAR_POP
    sql_measurements = ("count", "csum", "csq")
    noise_words = ("noisy count", "noisy centred sum of the clamped values",
                   "noisy centred sum of their squares")

    def from_measurements(self, noisy: dict[str, float],
                          bounds: tuple[float, float]) -> tuple[float, float]:
        """Q/n - (S/n)^2 with n = max(noisy count, 1), clipped to [0, d^2], on its grid (the
        square root of it for the standard deviation): post-processing only."""
        _, d, d2 = square_bound(bounds)
        n = max(noisy["count"], 1.0)
        var = min(max(noisy["csq"] / n - (noisy["csum"] / n) ** 2, 0.0), d2)
        return _on_grid(math.sqrt(var), d) if self.root else _on_grid(var, d2)

    def measurements_half_width(self, scales: dict[str, float], bounds: tuple[float, float],
                                count: float, gaussian: bool) -> float | None:
        _, d, _ = square_bound(bounds)
        return self._approx((scales["count"], scales["csum"], scales["csq"]), d, count,
                            gaussian)

    def exact(self, values: Any, x: Inputs) -> Any:
        v = clamped(values, x)
        if not v.size:
            return None
        return float(np.std(v)) if self.root else float(np.var(v))

    def plan(self, x: Inputs) -> tuple[nz.Noise, ...]:
        """Count, centred sum, centred sum of squares, each at epsilon / 3, delta / 3."""
        _, d, d2 = square_bound(x.bounds)  # type: ignore[arg-type]
        eps, delta = x.epsilon / 3, x.delta / 3
        lin = "laplace" if x.mechanism == "geometric" else x.mechanism
        count_mech = "geometric" if x.mechanism != "gaussian" else "gaussian"
        return (nz.additive(count_mech, 1, eps, delta, integer=True),
                nz.additive(lin, d, eps, delta, integer=False),
                nz.additive(lin, d2, eps, delta, integer=False))

    def release(self, values: Any, x: Inputs, rng: RngLike) -> Release:
        noise = self.plan(x)
        centre, d, d2 = square_bound(x.bounds)  # type: ignore[arg-type]
        lo, hi = x.bounds  # type: ignore[misc]
        y = np.clip(queries.as_numeric(values), lo, hi) - centre
        gen = make_rng(rng)
        c = draw(noise[0], len(y), gen)
        s = draw(noise[1], float(y.sum()), gen)
        q = draw(noise[2], float((y * y).sum()), gen)
        value, g = self.from_measurements(
            {"count": float(c.value), "csum": float(s.value), "csq": float(q.value)}, (lo, hi))
        guarantee = PrivacyGuarantee(
            epsilon=x.epsilon, delta=x.delta, mechanism=self.mechanism_text(x, noise),
            accountant=self.accountant,
            notes=(f"count, sum and sum of squares each at epsilon={x.epsilon / 3:g}",)
            + ((SEEDED_NOTE,) if is_seeded(rng) else ()))
        return Release(value=value, guarantee=guarantee, granularity=g,
                       noise={"distribution": "variance", "count_scale": c.noise["scale"],
                              "sum_scale": s.noise["scale"],
                              "sum_squares_scale": q.noise["scale"]},
                       details={"noisy_count": c.value, "noisy_centred_sum": float(s.value),
                                "noisy_centred_sum_squares": float(q.value),
                                "centre": centre, "clamped_to": [lo, hi]})

    def mechanism_text(self, x: Inputs, noise: tuple[nz.Noise, ...]) -> str:
        what = "sqrt of " if self.root else ""
        return (f"{self.name} = {what}noisy sum of squares / noisy count - (noisy sum / "
                f"noisy count)^2 ({x.mechanism})")

    def _approx(self, scales: tuple[float, float, float], d: float, n: float,
                gaussian: bool) -> float:
        """First-order 95% half-width at count n: (hw_Q + 2 d hw_S + d^2 hw_n) / n, from
        |dvar/dQ| = 1/n, |dvar/dS| = 2|S|/n^2 <= 2d/n, |dvar/dn| <= d^2/n; the standard
        deviation's is its square root (|sqrt a - sqrt b| <= sqrt |a - b|)."""
        z = 1.959964 if gaussian else math.log(20)
        hw_n, hw_s, hw_q = (z * s for s in scales)
        hw = (hw_q + 2 * d * hw_s + d * d * hw_n) / max(n, 1.0)
        return math.sqrt(hw) if self.root else hw

    def half_width(self, x: Inputs, noise: tuple[nz.Noise, ...],
                   level: float = 0.95) -> float | None:
        if x.public_size is None or level != 0.95:
            return None
        _, d, _ = square_bound(x.bounds)  # type: ignore[arg-type]
        return self._approx((noise[0].scale, noise[1].scale, noise[2].scale), d,
                            x.public_size, x.mechanism == "gaussian")

    def release_half_width(self, release: Release) -> float | None:
        lo, hi = release.details["clamped_to"]
        _, d, _ = square_bound((lo, hi))
        nz_ = release.noise
        return self._approx((nz_["count_scale"], nz_["sum_scale"], nz_["sum_squares_scale"]),
                            d, float(release.details["noisy_count"]),
                            "gaussian" in release.guarantee.mechanism)

    def half_width_words(self, release: Release) -> str | None:
        hw = self.release_half_width(release)
        return (f"about {hw:.4g} (first order, at the noisy count; a ratio of noisy sums, "
                "see the noise scales in --json)")


class StandardDeviation(Variance):
    name = "stddev"
    words = "the standard deviation of the values (the square root of the private variance)"
    root = True
    sql_functions = ("stddev", "stddevsamp", "stddevpop")  # STDDEV, STDDEV_SAMP, STDDEV_POP


STATISTICS = (Variance(), StandardDeviation())
