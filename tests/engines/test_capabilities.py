"""One engine protocol (issue 31): grouped counts are a capability of `privlab.engines.Engine`,
not a protocol of their own. The gateway's engines offer `QUERIES`, assess's sources
`GROUPED_COUNTS`, and assess refuses an engine without it by naming the capability."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from privlab.assess.declared_sql import ConformedSource
from privlab.assess.grouped import assess_grouped
from privlab.assess.sources import CountSource, DuckDBSource
from privlab.engines import GROUPED_COUNTS, QUERIES, DuckDBEngine, Engine
from privlab.engines.grouped import GroupedCounts
from privlab.schema import load_schema


@pytest.fixture()
def parquet(tmp_path: Path) -> Path:
    path = tmp_path / "t.parquet"
    pd.DataFrame({"a": ["x", "y", "x"], "b": [1, 2, 3]}).to_parquet(path)
    return path


def test_the_gateways_engines_offer_queries_only(tmp_path: Path) -> None:
    import duckdb

    duckdb.connect(str(tmp_path / "g.duckdb")).close()
    with DuckDBEngine(str(tmp_path / "g.duckdb")) as engine:
        assert isinstance(engine, Engine)
        assert engine.supports(QUERIES) and not engine.supports(GROUPED_COUNTS)


def test_assess_sources_are_engines_with_grouped_counts(parquet: Path) -> None:
    assert CountSource is GroupedCounts
    schema = load_schema({"name": "t", "columns": {
        "a": {"type": "categorical", "categories": ["x", "y"]},
        "b": {"type": "integer", "bounds": [0, 5]}}})
    with DuckDBSource(parquet) as src:
        assert isinstance(src, Engine) and src.supports(GROUPED_COUNTS)
        assert not src.supports(QUERIES)
        assert src.sql("SELECT COUNT(*) FROM __data") == [(3,)]
        conformed = ConformedSource(src, schema, "refuse")
        assert isinstance(conformed, Engine) and conformed.supports(GROUPED_COUNTS)


def test_assess_refuses_an_engine_without_grouped_counts(tmp_path: Path, parquet: Path
                                                         ) -> None:
    import duckdb

    duckdb.connect(str(tmp_path / "g.duckdb")).close()
    with DuckDBEngine(str(tmp_path / "g.duckdb")) as engine, \
            pytest.raises(TypeError, match="assess_grouped needs an engine with "
                                           "'grouped_counts'; DuckDBEngine offers"):
        assess_grouped(engine)
    with DuckDBSource(parquet) as src, DuckDBEngine(str(tmp_path / "g.duckdb")) as engine, \
            pytest.raises(TypeError, match="DuckDBEngine offers \\['queries'\\]"):
        assess_grouped(src, population=engine, quasi_identifiers=["a"])
