"""Parse, validate and rewrite an analyst's SQL into a bounded aggregation the engine runs.

Whitelist, not blacklist: the query is parsed with sqlglot and every node of the tree must be
one this module knows how to translate; the SQL the engine runs is *generated* from the
checked tree (identifiers from the config, quoted by us; every literal a bound parameter), so
nothing the analyst typed reaches the engine as text. Accepted:

    SELECT <group keys and aggregates> FROM <declared table> [JOIN <declared join> ...]
    [WHERE <row filter>] [GROUP BY <columns with a public domain or partition selection>]
    [ORDER BY <outputs>] [LIMIT n] [OFFSET n]

Aggregates: COUNT(*), COUNT(col), COUNT(DISTINCT <privacy unit>), SUM(col), AVG(col),
MEDIAN(col), PERCENTILE_CONT/DISC(q) WITHIN GROUP (ORDER BY col), QUANTILE_CONT(col, q).
Row filters: comparisons of a column with a literal of its declared type (or of two columns
of one type), AND / OR / NOT, IN (literals), BETWEEN, IS [NOT] NULL, [I]LIKE 'pattern'.
No arithmetic, casts or functions in filters: a data-dependent runtime error (a division
by zero, a failed cast, an overflow) would itself reveal something about a row. For the
same reason a `float` column is always read as DOUBLE PRECISION (`value_ref`) and an `int`
column is admitted at start-up only with a type inside 64 bits: every comparison and clamp
the planner emits is then total on every value the column can hold (docs/gateway.md).

Refusal reasons name only the query text and the public config, never anything read from
the data. The rewrite clamps every aggregated value into its public bounds and keeps at most
`max_rows` rows per privacy unit (ROW_NUMBER() OVER (PARTITION BY unit ORDER BY random())),
so the sensitivity of every aggregate is known before the engine runs.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import reduce
from threading import Lock
from typing import Any, Literal

from privlab.engines.base import quote_ident
from privlab.errors import InvalidInputError, PrivlabError
from privlab.query.config import ColumnSpec, GatewayConfig, TableSpec

AggKind = Literal["key", "count", "units", "sum", "avg", "quantile"]
MAX_IN_LIST = 1_000
MAX_LITERAL_CHARS = 1_000
MAX_DEPTH = 60
_ALLOWED_CONTROL = {"\t", "\n", "\r"}
_PLAIN_ASCII = re.compile(r"[\t\n\r\x20-\x7e]*")
_MAX_DOUBLE = 1.7976931348623157e308


class QueryRefused(InvalidInputError):
    """The query cannot be answered with differential privacy (HTTP 400).

    The message depends only on the query text and the public config.
    """

    status_code = 400


class AccessDenied(PrivlabError):
    """Unknown key (HTTP 401) or a table or record of someone else (HTTP 403)."""

    exit_code = 1
    status_code = 403


def _refuse(message: str) -> QueryRefused:
    return QueryRefused(message)


def value_ref(alias: str, col: ColumnSpec) -> str:
    """How generated SQL reads a column's values (comparisons, IN, BETWEEN, clamps, group
    keys, join keys). A `float` column is read as DOUBLE PRECISION: the start-up type check
    (`privlab.engines.types.type_problem`) admits for it only types whose every value casts
    to a double without error, and a comparison of doubles with doubles or 64-bit integers
    cannot fail, whatever the row holds (NaN, infinities, 128-bit integers, wide decimals).
    Comparing such a column as it is would let the engine pick a common type into which
    one row's value does not fit (DECIMAL(38,0) against DECIMAL(38,10), UHUGEINT against
    INTEGER): an error on that row only. An `int` column is admitted only with a type that
    fits in 64 bits, so it is read as it is (a no-op cast would only cost the engines)."""
    ref = f"{alias}.{quote_ident(col.name)}"
    return f"CAST({ref} AS DOUBLE PRECISION)" if col.type == "float" else ref


# --------------------------------------------------------------------------- plan objects

@dataclass(frozen=True)
class TableUse:
    alias: str  # our alias in the generated SQL: t0, t1, ...
    spec: TableSpec
    names: tuple[str, ...]  # how the query may refer to it (table name, its alias)


@dataclass(frozen=True)
class Measure:
    """A column value fed to an aggregate, clamped into its bounds when numeric."""

    index: int
    table: TableUse
    column: ColumnSpec
    clamp: tuple[float, float] | None

    @property
    def key(self) -> str:
        return f"__m{self.index}"

    @property
    def label(self) -> str:
        return self.column.name


@dataclass(frozen=True)
class GroupKey:
    index: int
    table: TableUse
    column: ColumnSpec

    @property
    def key(self) -> str:
        return f"__g{self.index}"

    @property
    def domain(self) -> tuple[Any, ...] | None:
        return self.column.domain


@dataclass(frozen=True)
class Output:
    """One column of the answer."""

    name: str
    kind: AggKind
    group: int | None = None  # kind == "key"
    measure: int | None = None  # None: COUNT(*)
    q: float | None = None  # quantiles

    def describe(self, plan: QueryPlan) -> str:
        col = "*" if self.measure is None else plan.measures[self.measure].label
        if self.kind == "key":
            return f"group key {plan.groups[self.group or 0].column.name}"
        if self.kind == "quantile":
            return f"quantile({col}, {self.q:g})"
        return f"{self.kind}({col})"


@dataclass(frozen=True)
class Primitive:
    """A noisy measurement that consumes budget: count, sum, centred sum, units, quantile."""

    kind: Literal["count", "sum", "csum", "units", "quantile"]
    measure: int | None = None
    q: float | None = None


@dataclass(frozen=True)
class QueryPlan:
    """A validated query: what to compute, how to compute it, and what it costs."""

    sql: str
    params: tuple[Any, ...]
    quantile_sql: str | None
    quantile_params: tuple[Any, ...]
    tables: tuple[TableUse, ...]
    measures: tuple[Measure, ...]
    groups: tuple[GroupKey, ...]
    outputs: tuple[Output, ...]
    primitives: tuple[Primitive, ...]
    order: tuple[tuple[int, bool], ...]  # (output index, descending)
    limit: int | None
    offset: int
    max_rows: int  # contribution bound per privacy unit
    user_level: bool  # a privacy-unit column exists (else: one row = one person)
    partition_selection: bool
    result_columns: tuple[str, ...]  # column names of `sql`'s result
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def table_names(self) -> tuple[str, ...]:
        return tuple(t.spec.name for t in self.tables)

    @property
    def n_cells(self) -> int | None:
        """Number of output groups when the domain is public, None with partition selection."""
        if self.partition_selection:
            return None
        return reduce(lambda a, g: a * len(g.domain or ()), self.groups, 1)

    def cells(self) -> list[tuple[Any, ...]]:
        """Every cell of the public domain (cartesian product, declared order)."""
        out: list[tuple[Any, ...]] = [()]
        for g in self.groups:
            out = [c + (v,) for c in out for v in (g.domain or ())]
        return out


# --------------------------------------------------------------------------- the planner

@dataclass
class _State:
    tables: list[TableUse] = field(default_factory=list)
    measures: list[Measure] = field(default_factory=list)
    groups: list[GroupKey] = field(default_factory=list)
    params: list[Any] = field(default_factory=list)
    placeholder: Callable[[int], str] = lambda i: "?"

    def param(self, value: Any) -> str:
        self.params.append(value)
        return self.placeholder(len(self.params) - 1)


def _check_text(sql: Any, max_chars: int) -> str:
    if not isinstance(sql, str):
        raise _refuse("sql must be a string")
    if not sql.strip():
        raise _refuse("sql is empty")
    if len(sql) > max_chars:
        raise _refuse(f"sql is longer than the limit of {max_chars} characters")
    if _PLAIN_ASCII.fullmatch(sql):
        return sql
    for ch in sql:
        if ch in _ALLOWED_CONTROL:
            continue
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            raise _refuse(f"sql contains a control, format or unassigned character "
                          f"(U+{ord(ch):04X}); remove it")
    return sql


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
                raise _refuse(f"a LIKE pattern must not end with its escape character "
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


def _paren_depth(sql: str) -> int:
    """Deepest parenthesis nesting outside quotes: a linear scan before any parsing."""
    depth = deepest = 0
    quote = None
    for ch in sql:
        if quote is not None:
            if ch == quote:
                quote = None
        elif ch in ("'", '"'):
            quote = ch
        elif ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")":
            depth -= 1
    return deepest


def _depth(node: Any, limit: int = MAX_DEPTH) -> None:
    """Refuse absurdly nested trees before walking them recursively."""
    stack = [(node, 0)]
    while stack:
        current, d = stack.pop()
        if d > limit:
            raise _refuse(f"the query is nested more than {limit} levels deep")
        for child in current.iter_expressions():
            stack.append((child, d + 1))


def _literal_value(token: Any) -> Any:
    """The value `Planner._literal` gives a NUMBER or STRING token, with the same checks
    (raises QueryRefused where it would refuse)."""
    text = token.text
    if token.token_type.name == "STRING":
        if len(text) > MAX_LITERAL_CHARS:
            raise _refuse(f"string literals are limited to {MAX_LITERAL_CHARS} characters")
        return text
    value: Any = int(text) if text.lstrip("-").isdigit() else float(text)
    if isinstance(value, float) and not math.isfinite(value):
        raise _refuse("numeric literals must be finite")
    if isinstance(value, int) and abs(value) >= 2**63:
        raise _refuse("integer literals must fit in 64 bits")
    return value


_LITERALS = ("NUMBER", "STRING")
# tokens after which no literal may be abstracted (their literals shape the plan)
_STRUCTURAL = {"GROUP_BY", "ORDER_BY", "LIMIT", "OFFSET", "HAVING", "FETCH", "WINDOW",
               "QUALIFY", "UNION", "SEMICOLON"}
# a literal next to these is not passed through verbatim (sign, pattern rewriting)
_TRANSFORMING = {"DASH", "PLUS", "LIKE", "ILIKE", "ESCAPE", "SIMILAR_TO", "GLOB", "RLIKE"}


def _template(tokens: list[Any]) -> tuple[tuple[Any, ...] | None, list[Any]]:
    """(normalised shape, literal values) of a query whose literals all sit in its WHERE
    clause and are passed to the engine verbatim; (None, []) otherwise. The shape keeps
    every token but those literals, which become their token type."""
    shape: list[Any] = []
    values: list[Any] = []
    where = done = False
    for t in tokens:
        kind = t.token_type.name
        if kind in _TRANSFORMING:
            return None, []
        if kind == "WHERE":
            where = True
        elif kind in _STRUCTURAL:
            done = True
        if kind in _LITERALS:
            if not where or done:
                return None, []
            try:
                values.append(_literal_value(t))
            except (QueryRefused, ValueError):
                return None, []
            shape.append("?" + kind)
        else:
            shape.append((kind, t.text))
    if not values:
        return None, []
    return tuple(shape), values


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _bindable(plan: QueryPlan, values: list[Any]) -> bool:
    """A plan whose first len(values) parameters are the literals, verbatim and in order
    (the WHERE clause is compiled first; the rest are config values), and whose other parts
    (no quantile pass, whose parameters repeat the WHERE) do not depend on them."""
    n = len(values)
    return (plan.quantile_sql is None and len(plan.params) >= n
            and all(_same(a, b) for a, b in zip(plan.params[:n], values, strict=False)))


class _Template:
    """A plan reusable for every query of the same shape: only the WHERE literals (its
    first `n` parameters) change."""

    __slots__ = ("plan", "n")

    def __init__(self, plan: QueryPlan, n: int) -> None:
        self.plan, self.n = plan, n

    def bind(self, values: list[Any]) -> QueryPlan | None:
        if len(values) != self.n:
            return None
        return replace(self.plan, params=tuple(values) + self.plan.params[self.n:])


class Planner:
    """Turns SQL text into a `QueryPlan` for one engine dialect ("duckdb" or "postgres").

    Plans are cached by (sql, analyst tables) in a small LRU, and by normalised SQL: a query
    that differs from a planned one only in the literals of its WHERE clause (passed to the
    engine as bound parameters, verbatim) reuses that plan with its own parameters, so a
    dashboard's stream of similar queries is tokenized, not parsed and planned again.
    """

    def __init__(self, config: GatewayConfig, dialect: str = "duckdb",
                 placeholder: Callable[[int], str] | None = None, cache_size: int = 512) -> None:
        if dialect not in ("duckdb", "postgres"):
            raise InvalidInputError(f"dialect must be 'duckdb' or 'postgres', got {dialect!r}")
        self.config = config
        self.dialect = dialect
        self.placeholder = placeholder or (lambda i: "?")
        self._cache: OrderedDict[tuple[str, tuple[str, ...] | None], QueryPlan] = OrderedDict()
        # plans by normalised SQL: the token stream with WHERE literals abstracted
        self._templates: OrderedDict[tuple[Any, ...], _Template] = OrderedDict()
        self._cache_size = cache_size
        self._lock = Lock()

    # -- public -----------------------------------------------------------------------------

    def plan(self, sql: str, allowed_tables: tuple[str, ...] | None = None) -> QueryPlan:
        """Validate and rewrite `sql`; `QueryRefused` (400) otherwise (also for a table the
        analyst may not query: the same refusal as for a missing one)."""
        key = (sql, allowed_tables) if isinstance(sql, str) else None
        if key is not None:
            with self._lock:
                hit = self._cache.get(key)
                if hit is not None:
                    self._cache.move_to_end(key)
                    return hit
        if key is None:
            return self._plan(sql, allowed_tables)
        tokens = self._tokens(_check_text(sql, self.config.limits.max_sql_chars))
        shape, values = _template(tokens)
        plan = None
        if shape is not None:
            tkey = (shape, allowed_tables)
            with self._lock:
                template = self._templates.get(tkey)
            if template is not None:
                plan = template.bind(values)
        if plan is None:
            plan = self._plan(sql, allowed_tables, tokens)
            if shape is not None and _bindable(plan, values):
                with self._lock:
                    self._templates[(shape, allowed_tables)] = _Template(plan, len(values))
                    while len(self._templates) > self._cache_size:
                        self._templates.popitem(last=False)
        if self._cache_size > 0:
            with self._lock:
                self._cache[key] = plan
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return plan

    # -- parsing ----------------------------------------------------------------------------

    def _tokens(self, sql: str) -> list[Any]:
        from sqlglot.dialects.dialect import Dialect

        dialect = Dialect.get_or_raise("postgres")
        # cheap refusals before the parser runs: nesting, then the token budget (the parse
        # time is linear in the tokens, so this bounds it)
        if _paren_depth(sql) > MAX_DEPTH:
            raise _refuse(f"the query is nested more than {MAX_DEPTH} levels deep")
        try:
            tokens = dialect.tokenize(sql)
        except Exception:
            raise _refuse("sql could not be tokenized; check quotes and symbols") from None
        if len(tokens) > self.config.limits.max_sql_tokens:
            raise _refuse(f"sql has {len(tokens)} tokens; the limit is "
                          f"{self.config.limits.max_sql_tokens} (limits.max_sql_tokens)")
        if any(t.comments for t in tokens):
            raise _refuse("comments are not accepted in queries; remove them")
        return tokens

    def _parse(self, sql: str, tokens: list[Any] | None = None) -> Any:
        from sqlglot import exp
        from sqlglot.dialects.dialect import Dialect

        if tokens is None:
            tokens = self._tokens(sql)
        try:
            statements = Dialect.get_or_raise("postgres").parser().parse(tokens, sql)
        except RecursionError:
            raise _refuse(f"the query is nested more than {MAX_DEPTH} levels deep") from None
        except Exception:
            raise _refuse("sql is not valid SQL (the parser rejected it)") from None
        statements = [s for s in statements if s is not None]
        if len(statements) != 1:
            raise _refuse("send exactly one statement (stacked statements are refused)")
        tree = statements[0]
        _depth(tree)
        if type(tree) is not exp.Select:
            raise _refuse(f"only SELECT queries are accepted, got {tree.key.upper()}")
        return tree

    # -- the main check ---------------------------------------------------------------------

    def _plan(self, sql: str, allowed: tuple[str, ...] | None,
              tokens: list[Any] | None = None) -> QueryPlan:
        from sqlglot import exp

        sql = _check_text(sql, self.config.limits.max_sql_chars)
        tree = self._parse(sql, tokens)
        used = {k for k, v in tree.args.items() if v not in (None, [], False)}
        extra = used - {"expressions", "from_", "joins", "where", "group", "order", "limit",
                        "offset"}
        if extra:
            names = ", ".join(sorted(e.rstrip("_").upper() for e in extra))
            raise _refuse(f"{names} is not supported; use SELECT aggregates FROM table [JOIN] "
                          "[WHERE] [GROUP BY] [ORDER BY] [LIMIT]")
        st = _State(placeholder=self.placeholder)
        from_ = tree.args.get("from_")
        if from_ is None:
            raise _refuse("FROM is required: name a declared table (GET /v1/tables)")
        self._add_table(st, from_.this, allowed)
        on_sql: list[str] = []
        joins = tree.args.get("joins") or []
        if len(joins) > self.config.limits.max_joins:
            raise _refuse(f"at most {self.config.limits.max_joins} joins per query")
        for join in joins:
            on_sql.append(self._add_join(st, join, allowed))
        private = [t for t in st.tables if not t.spec.public]
        if not private:
            raise _refuse("the query reads only public tables; query a private table")
        user_level = private[0].spec.privacy_unit is not None
        max_rows = max(t.spec.max_rows for t in private)
        unit = (private[0], private[0].spec.columns[private[0].spec.privacy_unit]) \
            if user_level else None

        where_sql = None
        if tree.args.get("where") is not None:
            where_sql = self._predicate(st, tree.args["where"].this)

        # GROUP BY
        group = tree.args.get("group")
        if group is not None:
            gused = {k for k, v in group.args.items() if v not in (None, [], False)}
            if gused - {"expressions"}:
                raise _refuse("GROUP BY ROLLUP / CUBE / GROUPING SETS / ALL are not supported")
            for g in group.expressions:
                if type(g) is not exp.Column:
                    raise _refuse("GROUP BY accepts column names only (no expressions or "
                                  "positions)")
                tbl, col = self._column(st, g)
                if any(k.table.alias == tbl.alias and k.column.name == col.name
                       for k in st.groups):
                    raise _refuse(f"column {col.name!r} appears twice in GROUP BY")
                if col.domain is None and not col.partition_selection:
                    raise _refuse(f"GROUP BY {col.name!r} is refused: the column has no public "
                                  "domain and partition selection is not enabled for it")
                st.groups.append(GroupKey(len(st.groups), tbl, col))
        partition_selection = any(g.domain is None for g in st.groups)
        if not partition_selection and st.groups:
            cells = reduce(lambda a, g: a * len(g.domain or ()), st.groups, 1)
            if cells > self.config.limits.max_groups:
                raise _refuse(f"GROUP BY has {cells} cells in its public domain; the limit is "
                              f"{self.config.limits.max_groups}")

        # SELECT list
        outputs: list[Output] = []
        select_exprs: list[Any] = []
        for item in tree.expressions:
            name = None
            node = item
            if type(item) is exp.Alias:
                name = item.alias
                node = item.this
                if not name:
                    raise _refuse("an alias must be a name")
            out = self._output(st, node)
            outputs.append(Output(name or self._default_name(st, out), out.kind, out.group,
                                  out.measure, out.q))
            select_exprs.append(node)
        if not any(o.kind != "key" for o in outputs):
            raise _refuse("select at least one aggregate (COUNT, SUM, AVG, MEDIAN, ...): "
                          "row-level values are never returned")
        if len([o for o in outputs if o.kind != "key"]) > self.config.limits.max_aggregates:
            raise _refuse(f"at most {self.config.limits.max_aggregates} aggregates per query")
        outputs = self._unique_names(outputs)
        for o in outputs:
            if o.kind == "units" and not user_level:
                raise _refuse("COUNT(DISTINCT ...) needs a table with a privacy unit; use "
                              "COUNT(*) (each row is one person here)")

        order = self._order(tree, outputs, select_exprs, st)
        limit = self._count_literal(tree.args.get("limit"), "LIMIT")
        offset = self._count_literal(tree.args.get("offset"), "OFFSET") or 0
        primitives = self._primitives(st, outputs, partition_selection)

        sql_text, result_columns = self._compile(st, on_sql, where_sql, unit, user_level,
                                                 max_rows, primitives)
        params = tuple(st.params)
        quantile_sql, quantile_params = None, ()
        if any(p.kind == "quantile" for p in primitives):
            st.params = []
            where_again = None
            if tree.args.get("where") is not None:
                where_again = self._predicate(st, tree.args["where"].this)
            quantile_sql = self._compile_values(st, on_sql, where_again, unit, user_level,
                                                max_rows, primitives)
            quantile_params = tuple(st.params)
        notes = []
        if user_level:
            notes.append(f"at most {max_rows} row(s) per {unit[1].name if unit else 'unit'} "
                         "kept (chosen at random) before aggregation")
        return QueryPlan(
            sql=sql_text, params=params, quantile_sql=quantile_sql,
            quantile_params=quantile_params, tables=tuple(st.tables),
            measures=tuple(st.measures), groups=tuple(st.groups), outputs=tuple(outputs),
            primitives=primitives, order=order, limit=limit, offset=offset, max_rows=max_rows,
            user_level=user_level, partition_selection=partition_selection,
            result_columns=result_columns, notes=tuple(notes),
        )

    # -- tables and joins -------------------------------------------------------------------

    def _add_table(self, st: _State, node: Any, allowed: tuple[str, ...] | None) -> TableUse:
        from sqlglot import exp

        if type(node) is not exp.Table:
            raise _refuse("FROM accepts a declared table name only (no sub-queries, functions "
                          "or VALUES)")
        used = {k for k, v in node.args.items() if v not in (None, [], False)}
        if used & {"db", "catalog"}:
            raise _refuse("schema-qualified names are not accepted; use a declared table name "
                          "(GET /v1/tables)")
        if used - {"this", "alias"}:
            raise _refuse("table modifiers (TABLESAMPLE, hints, ONLY, ...) are not supported")
        ident = node.this
        if type(ident) is not exp.Identifier:
            raise _refuse("FROM accepts a declared table name only")
        spec = self.config.table(ident.this)
        if spec is None or (allowed is not None and spec.name not in allowed):
            # One refusal, word for word, for a table that does not exist and for one this
            # analyst may not query (it names what was typed, not the declared spelling):
            # a different status or text would list the hidden tables' names.
            raise _refuse(f"table {ident.this[:64]!r} is not declared or not open to you "
                          "(GET /v1/tables lists the tables you may query)")
        if any(t.spec.name == spec.name for t in st.tables):
            raise _refuse(f"table {spec.name!r} appears twice; self-joins are not supported")
        names = [spec.name.lower()]
        alias = node.args.get("alias")
        if alias is not None:
            aused = {k for k, v in alias.args.items() if v not in (None, [], False)}
            if aused - {"this"} or type(alias.this) is not exp.Identifier:
                raise _refuse("a table alias must be a plain name")
            names = [alias.this.this.lower()]
        for t in st.tables:
            if set(names) & set(t.names):
                raise _refuse(f"table name or alias {names[0]!r} is used twice")
        use = TableUse(alias=f"t{len(st.tables)}", spec=spec, names=tuple(names))
        st.tables.append(use)
        return use

    def _add_join(self, st: _State, join: Any, allowed: tuple[str, ...] | None) -> str:
        from sqlglot import exp

        used = {k for k, v in join.args.items() if v not in (None, [], False)}
        kind = (join.args.get("kind") or "").upper()
        if used - {"this", "on", "kind"} or kind not in ("", "INNER"):
            raise _refuse("only INNER JOIN ... ON a.col = b.col along a declared join is "
                          "supported")
        on = join.args.get("on")
        if on is None:
            raise _refuse("a JOIN needs ON a.col = b.col along a declared join (comma joins and "
                          "CROSS JOIN are refused)")
        new = self._add_table(st, join.this, allowed)
        if type(on) is not exp.EQ or type(on.this) is not exp.Column \
                or type(on.expression) is not exp.Column:
            raise _refuse("JOIN ... ON must be one equality of two columns, e.g. "
                          "ON a.id = b.person_id")
        lt, lc = self._column(st, on.this)
        rt, rc = self._column(st, on.expression)
        if new.alias not in (lt.alias, rt.alias) or lt.alias == rt.alias:
            raise _refuse("JOIN ... ON must connect the joined table with an earlier one")
        a, b = (lt.spec.name, lc.name), (rt.spec.name, rc.name)
        if not any(j.matches(a, b) for j in self.config.joins):
            raise _refuse(f"join {a[0]}.{a[1]} = {b[0]}.{b[1]} is not declared (GET /v1/tables "
                          "lists the declared joins)")
        return (f"JOIN {self._source(new.spec)} AS {new.alias} ON "
                f"{value_ref(lt.alias, lc)} = {value_ref(rt.alias, rc)}")

    def _source(self, spec: TableSpec) -> str:
        if self.config.schema:
            return f"{quote_ident(self.config.schema)}.{quote_ident(spec.source)}"
        return quote_ident(spec.source)

    def _column(self, st: _State, node: Any) -> tuple[TableUse, ColumnSpec]:
        from sqlglot import exp

        used = {k for k, v in node.args.items() if v not in (None, [], False)}
        if used & {"db", "catalog"}:
            raise _refuse("column references may be qualified by a table name or alias only")
        if used - {"this", "table"} or type(node.this) is not exp.Identifier:
            raise _refuse("a column reference must be a plain column name")
        name = node.this.this
        qualifier = node.args.get("table")
        candidates = st.tables
        if qualifier is not None:
            if type(qualifier) is not exp.Identifier:
                raise _refuse("a column qualifier must be a table name or alias")
            q = qualifier.this.lower()
            candidates = [t for t in st.tables if q in t.names]
            if not candidates:
                raise _refuse(f"{qualifier.this[:64]!r} is not a table or alias of this query")
        found = [(t, t.spec.column(name)) for t in candidates if t.spec.column(name)]
        if not found:
            raise _refuse(f"column {name[:64]!r} is not declared in "
                          f"{', '.join(t.spec.name for t in candidates)}")
        if len(found) > 1:
            raise _refuse(f"column {name[:64]!r} is ambiguous; qualify it with a table alias")
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
                raise _refuse("unsupported literal")
            if node.is_string:
                if negate:
                    raise _refuse("a minus sign cannot apply to a string")
                if len(text) > MAX_LITERAL_CHARS:
                    raise _refuse(f"string literals are limited to {MAX_LITERAL_CHARS} "
                                  "characters")
                return "text", text
            try:
                value: Any = int(text) if text.lstrip("-").isdigit() else float(text)
            except ValueError:
                raise _refuse("a numeric literal could not be read") from None
            if isinstance(value, float) and not math.isfinite(value):
                raise _refuse("numeric literals must be finite")
            if isinstance(value, int) and abs(value) >= 2**63:
                raise _refuse("integer literals must fit in 64 bits")
            return "number", -value if negate else value
        if type(node) is exp.Null:
            raise _refuse("compare with NULL using IS NULL / IS NOT NULL")
        raise _refuse(f"{node.key.upper()} is not supported here: filters compare columns with "
                      "literals (no functions, casts, arithmetic or sub-queries)")

    @staticmethod
    def _neg(lit: tuple[str, Any]) -> tuple[str, Any]:
        if lit[0] != "number":
            raise _refuse("a minus sign applies to numbers only")
        return "number", -lit[1]

    @staticmethod
    def _kind(col: ColumnSpec) -> str:
        return "number" if col.numeric else col.type

    def _operand(self, st: _State, node: Any) -> tuple[str, str, ColumnSpec | None]:
        """SQL, type and column of a comparison operand (a column or a literal)."""
        from sqlglot import exp

        if type(node) is exp.Column:
            tbl, col = self._column(st, node)
            return value_ref(tbl.alias, col), self._kind(col), col
        kind, value = self._literal(node)
        return st.param(value), kind, None

    def _predicate(self, st: _State, node: Any) -> str:
        from sqlglot import exp

        t = type(node)
        if t is exp.Paren:
            return f"({self._predicate(st, node.this)})"
        if t in (exp.And, exp.Or):
            op = "AND" if t is exp.And else "OR"
            return f"({self._predicate(st, node.this)} {op} {self._predicate(st, node.expression)})"
        if t is exp.Not:
            return f"(NOT {self._predicate(st, node.this)})"
        if t is exp.Boolean:
            return "TRUE" if node.this else "FALSE"
        if t is exp.Column:
            tbl, col = self._column(st, node)
            if col.type != "bool":
                raise _refuse(f"column {col.name!r} is {col.type}, not bool; compare it with a "
                              "value")
            return f"{tbl.alias}.{quote_ident(col.name)}"
        comparisons = {exp.EQ: "=", exp.NEQ: "<>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<",
                       exp.LTE: "<="}
        if t in comparisons:
            self._plain(node, {"this", "expression"})
            left, lk, lcol = self._operand(st, node.this)
            right, rk, rcol = self._operand(st, node.expression)
            if lcol is None and rcol is None:
                raise _refuse("a comparison needs at least one column")
            if lk != rk:
                what = (lcol or rcol).name  # type: ignore[union-attr]
                raise _refuse(f"type mismatch in a comparison with column {what!r}: compare "
                              "numbers with numbers, text with quoted strings, bools with "
                              "TRUE/FALSE")
            return f"({left} {comparisons[t]} {right})"
        if t is exp.Is:
            self._plain(node, {"this", "expression", "negate"})
            tbl, col = self._column_only(st, node.this, "IS")
            target = node.expression
            ref = f"{tbl.alias}.{quote_ident(col.name)}"
            neg = " NOT" if node.args.get("negate") else ""
            if type(target) is exp.Null:
                return f"({ref} IS{neg} NULL)"
            if type(target) is exp.Boolean and col.type == "bool":
                return f"({ref} IS{neg} {'TRUE' if target.this else 'FALSE'})"
            raise _refuse("IS accepts NULL (or TRUE/FALSE for bool columns)")
        if t is exp.In:
            if node.args.get("query") is not None or node.args.get("unnest") is not None:
                raise _refuse("sub-queries are not accepted; IN takes a list of literals")
            self._plain(node, {"this", "expressions"})
            tbl, col = self._column_only(st, node.this, "IN")
            values = node.expressions
            if not values:
                raise _refuse("IN needs a list of literals (sub-queries are refused)")
            if len(values) > MAX_IN_LIST:
                raise _refuse(f"IN lists are limited to {MAX_IN_LIST} values")
            items = []
            for v in values:
                kind, value = self._literal(v)
                if kind != self._kind(col):
                    raise _refuse(f"IN list values must match the type of column {col.name!r}")
                items.append(st.param(value))
            return f"({value_ref(tbl.alias, col)} IN ({', '.join(items)}))"
        if t is exp.Between:
            self._plain(node, {"this", "low", "high"})
            tbl, col = self._column_only(st, node.this, "BETWEEN")
            lo_kind, lo = self._literal(node.args["low"])
            hi_kind, hi = self._literal(node.args["high"])
            if not (lo_kind == hi_kind == self._kind(col)):
                raise _refuse(f"BETWEEN bounds must match the type of column {col.name!r}")
            return (f"({value_ref(tbl.alias, col)} BETWEEN {st.param(lo)} AND "
                    f"{st.param(hi)})")
        if t is exp.Escape and type(node.this) in (exp.Like, exp.ILike):
            self._plain(node, {"this", "expression"})
            kind, escape = self._literal(node.expression)
            if kind != "text" or len(escape) != 1:
                raise _refuse("ESCAPE takes one character in quotes, e.g. ESCAPE '!'")
            return self._like(st, node.this, escape)
        if t in (exp.Like, exp.ILike):
            return self._like(st, node, "\\")
        if t in (exp.Subquery, exp.Select, exp.Exists, exp.Union):
            raise _refuse("sub-queries are not accepted")
        raise _refuse(f"{node.key.upper()} is not supported in WHERE: use comparisons, IN, "
                      "BETWEEN, IS NULL, LIKE, AND, OR, NOT")

    def _like(self, st: _State, node: Any, escape: str) -> str:
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
            raise _refuse(f"LIKE applies to text columns; {col.name!r} is {col.type}")
        kind, pattern = self._literal(node.expression)
        if kind != "text":
            raise _refuse("LIKE needs a quoted pattern")
        canonical = like_pattern(pattern, escape)
        op = "LIKE" if type(node) is exp.Like else "ILIKE"
        neg = "NOT " if node.args.get("negate") else ""
        return (f"({tbl.alias}.{quote_ident(col.name)} {neg}{op} {st.param(canonical)} "
                "ESCAPE '!')")

    def _plain(self, node: Any, allowed: set[str]) -> None:
        used = {k for k, v in node.args.items() if v not in (None, [], False)}
        if used - allowed:
            raise _refuse(f"{node.key.upper()} with {', '.join(sorted(used - allowed))} is not "
                          "supported")

    def _column_only(self, st: _State, node: Any, what: str) -> tuple[TableUse, ColumnSpec]:
        from sqlglot import exp

        if type(node) is not exp.Column:
            raise _refuse(f"{what} applies to a column")
        return self._column(st, node)

    # -- select list ------------------------------------------------------------------------

    def _measure(self, st: _State, node: Any, need_bounds: bool, what: str) -> int:
        from sqlglot import exp

        if type(node) is not exp.Column:
            raise _refuse(f"{what} takes a column name (no expressions)")
        tbl, col = self._column(st, node)
        clamp = None
        if need_bounds:
            if not col.numeric:
                raise _refuse(f"{what} needs a numeric column; {col.name!r} is {col.type}")
            if col.bounds is None:
                raise _refuse(f"{what}({col.name}) needs public bounds and none are declared "
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
            raise _refuse("a quantile must be a number in [0, 1]")
        return float(value)

    def _output(self, st: _State, node: Any) -> Output:
        from sqlglot import exp

        t = type(node)
        if t is exp.Column:
            tbl, col = self._column(st, node)
            for g in st.groups:
                if g.table.alias == tbl.alias and g.column.name == col.name:
                    return Output("", "key", group=g.index)
            raise _refuse(f"column {col.name!r} is selected without an aggregate and is not in "
                          "GROUP BY: row-level values are never returned")
        if t is exp.Count:
            self._plain(node, {"this", "big_int"})
            arg = node.this
            if type(arg) is exp.Star or (type(arg) is exp.Literal and not arg.is_string
                                         and arg.this == "1"):
                return Output("", "count")
            if type(arg) is exp.Distinct:
                self._plain(arg, {"expressions"})
                if len(arg.expressions) != 1 or type(arg.expressions[0]) is not exp.Column:
                    raise _refuse("COUNT(DISTINCT ...) takes one column")
                tbl, col = self._column(st, arg.expressions[0])
                if tbl.spec.privacy_unit != col.name:
                    raise _refuse("COUNT(DISTINCT ...) is supported on the privacy unit column "
                                  "only (other distinct counts have unbounded sensitivity)")
                return Output("", "units")
            m = self._measure(st, arg, False, "COUNT")
            if not st.measures[m].column.nullable:
                return Output("", "count")
            return Output("", "count", measure=m)
        if t in (exp.Sum, exp.Avg):
            self._plain(node, {"this"})
            what = "SUM" if t is exp.Sum else "AVG"
            if type(node.this) is exp.Distinct:
                raise _refuse(f"{what}(DISTINCT ...) is not supported")
            m = self._measure(st, node.this, True, what)
            return Output("", "sum" if t is exp.Sum else "avg", measure=m)
        if t is exp.Median:
            self._plain(node, {"this"})
            return Output("", "quantile", measure=self._measure(st, node.this, True, "MEDIAN"),
                          q=0.5)
        if t is exp.WithinGroup:
            inner, order = node.this, node.expression
            if type(inner) not in (exp.PercentileCont, exp.PercentileDisc) or \
                    type(order) is not exp.Order or len(order.expressions) != 1:
                raise _refuse("WITHIN GROUP is supported for PERCENTILE_CONT / PERCENTILE_DISC "
                              "(q) WITHIN GROUP (ORDER BY column)")
            self._plain(inner, {"this"})
            ordered = order.expressions[0]
            if ordered.args.get("desc"):
                raise _refuse("use ORDER BY column ASC in WITHIN GROUP")
            q = self._quantile_q(inner.this)
            return Output("", "quantile", measure=self._measure(st, ordered.this, True,
                                                                 "PERCENTILE"), q=q)
        if t is exp.Quantile or (t is exp.Anonymous and str(node.this).lower() in (
                "quantile_cont", "quantile_disc", "quantile", "percentile_cont")):
            args = [node.this, node.args.get("quantile")] if t is exp.Quantile \
                else list(node.expressions)
            if len(args) != 2 or args[1] is None:
                raise _refuse("QUANTILE_CONT(column, q) takes a column and a number in [0, 1]")
            return Output("", "quantile", measure=self._measure(st, args[0], True, "QUANTILE"),
                          q=self._quantile_q(args[1]))
        if t in (exp.Window,):
            raise _refuse("window functions (OVER) are not supported")
        if t is exp.Filter:
            raise _refuse("aggregate FILTER clauses are not supported; put the condition in "
                          "WHERE")
        if t is exp.Star:
            raise _refuse("SELECT * returns row-level values and is refused; select aggregates")
        if t in (exp.Subquery, exp.Select):
            raise _refuse("sub-queries are not accepted")
        if t in (exp.Max, exp.Min):
            raise _refuse(f"{node.key.upper()} reveals an extreme row value and is refused; use "
                          "a quantile such as PERCENTILE_CONT(0.95)")
        fname = node.key.upper() if t is not exp.Anonymous else str(node.this)[:40].upper()
        raise _refuse(f"{fname} is not supported in SELECT: use COUNT, SUM, AVG, MEDIAN or "
                      "PERCENTILE_CONT over declared columns")

    def _default_name(self, st: _State, out: Output) -> str:
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
               st: _State) -> tuple[tuple[int, bool], ...]:
        from sqlglot import exp

        order = tree.args.get("order")
        if order is None:
            return ()
        self._plain(order, {"expressions"})
        result = []
        for ordered in order.expressions:
            if type(ordered) is not exp.Ordered:
                raise _refuse("ORDER BY accepts output names")
            self._plain(ordered, {"this", "desc", "nulls_first"})
            target = ordered.this
            index = None
            if type(target) is exp.Literal and not target.is_string:
                pos = str(target.this)
                if not pos.isdigit() or not 1 <= int(pos) <= len(outputs):
                    raise _refuse(f"ORDER BY position must be between 1 and {len(outputs)}")
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
                raise _refuse("ORDER BY accepts output columns (an alias, a group key or an "
                              "aggregate of the SELECT list)")
            result.append((index, bool(ordered.args.get("desc"))))
        return tuple(result)

    def _count_literal(self, node: Any, what: str) -> int | None:
        from sqlglot import exp

        if node is None:
            return None
        value = node.expression if type(node) in (exp.Limit, exp.Offset) else node
        if type(value) is not exp.Literal or value.is_string or not str(value.this).isdigit():
            raise _refuse(f"{what} takes a non-negative integer")
        n = int(value.this)
        if n > 1_000_000:
            raise _refuse(f"{what} is limited to 1000000")
        return n

    # -- budget split -----------------------------------------------------------------------

    @staticmethod
    def _primitives(st: _State, outputs: list[Output],
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
        return tuple(prims)

    # -- SQL generation ---------------------------------------------------------------------

    def _clamped(self, m: Measure) -> str:
        if m.clamp is None:  # COUNT(col) only: nothing is compared or added
            return f"{m.table.alias}.{quote_ident(m.column.name)}"
        ref = value_ref(m.table.alias, m.column)
        lo, hi = m.clamp
        if m.column.type == "int":
            los, his = str(int(lo)), str(int(hi))
        else:
            los, his = repr(float(lo)), repr(float(hi))
        return (f"CASE WHEN {ref} IS NULL THEN NULL WHEN {ref} < {los} THEN {los} "
                f"WHEN {ref} > {his} THEN {his} ELSE {ref} END")

    def _from_where(self, st: _State, on_sql: list[str], where_sql: str | None,
                    bound: bool) -> str:
        """FROM ... WHERE ...; with contribution bounding (`bound`), rows outside the public
        GROUP BY domain are filtered first so they do not use up a unit's `max_rows`."""
        first = st.tables[0]
        text = f"FROM {self._source(first.spec)} AS {first.alias}"
        for j in on_sql:
            text += f" {j}"
        conditions = [where_sql] if where_sql else []
        for g in st.groups:
            if g.domain is not None and not bound:
                continue  # keys outside the domain are dropped after the query
            if g.domain is not None:
                values = ", ".join(st.param(v) for v in g.domain)
                conditions.append(f"{value_ref(g.table.alias, g.column)} IN ({values})")
            elif g.column.type == "float":
                # released keys are JSON numbers: NaN and infinities are never candidates
                # (NaN compares above every double on both engines; NULL is not between)
                conditions.append(f"{value_ref(g.table.alias, g.column)} BETWEEN "
                                  f"{-_MAX_DOUBLE!r} AND {_MAX_DOUBLE!r}")
            else:
                conditions.append(f"{g.table.alias}.{quote_ident(g.column.name)} IS NOT NULL")
        if conditions:
            text += " WHERE " + " AND ".join(conditions)
        return text

    def _base(self, st: _State, on_sql: list[str], where_sql: str | None,
              unit: tuple[TableUse, ColumnSpec] | None, measures: list[Measure]) -> str:
        cols = []
        if unit is not None:
            cols.append(f"{unit[0].alias}.{quote_ident(unit[1].name)} AS __unit")
            cols.append("random() AS __r")  # a window's ORDER BY may not be volatile
        cols += [f"{value_ref(g.table.alias, g.column)} AS {g.key}" for g in st.groups]
        cols += [f"{self._clamped(m)} AS {m.key}" for m in measures]
        where = self._from_where(st, on_sql, where_sql, bound=unit is not None)
        return f"SELECT {', '.join(cols) or '1 AS __one'} {where}"

    def _compile(self, st: _State, on_sql: list[str], where_sql: str | None,
                 unit: tuple[TableUse, ColumnSpec] | None, user_level: bool, max_rows: int,
                 primitives: tuple[Primitive, ...]) -> tuple[str, tuple[str, ...]]:
        """The aggregation: group keys, COUNT(*), and per measure COUNT / SUM as needed."""
        aggs: list[tuple[str, str]] = [("__n", "COUNT(*)")]
        used: list[Measure] = []
        for p in primitives:
            if p.kind in ("count", "sum", "csum") and p.measure is not None:
                m = st.measures[p.measure]
                if m not in used:
                    used.append(m)
                if (f"__c{m.index}", f"COUNT({m.key})") not in aggs:
                    aggs.append((f"__c{m.index}", f"COUNT({m.key})"))
                if p.kind in ("sum", "csum") and (f"__s{m.index}", f"SUM({m.key})") not in aggs:
                    aggs.append((f"__s{m.index}", f"SUM({m.key})"))
            if p.kind == "units":
                aggs.append(("__u", "COUNT(DISTINCT __unit)"))
        keys = [g.key for g in st.groups]
        select = ", ".join(keys + [f"{expr} AS {name}" for name, expr in aggs])
        group_by = f" GROUP BY {', '.join(keys)}" if keys else ""
        if user_level:
            base = self._base(st, on_sql, where_sql, unit, used)
            sql = (f"WITH __base AS ({base}), __bounded AS (SELECT *, ROW_NUMBER() OVER "
                   f"(PARTITION BY __unit ORDER BY __r) AS __rn FROM __base) "
                   f"SELECT {select} FROM __bounded WHERE __rn <= {int(max_rows)}{group_by}")
        else:
            inner = self._base(st, on_sql, where_sql, None, used)
            sql = f"SELECT {select} FROM ({inner}) AS __base{group_by}"
        return sql, tuple(keys + [name for name, _ in aggs])

    def _compile_values(self, st: _State, on_sql: list[str], where_sql: str | None,
                        unit: tuple[TableUse, ColumnSpec] | None, user_level: bool,
                        max_rows: int, primitives: tuple[Primitive, ...]) -> str:
        """Clamped values of the quantile columns (after contribution bounding), per group."""
        used: list[Measure] = []
        for p in primitives:
            if p.kind == "quantile":
                m = st.measures[p.measure]  # type: ignore[index]
                if m not in used:
                    used.append(m)
        keys = [g.key for g in st.groups] + [m.key for m in used]
        base = self._base(st, on_sql, where_sql, unit if user_level else None, used)
        if user_level:
            return (f"WITH __base AS ({base}), __bounded AS (SELECT *, ROW_NUMBER() OVER "
                    f"(PARTITION BY __unit ORDER BY __r) AS __rn FROM __base) "
                    f"SELECT {', '.join(keys)} FROM __bounded WHERE __rn <= {int(max_rows)}")
        return f"SELECT {', '.join(keys)} FROM ({base}) AS __base"
