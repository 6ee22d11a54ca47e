"""The SELECT list: each output column (a group key, COUNT, SUM / AVG, a quantile or a
statistic of the registry with an SQL form) checked against the config and turned into an
`Output` over the plan's measures and group keys, with its default name.
"""

from __future__ import annotations

from typing import Any

from privlab.measure import stats as registry_stats
from privlab.query.planner.filters import FilterChecker
from privlab.query.planner.plan import (
    Measure,
    Output,
    PlanState,
    QueryRefused,
    refuse,
)


class OutputChecker(FilterChecker):
    """The select-list half of `Validator` (column references come from `FilterChecker`)."""

    def _measure(self, st: PlanState, node: Any, need_bounds: bool, what: str) -> int:
        from sqlglot import exp

        if type(node) is not exp.Column:
            raise refuse(f"{what} takes a column name (no expressions)")
        tbl, col = self._column(st, node)
        clamp = None
        if need_bounds:
            if not col.numeric:
                raise refuse(f"{what} needs a numeric column; {col.name!r} is {col.type}")
            if col.bounds is None:
                raise refuse(f"{what}({col.name}) needs public bounds and none are declared "
                             "for this column")
            clamp = (float(col.bounds[0]), float(col.bounds[1]))
        for m in st.measures:
            if m.table.alias == tbl.alias and m.column.name == col.name:
                if clamp is not None and m.clamp is None:
                    st.measures[m.index] = Measure(m.index, tbl, col, clamp)
                return m.index
        st.measures.append(Measure(len(st.measures), tbl, col, clamp))
        return len(st.measures) - 1

    def _quantile_q(self, node: Any) -> float:
        kind, value = self._literal(node)
        if kind != "number" or not 0.0 <= float(value) <= 1.0:
            raise refuse("a quantile must be a number in [0, 1]")
        return float(value)

    _QUANTILE_FUNCTIONS = ("quantile_cont", "quantile_disc", "quantile", "percentile_cont")

    def _output(self, st: PlanState, node: Any) -> Output:
        """A SELECT item as an Output: each accepted node type has its own step below;
        anything else is refused (`_refuse_output` says why)."""
        from sqlglot import exp

        t = type(node)
        if t is exp.Column:
            return self._group_key(st, node)
        if t is exp.Count:
            return self._count(st, node)
        if t in (exp.Sum, exp.Avg):
            return self._sum_avg(st, node)
        if t is exp.Median:
            self._plain(node, {"this"})
            return Output("", "quantile", measure=self._measure(st, node.this, True, "MEDIAN"),
                          q=0.5)
        if t is exp.WithinGroup:
            return self._within_group(st, node)
        if t is exp.Quantile or (t is exp.Anonymous
                                 and str(node.this).lower() in self._QUANTILE_FUNCTIONS):
            return self._quantile_call(st, node)
        stat = registry_stats.by_sql(node.key)
        if stat is not None:
            return self._registry_statistic(st, node, stat.name)
        raise self._refuse_output(node)

    def _registry_statistic(self, st: PlanState, node: Any, stat: str) -> Output:
        """A statistic of the registry by its SQL form (VARIANCE, STDDEV, ...) of a column
        with declared bounds (no DISTINCT)."""
        from sqlglot import exp

        self._plain(node, {"this"})
        what = node.key.upper()
        if type(node.this) is exp.Distinct:
            raise refuse(f"{what}(DISTINCT ...) is not supported")
        return Output("", stat, measure=self._measure(st, node.this, True, what))

    def _group_key(self, st: PlanState, node: Any) -> Output:
        """A bare column: only a GROUP BY key (row-level values are never returned)."""
        tbl, col = self._column(st, node)
        for g in st.groups:
            if g.table.alias == tbl.alias and g.column.name == col.name:
                return Output("", "key", group=g.index)
        raise refuse(f"column {col.name!r} is selected without an aggregate and is not in "
                     "GROUP BY: row-level values are never returned")

    def _count(self, st: PlanState, node: Any) -> Output:
        """COUNT(*), COUNT(1), COUNT(DISTINCT privacy unit) or COUNT(column)."""
        from sqlglot import exp

        self._plain(node, {"this", "big_int"})
        arg = node.this
        if type(arg) is exp.Star or (type(arg) is exp.Literal and not arg.is_string
                                     and arg.this == "1"):
            return Output("", "count")
        if type(arg) is exp.Distinct:
            self._plain(arg, {"expressions"})
            if len(arg.expressions) != 1 or type(arg.expressions[0]) is not exp.Column:
                raise refuse("COUNT(DISTINCT ...) takes one column")
            tbl, col = self._column(st, arg.expressions[0])
            if tbl.spec.privacy_unit != col.name:
                raise refuse("COUNT(DISTINCT ...) is supported on the privacy unit column "
                             "only (other distinct counts have unbounded sensitivity)")
            return Output("", "units")
        m = self._measure(st, arg, False, "COUNT")
        if not st.measures[m].column.nullable:
            return Output("", "count")
        return Output("", "count", measure=m)

    def _sum_avg(self, st: PlanState, node: Any) -> Output:
        """SUM / AVG of a column with declared bounds (no DISTINCT)."""
        from sqlglot import exp

        self._plain(node, {"this"})
        is_sum = type(node) is exp.Sum
        what = "SUM" if is_sum else "AVG"
        if type(node.this) is exp.Distinct:
            raise refuse(f"{what}(DISTINCT ...) is not supported")
        m = self._measure(st, node.this, True, what)
        return Output("", "sum" if is_sum else "avg", measure=m)

    def _within_group(self, st: PlanState, node: Any) -> Output:
        """PERCENTILE_CONT / PERCENTILE_DISC (q) WITHIN GROUP (ORDER BY column [ASC])."""
        from sqlglot import exp

        inner, order = node.this, node.expression
        if type(inner) not in (exp.PercentileCont, exp.PercentileDisc) or \
                type(order) is not exp.Order or len(order.expressions) != 1:
            raise refuse("WITHIN GROUP is supported for PERCENTILE_CONT / PERCENTILE_DISC "
                         "(q) WITHIN GROUP (ORDER BY column)")
        self._plain(inner, {"this"})
        ordered = order.expressions[0]
        if ordered.args.get("desc"):
            raise refuse("use ORDER BY column ASC in WITHIN GROUP")
        q = self._quantile_q(inner.this)
        return Output("", "quantile", measure=self._measure(st, ordered.this, True,
                                                             "PERCENTILE"), q=q)

    def _quantile_call(self, st: PlanState, node: Any) -> Output:
        """QUANTILE_CONT(column, q) and its spellings."""
        from sqlglot import exp

        args = [node.this, node.args.get("quantile")] if type(node) is exp.Quantile \
            else list(node.expressions)
        if len(args) != 2 or args[1] is None:
            raise refuse("QUANTILE_CONT(column, q) takes a column and a number in [0, 1]")
        return Output("", "quantile", measure=self._measure(st, args[0], True, "QUANTILE"),
                      q=self._quantile_q(args[1]))

    def _refuse_output(self, node: Any) -> QueryRefused:
        """The refusal for a SELECT item that is not an accepted aggregate, naming why."""
        from sqlglot import exp

        t = type(node)
        if t is exp.Window:
            return refuse("window functions (OVER) are not supported")
        if t is exp.Filter:
            return refuse("aggregate FILTER clauses are not supported; put the condition in "
                          "WHERE")
        if t is exp.Star:
            return refuse("SELECT * returns row-level values and is refused; select aggregates")
        if t in (exp.Subquery, exp.Select):
            return refuse("sub-queries are not accepted")
        if t in (exp.Max, exp.Min):
            return refuse(f"{node.key.upper()} reveals an extreme row value and is refused; "
                          "use a quantile such as PERCENTILE_CONT(0.95)")
        fname = node.key.upper() if t is not exp.Anonymous else str(node.this)[:40].upper()
        more = "".join(f", {n.upper()}" for n in registry_stats.sql_names())
        return refuse(f"{fname} is not supported in SELECT: use COUNT, SUM, AVG{more}, MEDIAN "
                      "or PERCENTILE_CONT over declared columns")

    def _default_name(self, st: PlanState, out: Output) -> str:
        if out.kind == "key":
            return st.groups[out.group or 0].column.name
        col = None if out.measure is None else st.measures[out.measure].column.name
        if out.kind == "count":
            return "count" if col is None else f"count_{col}"
        if out.kind == "units":
            return "count_units"
        if out.kind == "quantile":
            return f"median_{col}" if out.q == 0.5 else f"quantile_{out.q:g}_{col}"
        return f"{out.kind}_{col}"

    @staticmethod
    def _unique_names(outputs: list[Output]) -> list[Output]:
        seen: dict[str, int] = {}
        result = []
        for o in outputs:
            name = o.name
            if name in seen:
                seen[name] += 1
                name = f"{name}_{seen[o.name]}"
            seen.setdefault(name, 0)
            result.append(Output(name, o.kind, o.group, o.measure, o.q))
        return result

