"""One SparkSession for the Spark tests: local[2], two shuffle partitions, no UI (starting
Spark costs seconds; every test shares it). The [spark] extra is in `all`, so CI runs them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "query"))


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - pyspark is optional
    pytest.importorskip("pyspark", reason="pyspark missing: pip install -e '.[spark]'")
    from privlab.engines.spark import get_spark

    warehouse = tmp_path_factory.mktemp("spark-warehouse")  # not ./spark-warehouse
    session = get_spark("local[2]", conf={"spark.sql.shuffle.partitions": "2",
                                           "spark.default.parallelism": "2",
                                           "spark.driver.memory": "1g",
                                           "spark.sql.warehouse.dir": str(warehouse)})
    yield session
    session.stop()
