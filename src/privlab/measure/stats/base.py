"""What a statistic is, defined once: which columns it reads, the noise it draws (planned
from public inputs), how it releases (core samplers), its post-processing, its accuracy and
its plain words. Every front end that builds from the registry (privlab.measure.stats) gets
a new statistic by its one module."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from privlab.core.mechanisms import gaussian_mechanism, laplace_mechanism
from privlab.core.release import Release
from privlab.core.rng import RngLike
from privlab.measure.noise import Noise


@dataclass(frozen=True)
class Inputs:
    """The public inputs a statistic is planned from: its column's declared domain, the
    mechanism name, the row-level budget, the quantile's q and the public size."""

    bounds: tuple[float, float] | None
    categories: tuple[str, ...] | None
    labels: tuple[str, ...] | None
    bins: int | None
    integer: bool
    mechanism: str
    epsilon: float
    delta: float
    q: float = 0.5
    public_size: int | None = None


class Statistic:
    """One statistic. Subclasses set the class attributes and implement `plan` and
    `release`; `half_width` and `words` have defaults for a single additive noise."""

    name: ClassVar[str]
    words: ClassVar[str]  # plain words for a preview, e.g. "the number of rows"
    numeric: ClassVar[bool] = True  # reads numbers within declared bounds
    default_mechanism: ClassVar[str] = "laplace"
    mechanisms: ClassVar[tuple[str, ...]] = ("laplace", "geometric", "gaussian")
    accountant: ClassVar[str] = "exact"
    #: The SQL form, for the gateway's planner: the SQL functions (sqlglot expression keys,
    #: e.g. "variance" for VARIANCE and VAR_SAMP) that ask for this statistic, and the
    #: additive measurements it is post-processed from (`SQL_MEASUREMENTS`). Empty: the
    #: gateway has its own form for it (COUNT, SUM, AVG, quantiles) or none.
    sql_functions: ClassVar[tuple[str, ...]] = ()
    sql_measurements: ClassVar[tuple[str, ...]] = ()
    #: Plain words for each planned noise, in `plan`'s order (a preview's budget split).
    noise_words: ClassVar[tuple[str, ...]] = ()

    def plan(self, x: Inputs) -> tuple[Noise, ...]:
        raise NotImplementedError

    def release(self, values: Any, x: Inputs, rng: RngLike) -> Release:
        raise NotImplementedError

    def exact(self, values: Any, x: Inputs) -> Any:
        """The exact, NOT private value (what the demo prints beside the noisy one, named in
        its guarantee's `not_covered`); numeric statistics clamp to the declared bounds."""
        raise NotImplementedError

    def mechanism_text(self, x: Inputs, noise: tuple[Noise, ...]) -> str:
        n = noise[0]
        kind = "gaussian (discrete Gaussian" if n.mechanism == "gaussian" else \
            f"{n.mechanism} (discrete Laplace"
        return f"{kind} on grid {n.granularity:g})"

    def half_width(self, x: Inputs, noise: tuple[Noise, ...],
                   level: float = 0.95) -> float | None:
        """The `level` half-width before any row is read (None: none in closed form)."""
        return noise[0].half_width(level) if noise else None

    def release_half_width(self, release: Release) -> float | None:
        """The 95% half-width of a release, from its noise and details (post-processing)."""
        return release.confidence_interval(0.95)

    def half_width_words(self, release: Release) -> str | None:
        """Words for a release without a closed-form half-width (None: use the default)."""
        return None

    def from_measurements(self, noisy: dict[str, float],
                          bounds: tuple[float, float]) -> tuple[float, float]:
        """(value, grid) from the noisy `sql_measurements` of one cell (post-processing;
        the gateway's SQL form)."""
        raise NotImplementedError

    def measurements_half_width(self, scales: dict[str, float], bounds: tuple[float, float],
                                count: float, gaussian: bool) -> float | None:
        """The approximate 95% half-width from the measurements' noise scales at `count`."""
        return None


#: The additive measurements a statistic's SQL form may be built from, each per cell over the
#: values clamped to the public [lo, hi] with centre c = (lo + hi) / 2: the row count of the
#: column, the centred sum (sum of x - c) and the centred sum of squares (sum of (x - c)^2).
SQL_MEASUREMENTS = ("count", "csum", "csq")


def draw(noise: Noise, value: Any, rng: RngLike) -> Release:
    """Release `value` with the planned noise, by the existing exact samplers (the same
    call `core.queries` makes for these public inputs)."""
    changed = 1 if noise.coordinates > 1 else None
    if noise.mechanism == "gaussian":
        return gaussian_mechanism(value, noise.sensitivity, noise.epsilon, noise.delta,
                                  rng=rng, integer_valued=noise.integer,
                                  changed_coordinates=changed)
    return laplace_mechanism(value, noise.sensitivity, noise.epsilon, rng=rng,
                             integer_valued=noise.integer, changed_coordinates=changed,
                             mechanism_name=noise.mechanism)


def clamped(values: Any, x: Inputs) -> Any:
    """The numeric values without missing cells, clamped into the declared bounds."""
    import numpy as np

    from privlab.core.queries import as_numeric

    lo, hi = x.bounds  # type: ignore[misc]
    return np.clip(as_numeric(values), lo, hi)
