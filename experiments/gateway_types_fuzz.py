"""Long run of the gateway's type x value fuzz (the CI test runs 80 examples per engine).

    PRIVLAB_TEST_POSTGRES_URL=postgresql+psycopg://privlab:privlab@127.0.0.1:5433/privlab_test \
        .venv/bin/python experiments/gateway_types_fuzz.py --examples 1500 [--seed 1]

For each engine (DuckDB; PostgreSQL when the URL is set), one database holds, for every
engine type the start-up check accepts (`privlab.testing.gateway_types.ACCEPTED_TYPES`), a D and,
per extreme value of the type and NULL, a D' = D plus one row with that value. A gateway
over all the D and one over all the D' (same noise seed) receive the same `typed_sql()`
queries, each on a case drawn at random (Hypothesis, random, not the CI's fixed set).
Counted: queries, statuses, queries whose public views differ, server errors and engine
failures after the charge (audit `released_fallback` / `error`). Every count but the first
two must be 0. Results JSON: experiments/results/gateway_types_fuzz.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from privlab.query.gateway import Gateway  # noqa: E402
from privlab.testing.gateway import (  # noqa: E402
    ask,
    differences,
    fallbacks,
    print_run,
    write_fuzz_summary,
)
from privlab.testing.gateway_types import (  # noqa: E402
    type_cases,
    typed_config,
    typed_sql,
    typed_statements,
)


def database(engine: str, work: Path, pg_url: str | None) -> tuple[str, str | None]:
    if engine == "duckdb":
        import duckdb

        path = work / "types.duckdb"
        con = duckdb.connect(str(path))
        for s in typed_statements("duckdb"):
            con.execute(s)
        con.close()
        return str(path), None
    import sqlalchemy as sa

    assert pg_url is not None
    schema = f"tf_{uuid.uuid4().hex[:10]}"
    eng = sa.create_engine(pg_url)
    with eng.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
        for s in typed_statements("postgres", f'"{schema}".'):
            conn.exec_driver_sql(s)
    eng.dispose()
    return pg_url, schema


def run(engine: str, examples: int, seed: int, work: Path, pg_url: str | None
        ) -> dict[str, Any]:
    url, schema = database(engine, work, pg_url)
    gws = [Gateway(typed_config(engine, url, str(work / f"ledger-{engine}-{e}.db"), e,
                                schema=schema), rng=seed) for e in (False, True)]
    cases = type_cases(engine)
    stats: dict[str, Any] = {"engine": engine, "cases": len(cases), "queries": 0,
                             "statuses": {}, "differing": 0, "server_errors": 0,
                             "examples_of_differences": []}

    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(st.integers(0, len(cases) - 1), typed_sql())
    def check(j: int, query: tuple[str, float, float]) -> None:
        sql, eps, delta = query
        q = sql.format(t=f"c{j}")
        a, b = (ask(g, q, eps, delta) for g in gws)
        stats["queries"] += 1
        stats["statuses"][str(a["status"])] = stats["statuses"].get(str(a["status"]), 0) + 1
        stats["server_errors"] += int(a["status"] >= 500) + int(b["status"] >= 500)
        diff = differences(a, b)
        if diff:
            stats["differing"] += 1
            if len(stats["examples_of_differences"]) < 5:
                stats["examples_of_differences"].append(
                    {"case": list(cases[j]), "sql": q, "diff": diff[:5]})

    from hypothesis import seed as hseed

    started = time.perf_counter()
    hseed(seed)(check)()
    stats["seconds"] = round(time.perf_counter() - started, 1)
    stats["engine_failures_after_charge"] = len(fallbacks(*gws))
    for g in gws:
        g.close()
    return stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=1000, help="queries per engine")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results",
                                                       "gateway_types_fuzz.json"))
    args = parser.parse_args()
    pg_url = os.environ.get("PRIVLAB_TEST_POSTGRES_URL")
    engines = ["duckdb"] + (["postgres"] if pg_url else [])
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for engine in engines:
            stats = run(engine, args.examples, args.seed, Path(tmp), pg_url)
            results.append(stats)
            print_run(stats)
    return write_fuzz_summary(results, args.json, examples_per_engine=args.examples,
                              seed=args.seed, engines=engines)


if __name__ == "__main__":
    sys.exit(main())
