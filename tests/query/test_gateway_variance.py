"""VARIANCE / STDDEV in the gateway, from the statistics registry's SQL form
(`privlab.measure.stats`): the planner, the noise stage, the engines (DuckDB and, when a
server is reachable, PostgreSQL), the library path (`DPQuery`) and HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gw_fixtures import KEY_A, PEOPLE, SMALL_JOINS, SMALL_TABLES, adult_cfg, analysts, small_config

from privlab.measure.stats import get
from privlab.measure.stats.variance import square_bound
from privlab.query.config import parse_config
from privlab.query.demo import adult_config, adult_frame
from privlab.query.gateway import Gateway
from privlab.query.measurement import measure_query
from privlab.query.noise import answer, plan_budget
from privlab.query.planner import Planner, Primitive, QueryRefused

pytest.importorskip("sqlglot", reason="needs the server extra: pip install -e '.[server]'")


@pytest.fixture(scope="module")
def planner() -> Planner:
    raw = adult_config("unused.duckdb", "unused.db", analysts())
    raw["tables"].update(SMALL_TABLES)
    raw["joins"] = SMALL_JOINS
    return Planner(parse_config(raw))


@pytest.mark.parametrize("sql,kind", [("VARIANCE", "variance"), ("VAR_SAMP", "variance"),
                                      ("VAR_POP", "variance"), ("STDDEV", "stddev"),
                                      ("STDDEV_SAMP", "stddev"), ("STDDEV_POP", "stddev")])
def test_every_spelling_plans_the_registry_statistic(planner: Planner, sql: str,
                                                     kind: str) -> None:
    plan = planner.plan(f"SELECT {sql}(age) FROM adult")
    assert [(o.name, o.kind) for o in plan.outputs] == [(f"{kind}_age", kind)]
    # the registry's SQL form: count, centred sum, centred sum of squares (age: no NULLs)
    assert plan.primitives == (Primitive("count"), Primitive("csum", 0), Primitive("csq", 0))
    assert "SUM((CAST(__m0 AS DOUBLE PRECISION) - 53.5) * (CAST(__m0 AS DOUBLE PRECISION) " \
           "- 53.5)) AS __q0" in plan.sql


def test_avg_variance_and_stddev_share_three_measurements(planner: Planner) -> None:
    plan = planner.plan("SELECT AVG(age), VARIANCE(age), STDDEV(age) FROM adult")
    assert len(plan.primitives) == 3
    assert plan_budget(plan, 0.9, 0.0, None).per_primitive_epsilon == pytest.approx(0.3)
    with pytest.raises(QueryRefused, match=r"VARIANCE\(DISTINCT \.\.\.\) is not supported"):
        planner.plan("SELECT VARIANCE(DISTINCT age) FROM adult")
    with pytest.raises(QueryRefused, match=r"STDDEV needs a numeric column"):
        planner.plan("SELECT STDDEV(race) FROM adult")


def test_values_are_the_registry_post_processing_of_the_noisy_sums(planner: Planner) -> None:
    """The gateway's value is `Statistic.from_measurements` of its own noisy count, centred
    sum and centred sum of squares; its interval is the registry's first-order half-width."""
    plan = planner.plan("SELECT VARIANCE(age), STDDEV(age) FROM adult")
    ages = adult_frame().age.to_numpy(dtype=float)
    y = ages - 53.5
    row = (len(ages), len(ages), float(ages.sum()), float((y * y).sum()))
    budget = plan_budget(plan, 3.0, 0.0, None)
    ans = answer(plan, [row], [], measure_query(plan, budget), rng=5)
    var, sd = ans.rows[0]
    hw_var, hw_sd = (c.confidence_interval_95[0] for c in ans.info)
    assert abs(var - ages.var()) <= hw_var and abs(sd - ages.std()) <= hw_sd
    _, d, d2 = square_bound((17, 90))
    assert 0 <= var <= d2 and 0 <= sd <= d and sd == pytest.approx(np.sqrt(var), abs=d / 2**19)
    stat = get("variance")  # scales at epsilon 1 each: 1, d and d^2
    assert hw_var == pytest.approx(stat.measurements_half_width(
        {"count": 1 / 1.0, "csum": d / 1.0, "csq": d2 / 1.0}, (17, 90), len(ages), False),
        rel=0.05)


def test_engines_answer_close_to_the_truth(backend: dict[str, Any]) -> None:
    frame = adult_frame()
    cfg = adult_cfg(backend["adult"], backend["ledger"], schema=backend["adult_schema"],
                    epsilon=50.0, suffix=backend["suffix"])
    g = Gateway(cfg, rng=7)
    a = next(a for n, a in g.config.analysts.items() if n.startswith("alice"))
    r = g.query(a, "SELECT sex, VARIANCE(age) AS v, STDDEV(\"hours-per-week\") AS s FROM adult "
                   "GROUP BY sex", 3.0)
    assert r["columns"] == ["sex", "v", "s"] and r["epsilon_spent"] == 3.0
    info = {c["name"]: c for c in r["column_info"]}
    assert info["v"]["kind"] == "variance" and info["s"]["kind"] == "stddev"
    for i, (sex, v, s) in enumerate(r["rows"]):
        part = frame[frame.sex == sex]
        hours = part["hours-per-week"].clip(1, 99)
        assert abs(v - part.age.var(ddof=0)) <= 3 * info["v"]["confidence_interval_95"][i]
        assert abs(s - hours.std(ddof=0)) <= 3 * info["s"]["confidence_interval_95"][i]
    g.close()


def test_library_path_and_http(small_duckdb: str, tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason="needs the server extra: pip install -e '.[server]'")
    from fastapi.testclient import TestClient

    from privlab.engines.duckdb import DuckDBEngine
    from privlab.query.runner import DPQuery
    from privlab.service import create_app

    ages = np.array([age for _, age, _ in PEOPLE], dtype=float)
    q = DPQuery(SMALL_TABLES, DuckDBEngine(small_duckdb), joins=SMALL_JOINS)
    ans = q.query("SELECT VAR_POP(age), STDDEV_SAMP(age) FROM people", 30.0, rng=3)
    (var, sd), (hv, hs) = ans.rows[0], [c.confidence_interval_95[0] for c in ans.info]
    assert abs(var - ages.var()) <= 3 * hv and abs(sd - ages.std()) <= 3 * hs
    assert ans.guarantee.neighbouring == "user"
    q.engine.close()
    gw = Gateway(small_config(small_duckdb, str(tmp_path / "ledger.db"), epsilon=1.0), rng=3)
    client = TestClient(create_app(gateway=gw))
    r = client.post("/v1/queries", headers={"Authorization": f"Bearer {KEY_A}"}, json={
        "sql": "SELECT region, STDDEV(age) FROM people GROUP BY region", "epsilon": 0.5})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["columns"] == ["region", "stddev_age"] and body["epsilon_spent"] == 0.5
    assert [row[0] for row in body["rows"]] == ["north", "south", "east"]
    _, d, _ = square_bound((18, 80))
    assert all(0 <= row[1] <= d for row in body["rows"])
    assert all(h > 0 for h in body["column_info"][1]["confidence_interval_95"])
    gw.close()
