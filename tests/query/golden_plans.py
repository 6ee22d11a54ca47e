"""The gateway's generated SQL on the test suite's plans, as a golden file.

`python tests/query/golden_plans.py --write` records, for every query the gateway tests
planned (tests/query/golden_sql.json, "queries"), the SQL, the bound parameters and the
result columns the planner generates in both dialects under the tests' configuration
(Adult + the small person tables). tests/query/test_golden_sql.py checks that the planner
still generates them byte for byte: a refactor of the statistics must not change the SQL.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden_sql.json"
DIALECTS = {"duckdb": lambda i: "?", "postgres": lambda i: f":p{i}"}


def planners() -> dict[str, Any]:
    """(configuration, dialect) -> a planner without a cache: the tests' Adult + small
    tables configuration, and the neighbour harness's `persons` table."""
    sys.path.insert(0, str(HERE))
    from gw_fixtures import SMALL_JOINS, SMALL_TABLES, analysts

    from privlab.query.config import parse_config
    from privlab.query.demo import adult_config
    from privlab.query.planner import Planner
    from privlab.testing import gateway as neighbours

    raw = adult_config("unused.duckdb", "unused.db", analysts())
    raw["tables"].update(SMALL_TABLES)
    raw["joins"] = SMALL_JOINS
    configs = {"adult+small": parse_config(raw),
               "persons": neighbours.config("unused.duckdb", "unused.db")}
    return {f"{name}/{d}": Planner(cfg, d, placeholder=p, cache_size=0)
            for name, cfg in configs.items() for d, p in DIALECTS.items()}


def generated(planner: Any, sql: str) -> dict[str, Any] | None:
    """What the planner generates for `sql`; None when it refuses it."""
    from privlab.errors import PrivlabError

    try:
        plan = planner.plan(sql)
    except PrivlabError:
        return None
    return {"sql": plan.sql, "params": [repr(p) for p in plan.params],
            "quantile_sql": plan.quantile_sql,
            "quantile_params": [repr(p) for p in plan.quantile_params],
            "result_columns": list(plan.result_columns)}


def record(queries: list[str]) -> dict[str, Any]:
    ps = planners()
    out: dict[str, Any] = {}
    for sql in queries:
        per = {k: plan for k, p in ps.items() if (plan := generated(p, sql)) is not None}
        if per:
            out[sql] = per
    return out


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: golden_plans.py --write  (after a change that is MEANT to alter SQL)")
    # the recorded queries (first recorded from the SQL the gateway tests planned, issue 31)
    queries = json.loads(GOLDEN.read_text())["queries"]
    plans = record(queries)
    GOLDEN.write_text(json.dumps({"queries": sorted(plans), "plans": plans}, indent=1,
                                 sort_keys=True) + "\n")
    print(f"{len(plans)} plans in {GOLDEN}")
