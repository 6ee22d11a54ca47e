"""`QueryMeasurement`: a query's noise and guarantee, calibrated once from the plan's
structure and the budget, before any row is read (issue 31: one measurement).

Budget: the query's epsilon is split evenly over its noisy measurements ("primitives":
a count, a sum, a centred sum, a distinct-unit count, a quantile), and the guarantee is
their sequential composition. With the Laplace family (default) delta is spent only by
partition selection; with `mechanism="gaussian"` it is split evenly over the Gaussian
measurements. Sensitivities under the plan's contribution bound k rows per privacy unit,
G public cells (changed cells m = min(k, G)):

    COUNT            L1 = k                      (integer: exact discrete Laplace)
    COUNT(DISTINCT unit) L1 = m                  (a unit adds 1 to at most m cells)
    SUM(x)           L1 = k * max(|lo|, |hi|)
    AVG(x)           = centre + noisy sum(x - centre) / noisy count(x), centre = (lo+hi)/2:
                     the centred sum has L1 = k * (hi - lo) / 2, at most half of SUM's
    VARIANCE, STDDEV and any statistic of the registry with an SQL form
    (`privlab.measure.stats`): post-processing (`Statistic.from_measurements`) of the
                     noisy count, centred sum and centred sum of squares sum((x - centre)^2),
                     whose L1 = k * d^2 with d about (hi - lo) / 2 (rounded up, see
                     `privlab.measure.stats.variance.square_bound`)
    quantile         exponential mechanism (Smith 2011) per cell at epsilon / k

Partition selection (GROUP BY a column without a public domain): a cell is released only if
its noisy row count reaches k + m*, where m* is the smallest integer with
k * a^m* / (1 + a) <= delta and a = exp(-eps_count / k): a cell that exists only because of
one unit (at most k such cells, each with at most k rows) passes with total probability
<= delta, so the released key set is (eps, delta)-DP together with the counts.

Everything here is a function of the plan's structure (its SQL shape, primitives, bounds,
contribution bound, public domains) and the budget, never of its literals or its rows, so
the gateway and `DPQuery` build one `QueryMeasurement` per normalised plan and budget
(`MeasurementCache`) and `privlab.query.noise.answer` only draws with it.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privlab.core.guarantee import PrivacyGuarantee, check_delta, check_epsilon
from privlab.core.ledger.amounts import GuaranteeJSON
from privlab.core.mechanisms import (
    draw_few_on_grid,
    draw_on_grid,
    draw_one_float,
    gaussian_plan,
    laplace_plan,
)
from privlab.core.release import half_width
from privlab.core.rng import RngLike
from privlab.errors import PrivlabError
from privlab.measure.stats.variance import square_bound
from privlab.query.planner import Primitive, QueryPlan, QueryRefused

log = logging.getLogger("privlab.gateway")

MECHANISMS = ("laplace", "gaussian")
#: Smallest positive delta a query may ask for. The discrete Gaussian's delta is computed
#: with an additive slack of 1e-40 (`privlab.core.samplers.discrete_gaussian_delta`), so a
#: per-measurement delta near or below it cannot be calibrated (the search for sigma
#: overflows); 1e-30 (about 2^-100, already cryptographically negligible) leaves room for
#: the split over measurements. Refused before the charge, like any other parameter.
MIN_DELTA = 1e-30
#: up to this many cells a measurement draws in Python numbers (`AdditiveNoise.draw_cells`)
FEW_CELLS = 32


@dataclass(frozen=True)
class Budget:
    """What one query spends and how it is split."""

    epsilon: float
    delta: float  # the delta actually spent (0 with Laplace and no partition selection)
    mechanism: str
    per_primitive_epsilon: float
    per_primitive_delta: float  # Gaussian measurements only
    selection_delta: float  # partition selection only


def plan_budget(plan: QueryPlan, epsilon: float, delta: float, mechanism: str | None) -> Budget:
    """Validate (epsilon, delta, mechanism) for this plan and split the budget."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    mech = mechanism or "laplace"
    if mech not in MECHANISMS:
        raise QueryRefused(f"mechanism must be one of {', '.join(MECHANISMS)}, got {mech!r}")
    if 0 < delta < MIN_DELTA:
        raise QueryRefused(f"delta={delta:g} is below {MIN_DELTA:g}, the smallest delta this "
                           f"gateway calibrates; ask for delta >= {MIN_DELTA:g} (or delta=0 "
                           "with the laplace mechanism and no partition selection)")
    n = len(plan.primitives)
    n_gauss = sum(p.kind != "quantile" for p in plan.primitives)
    if plan.partition_selection:
        if mech == "gaussian":
            raise QueryRefused("partition selection (GROUP BY a column without a public domain) "
                               "uses the Laplace mechanism; omit mechanism or use laplace")
        if delta <= 0:
            raise QueryRefused("GROUP BY a column without a public domain needs delta > 0 "
                               "(partition selection), e.g. delta=1e-6")
        return Budget(epsilon, delta, mech, epsilon / n, 0.0, delta)
    if mech == "gaussian":
        if delta <= 0:
            raise QueryRefused("the gaussian mechanism needs delta > 0, e.g. delta=1e-6")
        if n_gauss == 0:
            raise QueryRefused("quantiles use the exponential mechanism; omit mechanism")
        return Budget(epsilon, delta, mech, epsilon / n, delta / n_gauss, 0.0)
    return Budget(epsilon, 0.0, mech, epsilon / n, 0.0, 0.0)


def selection_threshold(max_rows: int, epsilon: float, delta: float) -> int:
    """Smallest noisy count that releases a cell (see the module docstring)."""
    k = int(max_rows)
    a = math.exp(-epsilon / k)
    # in logarithms: delta * (1 + a) / k underflows to 0 for a tiny delta and a large k
    log_a = -epsilon / k
    target = math.log(delta) + math.log1p(a) - math.log(k)
    m = max(1, math.ceil(target / log_a))
    # the float rounding guard, with a margin so that rounding can only raise the threshold
    while math.log(k) + m * log_a - math.log1p(a) > math.log(delta) - 1e-12:
        m += 1
    return k + m


@dataclass(frozen=True)
class AdditiveNoise:
    """One additive measurement's calibrated noise: what `draw` adds to the exact values
    (the same grid, scale and integrality rule as `laplace_mechanism` / `gaussian_mechanism`,
    which calibrate the same way through `laplace_plan` / `gaussian_plan`)."""

    sensitivity: float
    integer: bool  # integer-valued input (int64 output on the unit grid)
    gaussian: bool
    granularity: float
    steps: float  # the scale (Laplace) or sigma (Gaussian) in grid steps
    exact: bool  # integer data on the unit grid, charged D rather than floor(D) + 1
    _half_widths: dict[float, float | None] = field(init=False, repr=False, compare=False)

    @property
    def scale(self) -> float:
        """The noise scale (Laplace) or sigma (Gaussian) in the value's units."""
        return self.steps * self.granularity

    def half_width(self, level: float) -> float | None:
        """Half-width w with P[|noise| <= w] >= level (`privlab.core.release.half_width`),
        memoised: the two levels an answer states (0.95, and 0.975 for a union bound) are
        computed when the measurement is built."""
        if level not in self._half_widths:
            distribution = "discrete_gaussian" if self.gaussian else "discrete_laplace"
            self._half_widths[level] = half_width(
                {"distribution": distribution, "scale": self.scale}, self.granularity, level)
        return self._half_widths[level]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_half_widths", {})

    def draw_one(self, value: float, rng: RngLike) -> float:
        """A scalar answer's noisy value: `draw_on_grid` of the 0-d value (the mechanisms'
        scalar path, `_draw_one`) as a Python float, the same checks, draw and value
        without the arrays (issue 32)."""
        return draw_one_float(value, self.granularity, self.steps, gaussian=self.gaussian,
                              exact=self.exact, rng=rng)

    def draw_cells(self, values: np.ndarray, rng: RngLike) -> Sequence[float]:
        """Every cell's noisy value (one per cell, as float64 holds it): `draw_on_grid` of
        the cells; up to `FEW_CELLS` cells the same checks, draws and values in Python
        numbers (`draw_few_on_grid`: no NumPy per cell, issue 32)."""
        if len(values) <= FEW_CELLS:
            return draw_few_on_grid(values.tolist(), self.granularity, self.steps,
                                    gaussian=self.gaussian, exact=self.exact, rng=rng)
        out = draw_on_grid(np.asarray(values, dtype=np.float64), self.granularity,
                           self.steps, gaussian=self.gaussian, exact=self.exact,
                           integer_valued=self.integer, rng=rng)
        return np.atleast_1d(out).astype(np.float64)


@dataclass(frozen=True)
class QueryMeasurement:
    """Every noise parameter a plan's primitives need, the partition-selection threshold and
    the guarantee: all known before the engine runs. `privlab.query.noise.answer` reads the
    rows and draws with it; it calibrates nothing."""

    budget: Budget
    primitives: tuple[Primitive, ...]
    #: the public cells (empty with partition selection: the engine's groups are the cells)
    cells: tuple[tuple[Any, ...], ...]
    #: how many cells one privacy unit can change (the L1 of a distinct-unit count)
    changed: int
    scalar: bool  # no GROUP BY: one value, drawn by the samplers' scalar path
    noises: dict[Primitive, AdditiveNoise]
    threshold: int | None  # partition selection's noisy-count threshold
    quantile_epsilon: float  # per quantile and cell: per-primitive epsilon / max_rows
    guarantee: PrivacyGuarantee  # without the seeded note (the answer adds it when seeded)
    #: `guarantee.to_dict()` (computed once)
    guarantee_dict: dict[str, Any] = field(compare=False, repr=False)
    #: the guarantee checked and serialised once, as the ledger stores it with each charge
    guarantee_json: GuaranteeJSON = field(compare=False, repr=False)
    #: `guarantee_dict` as an answer's JSON body holds it (compact, finite), serialised once
    guarantee_body: str = field(compare=False, repr=False, default="")


def _sensitivity(plan: QueryPlan, primitive: Primitive, changed: int) -> tuple[float, bool]:
    """One additive measurement's L1 sensitivity under the contribution bound, and whether
    its values are integers (see the module docstring)."""
    max_rows = plan.max_rows
    if primitive.kind == "count":
        return float(max_rows), True
    if primitive.kind == "units":
        return float(changed), True
    measure = plan.measures[primitive.measure]  # type: ignore[index]
    lo, hi = measure.clamp  # type: ignore[misc]
    if primitive.kind == "csq":  # one row moves it by at most d^2 (measure.stats.variance)
        return max_rows * square_bound((lo, hi))[2], False
    is_int = measure.column.type == "int"
    if primitive.kind == "sum":
        return max_rows * max(abs(lo), abs(hi)), is_int
    centre = (lo + hi) / 2
    sensitivity = max_rows * (hi - lo) / 2
    return sensitivity, is_int and float(centre).is_integer() and float(sensitivity).is_integer()


def _additive(sensitivity: float, integer: bool, budget: Budget, changed: int,
              draws: int, scalar: bool) -> AdditiveNoise:
    """Calibrate one additive measurement exactly as the mechanism would for `draws` cells
    (a scalar: one coordinate, one changed)."""
    if budget.mechanism == "gaussian":
        g, exact, sigma, _, _, _ = gaussian_plan(
            sensitivity, budget.per_primitive_epsilon, budget.per_primitive_delta,
            1 if scalar else changed, draws, None, integer)
        return AdditiveNoise(sensitivity, integer, True, g, sigma, exact)
    g, _, exact, steps = laplace_plan(sensitivity, budget.per_primitive_epsilon,
                                      1 if scalar else changed, None, integer)
    return AdditiveNoise(sensitivity, integer, False, g, steps, exact)


def _guarantee(plan: QueryPlan, budget: Budget, threshold: int | None) -> PrivacyGuarantee:
    """Sequential composition of the plan's measurements."""
    notes = list(plan.notes) + [
        f"epsilon split evenly over {len(plan.primitives)} noisy measurement(s): "
        f"{budget.per_primitive_epsilon:.6g} each"]
    if plan.partition_selection:
        notes.append(f"partition selection: cells with noisy count >= {threshold} released "
                     f"(delta {budget.selection_delta:g})")
    mechanism = ("privlab gateway: " + ", ".join(sorted({p.kind for p in plan.primitives}))
                 + f" ({budget.mechanism})")
    return PrivacyGuarantee(
        epsilon=budget.epsilon, delta=budget.delta,
        neighbouring="user" if plan.user_level else "add_remove_record",
        mechanism=mechanism,
        accountant=f"sequential composition of {len(plan.primitives)} measurement(s)",
        notes=tuple(notes))


def _build(plan: QueryPlan, budget: Budget) -> QueryMeasurement:
    cells = () if plan.partition_selection else tuple(plan.cells())
    if plan.partition_selection:
        changed, n_cells = plan.max_rows, None
    else:
        changed, n_cells = max(1, min(plan.max_rows, len(cells))), len(cells)
    if n_cells is None and budget.mechanism == "gaussian":  # plan_budget refuses it first
        raise QueryRefused("partition selection uses the Laplace mechanism")
    scalar = not plan.groups
    noises: dict[Primitive, AdditiveNoise] = {}
    for p in plan.primitives:
        if p.kind == "quantile" or n_cells == 0:
            continue
        sensitivity, integer = _sensitivity(plan, p, changed)
        noise = _additive(sensitivity, integer, budget, changed, max(n_cells or 1, 1), scalar)
        # a throwaway draw: the sampler refuses a scale it cannot draw from (too large for
        # the grid, not finite) here, before any charge, rather than after it
        noise.draw_one(0.0, np.random.default_rng(0))
        noise.half_width(0.95), noise.half_width(0.975)
        noises[p] = noise
    quantile_epsilon = budget.per_primitive_epsilon / plan.max_rows
    if any(p.kind == "quantile" for p in plan.primitives):
        check_epsilon(quantile_epsilon)
    threshold = selection_threshold(plan.max_rows, budget.per_primitive_epsilon,
                                    budget.selection_delta) if plan.partition_selection \
        else None
    guarantee = _guarantee(plan, budget, threshold)
    as_dict = guarantee.to_dict()
    return QueryMeasurement(budget, plan.primitives, cells, changed, scalar, noises, threshold,
                            quantile_epsilon, guarantee, as_dict, GuaranteeJSON.of(as_dict),
                            json.dumps(as_dict, allow_nan=False, separators=(",", ":")))


def measure_query(plan: QueryPlan, budget: Budget) -> QueryMeasurement:
    """Calibrate every noise parameter of `plan` at `budget`. It reads no row, so whatever it
    cannot compute (a calibration that overflows or does not converge for extreme
    parameters) depends on nothing private and is refused with one line (`QueryRefused`),
    never a raw exception."""
    try:
        return _build(plan, budget)
    except PrivlabError:
        raise
    except (ArithmeticError, ValueError, RuntimeError) as exc:
        log.warning("noise calibration failed: %s: %s", type(exc).__name__, exc)
        raise QueryRefused(f"the noise for epsilon={budget.epsilon:g}, delta={budget.delta:g}, "
                           f"mechanism {budget.mechanism} could not be calibrated for this "
                           "query; ask for a larger epsilon or delta") from None


def measurement_key(plan: QueryPlan, budget: Budget) -> tuple[Any, ...]:
    """The normalised plan: everything a `QueryMeasurement` depends on. Literals are bound
    parameters of `plan.sql` (not part of it), so queries that differ only in literals share
    one key; the SQL carries the bounds, the contribution bound and the group keys."""
    return (plan.sql, plan.quantile_sql, plan.primitives,
            tuple((o.kind, o.measure, o.q) for o in plan.outputs), plan.notes,
            plan.max_rows, plan.user_level, plan.partition_selection, budget)


class MeasurementCache:
    """`QueryMeasurement`s by normalised plan (`measurement_key`): a bounded LRU, safe to
    share between threads. Two threads missing the same key at once may both build it (a
    pure function of public inputs); one result is kept."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._items: OrderedDict[tuple[Any, ...], QueryMeasurement] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, plan: QueryPlan, budget: Budget) -> QueryMeasurement:
        """The measurement of `plan` at `budget`, built on a miss (`measure_query`)."""
        key = measurement_key(plan, budget)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                return hit
        built = measure_query(plan, budget)  # outside the lock: a miss may calibrate
        with self._lock:
            self._items[key] = built
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return built
