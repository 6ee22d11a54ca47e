"""The SQL generated since issue 32 answers exactly what the SQL it replaced answered.

Issue 32 trimmed the generated aggregation (the clamp's `IS NULL THEN NULL` branch, which
NULL reaches through ELSE anyway; COUNT(col) where only SUM(col) is read; the derived table
under a bare COUNT(*)). `sql_before_issue32.json.gz` keeps the DuckDB SQL of every recorded
plan that changed, as `golden_sql.json` held it before; here both run on one DuckDB holding
every table the recorded queries read (Adult, the small person tables, the neighbour
harness's `persons`), single-threaded with one `setseed` before each (contribution bounding
draws `random()`), and the new result must equal the old one on every column it keeps.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from gw_fixtures import CITIES, PEOPLE, VISITS, _fill_small

from privlab.query.demo import load_adult_duckdb
from privlab.testing import gateway as neighbours

HERE = Path(__file__).resolve().parent
BEFORE = HERE / "sql_before_issue32.json.gz"


@pytest.fixture(scope="module")
def every_table(tmp_path_factory: pytest.TempPathFactory) -> Any:
    work = tmp_path_factory.mktemp("equivalence")
    con = duckdb.connect(str(load_adult_duckdb(work / "adult.duckdb")))
    persons = neighbours.write_duckdb(work / "persons.duckdb", neighbours.BASE)
    con.execute("PRAGMA threads=1")  # random() in one deterministic order
    _fill_small(con.execute)
    con.executemany("INSERT INTO people VALUES (?, ?, ?)", PEOPLE)
    con.executemany("INSERT INTO visits VALUES (?, ?, ?)", VISITS)
    con.executemany("INSERT INTO cities VALUES (?, ?)", CITIES)
    con.execute(f"ATTACH '{persons}' AS p (READ_ONLY)")
    con.execute(f"CREATE TABLE {neighbours.TABLE} AS SELECT * FROM p.{neighbours.TABLE}")
    yield con
    con.close()


def _run(con: Any, plan: dict[str, Any]) -> list[tuple[Any, ...]]:
    from ast import literal_eval

    con.execute("SELECT setseed(0.25)")
    return con.execute(plan["sql"], [literal_eval(p) for p in plan["params"]]).fetchall()


def test_every_changed_plan_answers_as_before(every_table: Any) -> None:
    before = json.loads(gzip.decompress(BEFORE.read_bytes()))
    golden = json.loads((HERE / "golden_sql.json").read_text(encoding="utf-8"))["plans"]
    compared, differ = 0, []
    for sql, per in before.items():
        for key, old in per.items():
            new = golden[sql][key]
            assert new["sql"] != old["sql"]  # recorded because it changed
            kept = [old["result_columns"].index(c) for c in new["result_columns"]]
            old_rows = sorted((tuple(r[i] for i in kept) for r in _run(every_table, old)),
                              key=repr)
            new_rows = sorted((tuple(r) for r in _run(every_table, new)), key=repr)
            compared += 1
            if old_rows != new_rows:
                differ.append(f"{key}: {sql}")
    assert compared >= 150, compared
    assert not differ, f"{len(differ)} plans answer differently, first: {differ[:3]}"


def test_the_check_sees_a_changed_answer(every_table: Any) -> None:
    """The comparison is not vacuous: the old clamp against a narrower one differs."""
    before = json.loads(gzip.decompress(BEFORE.read_bytes()))
    sql, per = next((s, p) for s, p in before.items()
                    if "hours-per-week" in s and "adult+small/duckdb" in p)
    old = per["adult+small/duckdb"]
    narrowed = {**old, "sql": old["sql"].replace("> 99 THEN 99", "> 40 THEN 40")}
    assert narrowed["sql"] != old["sql"]
    assert _run(every_table, old) != _run(every_table, narrowed)
