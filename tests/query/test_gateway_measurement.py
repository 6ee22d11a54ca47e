"""`QueryMeasurement` (issue 31): a query's noise is calibrated once per normalised plan and
budget, before any row is read, and `answer` draws with it exactly what the per-query
calibration drew before."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from gw_fixtures import PEOPLE, SMALL_JOINS, SMALL_TABLES, analysts

import privlab.core.mechanisms as mechanisms
import privlab.query.measurement as measurement_module
from privlab.query.config import parse_config
from privlab.query.gateway import Gateway
from privlab.query.measurement import MeasurementCache, measure_query, measurement_key
from privlab.query.noise import plan_budget
from privlab.query.planner import Planner

pytest.importorskip("sqlglot", reason="needs the server extra: pip install -e '.[server]'")

#: (sql, epsilon, delta, mechanism), answered in this order by one gateway seeded with 2026
SEEDED_QUERIES: list[tuple[str, float, float, str | None]] = [
    ("SELECT COUNT(*) FROM people WHERE age > 30", 0.5, 0.0, None),
    ("SELECT SUM(age) FROM people", 1.0, 0.0, None),
    ("SELECT AVG(age), SUM(age) FROM people WHERE region = 'north'", 1.0, 0.0, None),
    ("SELECT region, COUNT(*), AVG(age) FROM people GROUP BY region ORDER BY region", 1.5, 0.0,
     None),
    ("SELECT MEDIAN(age) FROM people", 1.0, 0.0, None),
    ("SELECT region, QUANTILE_CONT(age, 0.25) FROM people GROUP BY region", 1.0, 0.0, None),
    ("SELECT VARIANCE(age), STDDEV(age) FROM people", 1.5, 0.0, None),
    ("SELECT region, COUNT(*), SUM(age) FROM people GROUP BY region", 1.0, 1e-6, "gaussian"),
    ("SELECT AVG(age) FROM people", 1.0, 1e-6, "gaussian"),
    ("SELECT COUNT(DISTINCT id) FROM people WHERE age < 40", 0.5, 0.0, None),
    ("SELECT town, COUNT(*), AVG(age) FROM residents GROUP BY town ORDER BY town", 2.0, 1e-6,
     None),
]


def _tables() -> dict[str, Any]:
    """The small tables plus `residents`: one row per person (so the contribution bound's
    random choice keeps every row) and a GROUP BY column without a public domain."""
    tables = copy.deepcopy(SMALL_TABLES)
    tables["residents"] = {"privacy_unit": "id", "max_rows": 1, "columns": {
        "id": {"type": "int"},
        "age": {"type": "int", "bounds": [18, 80], "nullable": False},
        "town": {"type": "text", "partition_selection": True}}}
    return tables


def _database(tmp_path: Path) -> Path:
    path = tmp_path / "seeded.duckdb"
    if not path.exists():
        con = duckdb.connect(str(path))
        con.execute("CREATE TABLE people (id BIGINT, age BIGINT, region TEXT)")
        con.execute("CREATE TABLE visits (person_id BIGINT, city TEXT, amount DOUBLE PRECISION)")
        con.execute("CREATE TABLE cities (city TEXT, country TEXT)")
        con.execute("CREATE TABLE residents (id BIGINT, age BIGINT, town TEXT)")
        con.executemany("INSERT INTO people VALUES (?, ?, ?)", PEOPLE)
        con.executemany("INSERT INTO residents VALUES (?, ?, ?)",
                        [(i, age, "big" if i % 4 else "small") for i, age, _ in PEOPLE])
        con.close()
    return path


def _gateway(tmp_path: Path, seed: int = 2026, min_epsilon: float | None = None) -> Gateway:
    path = _database(tmp_path)
    tables = _tables()
    if min_epsilon is not None:  # an operator who allows tiny epsilons
        for spec in tables.values():
            spec["min_epsilon_per_query"] = min_epsilon
    config = parse_config({"database": {"url": str(path)}, "ledger": str(tmp_path / "l.db"),
                           "tables": tables, "joins": SMALL_JOINS,
                           "analysts": analysts(100.0, 1e-3)})
    return Gateway(config, rng=seed)


def test_seeded_answers_are_those_of_the_per_query_calibration(tmp_path: Path) -> None:
    """Values, intervals, column info and guarantees of seeded answers across COUNT, SUM,
    AVG, GROUP BY (public domain and partition selection), quantiles, VARIANCE/STDDEV,
    COUNT(DISTINCT unit) and the Gaussian mechanism are exactly those computed by the
    code before `QueryMeasurement` (the sources of commit cf7caea, which calibrated inside
    every `answer` call; frozen in seeded_answers.json)."""
    expected = json.loads((Path(__file__).parent / "seeded_answers.json").read_text())
    with _gateway(tmp_path) as g:
        alice = g.config.analysts["alice"]
        got = []
        for sql, epsilon, delta, mechanism in SEEDED_QUERIES:
            r = g.query(alice, sql, epsilon, delta, mechanism)
            got.append({k: r[k] for k in ("columns", "rows", "column_info", "guarantee")})
    assert json.loads(json.dumps(got)) == expected


def test_a_query_with_other_literals_does_not_calibrate_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second query of one shape (other literals, same budget) neither builds a
    measurement nor calls any calibration: `answer` only draws. (Before, every answer
    called `laplace_mechanism`, which calibrated through `laplace_plan`.)"""
    calls = {"laplace_plan": 0, "gaussian_plan": 0, "build": 0}

    def counting(name: str, real: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)
        return wrapper

    for module in (mechanisms, measurement_module):
        for name in ("laplace_plan", "gaussian_plan"):
            monkeypatch.setattr(module, name, counting(name, getattr(module, name)))
    monkeypatch.setattr(measurement_module, "_build",
                        counting("build", measurement_module._build))
    with _gateway(tmp_path) as g:
        alice = g.config.analysts["alice"]
        sql = "SELECT region, COUNT(*), AVG(age) FROM people WHERE age > {} GROUP BY region"
        g.query(alice, sql.format(30), 1.0)
        first = dict(calls)
        assert first["build"] == 1 and first["laplace_plan"] >= 1
        for literal in (40, 50, 60):
            g.query(alice, sql.format(literal), 1.0)
        g.query(alice, "SELECT AVG(age) FROM people WHERE region = 'south'", 1.0, 1e-6,
                "gaussian")
        second = dict(calls)
        g.query(alice, "SELECT AVG(age) FROM people WHERE region = 'north'", 1.0, 1e-6,
                "gaussian")
        assert calls == second and second["build"] == 2
        assert calls["laplace_plan"] == first["laplace_plan"]
        # another budget is another measurement
        g.query(alice, sql.format(30), 2.0)
        assert calls["build"] == 3 and len(g.measurements) == 3


def test_the_guarantee_is_serialised_once_per_measurement(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ledger stores the measurement's guarantee JSON as built with it: queries of one
    shape serialise no guarantee (issue 32), and each entry holds the measurement's."""
    import privlab.core.ledger.amounts as amounts

    serialised = [0]
    real = amounts._serialise

    def counting(guarantee: dict[str, Any]) -> str:
        serialised[0] += 1
        return real(guarantee)

    monkeypatch.setattr(amounts, "_serialise", counting)
    with _gateway(tmp_path) as g:
        alice = g.config.analysts["alice"]
        sql = "SELECT COUNT(*) FROM people WHERE age > {}"
        g.query(alice, sql.format(30), 0.5)
        assert serialised[0] == 1  # built with the measurement
        entries = [g.query(alice, sql.format(n), 0.5)["ledger_entry_id"] for n in (40, 50)]
        assert serialised[0] == 1
        (m,) = g.measurements._items.values()
        assert m.guarantee_json.text == json.dumps(m.guarantee_dict, sort_keys=True,
                                                   allow_nan=False, default=str)
        stored = {e.entry_id: e.guarantee for e in g.ledger.history(alice.principal)}
        assert all(stored[i] == m.guarantee_dict for i in entries)


def test_the_measurement_key_is_the_plan_without_its_literals() -> None:
    planner = Planner(parse_config({"database": "unused.duckdb", "ledger": "unused.db",
                                    "tables": _tables(), "joins": SMALL_JOINS,
                                    "analysts": analysts()}))
    a = planner.plan("SELECT COUNT(*) FROM people WHERE age > 30")
    b = planner.plan("SELECT COUNT(*) FROM people WHERE age > 55")
    c = planner.plan("SELECT COUNT(*) FROM people WHERE age < 30")
    assert a.params != b.params
    one = plan_budget(a, 1.0, 0.0, None)
    assert measurement_key(a, one) == measurement_key(b, plan_budget(b, 1.0, 0.0, None))
    assert measurement_key(a, one) != measurement_key(a, plan_budget(a, 0.5, 0.0, None))
    assert measurement_key(a, one) != measurement_key(c, one)  # another comparison: other SQL
    m = measure_query(a, one)
    # the guarantee the ledger stores says nothing of a seed: no row was read, nothing drawn
    assert m.guarantee_dict == m.guarantee.to_dict()
    assert not any("seeded" in n for n in m.guarantee.notes)


def test_the_cache_is_a_bounded_lru() -> None:
    planner = Planner(parse_config({"database": "unused.duckdb", "ledger": "unused.db",
                                    "tables": _tables(), "joins": SMALL_JOINS,
                                    "analysts": analysts()}))
    plan = planner.plan("SELECT COUNT(*) FROM people")
    cache = MeasurementCache(size=2)
    budgets = [plan_budget(plan, eps, 0.0, None) for eps in (0.1, 0.2, 0.3)]
    first = cache.get(plan, budgets[0])
    cache.get(plan, budgets[1])
    assert cache.get(plan, budgets[0]) is first  # a hit, and now the most recent
    cache.get(plan, budgets[2])  # evicts budgets[1], the least recently used
    assert len(cache) == 2 and cache.get(plan, budgets[0]) is first
    assert measurement_key(plan, budgets[1]) not in cache._items


def test_a_noise_the_sampler_cannot_draw_is_refused_before_the_charge(tmp_path: Path) -> None:
    """SUM(age) at epsilon 1e-15: the Laplace scale (80 / 1e-15 grid steps) calibrates, but
    the sampler refuses more than 2^52 steps. The measurement's throwaway draw refuses it
    when the measurement is built (as the dry run did), not after the charge when the real
    draw fails (which would leave a charge and an HTTP 500)."""
    from privlab.query.planner import QueryRefused

    with _gateway(tmp_path, min_epsilon=1e-300) as g:
        alice = g.config.analysts["alice"]
        with pytest.raises(QueryRefused, match=r"exceeds 2\^52") as info:
            g.query(alice, "SELECT SUM(age) FROM people", 1e-15)
        assert "\n" not in str(info.value)
        assert g.ledger.history(alice.principal) == []
        assert [r.decision for r in g.audit.all()] == ["refused"]
        assert len(g.measurements) == 0  # a refusal is not cached: it is raised every time


def test_dpquery_builds_one_measurement_per_shape_and_charges_its_guarantee(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The library path caches the measurement like the gateway, and the guarantee it stores
    with the charge is the measurement's: it no longer says the noise came from a seeded
    generator (the dry run's guarantee, drawn with seed 0, did) when the caller's noise is
    drawn from the CSPRNG."""
    from privlab.core.ledger import BudgetLedger
    from privlab.core.rng import SEEDED_NOTE
    from privlab.engines.duckdb import DuckDBEngine
    from privlab.query.runner import DPQuery

    builds = []
    real_build = measurement_module._build
    monkeypatch.setattr(measurement_module, "_build",
                        lambda *a: builds.append(1) or real_build(*a))
    with BudgetLedger(tmp_path / "lib.db") as ledger:
        ledger.set_budget("lib", 10.0, 0.0)
        with DPQuery(_tables(), DuckDBEngine(str(_database(tmp_path))), joins=SMALL_JOINS,
                     ledger=ledger, principal="lib") as q:
            for literal in (30, 40, 50):
                q.query(f"SELECT COUNT(*) FROM people WHERE age > {literal}", 0.5)
            assert len(builds) == 1 and len(q.measurements) == 1
        charged = ledger.history("lib")
        assert len(charged) == 3
        for entry in charged:
            assert entry.guarantee["epsilon"] == 0.5
            assert SEEDED_NOTE not in entry.guarantee["notes"]


@pytest.mark.parametrize("seed", [None, 2026])
def test_the_servers_joined_json_is_the_dicts_json(tmp_path: Path, seed: int | None) -> None:
    """`Gateway._head` without the dict (the server's path: fields' JSON joined, the
    guarantee's serialised once per measurement) gives the bytes `json.dumps` gives for
    the response dict, on every query shape above, unseeded (the cached guarantee) and
    seeded (the guarantee with the seeded note)."""
    with _gateway(tmp_path, seed=seed) as g:  # type: ignore[arg-type]
        alice = g.config.analysts["alice"]
        for sql, epsilon, delta, mechanism in SEEDED_QUERIES:
            plan, m = g._validate(alice, sql, epsilon, delta, mechanism)
            result = g._compute(plan, m)
            assert (result.guarantee is m.guarantee) == (seed is None)
            want = g._head("q" * 32, result, m, True)
            got = g._head("q" * 32, result, m, False)
            assert got[0] is None and got[1] == want[1]
            assert want[1] == json.dumps(want[0], allow_nan=False, separators=(",", ":"))


def test_query_json_is_query_serialised(tmp_path: Path) -> None:
    """Two gateways with one seed: each body of `query_json` is the JSON of the response
    `query` returns for the same query (but the random query id)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with _gateway(tmp_path / "a") as served, _gateway(tmp_path / "b") as library:
        alice_a, alice_b = served.config.analysts["alice"], library.config.analysts["alice"]
        for sql, epsilon, delta, mechanism in SEEDED_QUERIES:
            body = served.query_json(alice_a, sql, epsilon, delta, mechanism)
            response = library.query(alice_b, sql, epsilon, delta, mechanism)
            response["query_id"] = json.loads(body)["query_id"]
            assert body == json.dumps(response, allow_nan=False,
                                      separators=(",", ":")).encode("utf-8")
