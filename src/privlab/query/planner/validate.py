"""Validation: walk the parsed query tree, accept only nodes this module can translate, and
build the `QueryPlan` (tables and declared joins, row filters, group keys, the select list,
ORDER BY / LIMIT, the noisy measurements). Whitelist, not blacklist (see
`privlab.query.planner`). The WHERE and JOIN ... ON clauses are translated to SQL as they are
checked (every literal a bound parameter) by `filters`; the select list is `outputs`'; the
aggregation around them is `sqlgen`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce
from typing import Any

from privlab.measure import stats as registry_stats
from privlab.query.config import ColumnSpec, GatewayConfig
from privlab.query.planner.filters import like_pattern
from privlab.query.planner.limits import check_text, parse
from privlab.query.planner.outputs import OutputChecker
from privlab.query.planner.plan import (
    GroupKey,
    Output,
    PlanState,
    Primitive,
    QueryPlan,
    TableUse,
    refuse,
)
from privlab.query.planner.sqlgen import SqlGenerator, value_ref
from privlab.schema.units import missing_unit_note

__all__ = ["Validator", "like_pattern"]


class Validator(OutputChecker):
    """Checks one query tree against the config and builds its plan (`check`)."""

    def __init__(self, config: GatewayConfig, placeholder: Callable[[int], str]) -> None:
        self.config = config
        self.placeholder = placeholder
        self.sql = SqlGenerator(config.schema)

    def check(self, sql: str, allowed: tuple[str, ...] | None,
              tokens: list[Any] | None = None) -> QueryPlan:
        """Validate `sql` and rewrite it into a `QueryPlan`; `QueryRefused` otherwise.

        Steps in the order their refusals are checked: the clauses used, FROM and JOINs
        (`_from_clause`), WHERE, GROUP BY (`_group_by`), the SELECT list (`_select_list`),
        ORDER BY / LIMIT / OFFSET, the noisy measurements, then the SQL (`_compile`).
        `tokens` come from a caller that already checked the text (`Planner.plan`), so the
        text is checked here only without them."""
        if tokens is None:
            sql = check_text(sql, self.config.limits.max_sql_chars)
        tree = parse(sql, self.config.limits, tokens)
        used = {k for k, v in tree.args.items() if v not in (None, [], False)}
        extra = used - {"expressions", "from_", "joins", "where", "group", "order", "limit",
                        "offset"}
        if extra:
            names = ", ".join(sorted(e.rstrip("_").upper() for e in extra))
            raise refuse(f"{names} is not supported; use SELECT aggregates FROM table [JOIN] "
                         "[WHERE] [GROUP BY] [ORDER BY] [LIMIT]")
        st = PlanState(placeholder=self.placeholder)
        on_sql = self._from_clause(st, tree, allowed)
        private = [t for t in st.tables if not t.spec.public]
        if not private:
            raise refuse("the query reads only public tables; query a private table")
        user_level = private[0].spec.privacy_unit is not None
        max_rows = max(t.spec.max_rows for t in private)
        unit = (private[0], private[0].spec.columns[private[0].spec.privacy_unit]) \
            if user_level else None

        where_sql = None
        if tree.args.get("where") is not None:
            where_sql = self._predicate(st, tree.args["where"].this)
        partition_selection = self._group_by(st, tree)
        outputs, select_exprs = self._select_list(st, tree, user_level)
        order = self._order(tree, outputs, select_exprs, st)
        limit = self._count_literal(tree.args.get("limit"), "LIMIT")
        offset = self._count_literal(tree.args.get("offset"), "OFFSET") or 0
        primitives = self._primitives(st, outputs, partition_selection)
        sql_text, params, result_columns, quantile_sql, quantile_params = self._compile(
            st, tree, on_sql, where_sql, unit, user_level, max_rows, primitives)
        notes = []
        if user_level:
            notes.append(f"at most {max_rows} row(s) per {unit[1].name if unit else 'unit'} "
                         "kept (chosen at random) before aggregation")
            if unit is not None:
                notes.append(missing_unit_note(unit[1].name))
        return QueryPlan(
            sql=sql_text, params=params, quantile_sql=quantile_sql,
            quantile_params=quantile_params, tables=tuple(st.tables),
            measures=tuple(st.measures), groups=tuple(st.groups), outputs=tuple(outputs),
            primitives=primitives, order=order, limit=limit, offset=offset, max_rows=max_rows,
            user_level=user_level, partition_selection=partition_selection,
            result_columns=result_columns, notes=tuple(notes),
        )

    def _from_clause(self, st: PlanState, tree: Any, allowed: tuple[str, ...] | None
                     ) -> list[str]:
        """FROM one declared table and INNER JOINs along declared joins; the JOIN ... ON SQL."""
        from_ = tree.args.get("from_")
        if from_ is None:
            raise refuse("FROM is required: name a declared table (GET /v1/tables)")
        self._add_table(st, from_.this, allowed)
        joins = tree.args.get("joins") or []
        if len(joins) > self.config.limits.max_joins:
            raise refuse(f"at most {self.config.limits.max_joins} joins per query")
        return [self._add_join(st, join, allowed) for join in joins]

    def _group_by(self, st: PlanState, tree: Any) -> bool:
        """GROUP BY plain columns, each with a public domain or partition selection enabled;
        the public domain's cell count within limits. Returns whether partition selection
        is needed (some key has no public domain)."""
        from sqlglot import exp

        group = tree.args.get("group")
        if group is not None:
            gused = {k for k, v in group.args.items() if v not in (None, [], False)}
            if gused - {"expressions"}:
                raise refuse("GROUP BY ROLLUP / CUBE / GROUPING SETS / ALL are not supported")
            for g in group.expressions:
                if type(g) is not exp.Column:
                    raise refuse("GROUP BY accepts column names only (no expressions or "
                                 "positions)")
                tbl, col = self._column(st, g)
                if any(k.table.alias == tbl.alias and k.column.name == col.name
                       for k in st.groups):
                    raise refuse(f"column {col.name!r} appears twice in GROUP BY")
                if col.domain is None and not col.partition_selection:
                    raise refuse(f"GROUP BY {col.name!r} is refused: the column has no public "
                                 "domain and partition selection is not enabled for it")
                st.groups.append(GroupKey(len(st.groups), tbl, col))
        partition_selection = any(g.domain is None for g in st.groups)
        if not partition_selection and st.groups:
            cells = reduce(lambda a, g: a * len(g.domain or ()), st.groups, 1)
            if cells > self.config.limits.max_groups:
                raise refuse(f"GROUP BY has {cells} cells in its public domain; the limit is "
                             f"{self.config.limits.max_groups}")
        return partition_selection

    def _select_list(self, st: PlanState, tree: Any,
                     user_level: bool) -> tuple[list[Output], list[Any]]:
        """The outputs (group keys and aggregates, at least one aggregate, within limits,
        unique names) and the SELECT expressions they came from (for ORDER BY)."""
        from sqlglot import exp

        outputs: list[Output] = []
        select_exprs: list[Any] = []
        for item in tree.expressions:
            name = None
            node = item
            if type(item) is exp.Alias:
                name = item.alias
                node = item.this
                if not name:
                    raise refuse("an alias must be a name")
            out = self._output(st, node)
            outputs.append(Output(name or self._default_name(st, out), out.kind, out.group,
                                  out.measure, out.q))
            select_exprs.append(node)
        if not any(o.kind != "key" for o in outputs):
            raise refuse("select at least one aggregate (COUNT, SUM, AVG, MEDIAN, ...): "
                         "row-level values are never returned")
        if len([o for o in outputs if o.kind != "key"]) > self.config.limits.max_aggregates:
            raise refuse(f"at most {self.config.limits.max_aggregates} aggregates per query")
        outputs = self._unique_names(outputs)
        for o in outputs:
            if o.kind == "units" and not user_level:
                raise refuse("COUNT(DISTINCT ...) needs a table with a privacy unit; use "
                             "COUNT(*) (each row is one person here)")
        return outputs, select_exprs

    def _compile(self, st: PlanState, tree: Any, on_sql: list[str], where_sql: str | None,
                 unit: tuple[TableUse, ColumnSpec] | None, user_level: bool, max_rows: int,
                 primitives: tuple[Primitive, ...]
                 ) -> tuple[str, tuple[Any, ...], tuple[str, ...], str | None, tuple[Any, ...]]:
        """(sql, params, result columns, quantile sql, quantile params): the aggregation, and
        with quantiles a second statement of clamped values whose WHERE is translated
        again so that its parameters start from 0."""
        sql_text, result_columns = self.sql.aggregation(st, on_sql, where_sql, unit,
                                                        user_level, max_rows, primitives)
        params = tuple(st.params)
        quantile_sql, quantile_params = None, ()
        if any(p.kind == "quantile" for p in primitives):
            st.params = []
            where_again = None
            if tree.args.get("where") is not None:
                where_again = self._predicate(st, tree.args["where"].this)
            quantile_sql = self.sql.quantile_values(st, on_sql, where_again, unit,
                                                    user_level, max_rows, primitives)
            quantile_params = tuple(st.params)
        return sql_text, params, result_columns, quantile_sql, quantile_params

    # -- tables and joins -------------------------------------------------------------------

    def _add_table(self, st: PlanState, node: Any, allowed: tuple[str, ...] | None) -> TableUse:
        from sqlglot import exp

        if type(node) is not exp.Table:
            raise refuse("FROM accepts a declared table name only (no sub-queries, functions "
                         "or VALUES)")
        used = {k for k, v in node.args.items() if v not in (None, [], False)}
        if used & {"db", "catalog"}:
            raise refuse("schema-qualified names are not accepted; use a declared table name "
                         "(GET /v1/tables)")
        if used - {"this", "alias"}:
            raise refuse("table modifiers (TABLESAMPLE, hints, ONLY, ...) are not supported")
        ident = node.this
        if type(ident) is not exp.Identifier:
            raise refuse("FROM accepts a declared table name only")
        spec = self.config.table(ident.this)
        if spec is None or (allowed is not None and spec.name not in allowed):
            # One refusal, word for word, for a table that does not exist and for one this
            # analyst may not query (it names what was typed, not the declared spelling):
            # a different status or text would list the hidden tables' names.
            raise refuse(f"table {ident.this[:64]!r} is not declared or not open to you "
                         "(GET /v1/tables lists the tables you may query)")
        if any(t.spec.name == spec.name for t in st.tables):
            raise refuse(f"table {spec.name!r} appears twice; self-joins are not supported")
        names = [spec.name.lower()]
        alias = node.args.get("alias")
        if alias is not None:
            aused = {k for k, v in alias.args.items() if v not in (None, [], False)}
            if aused - {"this"} or type(alias.this) is not exp.Identifier:
                raise refuse("a table alias must be a plain name")
            names = [alias.this.this.lower()]
        for t in st.tables:
            if set(names) & set(t.names):
                raise refuse(f"table name or alias {names[0]!r} is used twice")
        use = TableUse(alias=f"t{len(st.tables)}", spec=spec, names=tuple(names))
        st.tables.append(use)
        return use

    def _add_join(self, st: PlanState, join: Any, allowed: tuple[str, ...] | None) -> str:
        from sqlglot import exp

        used = {k for k, v in join.args.items() if v not in (None, [], False)}
        kind = (join.args.get("kind") or "").upper()
        if used - {"this", "on", "kind"} or kind not in ("", "INNER"):
            raise refuse("only INNER JOIN ... ON a.col = b.col along a declared join is "
                         "supported")
        on = join.args.get("on")
        if on is None:
            raise refuse("a JOIN needs ON a.col = b.col along a declared join (comma joins and "
                         "CROSS JOIN are refused)")
        new = self._add_table(st, join.this, allowed)
        if type(on) is not exp.EQ or type(on.this) is not exp.Column \
                or type(on.expression) is not exp.Column:
            raise refuse("JOIN ... ON must be one equality of two columns, e.g. "
                         "ON a.id = b.person_id")
        lt, lc = self._column(st, on.this)
        rt, rc = self._column(st, on.expression)
        if new.alias not in (lt.alias, rt.alias) or lt.alias == rt.alias:
            raise refuse("JOIN ... ON must connect the joined table with an earlier one")
        a, b = (lt.spec.name, lc.name), (rt.spec.name, rc.name)
        if not any(j.matches(a, b) for j in self.config.joins):
            raise refuse(f"join {a[0]}.{a[1]} = {b[0]}.{b[1]} is not declared (GET /v1/tables "
                         "lists the declared joins)")
        return (f"JOIN {self.sql.source(new.spec)} AS {new.alias} ON "
                f"{value_ref(lt.alias, lc)} = {value_ref(rt.alias, rc)}")

    def _order(self, tree: Any, outputs: list[Output], select_exprs: list[Any],
               st: PlanState) -> tuple[tuple[int, bool], ...]:
        from sqlglot import exp

        order = tree.args.get("order")
        if order is None:
            return ()
        self._plain(order, {"expressions"})
        result = []
        for ordered in order.expressions:
            if type(ordered) is not exp.Ordered:
                raise refuse("ORDER BY accepts output names")
            self._plain(ordered, {"this", "desc", "nulls_first"})
            target = ordered.this
            index = None
            if type(target) is exp.Literal and not target.is_string:
                pos = str(target.this)
                if not pos.isdigit() or not 1 <= int(pos) <= len(outputs):
                    raise refuse(f"ORDER BY position must be between 1 and {len(outputs)}")
                result.append((int(pos) - 1, bool(ordered.args.get("desc"))))
                continue
            if type(target) is exp.Column and target.args.get("table") is None:
                name = target.this.this if type(target.this) is exp.Identifier else None
                for i, o in enumerate(outputs):
                    if name is not None and o.name.lower() == str(name).lower():
                        index = i
                        break
            if index is None:
                for i, e in enumerate(select_exprs):
                    if e == target:
                        index = i
                        break
            if index is None:
                raise refuse("ORDER BY accepts output columns (an alias, a group key or an "
                             "aggregate of the SELECT list)")
            result.append((index, bool(ordered.args.get("desc"))))
        return tuple(result)

    def _count_literal(self, node: Any, what: str) -> int | None:
        from sqlglot import exp

        if node is None:
            return None
        value = node.expression if type(node) in (exp.Limit, exp.Offset) else node
        if type(value) is not exp.Literal or value.is_string or not str(value.this).isdigit():
            raise refuse(f"{what} takes a non-negative integer")
        n = int(value.this)
        if n > 1_000_000:
            raise refuse(f"{what} is limited to 1000000")
        return n

    # -- budget split -----------------------------------------------------------------------

    @staticmethod
    def _primitives(st: PlanState, outputs: list[Output],
                    partition_selection: bool) -> tuple[Primitive, ...]:
        """The noisy measurements the outputs need, shared where possible (AVG reuses the
        count of its column; a SUM next to an AVG of the same column is derived from it)."""
        prims: list[Primitive] = []

        def need(p: Primitive) -> None:
            if p not in prims:
                prims.append(p)

        avg_measures = {o.measure for o in outputs if o.kind == "avg"}
        if partition_selection:
            need(Primitive("count"))
        for o in outputs:
            if o.kind == "count":
                need(Primitive("count", o.measure))
            elif o.kind == "units":
                need(Primitive("units"))
            elif o.kind == "avg":
                m = st.measures[o.measure]  # type: ignore[index]
                need(Primitive("count", o.measure if m.column.nullable else None))
                need(Primitive("csum", o.measure))
            elif o.kind == "sum" and o.measure not in avg_measures:
                need(Primitive("sum", o.measure))
            elif o.kind == "quantile":
                need(Primitive("quantile", o.measure, o.q))
            elif o.kind in registry_stats.sql_names():
                m = st.measures[o.measure]  # type: ignore[index]
                for kind in registry_stats.get(o.kind).sql_measurements:
                    need(Primitive("count", o.measure if m.column.nullable else None)
                         if kind == "count" else Primitive(kind, o.measure))  # type: ignore[arg-type]
        return tuple(prims)
