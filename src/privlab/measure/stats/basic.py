"""The five statistics privlab has always released: count, sum, mean, histogram, quantile.

Each is its sensitivity and noise (privlab.measure.noise, from core.sensitivity) and its
release by the `dp_*` query of core.queries, so values are those `privlab release` printed
before the registry existed (tests/measure)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from privlab.core import queries
from privlab.core.release import Release, half_width_text, ratio_half_width
from privlab.core.rng import RngLike
from privlab.measure import noise as nz
from privlab.measure.stats.base import Inputs, Statistic, clamped


class Count(Statistic):
    name = "count"
    words = "the number of rows"
    numeric = False
    default_mechanism = "geometric"

    def exact(self, values: Any, x: Inputs) -> Any:
        return len(values)

    def plan(self, x: Inputs) -> tuple[nz.Noise, ...]:
        return (nz.count_noise(x.mechanism, x.epsilon, x.delta),)

    def release(self, values: Any, x: Inputs, rng: RngLike) -> Release:
        return queries.dp_count(values, x.epsilon, delta=x.delta, mechanism=x.mechanism,
                                rng=rng)


class Sum(Statistic):
    name = "sum"
    words = "the sum of the values, each clamped into the declared bounds"

    def exact(self, values: Any, x: Inputs) -> Any:
        return float(clamped(values, x).sum())

    def plan(self, x: Inputs) -> tuple[nz.Noise, ...]:
        return (nz.sum_noise(x.mechanism, x.bounds, x.epsilon, x.delta),)  # type: ignore[arg-type]

    def release(self, values: Any, x: Inputs, rng: RngLike) -> Release:
        return queries.dp_sum(values, x.bounds, x.epsilon, delta=x.delta,  # type: ignore[arg-type]
                              mechanism=x.mechanism, rng=rng)


class Mean(Statistic):
    name = "mean"
    words = "the average of the values (a noisy sum over a noisy count)"
    accountant = "sequential composition of 2 releases"

    def exact(self, values: Any, x: Inputs) -> Any:
        v = clamped(values, x)
        return float(v.mean()) if v.size else None

    def plan(self, x: Inputs) -> tuple[nz.Noise, ...]:
        return nz.mean_noise(x.mechanism, x.bounds, x.epsilon, x.delta)  # type: ignore[arg-type]

    def release(self, values: Any, x: Inputs, rng: RngLike) -> Release:
        return queries.dp_mean(values, x.bounds, x.epsilon, delta=x.delta,  # type: ignore[arg-type]
                               mechanism=x.mechanism, rng=rng)

    def mechanism_text(self, x: Inputs, noise: tuple[nz.Noise, ...]) -> str:
        return f"mean = noisy sum / noisy count ({x.mechanism})"

    def half_width(self, x: Inputs, noise: tuple[nz.Noise, ...],
                   level: float = 0.95) -> float | None:
        """The ratio's approximate half-width at the public size (None without one)."""
        if x.public_size is None or level != 0.95 or x.bounds is None:
            return None
        s, c = noise
        hw = ratio_half_width({"sum_scale": s.scale, "count_scale": c.scale},
                              {"clamped_to": list(x.bounds), "noisy_count": x.public_size},
                              x.mechanism == "gaussian")
        return None if hw is None else hw["mean"]

    def release_half_width(self, release: Release) -> float | None:
        hw = ratio_half_width(release.noise, release.details or {},
                              "gaussian" in release.guarantee.mechanism)
        return None if hw is None else hw["mean"]

    def half_width_words(self, release: Release) -> str | None:
        return half_width_text(None, release.noise, release.details,
                               "gaussian" in release.guarantee.mechanism)


class Histogram(Statistic):
    name = "histogram"
    words = "the number of rows in each declared category or bin"
    numeric = False
    default_mechanism = "geometric"

    def exact(self, values: Any, x: Inputs) -> Any:
        if x.categories is not None:
            cells = [str(v) for v in values if v is not None and v == v]
            return [sum(c == cat for c in cells) for cat in x.categories]
        edges, _ = queries.histogram_edges(x.bounds, x.bins or 10, x.integer)  # type: ignore[arg-type]
        v = np.clip(queries.as_numeric(values), edges[0],
                    edges[-1] - 1 if x.integer else edges[-1])
        return np.histogram(v, bins=edges)[0].tolist()

    def plan(self, x: Inputs) -> tuple[nz.Noise, ...]:
        return (nz.histogram_noise(x.mechanism, len(x.labels or ()), x.epsilon, x.delta),)

    def release(self, values: Any, x: Inputs, rng: RngLike) -> Release:
        return queries.dp_histogram(values, x.epsilon, categories=x.categories,
                                    bounds=x.bounds, bins=x.bins or 10, delta=x.delta,
                                    mechanism=x.mechanism, rng=rng, integer=x.integer)


class Quantile(Statistic):
    name = "quantile"
    words = "the q-quantile of the values (the exponential mechanism picks it)"
    default_mechanism = "exponential"
    mechanisms: ClassVar[tuple[str, ...]] = ("laplace",)

    def exact(self, values: Any, x: Inputs) -> Any:
        v = clamped(values, x)
        return float(np.quantile(v, x.q)) if v.size else None

    def plan(self, x: Inputs) -> tuple[nz.Noise, ...]:
        return ()

    def release(self, values: Any, x: Inputs, rng: RngLike) -> Release:
        return queries.dp_quantile(values, x.q, x.bounds, x.epsilon, rng=rng)  # type: ignore[arg-type]

    def mechanism_text(self, x: Inputs, noise: tuple[nz.Noise, ...]) -> str:
        return "quantile (exponential mechanism)"

    def half_width(self, x: Inputs, noise: tuple[nz.Noise, ...],
                   level: float = 0.95) -> float | None:
        return None

    def half_width_words(self, release: Release) -> str | None:
        return half_width_text(None, release.noise, release.details)


STATISTICS = (Count(), Sum(), Mean(), Histogram(), Quantile())
