"""Which database column types each declared gateway type accepts (the start-up whitelist).

The check is part of the privacy argument: the planner only compares a column with literals
of its *declared* type and reads a `float` column through CAST(.. AS DOUBLE PRECISION), so a
database type outside this whitelist could make one row's value fail a cast or comparison,
an error that reveals that row. Catalog types are schema, not rows: reading them is public.
"""

from __future__ import annotations

import re

#: Integer types whose every value fits in a signed 64-bit integer: the planner compares
#: an `int` column as it is, with 64-bit literals and with other such columns, and clamps
#: it with 64-bit literals, so no comparison or clamp needs a narrowing cast.
_INT64 = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER",
          "INT1", "INT2", "INT4", "INT8"}
#: Types whose every value converts to DOUBLE PRECISION without an error: the planner reads
#: a `float` column only through `CAST(col AS DOUBLE PRECISION)` (comparisons, clamps, group
#: keys, joins), so these are compared, clamped and summed as doubles. DuckDB's 128-bit and
#: unsigned 64-bit integers stay below 3.5e38; a DECIMAL / NUMERIC(p, s) below 10^(p-s)
#: (see `_NUMERIC_DIGITS`); an unconstrained PostgreSQL numeric (up to 10^131072) is not here.
_DOUBLE_SAFE = _INT64 | {"FLOAT", "FLOAT4", "FLOAT8", "REAL", "DOUBLE", "DOUBLE PRECISION",
                         "HUGEINT", "UHUGEINT", "UBIGINT"}
#: A DECIMAL(p, s) / NUMERIC(p, s) holds |v| < 10^(p - s); casting it to DOUBLE PRECISION
#: (largest finite 1.8e308) cannot overflow while p - s <= this.
_NUMERIC_DIGITS = 307
#: Database types (upper case, without size or precision) each declared type accepts. A
#: whitelist: every expression the planner emits is total on every value of these types
#: (tests/soundness/test_gateway_types.py checks each with its extreme values on both engines).
_DECLARED: dict[str, set[str]] = {
    "int": _INT64,
    "float": _DOUBLE_SAFE | {"DECIMAL", "NUMERIC"},
    "text": {"VARCHAR", "TEXT", "CHARACTER VARYING", "CHARACTER", "BPCHAR", "CHAR", "STRING"},
    "bool": {"BOOLEAN", "BOOL"},
}
_PRECISION = re.compile(r"^\s*(\d+)\s*(?:,\s*(-?\d+)\s*)?$")


def type_problem(declared: str, db_type: str, column: str = "col") -> str | None:
    """None when a database column type (e.g. 'BIGINT', 'DECIMAL(10,2)', 'character
    varying(20)') holds values of the declared gateway type on which every generated
    expression is total; otherwise the fix, naming the cast to use (one line)."""
    base, _, rest = db_type.upper().partition("(")
    base = base.strip()
    wide_decimal = False
    if base in ("DECIMAL", "NUMERIC"):
        digits = _PRECISION.match(rest.rstrip(") "))
        wide_decimal = digits is None or \
            int(digits.group(1)) - int(digits.group(2) or 0) > _NUMERIC_DIGITS
        if declared == "float" and not wide_decimal:
            return None
    elif base in _DECLARED.get(declared, set()):
        return None
    if wide_decimal and declared in ("int", "float"):
        return (f"its values may exceed the double range, so a comparison or clamp could fail "
                f"on one row; declare it NUMERIC(p, s) with p - s <= {_NUMERIC_DIGITS} and "
                f"type float, or serve a view with CAST(LEAST(GREATEST({column}, -1e300), "
                f"1e300) AS DOUBLE PRECISION) AS {column} declared float")
    if declared == "int" and (base in _DOUBLE_SAFE or base in ("DECIMAL", "NUMERIC")):
        return (f"its values need not fit in 64 bits, so a comparison or clamp could fail on "
                f"one row; declare it float (compared and summed as DOUBLE PRECISION), or "
                f"serve a view with CAST({column} AS DOUBLE PRECISION) AS {column} declared "
                f"float")
    return (f"declare the matching type ({', '.join(sorted(_DECLARED.get(declared, ())))} "
            f"for {declared})")

