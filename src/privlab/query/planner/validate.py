"""Validation: walk the parsed query tree, accept only nodes this module can translate, and
build the `QueryPlan` (tables and declared joins, row filters, group keys, the select list,
ORDER BY / LIMIT, the noisy measurements). Whitelist, not blacklist (see
`privlab.query.planner`). The WHERE and JOIN ... ON clauses are translated to SQL as they are
checked (every literal a bound parameter); the aggregation around them is `sqlgen`'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import reduce
from typing import Any

from privlab.engines.base import quote_ident
from privlab.measure import stats as registry_stats
from privlab.query.config import ColumnSpec, GatewayConfig
from privlab.query.planner.limits import MAX_IN_LIST, MAX_LITERAL_CHARS, check_text, parse
from privlab.query.planner.plan import (
    GroupKey,
    Measure,
    Output,
    PlanState,
    Primitive,
    QueryPlan,
    QueryRefused,
    TableUse,
    refuse,
)
from privlab.query.planner.sqlgen import SqlGenerator, value_ref
from privlab.schema.units import missing_unit_note


def like_pattern(pattern: str, escape: str = "\\") -> str:
    """Rewrite a LIKE pattern read with escape character `escape` into the equivalent
    pattern for `ESCAPE '!'` in which only `%`, `_` and `!` are escaped (each by `!`).

    Refuses (`QueryRefused`) a pattern that ends in an unpaired escape character: the
    engines raise an error for it only when a value matches the prefix.
    """
    out = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == escape:
            if i + 1 == n:
                raise refuse(f"a LIKE pattern must not end with its escape character "
                             f"{escape!r}; write {escape * 2!r} for a literal {escape!r}")
            literal = pattern[i + 1]
            out.append("!" + literal if literal in "%_!" else literal)
            i += 2
            continue
        if ch in "%_":
            out.append(ch)
        elif ch == "!":
            out.append("!!")
        else:
            out.append(ch)
        i += 1
    return "".join(out)


class Validator:
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

    def _column(self, st: PlanState, node: Any) -> tuple[TableUse, ColumnSpec]:
        from sqlglot import exp

        used = {k for k, v in node.args.items() if v not in (None, [], False)}
        if used & {"db", "catalog"}:
            raise refuse("column references may be qualified by a table name or alias only")
        if used - {"this", "table"} or type(node.this) is not exp.Identifier:
            raise refuse("a column reference must be a plain column name")
        name = node.this.this
        qualifier = node.args.get("table")
        candidates = st.tables
        if qualifier is not None:
            if type(qualifier) is not exp.Identifier:
                raise refuse("a column qualifier must be a table name or alias")
            q = qualifier.this.lower()
            candidates = [t for t in st.tables if q in t.names]
            if not candidates:
                raise refuse(f"{qualifier.this[:64]!r} is not a table or alias of this query")
        found = [(t, t.spec.column(name)) for t in candidates if t.spec.column(name)]
        if not found:
            raise refuse(f"column {name[:64]!r} is not declared in "
                         f"{', '.join(t.spec.name for t in candidates)}")
        if len(found) > 1:
            raise refuse(f"column {name[:64]!r} is ambiguous; qualify it with a table alias")
        tbl, col = found[0]
        return tbl, col  # type: ignore[return-value]

    # -- row filters ------------------------------------------------------------------------

    def _literal(self, node: Any) -> tuple[str, Any]:
        """(type, value) of a literal: 'number', 'text', 'bool'; refuse anything else."""
        from sqlglot import exp

        negate = False
        while type(node) is exp.Neg:
            negate = not negate
            node = node.this
        if type(node) is exp.Paren:
            return self._literal(node.this) if not negate else self._neg(self._literal(node.this))
        if type(node) is exp.Boolean and not negate:
            return "bool", bool(node.this)
        if type(node) is exp.Literal:
            text = node.this
            if not isinstance(text, str):
                raise refuse("unsupported literal")
            if node.is_string:
                if negate:
                    raise refuse("a minus sign cannot apply to a string")
                if len(text) > MAX_LITERAL_CHARS:
                    raise refuse(f"string literals are limited to {MAX_LITERAL_CHARS} "
                                 "characters")
                return "text", text
            try:
                value: Any = int(text) if text.lstrip("-").isdigit() else float(text)
            except ValueError:
                raise refuse("a numeric literal could not be read") from None
            if isinstance(value, float) and not math.isfinite(value):
                raise refuse("numeric literals must be finite")
            if isinstance(value, int) and abs(value) >= 2**63:
                raise refuse("integer literals must fit in 64 bits")
            return "number", -value if negate else value
        if type(node) is exp.Null:
            raise refuse("compare with NULL using IS NULL / IS NOT NULL")
        raise refuse(f"{node.key.upper()} is not supported here: filters compare columns with "
                     "literals (no functions, casts, arithmetic or sub-queries)")

    @staticmethod
    def _neg(lit: tuple[str, Any]) -> tuple[str, Any]:
        if lit[0] != "number":
            raise refuse("a minus sign applies to numbers only")
        return "number", -lit[1]

    @staticmethod
    def _kind(col: ColumnSpec) -> str:
        return "number" if col.numeric else col.type

    def _operand(self, st: PlanState, node: Any) -> tuple[str, str, ColumnSpec | None]:
        """SQL, type and column of a comparison operand (a column or a literal)."""
        from sqlglot import exp

        if type(node) is exp.Column:
            tbl, col = self._column(st, node)
            return value_ref(tbl.alias, col), self._kind(col), col
        kind, value = self._literal(node)
        return st.param(value), kind, None

    @staticmethod
    def _comparison_ops() -> dict[type, str]:
        from sqlglot import exp

        return {exp.EQ: "=", exp.NEQ: "<>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<",
                exp.LTE: "<="}

    def _predicate(self, st: PlanState, node: Any) -> str:
        """A WHERE node as SQL: each accepted node type has its own step below; anything
        else is refused with the list of what is accepted."""
        from sqlglot import exp

        t = type(node)
        if t is exp.Paren:
            return f"({self._predicate(st, node.this)})"
        if t in (exp.And, exp.Or, exp.Not):
            return self._logical(st, node)
        if t is exp.Boolean:
            return "TRUE" if node.this else "FALSE"
        if t is exp.Column:
            return self._bool_column(st, node)
        ops = self._comparison_ops()
        if t in ops:
            return self._comparison(st, node, ops[t])
        if t is exp.Is:
            return self._is(st, node)
        if t is exp.In:
            return self._in(st, node)
        if t is exp.Between:
            return self._between(st, node)
        if t is exp.Escape and type(node.this) in (exp.Like, exp.ILike):
            return self._like_escape(st, node)
        if t in (exp.Like, exp.ILike):
            return self._like(st, node, "\\")
        if t in (exp.Subquery, exp.Select, exp.Exists, exp.Union):
            raise refuse("sub-queries are not accepted")
        raise refuse(f"{node.key.upper()} is not supported in WHERE: use comparisons, IN, "
                     "BETWEEN, IS NULL, LIKE, AND, OR, NOT")

    def _logical(self, st: PlanState, node: Any) -> str:
        """AND / OR / NOT over predicates (parenthesised, so precedence is explicit)."""
        from sqlglot import exp

        if type(node) is exp.Not:
            return f"(NOT {self._predicate(st, node.this)})"
        op = "AND" if type(node) is exp.And else "OR"
        return f"({self._predicate(st, node.this)} {op} {self._predicate(st, node.expression)})"

    def _bool_column(self, st: PlanState, node: Any) -> str:
        """A bare column as a predicate: only a bool column."""
        tbl, col = self._column(st, node)
        if col.type != "bool":
            raise refuse(f"column {col.name!r} is {col.type}, not bool; compare it with a "
                         "value")
        return f"{tbl.alias}.{quote_ident(col.name)}"

    def _comparison(self, st: PlanState, node: Any, op: str) -> str:
        """`a <op> b` with at least one column and both sides of one type."""
        self._plain(node, {"this", "expression"})
        left, lk, lcol = self._operand(st, node.this)
        right, rk, rcol = self._operand(st, node.expression)
        if lcol is None and rcol is None:
            raise refuse("a comparison needs at least one column")
        if lk != rk:
            what = (lcol or rcol).name  # type: ignore[union-attr]
            raise refuse(f"type mismatch in a comparison with column {what!r}: compare "
                         "numbers with numbers, text with quoted strings, bools with "
                         "TRUE/FALSE")
        return f"({left} {op} {right})"

    def _is(self, st: PlanState, node: Any) -> str:
        """`col IS [NOT] NULL`, or `IS [NOT] TRUE/FALSE` on a bool column."""
        from sqlglot import exp

        self._plain(node, {"this", "expression", "negate"})
        tbl, col = self._column_only(st, node.this, "IS")
        target = node.expression
        ref = f"{tbl.alias}.{quote_ident(col.name)}"
        neg = " NOT" if node.args.get("negate") else ""
        if type(target) is exp.Null:
            return f"({ref} IS{neg} NULL)"
        if type(target) is exp.Boolean and col.type == "bool":
            return f"({ref} IS{neg} {'TRUE' if target.this else 'FALSE'})"
        raise refuse("IS accepts NULL (or TRUE/FALSE for bool columns)")

    def _in(self, st: PlanState, node: Any) -> str:
        """`col IN (literals...)`: a bounded list of literals of the column's type."""
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            raise refuse("sub-queries are not accepted; IN takes a list of literals")
        self._plain(node, {"this", "expressions"})
        tbl, col = self._column_only(st, node.this, "IN")
        values = node.expressions
        if not values:
            raise refuse("IN needs a list of literals (sub-queries are refused)")
        if len(values) > MAX_IN_LIST:
            raise refuse(f"IN lists are limited to {MAX_IN_LIST} values")
        items = []
        for v in values:
            kind, value = self._literal(v)
            if kind != self._kind(col):
                raise refuse(f"IN list values must match the type of column {col.name!r}")
            items.append(st.param(value))
        return f"({value_ref(tbl.alias, col)} IN ({', '.join(items)}))"

    def _between(self, st: PlanState, node: Any) -> str:
        """`col BETWEEN lo AND hi` with literal bounds of the column's type."""
        self._plain(node, {"this", "low", "high"})
        tbl, col = self._column_only(st, node.this, "BETWEEN")
        lo_kind, lo = self._literal(node.args["low"])
        hi_kind, hi = self._literal(node.args["high"])
        if not (lo_kind == hi_kind == self._kind(col)):
            raise refuse(f"BETWEEN bounds must match the type of column {col.name!r}")
        return (f"({value_ref(tbl.alias, col)} BETWEEN {st.param(lo)} AND "
                f"{st.param(hi)})")

    def _like_escape(self, st: PlanState, node: Any) -> str:
        """`col LIKE pattern ESCAPE 'c'`: one quoted escape character."""
        self._plain(node, {"this", "expression"})
        kind, escape = self._literal(node.expression)
        if kind != "text" or len(escape) != 1:
            raise refuse("ESCAPE takes one character in quotes, e.g. ESCAPE '!'")
        return self._like(st, node.this, escape)

    def _like(self, st: PlanState, node: Any, escape: str) -> str:
        """`col [NOT] [I]LIKE pattern`, with the pattern rewritten into a canonical form.

        PostgreSQL (backslash by default) and DuckDB (with ESCAPE) raise an error for a
        pattern that ends in its escape character, and PostgreSQL does so only when some
        value matches the prefix, even while planning, from its statistics: the error
        itself would say whether a row exists. So the pattern is read here with `escape`
        (backslash unless the query says ESCAPE 'c'; the same meaning on both engines),
        a dangling escape is refused before anything runs, and the engine receives an
        equivalent pattern in which only `%`, `_` and `!` are escaped, with `ESCAPE '!'`
        written by us. Such a pattern is well-formed for every row, so the comparison
        cannot fail; and `!` needs no quoting under any `standard_conforming_strings`.
        """
        from sqlglot import exp

        self._plain(node, {"this", "expression", "negate"})
        tbl, col = self._column_only(st, node.this, "LIKE")
        if col.type != "text":
            raise refuse(f"LIKE applies to text columns; {col.name!r} is {col.type}")
        kind, pattern = self._literal(node.expression)
        if kind != "text":
            raise refuse("LIKE needs a quoted pattern")
        canonical = like_pattern(pattern, escape)
        op = "LIKE" if type(node) is exp.Like else "ILIKE"
        neg = "NOT " if node.args.get("negate") else ""
        return (f"({tbl.alias}.{quote_ident(col.name)} {neg}{op} {st.param(canonical)} "
                "ESCAPE '!')")

    def _plain(self, node: Any, allowed: set[str]) -> None:
        used = {k for k, v in node.args.items() if v not in (None, [], False)}
        if used - allowed:
            raise refuse(f"{node.key.upper()} with {', '.join(sorted(used - allowed))} is not "
                         "supported")

    def _column_only(self, st: PlanState, node: Any, what: str) -> tuple[TableUse, ColumnSpec]:
        from sqlglot import exp

        if type(node) is not exp.Column:
            raise refuse(f"{what} applies to a column")
        return self._column(st, node)

    # -- select list ------------------------------------------------------------------------

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
