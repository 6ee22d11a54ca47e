"""SQL generation: the statement the engine runs for a checked query (`aggregation`: group
keys, COUNT(*) and per measure COUNT / SUM, after contribution bounding) and the clamped
values of its quantile columns (`quantile_values`).

Identifiers come from the config, quoted here; every literal is a bound parameter
(`PlanState.param`). The WHERE and JOIN ... ON fragments are produced by the validator
while it checks those clauses (`privlab.query.planner.validate`), from the same helpers.
"""

from __future__ import annotations

from privlab.engines.base import qualified_source, quote_ident
from privlab.query.config import ColumnSpec, TableSpec
from privlab.query.planner.plan import Measure, PlanState, Primitive, TableUse
from privlab.schema.units import unit_present_sql

_MAX_DOUBLE = 1.7976931348623157e308


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


def bounded(base: str, select: str, max_rows: int) -> str:
    """Contribution bounding: `select` over the rows of `base` (which has the `__unit` and
    `__r` columns) keeping at most `max_rows` random rows per privacy unit."""
    return (f"WITH __base AS ({base}), __bounded AS (SELECT *, ROW_NUMBER() OVER "
            f"(PARTITION BY __unit ORDER BY __r) AS __rn FROM __base) "
            f"SELECT {select} FROM __bounded WHERE __rn <= {int(max_rows)}")


def centred_squares(m: Measure) -> str:
    """SUM((x - c) * (x - c)) over the clamped values, c = (lo + hi) / 2 as a double: the
    centred sum of squares of a registry statistic's SQL form (`privlab.measure.stats`)."""
    lo, hi = m.clamp  # type: ignore[misc]
    y = f"(CAST({m.key} AS DOUBLE PRECISION) - {float((lo + hi) / 2)!r})"
    return f"SUM({y} * {y})"


class SqlGenerator:
    """Generates the engine's SQL for one config (its `schema` qualifies table sources)."""

    def __init__(self, schema: str | None) -> None:
        self.schema = schema

    def source(self, spec: TableSpec) -> str:
        """A declared table's source, schema-qualified when the config names a schema."""
        return qualified_source(spec.source, self.schema)


    def _clamped(self, m: Measure) -> str:
        if m.clamp is None:  # COUNT(col) only: nothing is compared or added
            return f"{m.table.alias}.{quote_ident(m.column.name)}"
        ref = value_ref(m.table.alias, m.column)
        lo, hi = m.clamp
        if m.column.type == "int":
            los, his = str(int(lo)), str(int(hi))
        else:
            los, his = repr(float(lo)), repr(float(hi))
        # NULL compares as unknown in both WHENs and falls through to ELSE: NULL stays NULL
        # (no separate IS NULL branch: one evaluation of the column fewer per row)
        return f"CASE WHEN {ref} < {los} THEN {los} WHEN {ref} > {his} THEN {his} ELSE {ref} END"

    def _from_where(self, st: PlanState, on_sql: list[str], where_sql: str | None,
                    unit: tuple[TableUse, ColumnSpec] | None) -> str:
        """FROM ... WHERE ...; with contribution bounding (a `unit`), rows without a unit id
        are dropped (never one merged NULL partition, `privlab.schema.units`) and rows outside
        the public GROUP BY domain are filtered first so they do not use up a unit's
        `max_rows`."""
        bound = unit is not None
        first = st.tables[0]
        text = f"FROM {self.source(first.spec)} AS {first.alias}"
        for j in on_sql:
            text += f" {j}"
        conditions = [where_sql] if where_sql else []
        if unit is not None:
            conditions.append(unit_present_sql(f"{unit[0].alias}.{quote_ident(unit[1].name)}",
                                               unit[1].type == "text"))
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

    def _base(self, st: PlanState, on_sql: list[str], where_sql: str | None,
              unit: tuple[TableUse, ColumnSpec] | None, measures: list[Measure]) -> str:
        cols = []
        if unit is not None:
            cols.append(f"{unit[0].alias}.{quote_ident(unit[1].name)} AS __unit")
            cols.append("random() AS __r")  # a window's ORDER BY may not be volatile
        cols += [f"{value_ref(g.table.alias, g.column)} AS {g.key}" for g in st.groups]
        cols += [f"{self._clamped(m)} AS {m.key}" for m in measures]
        where = self._from_where(st, on_sql, where_sql, unit)
        return f"SELECT {', '.join(cols) or '1 AS __one'} {where}"

    def aggregation(self, st: PlanState, on_sql: list[str], where_sql: str | None,
                    unit: tuple[TableUse, ColumnSpec] | None, user_level: bool, max_rows: int,
                    primitives: tuple[Primitive, ...]) -> tuple[str, tuple[str, ...]]:
        """The aggregation: group keys, COUNT(*), and per measure what its primitives read
        (`privlab.query.noise._exact_values`): COUNT for a count of the column, a centred
        sum and a variance; SUM for a sum; the centred sum of squares. Nothing else: each
        aggregate costs the engine a pass over the clamped values."""
        aggs: list[tuple[str, str]] = [("__n", "COUNT(*)")]
        used: list[Measure] = []
        for p in primitives:
            if p.kind in ("count", "sum", "csum") and p.measure is not None:
                m = st.measures[p.measure]
                if m not in used:
                    used.append(m)
                if p.kind != "sum" and (f"__c{m.index}", f"COUNT({m.key})") not in aggs:
                    aggs.append((f"__c{m.index}", f"COUNT({m.key})"))
                if p.kind in ("sum", "csum") and (f"__s{m.index}", f"SUM({m.key})") not in aggs:
                    aggs.append((f"__s{m.index}", f"SUM({m.key})"))
            if p.kind == "csq" and p.measure is not None:
                m = st.measures[p.measure]
                if m not in used:
                    used.append(m)
                if (f"__c{m.index}", f"COUNT({m.key})") not in aggs:
                    aggs.append((f"__c{m.index}", f"COUNT({m.key})"))
                aggs.append((f"__q{m.index}", centred_squares(m)))
            if p.kind == "units":
                aggs.append(("__u", "COUNT(DISTINCT __unit)"))
        keys = [g.key for g in st.groups]
        select = ", ".join(keys + [f"{expr} AS {name}" for name, expr in aggs])
        group_by = f" GROUP BY {', '.join(keys)}" if keys else ""
        if user_level:
            sql = bounded(self._base(st, on_sql, where_sql, unit, used), select,
                          max_rows) + group_by
        elif not used and not keys:
            # COUNT(*) alone: straight over the filtered rows (no derived table to plan)
            sql = f"SELECT {select} {self._from_where(st, on_sql, where_sql, None)}"
        else:
            inner = self._base(st, on_sql, where_sql, None, used)
            sql = f"SELECT {select} FROM ({inner}) AS __base{group_by}"
        return sql, tuple(keys + [name for name, _ in aggs])

    def quantile_values(self, st: PlanState, on_sql: list[str], where_sql: str | None,
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
            return bounded(base, ", ".join(keys), max_rows)
        return f"SELECT {', '.join(keys)} FROM ({base}) AS __base"
