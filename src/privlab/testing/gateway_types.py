"""The gateway's types x values grid: every engine type the start-up check accepts, at its
extreme values, as a D and one D' per (type, value), with the battery and the Hypothesis
strategy sent to each (`tests/soundness/test_gateway_types.py`,
`experiments/gateway_types_fuzz.py`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from privlab.query.config import GatewayConfig, hash_key, parse_config
from privlab.testing.gateway import EDGE_FLOATS, EDGE_INTS, INT64_MAX, INT64_MIN, KEY

#: Every engine type the start-up check accepts, with the declared type it is accepted as
#: and its extreme values (SQL text, cast to the type when written). `TYPE_CASES` pairs each
#: with one D' = D plus one row holding that value (or NULL) in the typed columns.
ACCEPTED_TYPES: dict[str, list[tuple[str, str, list[str]]]] = {
    "duckdb": [
        ("TINYINT", "int", ["-128", "127"]),
        ("SMALLINT", "int", ["-32768", "32767"]),
        ("INTEGER", "int", ["-2147483648", "2147483647"]),
        ("BIGINT", "int", [str(INT64_MIN), str(INT64_MAX)]),
        ("UTINYINT", "int", ["255"]),
        ("USMALLINT", "int", ["65535"]),
        ("UINTEGER", "int", ["4294967295"]),
        ("FLOAT", "float", ["-3.4028235e38", "3.4028235e38", "NaN", "Infinity", "-Infinity"]),
        ("DOUBLE", "float", ["-1.7976931348623157e308", "1.7976931348623157e308", "NaN",
                             "Infinity", "-Infinity", "5e-324"]),
        ("DECIMAL(38,0)", "float", ["-" + "9" * 38, "9" * 38]),
        ("DECIMAL(38,10)", "float", ["-" + "9" * 28 + "." + "9" * 10, "9" * 28 + "." + "9" * 10]),
        ("DECIMAL(4,3)", "float", ["-9.999", "9.999"]),
        ("HUGEINT", "float", [str(-(2**127)), str(2**127 - 1)]),
        ("UHUGEINT", "float", [str(2**128 - 1)]),
        ("UBIGINT", "float", [str(2**64 - 1)]),
        ("BIGINT", "float", [str(INT64_MIN), str(INT64_MAX)]),
        ("TINYINT", "float", ["-128", "127"]),
    ],
    "postgres": [
        ("SMALLINT", "int", ["-32768", "32767"]),
        ("INTEGER", "int", ["-2147483648", "2147483647"]),
        ("BIGINT", "int", [str(INT64_MIN), str(INT64_MAX)]),
        ("REAL", "float", ["-3.4028235e38", "3.4028235e38", "NaN", "Infinity", "-Infinity"]),
        ("DOUBLE PRECISION", "float", ["-1.7976931348623157e308", "1.7976931348623157e308",
                                       "NaN", "Infinity", "-Infinity", "5e-324"]),
        ("NUMERIC(307,0)", "float", ["-" + "9" * 307, "9" * 307, "NaN"]),
        ("NUMERIC(20,10)", "float", ["-" + "9" * 10 + "." + "9" * 10, "9" * 10 + "." + "9" * 10,
                                     "NaN"]),
        ("BIGINT", "float", [str(INT64_MIN), str(INT64_MAX)]),
        ("SMALLINT", "float", ["-32768", "32767"]),
    ],
}
#: Engine types the start-up check refuses for a declared type (a one-line error naming the
#: column and the cast to use): a comparison or clamp could fail on one extreme row.
REFUSED_TYPES: dict[str, list[tuple[str, str]]] = {
    "duckdb": [("HUGEINT", "int"), ("UHUGEINT", "int"), ("UBIGINT", "int"),
               ("DECIMAL(38,0)", "int"), ("DECIMAL(18,2)", "int"), ("VARCHAR", "float")],
    "postgres": [("NUMERIC", "float"), ("NUMERIC", "int"), ("NUMERIC(400,0)", "float"),
                 ("NUMERIC(10,0)", "int"), ("TEXT", "int")],
}
TYPED_COLUMNS = ("pid", "x", "xd", "y", "k")
#: D of every typed case: 30 people, x and xd of the tested type (small values that every
#: type holds), y a double, k a bigint, and one person with NULLs.
TYPED_BASE: list[tuple[str, ...]] = [
    (str(i), str(i % 10), str(i % 3), f"{(i % 7) / 2}", str(i % 5)) for i in range(1, 31)
] + [("31", "NULL", "NULL", "NULL", "NULL")]
#: the battery sent for every typed case ({t}: the case's table)
TYPED_QUERIES: list[tuple[str, float, float]] = [
    ("SELECT COUNT(*) FROM {t} WHERE x < 5", 1.0, 0.0),
    ("SELECT COUNT(*) FROM {t} WHERE x < y OR k >= x", 1.0, 0.0),
    ("SELECT COUNT(*) FROM {t} WHERE x = 9223372036854775807 OR x <= -1e308 OR x > 1.5e19",
     1.0, 0.0),
    ("SELECT COUNT(*) FROM {t} WHERE x IN (1, 2.5, -9223372036854775807) OR xd NOT IN (0, 1)",
     1.0, 0.0),
    ("SELECT COUNT(*) FROM {t} WHERE x BETWEEN -1.5 AND 1e300 AND x <> 3 AND x > xd", 1.0, 0.0),
    ("SELECT SUM(x), AVG(x), COUNT(x) FROM {t}", 1.0, 0.0),
    ("SELECT MEDIAN(x), SUM(k) FROM {t} WHERE x IS NOT NULL", 1.0, 0.0),
    ("SELECT xd, COUNT(*), SUM(x), AVG(y) FROM {t} GROUP BY xd", 1.0, 0.0),
    ("SELECT x, COUNT(*), SUM(x) FROM {t} GROUP BY x", 1.0, 1e-6),
    ("SELECT COUNT(DISTINCT pid), SUM(y) FROM {t} WHERE NOT (x >= 0) OR x IS NULL", 1.0, 0.0),
]


def type_cases(engine: str) -> list[tuple[str, str, str]]:
    """(engine type, declared type, edit value: an extreme or NULL) for every D' of the grid."""
    out = []
    for db_type, declared, values in ACCEPTED_TYPES[engine]:
        out += [(db_type, declared, v) for v in values + ["NULL"]]
    return out


def _typed_rows(db_type: str, rows: Iterable[tuple[str, ...]], double: str) -> str:
    def lit(v: str, t: str) -> str:
        return "NULL" if v == "NULL" else f"CAST('{v}' AS {t})"

    return ", ".join(f"({lit(p, 'BIGINT')}, {lit(x, db_type)}, {lit(xd, db_type)}, "
                     f"{lit(y, double)}, {lit(k, 'BIGINT')})" for p, x, xd, y, k in rows)


def typed_statements(engine: str, prefix: str = "") -> list[str]:
    """CREATE and INSERT statements of the grid: per accepted (type, declared) pair a table
    `{prefix}base_{i}` (D), per case a table `{prefix}edit_{j}` (D plus one row)."""
    double = "DOUBLE" if engine == "duckdb" else "DOUBLE PRECISION"
    stmts = []
    for i, (db_type, _, _) in enumerate(ACCEPTED_TYPES[engine]):
        stmts.append(f"CREATE TABLE {prefix}base_{i} (pid BIGINT, x {db_type}, xd {db_type}, "
                     f"y {double}, k BIGINT)")
        stmts.append(f"INSERT INTO {prefix}base_{i} VALUES "
                     f"{_typed_rows(db_type, TYPED_BASE, double)}")
    index = {(t, d): i for i, (t, d, _) in enumerate(ACCEPTED_TYPES[engine])}
    for j, (db_type, declared, value) in enumerate(type_cases(engine)):
        i = index[(db_type, declared)]
        stmts.append(f"CREATE TABLE {prefix}edit_{j} AS SELECT * FROM {prefix}base_{i}")
        row = [("100", value, value, "1.0", "1")]
        stmts.append(f"INSERT INTO {prefix}edit_{j} VALUES {_typed_rows(db_type, row, double)}")
    return stmts


def typed_table(declared: str, source: str) -> dict[str, Any]:
    """The public metadata of a grid table whose x and xd are declared `declared`."""
    num: Any = int if declared == "int" else float
    return {"source": source, "privacy_unit": "pid", "max_rows": 1, "columns": {
        "pid": {"type": "int"},
        "x": {"type": declared, "bounds": [num(0), num(8)], "partition_selection": True},
        "xd": {"type": declared, "domain": [num(0), num(1), num(2)]},
        "y": {"type": "float", "bounds": [0.0, 10.0]},
        "k": {"type": "int", "bounds": [0, 10]},
    }}


def typed_config(engine: str, database: str, ledger: str, edited: bool,
                 schema: str | None = None) -> GatewayConfig:
    """A gateway over the grid: table `c{j}` is case j's D (`edited` False) or D'."""
    index = {(t, d): i for i, (t, d, _) in enumerate(ACCEPTED_TYPES[engine])}
    tables = {}
    for j, (db_type, declared, _) in enumerate(type_cases(engine)):
        source = f"edit_{j}" if edited else f"base_{index[(db_type, declared)]}"
        tables[f"c{j}"] = typed_table(declared, source)
    db: dict[str, Any] = {"url": database}
    if schema:
        db["schema"] = schema
    return parse_config({
        "database": db, "ledger": ledger, "tables": tables,
        "analysts": {"analyst": {"key_sha256": hash_key(KEY), "epsilon": 1e9, "delta": 0.5}},
        "limits": {"rate_per_second": 1e9, "burst": 10**9, "max_epsilon_per_query": 10},
    })


def typed_sql() -> Any:
    """A Hypothesis strategy of queries over a grid table ({t}): WHERE trees of comparisons
    of x, xd, y, k with each other and with literals at 64-bit and double edges, IN,
    BETWEEN, IS [NOT] NULL, AND / OR / NOT; SUM / AVG / COUNT / MEDIAN of the typed column;
    GROUP BY its public domain or by partition selection."""
    from hypothesis import strategies as st

    number = st.one_of(st.sampled_from(EDGE_INTS), st.sampled_from(EDGE_FLOATS + [-1e-300, 1.5e19]),
                       st.integers(-20, 20)).map(repr)
    cols = st.sampled_from(["x", "xd", "y", "k", "pid"])
    op = st.sampled_from(["=", "<>", "<", "<=", ">", ">="])
    comparison = st.one_of(
        st.tuples(cols, op, number).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
        st.tuples(number, op, cols).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
        st.tuples(cols, op, cols).map(lambda t: f"{t[0]} {t[1]} {t[2]}"))
    in_list = st.tuples(cols, st.booleans(), st.lists(number, min_size=1, max_size=4)).map(
        lambda t: f"{t[0]} {'NOT ' if t[1] else ''}IN ({', '.join(t[2])})")
    between = st.tuples(cols, number, number).map(lambda t: f"{t[0]} BETWEEN {t[1]} AND {t[2]}")
    null_test = st.tuples(cols, st.booleans()).map(
        lambda t: f"{t[0]} IS {'NOT ' if t[1] else ''}NULL")
    condition = st.recursive(
        st.one_of(comparison, comparison, in_list, between, null_test),
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"),
            inner.map(lambda c: f"NOT ({c})")),
        max_leaves=4)
    aggregate = st.sampled_from(["COUNT(*)", "COUNT(x)", "SUM(x)", "AVG(x)", "MEDIAN(x)",
                                 "SUM(xd)", "AVG(y)", "SUM(k)", "COUNT(DISTINCT pid)",
                                 "VARIANCE(x)", "STDDEV(y)",
                                 "PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY x)"])
    group = st.sampled_from([(), (), ("xd",), ("x",)])

    def build(parts: tuple[Any, ...]) -> tuple[str, float, float]:
        aggs, where, keys = parts
        sql = f"SELECT {', '.join(list(keys) + aggs)} FROM {{t}}"
        if where is not None:
            sql += f" WHERE {where}"
        if keys:
            sql += f" GROUP BY {', '.join(keys)}"
        return sql, 1.0, 1e-6 if "x" in keys else 0.0

    return st.tuples(st.lists(aggregate, min_size=1, max_size=3, unique=True),
                     st.one_of(condition, condition, st.none()), group).map(build)
