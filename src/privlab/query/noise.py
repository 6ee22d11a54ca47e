"""Turn the engine's exact, contribution-bounded aggregates into a DP answer.

`answer` reads the engine's rows and draws with a `QueryMeasurement`
(`privlab.query.measurement`: the budget split, every noise parameter, the
partition-selection threshold and the guarantee, calibrated once per query shape before any
row is read); it calibrates nothing itself. The sensitivities and the partition-selection
rule are stated in `privlab.query.measurement`'s docstring.

A SUM next to an AVG of the same column is post-processing of the AVG's two measurements
(sum = centred sum + centre * count), not a third charge. Every value is grid-valued
(`privlab.core.mechanisms`) and drawn from the CSPRNG unless a seed is given (tests only).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privlab.core.guarantee import PrivacyGuarantee
from privlab.core.queries import dp_quantile
from privlab.core.rng import SEEDED_NOTE, RngLike, is_seeded, make_rng
from privlab.core.samplers import power_of_two_at_most
from privlab.measure import stats as registry_stats
from privlab.query.measurement import (
    MECHANISMS,
    MIN_DELTA,
    Budget,
    QueryMeasurement,
    plan_budget,
    selection_threshold,
)
from privlab.query.planner import Output, Primitive, QueryPlan

__all__ = ["MECHANISMS", "MIN_DELTA", "Answer", "Budget", "ColumnInfo", "QueryMeasurement",
           "answer", "plan_budget", "selection_threshold"]


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


def _py(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return value


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

    def exact_one(self, column: str) -> float:
        """`exact(column)[0]` of the one cell of a scalar answer, as a Python float."""
        row = self.rows_by_key.get(self.keys[0])
        return 0.0 if row is None else float(row[self.column_index[column]] or 0)


def _group_key(row: tuple[Any, ...], n_groups: int) -> tuple[Any, ...]:
    return tuple(_py(v) for v in row[:n_groups])


def _candidate_cells(plan: QueryPlan, m: QueryMeasurement,
                     rows: list[tuple[Any, ...]]) -> _Cells:
    """Step 1: which cells the answer covers (see `_Cells`)."""
    n_groups = len(plan.groups)
    rows_by_key = {_group_key(r, n_groups): r for r in rows}
    column_index = {name: i for i, name in enumerate(plan.result_columns)}
    if not plan.partition_selection:
        return _Cells(list(m.cells), rows_by_key, column_index, m.changed, phantom=False)
    if rows_by_key:
        return _Cells(list(rows_by_key), rows_by_key, column_index, m.changed, phantom=False)
    # No candidate group at all. The answer must still be shaped exactly as when there are
    # candidates (threshold, intervals, notes), or whether any row passed the WHERE would
    # show without noise: release one all-zero phantom cell the usual way, then drop it
    # whatever its noisy count.
    return _Cells([tuple([None] * n_groups)], rows_by_key, column_index, m.changed,
                  phantom=True)


def _exact_values(plan: QueryPlan, primitive: Primitive,
                  exact: Callable[[str], Any]) -> Any:
    """The exact values of one additive measurement in every cell (its sensitivity is the
    measurement's: `privlab.query.measurement`), read with `exact` (`_Cells.exact`: an array
    over the cells; `_Cells.exact_one`: the float of a scalar answer's one cell, the same
    IEEE arithmetic)."""
    if primitive.kind == "count":
        return exact("__n" if primitive.measure is None else f"__c{primitive.measure}")
    if primitive.kind == "units":
        return exact("__u")
    measure = plan.measures[primitive.measure]  # type: ignore[index]
    if primitive.kind == "csq":
        return exact(f"__q{measure.index}")
    sums = exact(f"__s{measure.index}")
    if primitive.kind == "sum":
        return sums
    # centred sum: sum(x - centre) = sum(x) - centre * count(x)
    lo, hi = measure.clamp  # type: ignore[misc]
    return sums - (lo + hi) / 2 * exact(f"__c{measure.index}")


def _measure(plan: QueryPlan, m: QueryMeasurement, cells: _Cells,
             rng: np.random.Generator) -> dict[Primitive, Sequence[float]]:
    """Step 2: the noisy values of each additive measurement, in the plan's order (the order
    of the draws from `rng`); quantiles come later, per released cell. A scalar answer's
    one value stays a Python float (a one-element list: the same draw and value as the
    float64 array, without NumPy on the hot path)."""
    noisy: dict[Primitive, Sequence[float]] = {}
    if not cells.keys:
        return noisy
    for primitive in plan.primitives:
        if primitive.kind == "quantile":
            continue
        noise = m.noises[primitive]
        if m.scalar:
            noisy[primitive] = [noise.draw_one(
                _exact_values(plan, primitive, cells.exact_one), rng)]
        else:
            noisy[primitive] = noise.draw_cells(_exact_values(plan, primitive, cells.exact), rng)
    return noisy


def _released_cells(plan: QueryPlan, m: QueryMeasurement, cells: _Cells,
                    noisy: dict[Primitive, Sequence[float]]) -> list[int]:
    """Step 3: the indices of the cells released (every cell with a public domain; those
    whose noisy count reaches the measurement's threshold with partition selection)."""
    if not plan.partition_selection or not cells.keys:
        return list(range(len(cells.keys)))
    counts = noisy[Primitive("count")]
    return [i for i in range(len(cells.keys))
            if counts[i] >= m.threshold and not cells.phantom]  # type: ignore[operator]


def _quantiles(plan: QueryPlan, m: QueryMeasurement, cells: _Cells, released: list[int],
               value_rows: list[tuple[Any, ...]],
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
            release = dp_quantile(xs, float(p.q), measure.clamp, m.quantile_epsilon, rng=rng)
            per_cell.append(float(release.value))
        out[p] = per_cell
    return out


@dataclass
class _Noisy:
    """Everything the output columns are read from (steps 1-4)."""

    plan: QueryPlan
    measurement: QueryMeasurement
    cells: _Cells
    noisy: dict[Primitive, Sequence[float]]
    released: list[int]
    quantiles: dict[Primitive, list[float]]

    @property
    def budget(self) -> Budget:
        return self.measurement.budget

    @property
    def threshold(self) -> int | None:
        return self.measurement.threshold

    def values(self, primitive: Primitive) -> Sequence[float]:
        return self.noisy[primitive] if self.cells.keys else ()

    def interval(self, primitive: Primitive, level: float) -> Any:
        """The measurement's half-width (None where nothing was drawn)."""
        if not self.cells.keys or primitive not in self.noisy:
            return None
        return self.measurement.noises[primitive].half_width(level)


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
    whole = measure.column.type == "int" and \
        noisy.measurement.noises[p].granularity == 1.0 if noisy.cells.keys else False
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
    counts, centred = noisy.noisy[count_p], noisy.noisy[centred_p]
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
        mean = float(min(max(centre + float(centred[i]) / count, lo), hi))  # np.clip, unboxed
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
    values_of = {kind: noisy.noisy[p] for kind, p in prims.items()}
    scales = {kind: noisy.measurement.noises[p].scale for kind, p in prims.items()}
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


def _guarantee(m: QueryMeasurement, seeded: bool) -> PrivacyGuarantee:
    """Step 7: the measurement's guarantee, saying so when the noise came from a seed."""
    if not seeded:
        return m.guarantee
    return dataclasses.replace(m.guarantee, notes=m.guarantee.notes + (SEEDED_NOTE,))


def answer(plan: QueryPlan, rows: list[tuple[Any, ...]], value_rows: list[tuple[Any, ...]],
           measurement: QueryMeasurement, rng: RngLike = None, *,
           seeded: bool | None = None) -> Answer:
    """Add noise to the engine's result (`rows` from `plan.sql`, `value_rows` from
    `plan.quantile_sql`) with `measurement` (`measure_query(plan, budget)`, or a cached one
    of the same normalised plan) and shape the answer. `seeded=False` tells that a Generator
    passed as `rng` is a CSPRNG (the gateway keeps one per thread) rather than a seeded one.

    Steps, each a function a reviewer can check alone: the cells (`_candidate_cells`), the
    noisy values of each additive measurement (`_measure`), partition selection
    (`_released_cells`), quantiles per released cell (`_quantiles`), each output column
    (`_output_column`), ORDER BY / LIMIT (`_order_and_limit`), the guarantee (`_guarantee`).
    """
    if measurement.primitives != plan.primitives:
        raise ValueError("this measurement was built for another plan")
    generator = make_rng(rng)
    cells = _candidate_cells(plan, measurement, rows)
    noisy_values = _measure(plan, measurement, cells, generator)
    released = _released_cells(plan, measurement, cells, noisy_values)
    quantiles = _quantiles(plan, measurement, cells, released, value_rows, generator)
    noisy = _Noisy(plan, measurement, cells, noisy_values, released, quantiles)
    columns = [_output_column(o, noisy) for o in plan.outputs]
    rows_out = [[values[r] for values, _ in columns] for r in range(len(released))]
    info = [column_info for _, column_info in columns]
    rows_out = _order_and_limit(plan, rows_out, info)
    guarantee = _guarantee(measurement, is_seeded(rng) if seeded is None else seeded)
    return Answer(columns=[o.name for o in plan.outputs], rows=rows_out, info=info,
                  guarantee=guarantee, budget=measurement.budget)
