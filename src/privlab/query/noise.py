"""Turn the engine's exact, contribution-bounded aggregates into a DP answer.

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

A SUM next to an AVG of the same column is post-processing of the AVG's two measurements
(sum = centred sum + centre * count), not a third charge. Every value is grid-valued
(`privlab.core.mechanisms`) and drawn from the CSPRNG unless a seed is given (tests only).

Partition selection (GROUP BY a column without a public domain): a cell is released only if
its noisy row count reaches k + m*, where m* is the smallest integer with
k * a^m* / (1 + a) <= delta and a = exp(-eps_count / k): a cell that exists only because of
one unit (at most k such cells, each with at most k rows) passes with total probability
<= delta, so the released key set is (eps, delta)-DP together with the counts.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privlab.core.guarantee import PrivacyGuarantee, check_delta, check_epsilon
from privlab.core.mechanisms import gaussian_mechanism, laplace_mechanism
from privlab.core.queries import dp_quantile
from privlab.core.release import Release
from privlab.core.rng import SEEDED_NOTE, RngLike, is_seeded, make_rng
from privlab.core.samplers import power_of_two_at_most
from privlab.errors import PrivlabError
from privlab.measure import stats as registry_stats
from privlab.measure.stats.variance import square_bound
from privlab.query.planner import Output, Primitive, QueryPlan, QueryRefused

log = logging.getLogger("privlab.gateway")

MECHANISMS = ("laplace", "gaussian")
#: Smallest positive delta a query may ask for. The discrete Gaussian's delta is computed
#: with an additive slack of 1e-40 (`privlab.core.samplers.discrete_gaussian_delta`), so a
#: per-measurement delta near or below it cannot be calibrated (the search for sigma
#: overflows); 1e-30 (about 2^-100, already cryptographically negligible) leaves room for
#: the split over measurements. Refused before the charge, like any other parameter.
MIN_DELTA = 1e-30


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


@dataclass
class ColumnInfo:
    name: str
    kind: str
    confidence_interval_95: float | list[float | None] | None
    epsilon: float
    mechanism: str
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind,
                "confidence_interval_95": self.confidence_interval_95,
                "epsilon": self.epsilon, "mechanism": self.mechanism, "notes": self.notes}


@dataclass
class Answer:
    columns: list[str]
    rows: list[list[Any]]
    info: list[ColumnInfo]
    guarantee: PrivacyGuarantee
    budget: Budget

    def to_dict(self) -> dict[str, Any]:
        return {"columns": self.columns, "rows": self.rows,
                "column_info": [c.to_dict() for c in self.info],
                "guarantee": self.guarantee.to_dict()}


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


def _py(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return value


def _release(values: np.ndarray, sensitivity: float, budget: Budget, integer: bool,
             changed: int, neighbouring: str, rng: np.random.Generator, scalar: bool) -> Release:
    arr = values[0] if scalar else values
    if budget.mechanism == "gaussian":
        return gaussian_mechanism(arr, sensitivity, budget.per_primitive_epsilon,
                                  budget.per_primitive_delta, rng=rng, integer_valued=integer,
                                  changed_coordinates=None if scalar else changed,
                                  neighbouring=neighbouring)
    return laplace_mechanism(arr, sensitivity, budget.per_primitive_epsilon, rng=rng,
                             integer_valued=integer,
                             changed_coordinates=None if scalar else changed,
                             neighbouring=neighbouring)


@dataclass
class _Cells:
    """The cells an answer covers and the engine's exact, contribution-bounded row for each.

    With a public domain the cells are every cell of it (`plan.cells()`), whether or not the
    engine returned a row for it; with partition selection they are the groups the engine
    returned (candidates, each released only if its noisy count passes the threshold).
    """

    keys: list[tuple[Any, ...]]
    rows_by_key: dict[tuple[Any, ...], tuple[Any, ...]]
    column_index: dict[str, int]
    #: how many cells one privacy unit can change (the L1 of a distinct-unit count)
    changed: int
    #: no candidate group at all: one all-zero cell stands in, and is never released
    phantom: bool

    def exact(self, column: str) -> np.ndarray:
        """The engine's value of a result column in every cell (0 for a missing cell or NULL)."""
        i = self.column_index[column]
        return np.array([float(self.rows_by_key[c][i] or 0) if c in self.rows_by_key else 0.0
                         for c in self.keys], dtype=np.float64)


def _group_key(row: tuple[Any, ...], n_groups: int) -> tuple[Any, ...]:
    return tuple(_py(v) for v in row[:n_groups])


def _candidate_cells(plan: QueryPlan, rows: list[tuple[Any, ...]]) -> _Cells:
    """Step 1: which cells the answer covers (see `_Cells`)."""
    n_groups = len(plan.groups)
    rows_by_key = {_group_key(r, n_groups): r for r in rows}
    column_index = {name: i for i, name in enumerate(plan.result_columns)}
    if not plan.partition_selection:
        keys = plan.cells()
        return _Cells(keys, rows_by_key, column_index, max(1, min(plan.max_rows, len(keys))),
                      phantom=False)
    if rows_by_key:
        return _Cells(list(rows_by_key), rows_by_key, column_index, plan.max_rows,
                      phantom=False)
    # No candidate group at all. The answer must still be shaped exactly as when there are
    # candidates (threshold, intervals, notes), or whether any row passed the WHERE would
    # show without noise: release one all-zero phantom cell the usual way, then drop it
    # whatever its noisy count.
    return _Cells([tuple([None] * n_groups)], rows_by_key, column_index, plan.max_rows,
                  phantom=True)


def _exact_measurement(plan: QueryPlan, primitive: Primitive,
                       cells: _Cells) -> tuple[np.ndarray, float, bool]:
    """The exact values of one additive measurement in every cell, its L1 sensitivity under
    the contribution bound, and whether it is integer-valued (see the module docstring)."""
    max_rows = plan.max_rows
    if primitive.kind == "count":
        column = "__n" if primitive.measure is None else f"__c{primitive.measure}"
        return cells.exact(column), float(max_rows), True
    if primitive.kind == "units":
        return cells.exact("__u"), float(cells.changed), True
    measure = plan.measures[primitive.measure]  # type: ignore[index]
    lo, hi = measure.clamp  # type: ignore[misc]
    if primitive.kind == "csq":  # one row moves it by at most d^2 (measure.stats.variance)
        return cells.exact(f"__q{measure.index}"), max_rows * square_bound((lo, hi))[2], False
    sums = cells.exact(f"__s{measure.index}")
    is_int = measure.column.type == "int"
    if primitive.kind == "sum":
        return sums, max_rows * max(abs(lo), abs(hi)), is_int
    # centred sum: sum(x - centre) = sum(x) - centre * count(x)
    centre = (lo + hi) / 2
    sensitivity = max_rows * (hi - lo) / 2
    integer = is_int and float(centre).is_integer() and float(sensitivity).is_integer()
    return sums - centre * cells.exact(f"__c{measure.index}"), sensitivity, integer


def _measure(plan: QueryPlan, cells: _Cells, budget: Budget, neighbouring: str,
             rng: np.random.Generator) -> dict[Primitive, Release]:
    """Step 2: one noisy release per additive measurement, in the plan's order (the order of
    the draws from `rng`); quantiles come later, per released cell."""
    releases: dict[Primitive, Release] = {}
    scalar = not plan.groups
    for primitive in plan.primitives:
        if primitive.kind == "quantile" or not cells.keys:
            continue
        exact, sensitivity, integer = _exact_measurement(plan, primitive, cells)
        releases[primitive] = _release(exact, sensitivity, budget, integer, cells.changed,
                                       neighbouring, rng, scalar)
    return releases


def _noisy(releases: dict[Primitive, Release], primitive: Primitive) -> np.ndarray:
    return np.atleast_1d(np.asarray(releases[primitive].value, dtype=np.float64))


def _released_cells(plan: QueryPlan, cells: _Cells, releases: dict[Primitive, Release],
                    budget: Budget) -> tuple[list[int], int | None]:
    """Step 3: the indices of the cells released, and the partition-selection threshold
    (None with a public domain, where every cell is released)."""
    if not plan.partition_selection or not cells.keys:
        return list(range(len(cells.keys))), None
    threshold = selection_threshold(plan.max_rows, budget.per_primitive_epsilon,
                                    budget.selection_delta)
    counts = _noisy(releases, Primitive("count"))
    released = [i for i in range(len(cells.keys))
                if counts[i] >= threshold and not cells.phantom]
    return released, threshold


def _quantiles(plan: QueryPlan, cells: _Cells, released: list[int],
               value_rows: list[tuple[Any, ...]], budget: Budget,
               rng: np.random.Generator) -> dict[Primitive, list[float]]:
    """Step 4: each quantile in each released cell by the exponential mechanism at
    epsilon / max_rows over the cell's clamped values (`value_rows` from
    `plan.quantile_sql`: the group keys, then one column per quantile measure)."""
    quantile_primitives = [p for p in plan.primitives if p.kind == "quantile"]
    if not quantile_primitives:
        return {}
    n_groups = len(plan.groups)
    values_by_key: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for r in value_rows:
        values_by_key.setdefault(_group_key(r, n_groups), []).append(r)
    measure_order: list[int | None] = []
    for p in quantile_primitives:
        if p.measure not in measure_order:
            measure_order.append(p.measure)
    out: dict[Primitive, list[float]] = {}
    for p in quantile_primitives:
        measure = plan.measures[p.measure]  # type: ignore[index]
        column = n_groups + measure_order.index(p.measure)
        per_cell = []
        for i in released:
            cell_rows = values_by_key.get(cells.keys[i], [])
            xs = np.array([float(r[column]) for r in cell_rows if r[column] is not None])
            release = dp_quantile(xs, float(p.q), measure.clamp,
                                  budget.per_primitive_epsilon / plan.max_rows, rng=rng)
            per_cell.append(float(release.value))
        out[p] = per_cell
    return out


@dataclass
class _Noisy:
    """Everything the output columns are read from (steps 1-4)."""

    plan: QueryPlan
    budget: Budget
    cells: _Cells
    releases: dict[Primitive, Release]
    released: list[int]
    threshold: int | None
    quantiles: dict[Primitive, list[float]]

    def values(self, primitive: Primitive) -> np.ndarray:
        return _noisy(self.releases, primitive) if self.cells.keys else np.zeros(0)

    def interval(self, primitive: Primitive, level: float) -> Any:
        release = self.releases.get(primitive)
        return release.confidence_interval(level) if release is not None else None


_Column = tuple[list[Any], ColumnInfo]  # values in the released cells, column info


def _key_column(o: Output, noisy: _Noisy) -> _Column:
    values = [noisy.cells.keys[i][o.group or 0] for i in noisy.released]
    how = ("public domain" if not noisy.plan.partition_selection else
           f"released by partition selection (noisy count >= {noisy.threshold})")
    return values, ColumnInfo(o.name, "group_key", None, 0.0, "none", [how])


def _count_column(o: Output, noisy: _Noisy) -> _Column:
    """COUNT(*), COUNT(col) or COUNT(DISTINCT unit): one integer measurement."""
    p = Primitive("count", o.measure) if o.kind == "count" else Primitive("units")
    counts = noisy.values(p)
    values = [int(counts[i]) for i in noisy.released]
    return values, ColumnInfo(o.name, o.kind, noisy.interval(p, 0.95),
                              noisy.budget.per_primitive_epsilon, noisy.budget.mechanism, [])


def _sum_column(o: Output, noisy: _Noisy) -> _Column:
    """SUM(col) measured on its own (no AVG of the column beside it)."""
    p = Primitive("sum", o.measure)
    sums = noisy.values(p)
    measure = noisy.plan.measures[o.measure]  # type: ignore[index]
    whole = measure.column.type == "int" and noisy.releases[p].granularity == 1.0 \
        if noisy.cells.keys else False
    values = [int(sums[i]) if whole else float(sums[i]) for i in noisy.released]
    return values, ColumnInfo(o.name, o.kind, noisy.interval(p, 0.95),
                              noisy.budget.per_primitive_epsilon, noisy.budget.mechanism, [])


def _centred_column(o: Output, noisy: _Noisy) -> _Column:
    """AVG(col), or SUM(col) beside an AVG of the same column: post-processing of the noisy
    count and the noisy centred sum, each measured once."""
    measure = noisy.plan.measures[o.measure]  # type: ignore[index]
    lo, hi = measure.clamp  # type: ignore[misc]
    centre = (lo + hi) / 2
    count_p = Primitive("count", o.measure if measure.column.nullable else None)
    centred_p = Primitive("csum", o.measure)
    spent = 2 * noisy.budget.per_primitive_epsilon
    if not noisy.cells.keys:
        return [], ColumnInfo(o.name, o.kind, None, spent, noisy.budget.mechanism)
    counts, centred = _noisy(noisy.releases, count_p), _noisy(noisy.releases, centred_p)
    count_ci = noisy.interval(count_p, 0.975) or 0.0
    centred_ci = noisy.interval(centred_p, 0.975) or 0.0
    if o.kind == "sum":
        values: list[Any] = [float(centred[i] + centre * counts[i]) for i in noisy.released]
        return values, ColumnInfo(
            o.name, o.kind, centred_ci + abs(centre) * count_ci, spent, noisy.budget.mechanism,
            ["post-processed from the AVG of this column: centred sum + centre * count; "
             "interval by a union bound"])
    grid = power_of_two_at_most((hi - lo) / 2**20)
    values, intervals = [], []
    for i in noisy.released:
        count = max(float(counts[i]), 1.0)
        mean = float(np.clip(centre + centred[i] / count, lo, hi))
        values.append(round(mean / grid) * grid)
        denominator = counts[i] - count_ci
        half = ((centred_ci + abs(mean - centre) * count_ci) / denominator
                if denominator > 0 else math.inf)
        intervals.append(float(min(half, hi - lo)))
    return values, ColumnInfo(o.name, o.kind, intervals, spent, noisy.budget.mechanism,
                              ["noisy centred sum / noisy count, budget split evenly; interval "
                               "approximate (union bound over the two noises)"])


def _registry_column(o: Output, noisy: _Noisy) -> _Column:
    """A statistic of the registry by its SQL form (VARIANCE, STDDEV, ...): its
    `from_measurements` post-processing of the noisy count, centred sum and centred sum of
    squares, each measured once (shared with an AVG of the same column)."""
    stat = registry_stats.get(o.kind)
    measure = noisy.plan.measures[o.measure]  # type: ignore[index]
    bounds = measure.clamp
    prims = {kind: Primitive("count", o.measure if measure.column.nullable else None)
             if kind == "count" else Primitive(kind, o.measure)  # type: ignore[arg-type]
             for kind in stat.sql_measurements}
    spent = len(prims) * noisy.budget.per_primitive_epsilon
    mechanism = noisy.budget.mechanism
    if not noisy.cells.keys:
        return [], ColumnInfo(o.name, o.kind, None, spent, mechanism)
    values_of = {kind: _noisy(noisy.releases, p) for kind, p in prims.items()}
    scales = {kind: float(noisy.releases[p].noise["scale"]) for kind, p in prims.items()}
    values, intervals = [], []
    for i in noisy.released:
        cell = {kind: float(v[i]) for kind, v in values_of.items()}
        values.append(stat.from_measurements(cell, bounds)[0])  # type: ignore[arg-type]
        intervals.append(stat.measurements_half_width(
            scales, bounds, max(cell.get("count", 1.0), 1.0),  # type: ignore[arg-type]
            mechanism == "gaussian"))
    return values, ColumnInfo(o.name, o.kind, intervals, spent, mechanism,
                              [f"{stat.words}; interval approximate (first order, at the "
                               "noisy count)"])


def _quantile_column(o: Output, noisy: _Noisy) -> _Column:
    values = list(noisy.quantiles[Primitive("quantile", o.measure, o.q)])
    return values, ColumnInfo(o.name, o.kind, None, noisy.budget.per_primitive_epsilon,
                              "exponential (quantile)",
                              ["exponential mechanism over the sorted clamped values: no "
                               "additive noise interval"])


def _output_column(o: Output, noisy: _Noisy) -> _Column:
    """Step 5: one output column's values in the released cells and its column info."""
    if o.kind == "key":
        return _key_column(o, noisy)
    if o.kind in ("count", "units"):
        return _count_column(o, noisy)
    if o.kind == "sum" and Primitive("sum", o.measure) in noisy.plan.primitives:
        return _sum_column(o, noisy)
    if o.kind in ("sum", "avg"):
        return _centred_column(o, noisy)
    if o.kind != "quantile":
        return _registry_column(o, noisy)
    return _quantile_column(o, noisy)


def _order_and_limit(plan: QueryPlan, rows: list[list[Any]],
                     info: list[ColumnInfo]) -> list[list[Any]]:
    """Step 6: ORDER BY / LIMIT / OFFSET, post-processing of the noisy rows (per-row
    intervals follow their rows)."""
    order = list(range(len(rows)))
    for index, desc in reversed(plan.order):
        order.sort(key=lambda i, j=index: (rows[i][j] is None, rows[i][j]), reverse=desc)
    stop = None if plan.limit is None else plan.offset + plan.limit
    order = order[plan.offset:stop]
    for c in info:
        if isinstance(c.confidence_interval_95, list):
            c.confidence_interval_95 = [c.confidence_interval_95[i] for i in order]
    return [rows[i] for i in order]


def _guarantee(plan: QueryPlan, budget: Budget, threshold: int | None,
               seeded: bool) -> PrivacyGuarantee:
    """Step 7: sequential composition of the plan's measurements."""
    notes = list(plan.notes) + [
        f"epsilon split evenly over {len(plan.primitives)} noisy measurement(s): "
        f"{budget.per_primitive_epsilon:.6g} each"]
    if plan.partition_selection:
        notes.append(f"partition selection: cells with noisy count >= {threshold} released "
                     f"(delta {budget.selection_delta:g})")
    if seeded:
        notes.append(SEEDED_NOTE)
    mechanism = ("privlab gateway: " + ", ".join(sorted({p.kind for p in plan.primitives}))
                 + f" ({budget.mechanism})")
    return PrivacyGuarantee(
        epsilon=budget.epsilon, delta=budget.delta,
        neighbouring="user" if plan.user_level else "add_remove_record",
        mechanism=mechanism,
        accountant=f"sequential composition of {len(plan.primitives)} measurement(s)",
        notes=tuple(notes))


def answer(plan: QueryPlan, rows: list[tuple[Any, ...]], value_rows: list[tuple[Any, ...]],
           budget: Budget, rng: RngLike = None, *, seeded: bool | None = None) -> Answer:
    """Add noise to the engine's result (`rows` from `plan.sql`, `value_rows` from
    `plan.quantile_sql`) and shape the answer. `seeded=False` tells that a Generator passed
    as `rng` is a CSPRNG (the gateway keeps one per thread) rather than a seeded one.

    Steps, each a function a reviewer can check alone: the cells (`_candidate_cells`), one
    noisy release per additive measurement (`_measure`), partition selection
    (`_released_cells`), quantiles per released cell (`_quantiles`), each output column
    (`_output_column`), ORDER BY / LIMIT (`_order_and_limit`), the guarantee (`_guarantee`).
    """
    generator = make_rng(rng)
    neighbouring = "user" if plan.user_level else "add_remove_record"
    cells = _candidate_cells(plan, rows)
    releases = _measure(plan, cells, budget, neighbouring, generator)
    released, threshold = _released_cells(plan, cells, releases, budget)
    quantiles = _quantiles(plan, cells, released, value_rows, budget, generator)
    noisy = _Noisy(plan, budget, cells, releases, released, threshold, quantiles)
    columns = [_output_column(o, noisy) for o in plan.outputs]
    rows_out = [[values[r] for values, _ in columns] for r in range(len(released))]
    info = [column_info for _, column_info in columns]
    rows_out = _order_and_limit(plan, rows_out, info)
    guarantee = _guarantee(plan, budget, threshold,
                           is_seeded(rng) if seeded is None else seeded)
    return Answer(columns=[o.name for o in plan.outputs], rows=rows_out, info=info,
                  guarantee=guarantee, budget=budget)


def dry_run(plan: QueryPlan, budget: Budget) -> Answer:
    """`answer` on an empty result: validates every noise parameter before a charge (the
    gateway and `DPQuery` both run it first). It reads no row, so whatever it cannot compute
    (a calibration that overflows or does not converge for extreme parameters) depends on
    nothing private and is refused with one line (`QueryRefused`), never a raw exception."""
    try:
        return answer(plan, [], [], budget, rng=0)
    except PrivlabError:
        raise
    except (ArithmeticError, ValueError, RuntimeError) as exc:
        log.warning("noise calibration failed on the dry run: %s: %s", type(exc).__name__, exc)
        raise QueryRefused(f"the noise for epsilon={budget.epsilon:g}, delta={budget.delta:g}, "
                           f"mechanism {budget.mechanism} could not be calibrated for this "
                           "query; ask for a larger epsilon or delta") from None
