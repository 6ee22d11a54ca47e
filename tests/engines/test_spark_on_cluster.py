"""Issue 32: privlab on a real Spark standalone cluster (a master and two workers, each its own
JVM process, `spark_cluster.py`) and through Spark Connect, not only in local mode: the gateway
answers as DuckDB does for one seed, `assess --master` reports what pandas reports, MST's and
AIM's marginals are counted on the executors and give the released table of the in-memory
path, and `privlab synth --method aim --engine spark` writes the in-memory CSV byte for byte.

Small data throughout: the cluster costs its start (a minute on a loaded 2-core machine), the
tests seconds each."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from gw_fixtures import KEY_A, SMALL_JOINS, SMALL_TABLES, small_config

from privlab.cli.main import main
from privlab.errors import InvalidInputError

GATEWAY_SQL = ("SELECT region, COUNT(*), AVG(age) FROM people GROUP BY region",
               "SELECT COUNT(DISTINCT id) FROM people WHERE age > 40")


def _adult(rows: int = 2000) -> pd.DataFrame:
    from privlab.data.datasets import load_dataset

    frame = load_dataset("adult").iloc[:rows][["age", "education", "sex", "hours-per-week",
                                               "salary"]].reset_index(drop=True)
    frame.loc[::50, "hours-per-week"] = None
    return frame


def _schema(frame: pd.DataFrame) -> dict[str, Any]:
    return {"columns": {
        "age": {"type": "numeric", "bounds": [17, 90], "bins": 6},
        "education": {"type": "categorical",
                      "categories": sorted(frame["education"].unique().tolist()[:6]),
                      "other": True},
        "sex": {"type": "categorical", "categories": ["Female", "Male"]},
        "hours-per-week": {"type": "numeric", "bounds": [1, 99], "bins": 4,
                           "point_masses": [40]},
        "salary": {"type": "categorical", "categories": ["<=50K", ">50K"]}}}


def _same(a: Any, b: Any, path: str = "") -> None:
    """Equal JSON documents, floats to 1e-9 (sums come back in another order)."""
    if isinstance(a, dict):
        assert set(a) == set(b), (path, set(a) ^ set(b))
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, (int, float)):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), (path, a, b)
    else:
        assert a == b, (path, a, b)


def _gateway_pair(lake: Path, tmp_path: Path) -> tuple[Any, Any, Any, Any]:
    """A gateway on `database: spark:lake` and one on the DuckDB copy, same seed."""
    from privlab.query.config import parse_config
    from privlab.query.gateway import Gateway

    duck = small_config(str(lake / "small.duckdb"), str(tmp_path / "l1.db"))
    raw = {"database": {"url": "spark:lake"}, "ledger": str(tmp_path / "l2.db"),
           "tables": SMALL_TABLES, "joins": SMALL_JOINS, "limits": {"statement_timeout_s": 300},
           "analysts": {a.name: {"key_sha256": a.key_sha256, "epsilon": a.epsilon,
                                 "delta": a.delta} for a in duck.analysts.values()}}
    (tmp_path / "lake").symlink_to(lake)
    cfg = parse_config(raw, base_dir=tmp_path)
    return Gateway(cfg, rng=3), Gateway(duck, rng=3), cfg, duck


def _same_answers(g_spark: Any, g_duck: Any, cfg: Any, duck: Any) -> None:
    alice_s, alice_d = cfg.analyst_by_key(KEY_A), duck.analyst_by_key(KEY_A)
    for sql in GATEWAY_SQL:
        a, b = g_spark.query(alice_s, sql, 0.5), g_duck.query(alice_d, sql, 0.5)
        for key in ("columns", "rows", "guarantee", "epsilon_spent", "remaining_budget"):
            assert a[key] == b[key], (sql, key)


def test_engine_spark_refusals(tmp_path: Path, capsys: Any) -> None:
    """What needs the rows in this process is refused with --engine spark, before any
    Spark session starts (exit 2, one line naming the option)."""
    data = tmp_path / "a.parquet"
    _adult(50).to_parquet(data)
    base = ["synth", str(data), "--schema", "adult", "--epsilon", "1", "--rows", "10",
            "--out", str(tmp_path / "o.csv")]
    cases = [(["--method", "aim", "--engine", "spark", "--evaluate"], "--evaluate reads"),
             (["--method", "mst", "--engine", "spark", "--holdout", "0.2"], "--holdout reads"),
             (["--method", "dpvae", "--engine", "spark"], "runs --method aim or mst"),
             (["--method", "aim", "--engine", "duck"], "--engine must be memory or spark"),
             (["--method", "aim", "--master", "local[1]"], "--master applies to --engine spark")]
    for extra, message in cases:
        capsys.readouterr()
        assert main([*base, *extra]) == 2, extra
        err = capsys.readouterr().err
        assert message in err and err.strip().count("\n") == 0, err
    assert not (tmp_path / "o.csv").exists()


def test_spark_path_keeps_the_schema_column_order(spark: Any, tmp_path: Path) -> None:
    """A Parquet file whose columns come in another order than the schema's still gets the
    in-memory domain (the schema's order), so the seeded release is the same."""
    from privlab.synth.aim import AIMSynthesizer
    from privlab.synth.spark import SparkAIMSynthesizer

    frame = _adult(600)
    data = tmp_path / "shuffled.parquet"
    frame[list(reversed(frame.columns))].to_parquet(data)
    schema = _schema(frame)
    mem = AIMSynthesizer(schema=schema, rng=2, rounds=10).fit(frame, 1.0, 1e-6)
    on = SparkAIMSynthesizer(schema=schema, rng=2, rounds=10, spark=spark).fit(str(data), 1.0,
                                                                             1e-6)
    assert on.domain is not None and on.domain.names == list(frame.columns)
    pd.testing.assert_frame_equal(on.sample(200), mem.sample(200))
    with pytest.raises(InvalidInputError, match="--exclude names columns that are not in"):
        SparkAIMSynthesizer(schema=schema, drop=["nope"], rng=2, spark=spark).fit(
            str(data), 1.0, 1e-6)
    bad = copy.deepcopy(schema)
    bad["columns"]["sex"]["categories"] = ["Female"]
    with pytest.raises(InvalidInputError, match="'sex' has values outside its declared"):
        SparkAIMSynthesizer(schema=bad, rng=2, rounds=10, spark=spark).fit(str(data), 1.0, 1e-6)


def test_cluster_has_two_workers_and_runs_the_jobs(cluster_spark: Any,
                                                   spark_cluster: Any) -> None:
    """The session is on the standalone master, which lists two live workers and gives this
    application one executor on each (its tasks run in those JVMs, not in the driver)."""
    assert cluster_spark.sparkContext.master == spark_cluster.master_url
    assert cluster_spark.range(0, 100_000, numPartitions=4).selectExpr("sum(id)").first()[0] \
        == 100_000 * 99_999 // 2
    state = spark_cluster.state()
    assert state["aliveworkers"] == 2
    mine = [a for a in state["activeapps"] if a["id"] == cluster_spark.sparkContext.applicationId]
    assert len(mine) == 1 and mine[0]["cores"] == 2
    executors = cluster_spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()
    assert executors == 3  # the driver's block manager and one executor on each worker


def test_gateway_on_cluster_matches_duckdb(cluster_spark: Any, spark_cluster: Any, lake: Path,
                                           tmp_path: Path, monkeypatch: Any) -> None:
    """`database: spark:DIR` with PRIVLAB_SPARK_MASTER: DuckDB's answers, charges and
    guarantees for one seed, computed on the cluster."""
    monkeypatch.setenv("PRIVLAB_SPARK_MASTER", spark_cluster.master_url)
    g_spark, g_duck, cfg, duck = _gateway_pair(lake, tmp_path)
    try:
        assert g_spark.engine.spark.sparkContext.master == spark_cluster.master_url
        _same_answers(g_spark, g_duck, cfg, duck)
    finally:
        g_spark.close()
        g_duck.close()


def test_assess_on_cluster_equals_pandas(cluster_spark: Any, spark_cluster: Any,
                                         tmp_path: Path, capsys: Any) -> None:
    """`privlab assess DATA --engine spark --master spark://...` = the pandas report."""
    frame = _adult(3000)
    data = tmp_path / "adult.parquet"
    frame.to_parquet(data)
    args = ["assess", "-q", "age,sex,education", "-s", "salary", "--bin-numeric", "4",
            "--max-combination-size", "3", "--json", str(data)]
    out = {}
    for engine in (["--engine", "pandas"], ["--engine", "spark", "--master",
                                            spark_cluster.master_url]):
        capsys.readouterr()
        assert main([*args, *engine]) == 0
        out[engine[1]] = json.loads(capsys.readouterr().out)
    _same(out["pandas"], out["spark"])


def test_mst_on_cluster_equals_in_memory(cluster_spark: Any, spark_cluster: Any,
                                         tmp_path: Path) -> None:
    from privlab.synth.mst import MSTSynthesizer
    from privlab.synth.spark import SparkMSTSynthesizer

    frame = _adult()
    data = tmp_path / "a.parquet"
    frame.to_parquet(data)
    schema = _schema(frame)
    mem = MSTSynthesizer(schema=schema, rng=5).fit(frame, 1.0, 1e-6)
    on = SparkMSTSynthesizer(schema=schema, rng=5,
                             master=spark_cluster.master_url).fit(str(data), 1.0, 1e-6)
    assert on.edges == mem.edges
    assert on.budget_lines() == mem.budget_lines()
    pd.testing.assert_frame_equal(on.sample(500), mem.sample(500))


def test_aim_marginals_on_cluster(cluster_spark: Any, spark_cluster: Any,
                                  tmp_path: Path) -> None:
    """Every clique AIM asks for, counted on the executors (maximal ones by GROUPING SETS,
    the rest summed out of them), equals the in-memory counts exactly; AIM fitted on them
    releases the in-memory table for the same seed."""
    from privlab.synth.aim import AIMSynthesizer, candidate_weights
    from privlab.synth.marginals import DuckDBMarginals
    from privlab.synth.spark import SparkAIMSynthesizer, SparkMarginals

    frame = _adult()
    data = tmp_path / "parts"  # a directory of Parquet files, as a lake holds them
    data.mkdir()
    frame.iloc[:900].to_parquet(data / "part-0.parquet")
    frame.iloc[900:].to_parquet(data / "part-1.parquet")
    schema = _schema(frame)
    mem = AIMSynthesizer(schema=schema, rng=7, rounds=12).fit(frame, 1.0, 1e-6)
    on = SparkAIMSynthesizer(schema=schema, rng=7, rounds=12, master=spark_cluster.master_url)
    on.fit(str(data), 1.0, 1e-6)
    assert on.budget_lines() == mem.budget_lines()
    assert on.round_log == mem.round_log
    pd.testing.assert_frame_equal(on.sample(400), mem.sample(400))

    assert on.domain is not None and mem.domain is not None
    d, sizes = len(on.domain.sizes), on.domain.sizes
    cliques = [*candidate_weights([c for k in (2, 3) for c in _combos(d, k)]),
               (4, 1), (3, 0, 2)]  # and cliques in another axis order
    oracle = DuckDBMarginals(mem.domain.encode(frame), sizes)
    want = oracle.counts(cliques)
    oracle.close()
    source = on._marginal_source(None)
    assert isinstance(source, SparkMarginals)
    got = source.counts(cliques)
    source.close()
    assert source.queries == 1  # the 3-way cliques in one scan; every other one summed
    assert set(got) == set(want)
    for cl in cliques:
        assert got[cl].shape == tuple(sizes[a] for a in cl)
        np.testing.assert_array_equal(got[cl], want[cl])
    assert got[(0,)].sum() == len(frame)


def _combos(d: int, k: int) -> list[tuple[int, ...]]:
    import itertools

    return list(itertools.combinations(range(d), k))


def test_cli_aim_on_cluster_writes_the_in_memory_table(cluster_spark: Any, spark_cluster: Any,
                                                       tmp_path: Path, capsys: Any) -> None:
    """`privlab synth DATA --method aim --engine spark --master URL` = `--engine memory`."""
    frame = _adult(1500)
    data = tmp_path / "a.parquet"
    frame.to_parquet(data)
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(_schema(frame)))
    common = ["synth", str(data), "--method", "aim", "--schema", str(schema), "--epsilon",
              "0.5", "--rows", "300", "--seed", "13", "--workload", "2way", "--json"]
    docs = {}
    for name, extra in (("memory", []),
                        ("spark", ["--engine", "spark", "--master", spark_cluster.master_url])):
        capsys.readouterr()
        assert main([*common, "--out", str(tmp_path / f"{name}.csv"), *extra]) == 0
        docs[name] = json.loads(capsys.readouterr().out)
    assert (tmp_path / "spark.csv").read_bytes() == (tmp_path / "memory.csv").read_bytes()
    assert docs["spark"]["budget"] == docs["memory"]["budget"]
    assert docs["spark"]["details"] == docs["memory"]["details"]
    assert docs["spark"]["guarantee"]["epsilon"] == docs["memory"]["guarantee"]["epsilon"]


def test_gateway_over_spark_connect_matches_duckdb(spark_cluster: Any, lake: Path,
                                                   tmp_path: Path, monkeypatch: Any) -> None:
    """SPARK_REMOTE=sc://...: the gateway's queries go over Spark Connect (gRPC) to a server
    whose driver runs on the cluster; same answers as DuckDB for one seed."""
    url = spark_cluster.start_connect()
    monkeypatch.setenv("SPARK_REMOTE", url)
    g_spark, g_duck, cfg, duck = _gateway_pair(lake, tmp_path)
    session = g_spark.engine.spark
    try:
        assert type(session).__module__.startswith("pyspark.sql.connect")
        _same_answers(g_spark, g_duck, cfg, duck)
    finally:
        g_spark.close()
        g_duck.close()
        session.stop()
