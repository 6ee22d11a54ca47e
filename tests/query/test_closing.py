"""Issue 33: every object that holds a database closes deterministically (`close()`, `with`),
warns when dropped open, and DuckDB files are opened with one configuration per process.

The suite's conftest makes what a test builds itself quiet when dropped; these tests put the
product's own warning back (`_as_shipped`) to check it.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest
from gw_fixtures import SMALL_TABLES, small_config

from privlab.core.ledger import BudgetLedger
from privlab.engines import DuckDBEngine, EngineError
from privlab.errors import InvalidInputError
from privlab.query.gateway import Gateway
from privlab.query.runner import DPQuery
from privlab.utils.closing import Closing

PROGRESS = "SELECT current_setting('enable_progress_bar')"


@pytest.fixture
def _as_shipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """`Closing._hold` as privlab ships it: a holder the test drops open warns."""
    monkeypatch.setattr(Closing, "_hold", getattr(Closing._hold, "__wrapped__", Closing._hold))


def _drop(names: dict[str, Any], *held: str) -> list[str]:
    """Drop the test's references `held` (a dict of locals), run the collector: the
    ResourceWarnings that set off."""
    with pytest.warns(ResourceWarning) as caught:
        for name in held:
            del names[name]
        gc.collect()
    return [str(w.message) for w in caught]


@pytest.mark.usefixtures("_as_shipped")
def test_an_engine_dropped_open_warns_and_lets_its_file_go(small_duckdb: str) -> None:
    held: dict[str, Any] = {"engine": DuckDBEngine(small_duckdb, threads=1)}
    held["cycle"] = [held["engine"]]
    held["cycle"].append(held["cycle"])  # in a reference cycle: only the collector finds it
    assert any(m.startswith("privlab: DuckDBEngine(") and "without close()" in m
               for m in _drop(held, "engine", "cycle"))
    with DuckDBEngine(small_duckdb, threads=2) as other:  # the file was let go
        assert other.run("SELECT COUNT(*) FROM people")[0][0] > 0


def test_a_second_configuration_is_refused_in_one_line(small_duckdb: str) -> None:
    first = DuckDBEngine(small_duckdb, threads=1)
    with pytest.raises(InvalidInputError) as info:
        DuckDBEngine(small_duckdb, threads=2)
    text = str(info.value)
    assert "\n" not in text and "already open in this process with another DuckDB " \
        "configuration (threads=1, asked threads=2)" in text
    same = DuckDBEngine(small_duckdb, threads=1)  # the same configuration shares the file
    first.close()
    assert same.run("SELECT COUNT(*) FROM visits")[0][0] > 0
    same.close()
    with DuckDBEngine(small_duckdb, threads=2) as other:  # closed by both: free again
        assert other.run("SELECT 1") == [(1,)]


def test_close_is_idempotent_and_with_closes(small_duckdb: str) -> None:
    with DuckDBEngine(small_duckdb) as engine:
        assert engine.run(PROGRESS) == [(False,)]  # no progress bar inside --json output
        assert not engine.closed
    assert engine.closed
    engine.close()  # a second close does nothing
    with pytest.raises(EngineError):
        engine.run("SELECT 1")


@pytest.mark.usefixtures("_as_shipped")
def test_a_gateway_dropped_open_warns_once_and_closes_what_it_holds(small_duckdb: str,
                                                                     tmp_path: Path) -> None:
    held = {"gateway": Gateway(small_config(small_duckdb, str(tmp_path / "ledger.db")), rng=1)}
    engine, ledger, audit = held["gateway"].engine, held["gateway"].ledger, held["gateway"].audit
    assert [m for m in _drop(held, "gateway") if m.startswith("privlab:")] == [
        "privlab: Gateway was dropped without close(); close it (or use `with`) so its "
        "database is released at once"]
    assert engine.closed and ledger.closed and audit.closed


def test_a_refused_gateway_holds_nothing_open(small_duckdb: str, tmp_path: Path) -> None:
    """The config names a column the database lacks: the engine the gateway opened is
    closed before the refusal, so the file opens again with another configuration."""
    people = SMALL_TABLES["people"]
    tables = {**SMALL_TABLES, "people": {**people, "columns": {
        **people["columns"], "nothere": {"type": "int", "bounds": [0, 1]}}}}
    cfg = small_config(small_duckdb, str(tmp_path / "ledger.db"), tables=tables)  # threads 1
    with pytest.raises(InvalidInputError, match="tables.people"):
        Gateway(cfg)
    with DuckDBEngine(small_duckdb, threads=2) as other:
        assert other.run("SELECT 1") == [(1,)]


def test_dpquery_closes_its_engine(small_duckdb: str) -> None:
    with DPQuery(SMALL_TABLES, DuckDBEngine(small_duckdb), joins=[]) as q:
        engine = q.engine
        assert engine.run(PROGRESS) == [(False,)]
    assert engine.closed


@pytest.mark.usefixtures("_as_shipped")
def test_a_ledger_closed_then_used_again_is_closed_again(tmp_path: Path) -> None:
    held = {"book": BudgetLedger(tmp_path / "b.db")}
    held["book"].set_budget("p", 1.0)
    held["book"].close()
    assert held["book"].closed
    assert held["book"].remaining("p") == (1.0, 0.0)  # still usable: it reconnects...
    assert not held["book"].closed  # ...and must be closed again
    assert any(m.startswith("privlab: BudgetLedger(") for m in _drop(held, "book"))
