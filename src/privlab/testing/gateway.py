"""The gateway's neighbouring-dataset harness: the judge of "every response is the same
whether or not some row exists, except through the noise".

Build a database D and a neighbour D' (one row added, removed or changed: a hostile string,
a missing value, an extreme or non-finite number, a new category, a second row of one
person) in DuckDB or PostgreSQL, send the same requests with the same seed to a gateway over
each, and compare everything that is not noise: HTTP status, error text, charge, remaining
budget, response keys, column names, column metadata, the guarantee, the public group keys
and the JSON type of every value. `tests/soundness` runs a fixed battery and a Hypothesis
fuzz over `gateway_sql()`; `experiments/gateway_fuzz.py` runs the fuzz for longer. The typed
grid (every engine type the start-up check accepts, at its extremes) is `gateway_types`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from privlab.query.config import GatewayConfig, hash_key, parse_config
from privlab.utils.atomic import atomic_write_text

Row = tuple[Any, ...]
KEY = "pk_neighbours_harness_key"
TABLE = "persons"
COLUMNS = ("pid", "name", "city", "age", "income", "big", "flag")
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

PERSONS: dict[str, Any] = {
    "privacy_unit": "pid", "max_rows": 1, "min_epsilon_per_query": 0.01, "columns": {
        "pid": {"type": "int"},
        "name": {"type": "text", "partition_selection": True},
        "city": {"type": "text", "domain": ["Ankara", "Izmir", "Kyiv"]},
        "age": {"type": "int", "bounds": [0, 120]},
        "income": {"type": "float", "bounds": [0, 1_000_000]},
        "big": {"type": "int", "bounds": [0, 1_000_000_000_000]},
        "flag": {"type": "bool", "domain": [True, False]},
    }}

# D: 40 people; "Izmir" is in the public domain but absent (a rare category for the edits)
BASE: list[Row] = [
    (i, f"p{i:02d}", ["Ankara", "Kyiv"][i % 2], 18 + i, 1000.0 * i, i * 1_000_000_000,
     i % 3 == 0)
    for i in range(1, 41)
] + [(41, None, None, None, None, None, None)]

HOSTILE_NAME = "ab\\%_'Zo\u00eb \U0001f642\\"


def _replace(pid: int, **values: Any) -> Callable[[list[Row]], list[Row]]:
    def edit(rows: list[Row]) -> list[Row]:
        out = []
        for r in rows:
            if r[0] == pid:
                r = tuple(values.get(c, v) for c, v in zip(COLUMNS, r, strict=True))
            out.append(r)
        return out
    return edit


def _add(*row: Any) -> Callable[[list[Row]], list[Row]]:
    return lambda rows: rows + [tuple(row)]


#: One-row edits: D' = edit(D).
EDITS: dict[str, Callable[[list[Row]], list[Row]]] = {
    "add": _add(50, "p50", "Ankara", 30, 5000.0, 10, True),
    "remove": lambda rows: [r for r in rows if r[0] != 7],
    "rare_category": _replace(3, city="Izmir"),
    "new_category": _replace(3, city="Zurich"),
    "missing_values": _replace(5, name=None, city=None, age=None, income=None, big=None,
                               flag=None),
    "extreme_values": _add(50, "p50", "Kyiv", INT64_MAX, 1e308, INT64_MAX, False),
    "negative_extremes": _add(50, "p50", "Kyiv", INT64_MIN, -1e308, INT64_MIN, False),
    "infinity": _add(50, "p50", "Kyiv", 40, math.inf, 1, True),
    "nan": _add(50, "p50", "Kyiv", 40, math.nan, 1, True),
    "backslash": _add(50, "ab\\", "Kyiv", 40, 1.0, 1, True),
    "percent": _add(50, "50%_off", "Kyiv", 40, 1.0, 1, True),
    "quote": _add(50, "O'Brien", "Kyiv", 40, 1.0, 1, True),
    "unicode": _add(50, "Zo\u00eb \U0001f642 \u01c5 \u00df", "Kyiv", 40, 1.0, 1, True),
    "hostile_row": _add(50, HOSTILE_NAME, "Zurich", INT64_MAX, math.nan, INT64_MAX, None),
    "duplicate_person": lambda rows: rows + [rows[0]],
}

#: (sql, epsilon, delta): what the battery sends, refused ones included.
QUERIES: list[tuple[str, float, float]] = [
    ("SELECT COUNT(*) FROM persons", 0.5, 0.0),
    # the backslash oracle: a pattern ending in its escape character is refused up front
    ("SELECT COUNT(*) FROM persons WHERE name LIKE 'ab\\'", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE name ILIKE 'AB\\'", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE name NOT LIKE 'ab\\'", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE name LIKE 'ab!' ESCAPE '!'", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE name LIKE 'ab' ESCAPE '!!'", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE name LIKE 'ab\\\\'", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE name LIKE 'ab\\\\%'", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE name LIKE '%\\%%'", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE name LIKE '50!%!_off' ESCAPE '!'", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE name ILIKE '%ZO\u00cb%'", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE name LIKE '%''%'", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE name LIKE '%\\_%' AND name NOT ILIKE '!%'", 0.5, 0.0),
    # comparisons of mixed numeric types, extreme literals
    ("SELECT COUNT(*) FROM persons WHERE age > 2.5", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE age = 30.0", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE age >= 9223372036854775807", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE age < -9223372036854775807", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE age > 9223372036854775808", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE income > 1e308 OR income < -1e308", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE big > 1.5e19", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE age > income", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE big <= age", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE name > 'Zo\u00eb' AND name <> 'O''Brien'", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE name = 'ab\\'", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE flag = TRUE", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE age = 'x'", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE name = 1", 0.5, 0.0),
    # IN, BETWEEN
    ("SELECT COUNT(*) FROM persons WHERE city IN ('Ankara', 'Zurich')", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE age IN (1, 2.5, 9223372036854775807, -3)", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE income IN (1e308, 0, -1e-300)", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE name NOT IN ('O''Brien', 'Zo\u00eb', 'ab\\')",
     0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE age BETWEEN 10 AND 1e300", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE age BETWEEN 50 AND 10", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE income BETWEEN -1e308 AND 1e308", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE name BETWEEN 'a' AND '\U0001f642'", 0.5, 0.0),
    # NULL tests
    ("SELECT COUNT(*) FROM persons WHERE name IS NULL", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE age IS NOT NULL AND flag IS NOT TRUE", 0.5, 0.0),
    ("SELECT COUNT(*) FROM persons WHERE NOT (income IS NULL)", 0.5, 0.0),
    # aggregates of huge values, NULLs, non-finite values
    ("SELECT SUM(big) FROM persons", 0.5, 0.0),
    ("SELECT SUM(income), AVG(income) FROM persons", 0.5, 0.0),
    ("SELECT SUM(age), AVG(age), COUNT(age) FROM persons", 0.5, 0.0),
    ("SELECT MEDIAN(income) FROM persons", 0.5, 0.0),
    ("SELECT VARIANCE(income), STDDEV(big), AVG(income) FROM persons", 0.5, 0.0),
    ("SELECT city, VAR_POP(age), STDDEV_SAMP(income) FROM persons GROUP BY city", 0.5, 0.0),
    ("SELECT PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY big) FROM persons", 0.5, 0.0),
    ("SELECT COUNT(DISTINCT pid) FROM persons", 0.5, 0.0),
    # GROUP BY over public domains, partition selection
    ("SELECT city, COUNT(*), AVG(age) FROM persons GROUP BY city", 0.5, 0.0),
    ("SELECT flag, city, SUM(big) FROM persons GROUP BY flag, city ORDER BY 3 DESC LIMIT 4",
     0.5, 0.0),
    ("SELECT name, COUNT(*) FROM persons GROUP BY name", 1.0, 1e-6),
    # partition selection where only an edited row can be a candidate (none on D)
    ("SELECT name, COUNT(*), SUM(big), AVG(income) FROM persons WHERE pid = 50 GROUP BY name",
     1.0, 1e-6),
    # budget-side refusals
    ("SELECT COUNT(*) FROM persons", 0.001, 0.0),
    ("SELECT COUNT(*) FROM persons", 50.0, 0.0),
]


# --------------------------------------------------------------------------- databases

def write_duckdb(path: str | Path, rows: Iterable[Row]) -> str:
    from privlab.utils.duck import connect

    con = connect(str(path))  # no progress bar
    try:
        con.execute(f"CREATE TABLE {TABLE} (pid BIGINT, name VARCHAR, city VARCHAR, "
                    "age BIGINT, income DOUBLE, big BIGINT, flag BOOLEAN)")
        con.executemany(f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?, ?, ?, ?)", list(rows))
    finally:
        con.close()
    return str(path)


def write_postgres(url: str, schema: str, rows: Iterable[Row]) -> None:
    """Create `schema`.persons and ANALYZE it (so the planner has statistics: the original
    backslash oracle fired while PostgreSQL planned from them)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
            conn.exec_driver_sql(f'CREATE TABLE "{schema}".{TABLE} (pid BIGINT, name TEXT, '
                                 "city TEXT, age BIGINT, income DOUBLE PRECISION, big BIGINT, "
                                 "flag BOOLEAN)")
            conn.exec_driver_sql(f'INSERT INTO "{schema}".{TABLE} VALUES '
                                 "(%s, %s, %s, %s, %s, %s, %s)", list(rows))
            conn.exec_driver_sql(f'ANALYZE "{schema}".{TABLE}')
    finally:
        engine.dispose()


def config(database: str, ledger: str, schema: str | None = None) -> GatewayConfig:
    db: dict[str, Any] = {"url": database}
    if schema:
        db["schema"] = schema
    return parse_config({
        "database": db, "ledger": ledger, "tables": {TABLE: PERSONS},
        "analysts": {"analyst": {"key_sha256": hash_key(KEY), "epsilon": 1e6, "delta": 0.5}},
        "limits": {"rate_per_second": 1e9, "burst": 10**9, "max_epsilon_per_query": 10},
    })


# --------------------------------------------------------------------------- observation

_HEX_ID = re.compile(r"\b[0-9a-f]{32}\b")
#: column kinds whose 95% interval is computed from the query's parameters only
_FIXED_CI = {"count", "sum", "units", "key"}


def public_view(status: int, body: Any) -> dict[str, Any]:
    """Everything in a response that must not depend on the data: all of it but the noise.

    For an answer: keys, columns, metadata, guarantee, charge and budget, the group keys
    when the domain is public, the number of rows and every value's JSON type (public
    domain only: with partition selection which rows exist is noise). For an error: the
    whole body (query ids masked)."""
    if status != 200 or not isinstance(body, dict) or "rows" not in body:
        text = body if isinstance(body, str) else repr(body)
        return {"status": status, "body": _HEX_ID.sub("<id>", text)}
    selection = any("partition selection" in n for n in body["guarantee"].get("notes", []))
    info = []
    for c in body["column_info"]:
        c = dict(c)
        if c["kind"] not in _FIXED_CI:
            c["confidence_interval_95"] = type(c["confidence_interval_95"]).__name__
        elif selection and isinstance(c["confidence_interval_95"], list):
            c["confidence_interval_95"] = sorted(set(c["confidence_interval_95"]))
        info.append(c)
    keys = [i for i, c in enumerate(body["column_info"]) if c["kind"] == "key"]
    view: dict[str, Any] = {
        "status": status, "keys": sorted(body), "columns": body["columns"],
        "column_info": info, "guarantee": body["guarantee"],
        "epsilon_spent": body["epsilon_spent"], "delta_spent": body["delta_spent"],
        "remaining_budget": body["remaining_budget"],
        "ledger_entry_id": body["ledger_entry_id"],
    }
    if not selection:
        view["n_rows"] = len(body["rows"])
        view["group_keys"] = [[r[i] for i in keys] for r in body["rows"]]
        view["types"] = [[type(v).__name__ for v in r] for r in body["rows"]]
    return view


def send(client: Any, sql: str, epsilon: Any, delta: Any = 0.0) -> dict[str, Any]:
    """POST one query through an HTTP client (FastAPI's TestClient or httpx) and reduce the
    response to its public view."""
    r = client.post("/v1/queries", headers={"Authorization": f"Bearer {KEY}"},
                    json={"sql": sql, "epsilon": epsilon, "delta": delta})
    try:
        body = r.json()
    except ValueError:
        body = r.text
    return public_view(r.status_code, body)


def history_view(client: Any) -> list[dict[str, Any]]:
    """The analyst's history minus ids, times, sequence numbers and released values."""
    r = client.get("/v1/queries?limit=1000", headers={"Authorization": f"Bearer {KEY}"})
    out = []
    for e in r.json()["queries"]:
        out.append({k: v for k, v in e.items()
                    if k not in ("query_id", "created_at", "seq", "result")})
    return out


def differences(a: Any, b: Any, where: str = "") -> list[str]:
    """Paths at which two public views differ (empty: indistinguishable)."""
    if type(a) is not type(b):
        return [f"{where}: {a!r} != {b!r}"]
    if isinstance(a, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += differences(a.get(k), b.get(k), f"{where}.{k}")
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{where}: length {len(a)} != {len(b)}"]
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += differences(x, y, f"{where}[{i}]")
        return out
    if a != b and not (isinstance(a, float) and math.isnan(a) and math.isnan(b)):
        return [f"{where}: {a!r} != {b!r}"]
    return []


# --------------------------------------------------------------------------- the fuzz grammar

_TEXT_ATOMS = ["ab", "\\", "%", "_", "'", "!", "Zo\u00eb", "\U0001f642", "p0", "Kyiv", "x",
               "50", "O'Brien", "\u00df", " "]
#: literals at the 64-bit and double edges (shared with `gateway_types.typed_sql`)
EDGE_INTS = [0, 1, -1, 2, 30, 58, 120, 10**12, INT64_MAX, -INT64_MAX, INT64_MIN, 2**63, 10**30]
EDGE_FLOATS = [0.0, 2.5, -2.5, 1e-300, 1e308, -1e308, 1e6, 123456.75, 3.0]


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def gateway_sql() -> Any:
    """A Hypothesis strategy of gateway queries over `persons`: aggregates, WHERE trees of
    comparisons (mixed numeric types, columns on both sides), IN, BETWEEN, IS [NOT] NULL,
    [NOT] [I]LIKE with hostile patterns and ESCAPE, AND / OR / NOT, and GROUP BY; literals
    include 64-bit edges, out-of-range numbers, non-matching types, quotes, backslashes and
    astral characters. Most are valid; the rest must be refused identically on D and D'."""
    from hypothesis import strategies as st

    text = st.lists(st.sampled_from(_TEXT_ATOMS), max_size=4).map("".join)
    number = st.one_of(st.sampled_from(EDGE_INTS), st.sampled_from(EDGE_FLOATS),
                       st.integers(-200, 200)).map(repr)
    boolean = st.sampled_from(["TRUE", "FALSE"])
    numeric_cols = st.sampled_from(["age", "income", "big", "pid"])
    text_cols = st.sampled_from(["name", "city"])
    any_literal = st.one_of(text.map(_sql_string), number, boolean)

    def literal_for(col: str) -> Any:
        # mostly the right type; sometimes any literal (then refused on both)
        right = (text.map(_sql_string) if col in ("name", "city") else
                 boolean if col == "flag" else number)
        return st.one_of(right, right, right, any_literal)

    column = st.sampled_from(list(COLUMNS))
    op = st.sampled_from(["=", "<>", "<", "<=", ">", ">="])

    comparison = st.one_of(
        st.tuples(column, op).flatmap(
            lambda co: literal_for(co[0]).map(lambda v: f"{co[0]} {co[1]} {v}")),
        st.tuples(numeric_cols, op, numeric_cols).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
    )
    in_list = column.flatmap(lambda c: st.tuples(
        st.booleans(), st.lists(literal_for(c), min_size=1, max_size=4)).map(
        lambda t: f"{c} {'NOT ' if t[0] else ''}IN ({', '.join(t[1])})"))
    between = column.flatmap(lambda c: st.tuples(literal_for(c), literal_for(c)).map(
        lambda t: f"{c} BETWEEN {t[0]} AND {t[1]}"))
    null_test = st.tuples(column, st.booleans()).map(
        lambda t: f"{t[0]} IS {'NOT ' if t[1] else ''}NULL")
    # patterns ending in an escape character, prefixes of the hostile row's name
    pattern = st.one_of(text, text.map(lambda t: t + "\\"),
                        st.sampled_from(["ab\\", "AB\\", "ab%", "%\\", "ab\\\\", "a!",
                                         "ab\\%_", "%\U0001f642%"]))
    like = st.tuples(text_cols, st.booleans(), st.sampled_from(["LIKE", "ILIKE"]), pattern,
                     st.sampled_from(["", "", " ESCAPE '!'", " ESCAPE '\\'", " ESCAPE 'ab'"])
                     ).map(lambda t: f"{t[0]} {'NOT ' if t[1] else ''}{t[2]} "
                                     f"{_sql_string(t[3])}{t[4]}")
    atom = st.one_of(like, comparison, in_list, like, between, null_test,
                     st.sampled_from(["flag", "NOT flag"]))
    condition = st.recursive(
        atom, lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"),
            inner.map(lambda c: f"NOT ({c})")),
        max_leaves=5)
    aggregate = st.sampled_from(["COUNT(*)", "COUNT(age)", "COUNT(name)", "SUM(age)",
                                 "SUM(income)", "SUM(big)", "AVG(income)", "AVG(big)",
                                 "MEDIAN(age)", "COUNT(DISTINCT pid)", "VARIANCE(income)",
                                 "STDDEV(big)"])
    group = st.sampled_from([(), ("city",), ("flag",), ("city", "flag"), ("name",)])

    def build(parts: tuple[Any, ...]) -> tuple[str, float, float]:
        aggs, where, keys, epsilon = parts
        select = ", ".join(list(keys) + aggs)
        sql = f"SELECT {select} FROM persons"
        if where is not None:
            sql += f" WHERE {where}"
        if keys:
            sql += f" GROUP BY {', '.join(keys)}"
        delta = 1e-6 if "name" in keys else 0.0
        return sql, epsilon, delta

    return st.tuples(st.lists(aggregate, min_size=1, max_size=3, unique=True),
                     st.one_of(condition, condition, st.none()), group,
                     st.sampled_from([0.5, 1.0, 0.005, 0.01])).map(build)


def ask(gateway: Any, sql: str, epsilon: float, delta: float,
        analyst: str = "analyst") -> dict[str, Any]:
    """One query through `Gateway.query_json` (in process, as the HTTP route sends it),
    reduced to its public view; a refusal reads as its status and text."""
    import json

    from privlab.errors import PrivlabError

    spec = gateway.config.analysts[analyst]
    try:
        return public_view(200, json.loads(gateway.query_json(spec, sql, epsilon, delta)))
    except PrivlabError as exc:
        return public_view(getattr(exc, "status_code", 500), {"reason": str(exc)})


def fallbacks(*gateways: Any) -> list[tuple[Any, Any]]:
    """(sql, reason) of every audit row whose answer did not come from the engine's rows."""
    return [(r.sql, r.reason) for gw in gateways for r in gw.audit.all()
            if r.decision in ("released_fallback", "error")]


def print_run(stats: dict[str, Any]) -> None:
    """One fuzz run's counts on stdout (its example differences go to the JSON only)."""
    import json

    print(json.dumps({k: v for k, v in stats.items() if k != "examples_of_differences"}),
          flush=True)


def write_fuzz_summary(results: list[dict[str, Any]], path: str | Path,
                       **settings: Any) -> int:
    """The gateway fuzzes' result file: the settings, the runs, and the problems (differing
    answers, server errors, engine failures after a charge); the exit code, 1 on a problem."""
    import json

    bad = sum(r["differing"] + r["server_errors"] + r["engine_failures_after_charge"]
              for r in results)
    out = {**settings, "total_queries": sum(r["queries"] for r in results), "problems": bad,
           "runs": results}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(out, indent=2) + "\n")  # never half a summary
    print(f"{out['total_queries']} queries, {bad} problems -> {path}")
    return 1 if bad else 0
