"""A declared schema on the grouped assessment path: the rows conformed to it inside the engine.

Why: `privlab assess --schema` must not pull a large Parquet table into pandas just to
conform it. `ConformedSource` wraps a `CountSource` (DuckDB or Spark) so that every query of
`privlab.assess.grouped` reads `__data` as the rows conformed in SQL, with the semantics of
`privlab.schema.conform` (the pandas path):

- a first subquery parses each column once (text for categorical / identifier / text,
  DOUBLE for integer / numeric, TIMESTAMP for datetime) beside a flag "missing in the file";
- `--on-invalid refuse`: one aggregate query counts, per column, the cells each check of
  `conform` would refuse; the first column (file order) and check (conform's order) with a
  count raises conform's one-line error, prefixed with DATA / --population;
- the conformed view clamps numbers to the bounds (integers rounded half to even, as
  `np.round`), maps undeclared categories to `<other>` (or missing), clamps dates, and drops
  the rows whose value has no place (missing where `missing: false`).

Only counts come back to this process, as on the grouped path without a schema.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from privlab.assess.sources import FLOAT_TYPES, INT_TYPES, CountSource, lit, q, read_from
from privlab.errors import InvalidInputError
from privlab.schema.conform import Policy, check_policy
from privlab.schema.model import ISO8601, OTHER, ColumnSchema, Schema

_FIX = "fix the data, widen the schema, or pass --on-invalid coerce"
_MISSING = "a missing value but the schema declares missing: false"


def source_kind(type_name: str) -> str:
    """int | float | bool | text | time | other, from a DuckDB or Spark type name."""
    t = type_name.lower().split("(")[0].strip()
    if t in INT_TYPES:
        return "int"
    if t in FLOAT_TYPES or t.startswith("decimal"):
        return "float"
    if t in ("boolean", "bool"):
        return "bool"
    if t in ("varchar", "string", "text"):
        return "text"
    if t.startswith(("timestamp", "date")):
        return "time"
    return "other"


def _str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _ts(value: Any) -> str:
    return f"CAST('{pd.Timestamp(value).isoformat(sep=' ')}' AS TIMESTAMP)"


def _is_missing(x: str, kind: str) -> str:
    return f"({x} IS NULL OR isnan({x}))" if kind == "float" else f"{x} IS NULL"


def _text(x: str, kind: str) -> str:
    """A value as the text `conform` compares with the declared categories (whole floats
    read '1', not '1.0'; booleans 'True' / 'False' as Python prints them)."""
    if kind == "text":
        return x
    if kind == "float":
        return (f"CASE WHEN {x} IS NULL OR isnan({x}) THEN NULL WHEN {x} = floor({x}) AND "
                f"abs({x}) < {lit(1e15)} THEN CAST(CAST({x} AS BIGINT) AS VARCHAR) "
                f"ELSE CAST({x} AS VARCHAR) END")
    if kind == "bool":
        return f"CASE WHEN {x} IS NULL THEN NULL WHEN {x} THEN 'True' ELSE 'False' END"
    return f"CAST({x} AS VARCHAR)"


#: The numeric rule of `privlab.schema.values` for a text cell (no "inf", no separators).
_NUMBER_RE = r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"


def _number(x: str, kind: str, dialect: str = "duckdb") -> str:
    """The value as DOUBLE; NULL where `privlab.schema.values.number_of` finds no number
    (a text cell must be a decimal number on its own: the rule, not the engine's cast)."""
    if kind == "bool":
        return "CAST(NULL AS DOUBLE)"
    if kind in ("int", "float"):
        return f"CASE WHEN isnan(CAST({x} AS DOUBLE)) THEN NULL ELSE CAST({x} AS DOUBLE) END"
    t = f"trim(CAST({x} AS VARCHAR))"
    match = f"regexp_full_match({t}, '{_NUMBER_RE}')" if dialect == "duckdb" else \
        f"{t} RLIKE '^{_NUMBER_RE}$'"
    return f"CASE WHEN {match} THEN CAST({t} AS DOUBLE) ELSE NULL END"


def _time(x: str, kind: str, fmt: str = ISO8601, dialect: str = "duckdb") -> str:
    """A datetime cell by the column's declared format (`privlab.schema.values.datetime_of`):
    ISO 8601 with an offset or Z converted to UTC (DuckDB reads through TIMESTAMPTZ on a UTC
    session; Spark through its instant type, shown in the session time zone, which
    `SparkSource` holds at UTC while it counts), or a strptime pattern; never a format taken
    from other rows."""
    if kind == "time":
        return f"CAST({x} AS TIMESTAMP)"
    t = f"trim(CAST({x} AS VARCHAR))"
    if dialect != "duckdb":
        if fmt != ISO8601:
            raise InvalidInputError(f"a datetime format {fmt!r} is read on the pandas and "
                                    "DuckDB engines; on Spark store the column as a timestamp "
                                    "or as ISO 8601 text")
        # (a plain TIMESTAMP is Spark's TIMESTAMP_NTZ after `to_spark_sql`: it drops offsets)
        return f"CAST(TRY_CAST({t} AS TIMESTAMPTZ) AS TIMESTAMP)"
    if fmt != ISO8601:
        quoted = "'" + fmt.replace("'", "''") + "'"
        return f"TRY_STRPTIME({t}, {quoted})"
    return f"CAST(TRY_CAST({t} AS TIMESTAMPTZ) AT TIME ZONE 'UTC' AS TIMESTAMP)"


def _half_even(x: str) -> str:
    """`np.round(x)` (half to even) in SQL both DuckDB and Spark read."""
    half = lit(0.5)
    return (f"CASE WHEN {x} - floor({x}) = {half} AND floor({x}) % 2 = 0 THEN floor({x}) "
            f"WHEN {x} - floor({x}) = {half} THEN floor({x}) + 1 "
            f"ELSE floor({x} + {half}) END")


@dataclass(frozen=True)
class _Column:
    """One declared column in SQL: its parse, refusal checks, output and drop condition."""

    name: str
    parse: str  # over the file's column
    checks: tuple[tuple[str, str], ...]  # (condition over p / m, conform's message)
    out: str  # over the parsed value p
    drop: str | None  # rows dropped (no place for the value); None: never
    sql_type: str


def _categorical(col: ColumnSchema, p: str) -> tuple[list[tuple[str, str]], str, str | None]:
    cats = ", ".join(_str(c) for c in col.categories)
    unknown = f"({p} IS NOT NULL AND {p} NOT IN ({cats}))"
    checks = [] if col.other else [(unknown, "a value outside its declared categories")]
    other = _str(OTHER) if col.other else "NULL"
    out = f"CASE WHEN {p} IS NULL THEN NULL WHEN {p} IN ({cats}) THEN {p} ELSE {other} END"
    nothing = f"{p} IS NULL" if col.other else f"({p} IS NULL OR {unknown})"
    if not col.missing:
        checks.append((nothing, _MISSING))
    return checks, out, None if col.missing else nothing


def _numeric(col: ColumnSchema, p: str, m: str, kind: str
             ) -> tuple[list[tuple[str, str]], str, str | None]:
    lo, hi = col.bounds  # type: ignore[misc]
    checks = [("TRUE", "true/false values in a numeric column")] if kind == "bool" else []
    checks.append((f"({p} IS NULL AND NOT {m})",
                   f"a value that is not a number in a {col.type} column"))
    clamp = (f"CASE WHEN {p} < {lit(lo)} THEN {lit(lo)} WHEN {p} > {lit(hi)} "
             f"THEN {lit(hi)} ELSE {p} END")
    if col.type == "integer":
        finite = f"{p} <> {lit(float('inf'))} AND {p} <> {lit(float('-inf'))}"
        checks.append((f"({p} IS NOT NULL AND {finite} AND {p} <> floor({p}))",
                       "a non-integer value in an integer column"))
        # clamping to whole bounds and rounding commute; integers need no rounding
        out = f"CAST({clamp if kind == 'int' else _half_even(f'({clamp})')} AS BIGINT)"
    else:
        out = clamp
    checks.append((f"({p} IS NOT NULL AND ({p} < {lit(lo)} OR {p} > {lit(hi)}))",
                   f"a value outside its declared bounds [{lo}, {hi}]"))
    if not col.missing:
        checks.append((f"{p} IS NULL", _MISSING))
    return checks, out, None if col.missing else f"{p} IS NULL"


def _datetime(col: ColumnSchema, p: str, m: str) -> tuple[list[tuple[str, str]], str, str | None]:
    lo, hi = (pd.Timestamp(b) for b in col.bounds)  # type: ignore[union-attr]
    fmt = "ISO 8601" if col.format == ISO8601 else repr(col.format)
    checks = [(f"({p} IS NULL AND NOT {m})",
               f"a value that is not a date/time in its declared format ({fmt})"),
              (f"({p} IS NOT NULL AND ({p} < {_ts(lo)} OR {p} > {_ts(hi)}))",
               f"a date outside its declared bounds [{lo}, {hi}]")]
    out = f"CASE WHEN {p} < {_ts(lo)} THEN {_ts(lo)} WHEN {p} > {_ts(hi)} THEN {_ts(hi)} " \
          f"ELSE {p} END"
    if not col.missing:
        checks.append((f"{p} IS NULL", _MISSING))
    return checks, out, None if col.missing else f"{p} IS NULL"


_SQL_TYPES = {"categorical": "VARCHAR", "integer": "BIGINT", "numeric": "DOUBLE",
              "datetime": "TIMESTAMP", "identifier": "VARCHAR", "text": "VARCHAR"}


def declared_column(col: ColumnSchema, index: int, type_name: str,
                    dialect: str = "duckdb") -> _Column:
    """The SQL of one declared column read from a file column of type `type_name` on the
    `dialect` engine ("duckdb" or "spark")."""
    kind = source_kind(type_name)
    x, p, m = q(col.name), f"__p{index}", f"__m{index}"
    if col.type in ("integer", "numeric"):
        parse = _number(x, kind, dialect)
        checks, out, drop = _numeric(col, p, m, kind)
    elif col.type == "datetime":
        parse = _time(x, kind, col.format, dialect)
        checks, out, drop = _datetime(col, p, m)
    else:
        parse = _text(x, kind)
        if col.type == "categorical":
            checks, out, drop = _categorical(col, p)
        else:  # identifier / text: only a missing value can be refused
            out, drop = p, None if col.missing else f"{p} IS NULL"
            checks = [] if col.missing else [(f"{p} IS NULL", _MISSING)]
    parse = f"{parse} AS {p}, {_is_missing(x, kind)} AS {m}"
    return _Column(col.name, parse, tuple(checks), out, drop, _SQL_TYPES[col.type])


class ConformedSource(CountSource):
    """`inner`'s rows conformed to `schema` under `policy`, as a CountSource (see the module
    docstring). Constructing it runs the refuse checks; `rows_read` counts the file's rows."""

    def __init__(self, inner: CountSource, schema: Schema, policy: Policy,
                 what: str = "DATA") -> None:
        self.inner, self.name, self.what = inner, inner.name, what
        if schema.draft:
            raise InvalidInputError(f"{what}: schema {schema.name!r} is a draft drawn from the "
                                    "data: review it and drop 'draft: true' before use")
        try:
            cols = [declared_column(schema.column(c), i, t, inner.name)
                    for i, (c, t) in enumerate(inner.columns.items())]
        except InvalidInputError as exc:
            raise InvalidInputError(f"{what}: {exc}") from None
        parsed = f"(SELECT {', '.join(c.parse for c in cols)} FROM __data) AS __parsed"
        drops = [c.drop for c in cols if c.drop is not None]
        keep = "NOT (" + " OR ".join(drops) + ")" if drops else "TRUE"
        self.rows_read, self.rows_kept = self._refuse_or_count(cols, parsed, keep, policy)
        outs = ", ".join(f"{c.out} AS {q(c.name)}" for c in cols)
        self.view = f"(SELECT {outs} FROM {parsed} WHERE {keep}) AS __conformed"
        self.columns = {c.name: c.sql_type for c in cols}

    def close(self) -> None:
        """Closes the wrapped source."""
        self.inner.close()

    def _refuse_or_count(self, cols: list[_Column], parsed: str, keep: str,
                         policy: Policy) -> tuple[int, int]:
        """The file's rows and the rows kept, in one scan; under refuse, the first invalid
        cell (columns in file order, checks in conform's order) raises conform's error."""
        checks = [(c.name, msg, cond) for c in cols for cond, msg in c.checks] \
            if policy == "refuse" else []
        sums = "".join(f", SUM(CASE WHEN {cond} THEN 1 ELSE 0 END)" for _, _, cond in checks)
        row = self.inner.sql(f"SELECT COUNT(*), SUM(CASE WHEN {keep} THEN 1 ELSE 0 END)"
                             f"{sums} FROM {parsed}")[0]
        for (name, msg, _), count in zip(checks, row[2:], strict=True):
            if count:
                raise InvalidInputError(f"{self.what}: column {name!r}: {msg}; {_FIX}")
        return int(row[0]), int(row[1] or 0)

    def _text(self, text: str) -> str:
        return read_from(text, self.view)

    def sql(self, text: str) -> list[tuple[Any, ...]]:
        return self.inner.sql(self._text(text))

    def frame(self, text: str) -> pd.DataFrame:
        return self.inner.frame(self._text(text))


def conformed_sources(src: CountSource, population: CountSource | None, schema: Schema,
                      on_invalid: str, attributes: Sequence[str] | None,
                      qis: Sequence[str] | None, sensitive: str | None,
                      bins: int | Mapping[str, Any] | None) -> tuple[Any, ...]:
    """`privlab.assess.pipeline._apply_schema` on the grouped path: the same refusals, direct
    identifiers, attributes, declared bins and schema block, with the rows conformed in SQL."""
    from privlab.assess.declared import (
        declared_attributes,
        refuse_direct_roles,
        schema_summary,
    )

    policy = check_policy(on_invalid)
    refuse_direct_roles(schema, attributes, qis, sensitive)
    data = ConformedSource(src, schema, policy)
    if population is not None:
        population = ConformedSource(population, schema, policy, "--population")
    direct, attributes, bins = declared_attributes(schema, list(data.columns), attributes, bins)
    info = schema_summary(schema, policy, data.rows_read, data.rows_kept, direct)
    return data, population, attributes, bins, info, direct


__all__ = ["ConformedSource", "conformed_sources", "declared_column", "source_kind"]
