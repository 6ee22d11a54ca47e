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
from privlab.query.planner import Primitive, QueryPlan, QueryRefused

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


def answer(plan: QueryPlan, rows: list[tuple[Any, ...]], value_rows: list[tuple[Any, ...]],
           budget: Budget, rng: RngLike = None, *, seeded: bool | None = None) -> Answer:
    """Add noise to the engine's result (`rows` from `plan.sql`, `value_rows` from
    `plan.quantile_sql`) and shape the answer. `seeded=False` tells that a Generator passed
    as `rng` is a CSPRNG (the gateway keeps one per thread) rather than a seeded one."""
    gen = make_rng(rng)
    neighbouring = "user" if plan.user_level else "add_remove_record"
    k = plan.max_rows
    n_groups = len(plan.groups)
    col = {name: i for i, name in enumerate(plan.result_columns)}
    by_key: dict[tuple[Any, ...], tuple[Any, ...]] = {
        tuple(_py(v) for v in r[:n_groups]): r for r in rows}
    phantom = False
    if plan.partition_selection:
        cells = list(by_key)
        changed = k
        if not cells:
            # No candidate group at all. The answer must still be shaped exactly as when
            # there are candidates (threshold, intervals, notes), or whether any row passed
            # the WHERE would show without noise: release one all-zero phantom cell the
            # usual way, then drop it whatever its noisy count.
            cells, phantom = [tuple([None] * n_groups)], True
    else:
        cells = plan.cells()
        changed = max(1, min(k, len(cells)))
    scalar = n_groups == 0

    def vector(name: str) -> np.ndarray:
        i = col[name]
        return np.array([float(by_key[c][i] or 0) if c in by_key else 0.0 for c in cells],
                        dtype=np.float64)

    releases: dict[Primitive, Release] = {}
    exact: dict[Primitive, np.ndarray] = {}
    for p in plan.primitives:
        if p.kind == "quantile":
            continue
        if p.kind == "count":
            name = "__n" if p.measure is None else f"__c{p.measure}"
            x, sens, integer = vector(name), float(k), True
        elif p.kind == "units":
            x, sens, integer = vector("__u"), float(changed), True
        else:
            m = plan.measures[p.measure]  # type: ignore[index]
            lo, hi = m.clamp  # type: ignore[misc]
            x = vector(f"__s{m.index}")
            is_int = m.column.type == "int"
            if p.kind == "sum":
                sens, integer = k * max(abs(lo), abs(hi)), is_int
            else:  # centred sum
                centre = (lo + hi) / 2
                x = x - centre * vector(f"__c{m.index}")
                sens = k * (hi - lo) / 2
                integer = is_int and float(centre).is_integer() and float(sens).is_integer()
        exact[p] = x
        if not cells:
            continue
        releases[p] = _release(x, sens, budget, integer, changed, neighbouring, gen, scalar)

    def noisy(p: Primitive) -> np.ndarray:
        return np.atleast_1d(np.asarray(releases[p].value, dtype=np.float64))

    # partition selection: keep the cells whose noisy row count reaches the threshold
    keep = list(range(len(cells)))
    threshold = None
    if plan.partition_selection and cells:
        threshold = selection_threshold(k, budget.per_primitive_epsilon, budget.selection_delta)
        counts = noisy(Primitive("count"))
        keep = [i for i in range(len(cells)) if counts[i] >= threshold and not phantom]

    # quantiles, per kept cell
    quantiles: dict[Primitive, list[float]] = {}
    qprims = [p for p in plan.primitives if p.kind == "quantile"]
    if qprims:
        values: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        for r in value_rows:
            values.setdefault(tuple(_py(v) for v in r[:n_groups]), []).append(r)
        qmeasures = []
        for p in qprims:
            if p.measure not in qmeasures:
                qmeasures.append(p.measure)
        for p in qprims:
            m = plan.measures[p.measure]  # type: ignore[index]
            j = n_groups + qmeasures.index(p.measure)
            out = []
            for i in keep:
                cell_rows = values.get(cells[i], [])
                xs = np.array([float(r[j]) for r in cell_rows if r[j] is not None])
                rel = dp_quantile(xs, float(p.q), m.clamp, budget.per_primitive_epsilon / k,
                                  rng=gen)
                out.append(float(rel.value))
            quantiles[p] = out

    # assemble the outputs
    rows_out: list[list[Any]] = [[] for _ in keep]
    info: list[ColumnInfo] = []
    eps_i = budget.per_primitive_epsilon
    for o in plan.outputs:
        ci: Any = None
        notes: list[str] = []
        mech = budget.mechanism
        if o.kind == "key":
            for r, i in zip(rows_out, keep, strict=True):
                r.append(cells[i][o.group or 0])
            info.append(ColumnInfo(o.name, "group_key", None, 0.0, "none",
                                   ["public domain" if not plan.partition_selection else
                                    f"released by partition selection (noisy count >= "
                                    f"{threshold})"]))
            continue
        if o.kind in ("count", "units"):
            p = Primitive("count", o.measure) if o.kind == "count" else Primitive("units")
            vals = noisy(p) if cells else np.zeros(0)
            for r, i in zip(rows_out, keep, strict=True):
                r.append(int(vals[i]))
            ci = releases[p].confidence_interval(0.95) if p in releases else None
            spent = eps_i
        elif o.kind == "sum" and Primitive("sum", o.measure) in plan.primitives:
            p = Primitive("sum", o.measure)
            vals = noisy(p) if cells else np.zeros(0)
            m = plan.measures[o.measure]  # type: ignore[index]
            for r, i in zip(rows_out, keep, strict=True):
                r.append(int(vals[i]) if m.column.type == "int" and
                         releases[p].granularity == 1.0 else float(vals[i]))
            ci = releases[p].confidence_interval(0.95) if p in releases else None
            spent = eps_i
        elif o.kind in ("sum", "avg"):
            m = plan.measures[o.measure]  # type: ignore[index]
            lo, hi = m.clamp  # type: ignore[misc]
            centre = (lo + hi) / 2
            pc = Primitive("count", o.measure if m.column.nullable else None)
            ps = Primitive("csum", o.measure)
            spent = 2 * eps_i
            if not cells:
                info.append(ColumnInfo(o.name, o.kind, None, spent, mech))
                continue
            n_noisy, s_noisy = noisy(pc), noisy(ps)
            ci_n = releases[pc].confidence_interval(0.975) or 0.0
            ci_s = releases[ps].confidence_interval(0.975) or 0.0
            if o.kind == "sum":
                for r, i in zip(rows_out, keep, strict=True):
                    r.append(float(s_noisy[i] + centre * n_noisy[i]))
                ci = ci_s + abs(centre) * ci_n
                notes.append("post-processed from the AVG of this column: centred sum + "
                             "centre * count; interval by a union bound")
            else:
                g = power_of_two_at_most((hi - lo) / 2**20)
                cis: list[float | None] = []
                for r, i in zip(rows_out, keep, strict=True):
                    n = max(float(n_noisy[i]), 1.0)
                    mean = float(np.clip(centre + s_noisy[i] / n, lo, hi))
                    r.append(round(mean / g) * g)
                    denom = n_noisy[i] - ci_n
                    half = (ci_s + abs(mean - centre) * ci_n) / denom if denom > 0 else math.inf
                    cis.append(float(min(half, hi - lo)))
                ci = cis
                notes.append("noisy centred sum / noisy count, budget split evenly; interval "
                             "approximate (union bound over the two noises)")
        else:  # quantile
            p = Primitive("quantile", o.measure, o.q)
            for r, pos in zip(rows_out, range(len(keep)), strict=True):
                r.append(quantiles[p][pos])
            spent = eps_i
            mech = "exponential (quantile)"
            notes.append("exponential mechanism over the sorted clamped values: no additive "
                         "noise interval")
        info.append(ColumnInfo(o.name, o.kind, ci, spent, mech, notes))

    # ORDER BY / LIMIT / OFFSET are post-processing of the noisy rows
    order = list(range(len(rows_out)))
    for index, desc in reversed(plan.order):
        order.sort(key=lambda i, j=index: (rows_out[i][j] is None, rows_out[i][j]),
                   reverse=desc)
    stop = None if plan.limit is None else plan.offset + plan.limit
    order = order[plan.offset:stop]
    rows_out = [rows_out[i] for i in order]
    for c in info:
        if isinstance(c.confidence_interval_95, list):
            c.confidence_interval_95 = [c.confidence_interval_95[i] for i in order]

    notes = list(plan.notes) + [
        f"epsilon split evenly over {len(plan.primitives)} noisy measurement(s): "
        f"{eps_i:.6g} each"]
    if plan.partition_selection:
        notes.append(f"partition selection: cells with noisy count >= {threshold} released "
                     f"(delta {budget.selection_delta:g})")
    if is_seeded(rng) if seeded is None else seeded:
        notes.append(SEEDED_NOTE)
    mech_name = ("privlab gateway: " + ", ".join(sorted({p.kind for p in plan.primitives}))
                 + f" ({budget.mechanism})")
    guarantee = PrivacyGuarantee(
        epsilon=budget.epsilon, delta=budget.delta,
        neighbouring="user" if plan.user_level else "add_remove_record",
        mechanism=mech_name,
        accountant=f"sequential composition of {len(plan.primitives)} measurement(s)",
        notes=tuple(notes))
    return Answer(columns=[o.name for o in plan.outputs], rows=rows_out, info=info,
                  guarantee=guarantee, budget=budget)
