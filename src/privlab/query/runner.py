"""`DPQuery`: the gateway's DP plans as a library call, on any engine (DuckDB, PostgreSQL,
Spark), without HTTP, API keys or an audit log.

Same steps and order as `Gateway.query`: plan (sqlglot whitelist, clamping, contribution
bounding), split the budget and calibrate every noise parameter (`QueryMeasurement`, cached
per normalised plan), charge the ledger (when one is given) *before* the engine runs, then
add noise on the caller's side with the grid-valued samplers. The returned `Answer` carries
the same `PrivacyGuarantee` the gateway would.

    from privlab.engines.spark import SparkEngine
    q = DPQuery({"people": {"columns": {...}}}, SparkEngine({"people": "people.parquet"}))
    q.query("SELECT education, COUNT(*) FROM people GROUP BY education", epsilon=1.0)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from privlab.core.guarantee import check_delta, check_epsilon
from privlab.core.rng import RngLike
from privlab.engines import Engine
from privlab.errors import InvalidInputError
from privlab.query.config import GatewayConfig, _join, _limits, _table
from privlab.query.measurement import MeasurementCache
from privlab.query.noise import Answer, answer, plan_budget
from privlab.query.planner import Planner, QueryPlan
from privlab.utils.closing import Closing


def tables_config(tables: Mapping[str, Any], joins: Sequence[Mapping[str, str]] = (),
                  limits: Mapping[str, Any] | None = None,
                  database: str = "<library>") -> GatewayConfig:
    """A config holding only table metadata (the `tables:` and `joins:` sections of a
    gateway config)."""
    if not isinstance(tables, Mapping) or not tables:
        raise InvalidInputError("tables: declare at least one table ({name: {columns: ...}})")
    specs = {name: _table(name, raw, f"tables.{name}") for name, raw in tables.items()}
    declared = tuple(_join(j, f"joins[{i}]", specs) for i, j in enumerate(joins))
    return GatewayConfig(database=database, tables=specs, analysts={}, ledger="",
                         joins=declared, limits=_limits(dict(limits) if limits else None))


class DPQuery(Closing):
    """Answer DP SQL over `engine` with the public table metadata `tables` (a mapping in the
    gateway config's `tables:` format, or a `GatewayConfig`).

    `joins`: declared joins ([{left: table.column, right: table.column}]).
    `ledger` + `principal`: charge every query to a `BudgetLedger` before computing it.
    `close()` (or `with DPQuery(...) as q:`) closes the engine; the ledger stays the
    caller's. An engine dropped open warns (`ResourceWarning`), so close one or the other.
    """

    def __init__(self, tables: Mapping[str, Any] | GatewayConfig, engine: Engine, *,
                 joins: Sequence[Mapping[str, str]] = (), ledger: Any = None,
                 principal: str | None = None, check_tables: bool = True) -> None:
        self.config = tables if isinstance(tables, GatewayConfig) \
            else tables_config(tables, joins)
        if (ledger is None) != (principal is None):
            raise InvalidInputError("pass both ledger= and principal= (or neither)")
        self.engine = engine
        self.ledger = ledger
        self.principal = principal
        if check_tables:
            engine.check_tables(self.config)
        self.planner = Planner(self.config, dialect=engine.dialect,
                               placeholder=engine.placeholder)
        self.measurements = MeasurementCache(256)

    def plan(self, sql: str) -> QueryPlan:
        return self.planner.plan(sql)

    def exact(self, plan: QueryPlan) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """The engine's contribution-bounded, clamped aggregates before noise (and the
        bounded values of quantile columns). Private: for tests and engine comparisons."""
        rows = self.engine.run(plan.sql, plan.params)
        values = self.engine.run(plan.quantile_sql, plan.quantile_params) \
            if plan.quantile_sql else []
        return rows, values

    def query(self, sql: str, epsilon: float, delta: float = 0.0,
              mechanism: str | None = None, rng: RngLike = None) -> Answer:
        plan = self.planner.plan(sql)
        eps, dlt = check_epsilon(epsilon), check_delta(delta)
        budget = plan_budget(plan, eps, dlt, mechanism)
        # every noise parameter, calibrated before the charge (QueryRefused), once per
        # normalised plan and budget
        measurement = self.measurements.get(plan, budget)
        if self.ledger is not None:
            self.ledger.charge(self.principal, budget.epsilon, budget.delta,
                               description=f"privlab DPQuery: {sql}",
                               guarantee=measurement.guarantee_json)
        rows, values = self.exact(plan)
        return answer(plan, rows, values, measurement, rng=rng)

    def close(self) -> None:
        self.engine.close()
