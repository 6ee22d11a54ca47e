"""Long run of the gateway's neighbouring-dataset fuzz (the CI test runs 60 examples).

    PRIVLAB_TEST_POSTGRES_URL=postgresql+psycopg://privlab:privlab@127.0.0.1:5433/privlab_test \
        .venv/bin/python experiments/gateway_fuzz.py --examples 1000 \
        [--edits hostile_row duplicate_person missing_values backslash] [--seed 1]

For each engine (DuckDB; PostgreSQL when the URL is set) and each edit of
`privlab.testing.gateway.EDITS`, a gateway over D and one over D' (one row edited) with the
same noise seed receive the same `gateway_sql()` queries (Hypothesis, random, not shrunk to
the CI's fixed set). Counted: queries, statuses, queries whose public views differ (status,
error text, charge, budget, keys, metadata, group keys, value types) and engine failures
after the charge (audit `released_fallback`). Every count but the first two must be 0.
Results JSON: experiments/results/gateway_fuzz.json.
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

from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402

from privlab.query.gateway import Gateway  # noqa: E402
from privlab.service.app import create_app  # noqa: E402
from privlab.testing.gateway import (  # noqa: E402
    BASE,
    EDITS,
    config,
    differences,
    gateway_sql,
    print_run,
    send,
    write_duckdb,
    write_fuzz_summary,
    write_postgres,
)


def gateway(engine: str, rows: list[Any], work: Path, pg_url: str | None,
            seed: int) -> Gateway:
    tag = uuid.uuid4().hex[:10]
    ledger = str(work / f"ledger-{tag}.db")
    if engine == "duckdb":
        return Gateway(config(write_duckdb(work / f"{tag}.duckdb", rows), ledger), rng=seed)
    assert pg_url is not None
    write_postgres(pg_url, f"fz_{tag}", rows)
    return Gateway(config(pg_url, ledger, schema=f"fz_{tag}"), rng=seed)


def run(engine: str, edit: str, examples: int, seed: int, work: Path,
        pg_url: str | None) -> dict[str, Any]:
    gws = [gateway(engine, list(BASE), work, pg_url, seed),
           gateway(engine, EDITS[edit](list(BASE)), work, pg_url, seed)]
    clients = [TestClient(create_app(gateway=g)) for g in gws]
    stats: dict[str, Any] = {"engine": engine, "edit": edit, "queries": 0, "statuses": {},
                             "differing": 0, "server_errors": 0, "examples_of_differences": []}

    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(gateway_sql())
    def check(query: tuple[str, float, float]) -> None:
        sql, eps, delta = query
        a, b = (send(c, sql, eps, delta) for c in clients)
        stats["queries"] += 1
        stats["statuses"][str(a["status"])] = stats["statuses"].get(str(a["status"]), 0) + 1
        stats["server_errors"] += int(a["status"] >= 500) + int(b["status"] >= 500)
        diff = differences(a, b)
        if diff:
            stats["differing"] += 1
            if len(stats["examples_of_differences"]) < 5:
                stats["examples_of_differences"].append({"sql": sql, "diff": diff[:5]})

    from hypothesis import seed as hseed

    started = time.perf_counter()
    hseed(seed)(check)()
    stats["seconds"] = round(time.perf_counter() - started, 1)
    stats["engine_failures_after_charge"] = sum(
        r.decision in ("released_fallback", "error") for g in gws for r in g.audit.all())
    for g in gws:
        g.close()
    return stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=1000, help="queries per engine and edit")
    parser.add_argument("--edits", nargs="+", default=["hostile_row", "duplicate_person",
                                                       "missing_values", "backslash"],
                        choices=sorted(EDITS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results",
                                                       "gateway_fuzz.json"))
    args = parser.parse_args()
    base_url = os.environ.get("PRIVLAB_TEST_POSTGRES_URL")
    engines = ["duckdb"] + (["postgres"] if base_url else [])
    results = []
    admin = pg_url = None
    if base_url:  # a scratch database, dropped at the end
        import sqlalchemy as sa

        name = f"privlab_fuzz_{uuid.uuid4().hex[:10]}"
        admin = sa.create_engine(base_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        pg_url = base_url.rsplit("/", 1)[0] + "/" + name
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for engine in engines:
                for edit in args.edits:
                    stats = run(engine, edit, args.examples, args.seed, Path(tmp), pg_url)
                    results.append(stats)
                    print_run(stats)
    finally:
        if admin is not None:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.dispose()
    return write_fuzz_summary(results, args.json, examples_per_run=args.examples,
                              seed=args.seed, engines=engines)


if __name__ == "__main__":
    sys.exit(main())
