"""The Spark tests' sessions. `spark`: local[2], two shuffle partitions, no UI (starting Spark
costs seconds; every test shares it). `spark_cluster`: a real standalone cluster (a master
and two workers as separate processes, `spark_cluster.py`), one per test session, started by
the first test that asks for it; `cluster_spark`: this process's session on it. One JVM
driver per process: asking for the other kind stops the current session first. The [spark]
extra is in `all`, so CI runs them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "query"))
from gw_fixtures import CITIES, PEOPLE, VISITS  # noqa: E402

LOCAL = "local[2]"
LOCAL_CONF = {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
              "spark.driver.memory": "1g"}


def _session(master: str, conf: dict[str, str]) -> Any:
    """The process's SparkSession on `master`, stopping one on another master first."""
    from pyspark.sql import SparkSession

    from privlab.engines.spark import get_spark

    active = SparkSession.getActiveSession()
    if active is not None and active.sparkContext.master != master:
        active.stop()
    return get_spark(master, conf=conf)


@pytest.fixture(scope="session")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small test database as Parquet (people, visits as a directory, cities) + DuckDB."""
    root = tmp_path_factory.mktemp("lake")
    pd.DataFrame(PEOPLE, columns=["id", "age", "region"]).to_parquet(root / "people.parquet")
    (root / "visits").mkdir()
    visits = pd.DataFrame(VISITS, columns=["person_id", "city", "amount"])
    half = len(visits) // 2
    visits.iloc[:half].to_parquet(root / "visits" / "part-0.parquet")
    visits.iloc[half:].to_parquet(root / "visits" / "part-1.parquet")
    pd.DataFrame(CITIES, columns=["city", "country"]).to_parquet(root / "cities.parquet")
    con = duckdb.connect(str(root / "small.duckdb"))
    for t in ("people", "cities"):
        con.execute(f"CREATE TABLE {t} AS SELECT * FROM read_parquet('{root / t}.parquet')")
    con.execute(f"CREATE TABLE visits AS SELECT * FROM read_parquet('{root}/visits/*.parquet')")
    con.close()
    return root


@pytest.fixture(scope="session")
def _spark_warehouse(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN202
    pytest.importorskip("pyspark", reason="pyspark missing: pip install -e '.[spark]'")
    warehouse = tmp_path_factory.mktemp("spark-warehouse")  # not ./spark-warehouse
    yield str(warehouse)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


@pytest.fixture
def spark(_spark_warehouse: str):  # noqa: ANN201 - pyspark is optional
    return _session(LOCAL, {**LOCAL_CONF, "spark.sql.warehouse.dir": _spark_warehouse})


@pytest.fixture(scope="session")
def spark_cluster(_spark_warehouse: str, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """A standalone master and two workers (stopped at the end, even after failures)."""
    from spark_cluster import SparkCluster

    cluster = SparkCluster(tmp_path_factory.mktemp("spark-cluster"))
    with cluster:
        yield cluster
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()  # its driver first, then the cluster
        if active is not None and active.sparkContext.master == cluster.master_url:
            active.stop()


@pytest.fixture
def cluster_spark(spark_cluster: Any, _spark_warehouse: str):  # noqa: ANN201
    return _session(spark_cluster.master_url,
                    {**spark_cluster.app_conf, "spark.sql.warehouse.dir": _spark_warehouse})
