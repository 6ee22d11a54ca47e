"""Row filters: the WHERE and JOIN ... ON clauses, checked node by node and translated to
SQL as they are checked (every literal a bound parameter): column references, literals of a
column's declared type, comparisons, AND / OR / NOT, IN, BETWEEN, IS [NOT] NULL and
[I]LIKE. A node this module does not know is refused (whitelist, see
`privlab.query.planner`).
"""

from __future__ import annotations

import math
from typing import Any

from privlab.engines.base import quote_ident
from privlab.query.config import ColumnSpec, GatewayConfig
from privlab.query.planner.limits import MAX_IN_LIST, MAX_LITERAL_CHARS
from privlab.query.planner.plan import (
    PlanState,
    TableUse,
    refuse,
)
from privlab.query.planner.sqlgen import value_ref


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


class FilterChecker:
    """The row-filter half of `Validator`: needs `self.config` (the public config)."""

    config: GatewayConfig

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
