"""privlab on Spark vs Tumult Analytics, PipelineDP (Spark backend) and plain Spark SQL.

Workload (issue 16), epsilon 1 in total: DP count by education (16 public categories), DP sum
of hours (bounds [0, 100]), DP mean of age (bounds [17, 90]), over a Parquet table of N rows,
one row per person. Every tool reads the same Parquet file in `local[*]` and reports wall
time for the three answers (session start excluded, the file's first read included).

    python benchmarks/spark.py gen --rows 1000000 10000000     # Parquet under /tmp (not git)
    python benchmarks/spark.py run --rows 1000000 10000000 --tools privlab,plain
    python benchmarks/spark.py run --rows 1000000 --tools privlab,plain,tumult,pipelinedp \
        --python tumult=/tmp/tumult-venv/bin/python,pipelinedp=/tmp/pdp-venv/bin/python
    python benchmarks/spark.py assess --rows 50000000 --engine duckdb
    python benchmarks/spark.py aim --spark-rows 1000000 10000000 --memory-rows 1000000
        # AIM's marginals on a local standalone cluster (master + 2 workers) beside memory

Each tool runs in its own process (`one` sub-command), so Tumult (pyspark 3.5, pandas < 2)
and PipelineDP can live in their own venvs. Results: benchmarks/results/spark*.json, with
the error of each answer against the exact value and each tool's expected noise scale.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("PRIVLAB_BENCH_DATA", "/tmp/privlab-spark-bench"))
EDU = ["Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th", "HS-grad",
       "Some-college", "Assoc-voc", "Assoc-acdm", "Bachelors", "Masters", "Prof-school",
       "Doctorate"]
EPS = 1.0
HOURS, AGE = (0, 100), (17, 90)


def path_for(rows: int) -> Path:
    return DATA / f"people_{rows}.parquet"


# --------------------------------------------------------------------------- data

def generate(rows: int, chunk: int = 5_000_000) -> Path:
    """A Parquet file of `rows` people: id, education, hours, age (+ sex, race, zip for the
    assessment), written in row groups so memory stays flat."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = path_for(rows)
    if out.exists():
        return out
    DATA.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    rng = np.random.default_rng(rows)
    p = np.linspace(1, 3, len(EDU))
    p /= p.sum()
    writer = None
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        table = pa.table({
            "id": np.arange(start, start + n, dtype=np.int64),
            "education": pa.DictionaryArray.from_arrays(
                rng.choice(len(EDU), size=n, p=p).astype(np.int32), EDU).cast(pa.string()),
            "hours": np.clip(rng.normal(40, 12, n).round(), 1, 99).astype(np.int64),
            "age": rng.integers(17, 91, n, dtype=np.int64),
            "sex": pa.array(np.where(rng.random(n) < 0.5, "F", "M")),
            "race": pa.array(rng.choice(np.array(["a", "b", "c", "d", "e"]), n)),
            "zip": rng.integers(10000, 10000 + 3000, n, dtype=np.int64),
        })
        if writer is None:
            writer = pq.ParquetWriter(tmp, table.schema)
        writer.write_table(table, row_group_size=1_000_000)
    assert writer is not None
    writer.close()
    tmp.rename(out)
    return out


def exact(rows: int) -> dict[str, Any]:
    """Exact answers (DuckDB), for the error columns."""
    import duckdb

    path = str(path_for(rows))
    con = duckdb.connect()
    counts = dict(con.execute("SELECT education, COUNT(*) FROM read_parquet(?) GROUP BY 1",
                              [path]).fetchall())
    s, m = con.execute("SELECT SUM(hours), AVG(age) FROM read_parquet(?)", [path]).fetchone()
    return {"counts": {e: int(counts.get(e, 0)) for e in EDU}, "sum_hours": float(s),
            "mean_age": float(m)}


# --------------------------------------------------------------------------- the tools

#: One Spark configuration for every tool (privlab's `get_spark` defaults, made explicit), so
#: the only difference between the runs is the library on top.
SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.driver.memory": os.environ.get("BENCH_DRIVER_MEMORY", "3g"),
}


def _spark(master: str = "local[*]") -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # UDF workers: this venv
    builder = SparkSession.builder.master(master).appName("bench")
    for k, v in SPARK_CONF.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_privlab_bounded(rows: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same workload with `id` declared the privacy unit (max_rows 1): contribution
    bounding by ROW_NUMBER() OVER (PARTITION BY id) costs a shuffle of every row."""
    return run_privlab(rows, unit=True)


def run_privlab(rows: int, unit: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    sys.path.insert(0, str(ROOT / "src"))
    from privlab.engines.spark import SparkEngine, get_spark
    from privlab.query.runner import DPQuery

    spark = get_spark("local[*]", conf=SPARK_CONF)
    tables = {"people": {"columns": {
        "id": "int", "education": {"type": "text", "domain": EDU},
        "hours": {"type": "int", "bounds": list(HOURS)},
        "age": {"type": "int", "bounds": list(AGE)}}}}
    if unit:
        tables["people"].update(privacy_unit="id", max_rows=1)
    t0 = time.perf_counter()
    q = DPQuery(tables, SparkEngine({"people": str(path_for(rows))}, spark=spark))
    # eps 1 in total: three queries of 1/3 each
    a = q.query("SELECT education, COUNT(*) FROM people GROUP BY education", EPS / 3)
    b = q.query("SELECT SUM(hours) FROM people", EPS / 3)
    c = q.query("SELECT AVG(age) FROM people", EPS / 3)
    wall = time.perf_counter() - t0
    out = {"counts": {r[0]: r[1] for r in a.rows}, "sum_hours": b.rows[0][0],
           "mean_age": c.rows[0][0]}
    # expected noise (std): count Laplace b = 3; sum b = 3 * 100; mean from two halves
    noise = {"count_std": 2 ** 0.5 * 3, "sum_std": 2 ** 0.5 * 3 * 100,
             "mean_note": "AVG = centre + noisy centred sum / noisy count at eps 1/6 each"}
    return {"wall_s": wall, **out}, noise


def run_duckdb(rows: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """privlab's DuckDB engine (one machine) on the same rows, loaded into a DuckDB file
    first (not timed: the engine opens files read-only with external access disabled)."""
    sys.path.insert(0, str(ROOT / "src"))
    import duckdb

    from privlab.engines import DuckDBEngine
    from privlab.query.runner import DPQuery

    db = DATA / f"people_{rows}.duckdb"
    if not db.exists():
        tmp = db.with_suffix(".tmp")
        con = duckdb.connect(str(tmp))
        con.execute("CREATE TABLE people AS SELECT id, education, hours, age FROM "
                    "read_parquet(?)", [str(path_for(rows))])
        con.close()
        tmp.rename(db)
    tables = {"people": {"columns": {
        "id": "int", "education": {"type": "text", "domain": EDU},
        "hours": {"type": "int", "bounds": list(HOURS)},
        "age": {"type": "int", "bounds": list(AGE)}}}}
    t0 = time.perf_counter()
    q = DPQuery(tables, DuckDBEngine(db, timeout_s=600))
    a = q.query("SELECT education, COUNT(*) FROM people GROUP BY education", EPS / 3)
    b = q.query("SELECT SUM(hours) FROM people", EPS / 3)
    c = q.query("SELECT AVG(age) FROM people", EPS / 3)
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "counts": {r[0]: r[1] for r in a.rows}, "sum_hours": b.rows[0][0],
            "mean_age": c.rows[0][0]}, {"note": "same DP plans as privlab on Spark"}


def run_plain(rows: int) -> tuple[dict[str, Any], dict[str, Any]]:
    spark = _spark()
    t0 = time.perf_counter()
    df = spark.read.parquet(str(path_for(rows)))
    df.createOrReplaceTempView("people")
    a = spark.sql("SELECT education, COUNT(*) FROM people GROUP BY education").collect()
    b = spark.sql("SELECT SUM(hours) FROM people").collect()
    c = spark.sql("SELECT AVG(age) FROM people").collect()
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "counts": {r[0]: r[1] for r in a}, "sum_hours": float(b[0][0]),
            "mean_age": float(c[0][0])}, {"note": "exact, no noise (the floor)"}


def run_tumult(rows: int) -> tuple[dict[str, Any], dict[str, Any]]:
    from tmlt.analytics import (
        AddOneRow,
        KeySet,
        PureDPBudget,
        QueryBuilder,
        Session,
    )

    spark = _spark()
    t0 = time.perf_counter()
    df = spark.read.parquet(str(path_for(rows))).select("education", "hours", "age")
    session = Session.from_dataframe(privacy_budget=PureDPBudget(EPS), source_id="people",
                                     dataframe=df, protected_change=AddOneRow())
    keys = KeySet.from_dict({"education": EDU})
    a = session.evaluate(QueryBuilder("people").groupby(keys).count(), PureDPBudget(EPS / 3))
    b = session.evaluate(QueryBuilder("people").sum("hours", *HOURS), PureDPBudget(EPS / 3))
    # the mean as sum / count (the anchor), eps 1/6 each
    s = session.evaluate(QueryBuilder("people").sum("age", *AGE), PureDPBudget(EPS / 6))
    n = session.evaluate(QueryBuilder("people").count(), PureDPBudget(EPS / 6))
    a_rows = a.collect()
    b_val = b.collect()[0][0]
    mean = s.collect()[0][0] / max(n.collect()[0][0], 1)
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "counts": {r[0]: r[1] for r in a_rows}, "sum_hours": float(b_val),
            "mean_age": float(mean)}, {"note": "Tumult picks its own noise (geometric)"}


def run_pipelinedp(rows: int) -> tuple[dict[str, Any], dict[str, Any]]:
    import pipeline_dp

    spark = _spark()
    t0 = time.perf_counter()
    rdd = spark.read.parquet(str(path_for(rows))).select("id", "education", "hours",
                                                         "age").rdd
    backend = pipeline_dp.SparkRDDBackend(spark.sparkContext)
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPS, total_delta=0)
    engine = pipeline_dp.DPEngine(accountant, backend)
    ext = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0],
                                     partition_extractor=lambda r: r[1],
                                     value_extractor=lambda r: 0)
    counts = engine.aggregate(rdd, pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.LAPLACE, metrics=[pipeline_dp.Metrics.COUNT],
        max_partitions_contributed=1, max_contributions_per_partition=1),
        ext, public_partitions=EDU)
    ext_h = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0],
                                       partition_extractor=lambda r: 0,
                                       value_extractor=lambda r: r[2])
    sums = engine.aggregate(rdd, pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.LAPLACE, metrics=[pipeline_dp.Metrics.SUM],
        max_partitions_contributed=1, max_contributions_per_partition=1,
        min_value=HOURS[0], max_value=HOURS[1]), ext_h, public_partitions=[0])
    ext_a = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0],
                                       partition_extractor=lambda r: 0,
                                       value_extractor=lambda r: r[3])
    means = engine.aggregate(rdd, pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.LAPLACE, metrics=[pipeline_dp.Metrics.MEAN],
        max_partitions_contributed=1, max_contributions_per_partition=1,
        min_value=AGE[0], max_value=AGE[1]), ext_a, public_partitions=[0])
    accountant.compute_budgets()
    c_rows = counts.collect()
    s_rows = sums.collect()
    m_rows = means.collect()
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "counts": {k: float(v.count) for k, v in c_rows},
            "sum_hours": float(s_rows[0][1].sum), "mean_age": float(m_rows[0][1].mean)}, \
        {"note": "PipelineDP Laplace, budget split evenly by its accountant"}


TOOLS = {"privlab": run_privlab, "privlab_bounded": run_privlab_bounded,
         "duckdb": run_duckdb, "plain": run_plain, "tumult": run_tumult,
         "pipelinedp": run_pipelinedp}


def one(tool: str, rows: int) -> None:
    """Run one tool once in this process and print a JSON line."""
    result, noise = TOOLS[tool](rows)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps({"tool": tool, "rows": rows, **result, "noise": noise,
                                  "driver_python_peak_rss_mib": round(peak, 1)}))


def run(rows_list: list[int], tools: list[str], python: str, out: Path,
        timeout: float, repeat: int = 1) -> None:
    """Each tool in a fresh process per run; with `repeat`, the tools alternate (A B A B) so
    that a burst of load on the shared machine hits them alike."""
    results = json.loads(out.read_text()) if out.exists() else {"runs": []}
    pythons = dict(p.split("=", 1) for p in python.split(",") if "=" in p)
    default_python = next((p for p in python.split(",") if "=" not in p), sys.executable)
    for rows in rows_list:
        truth = exact(rows)
        for rep, tool in ((r, t) for r in range(repeat) for t in tools):
            cmd = [pythons.get(tool, default_python), __file__, "one", tool, str(rows)]
            t0 = time.perf_counter()
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                entry: dict[str, Any] = {"tool": tool, "rows": rows, "error": f"timeout {timeout}s"}
            else:
                line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
                if proc.returncode != 0 or not line:
                    tail = (proc.stderr.strip().splitlines() or ["?"])[-1][:300]
                    entry = {"tool": tool, "rows": rows, "error": tail}
                else:
                    entry = json.loads(line[0][len("RESULT "):])
                    entry["errors"] = {
                        "count_max_abs": max(abs(float(entry["counts"].get(e, 0)) -
                                                 truth["counts"][e]) for e in EDU),
                        "sum_abs": abs(entry["sum_hours"] - truth["sum_hours"]),
                        "mean_abs": abs(entry["mean_age"] - truth["mean_age"]),
                    }
                    entry.pop("counts")
            entry["repeat"] = rep
            entry["process_wall_s"] = round(time.perf_counter() - t0, 2)
            print(json.dumps(entry), flush=True)
            results["runs"].append(entry)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(results, indent=1))


def tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and all its descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        stack.extend(children.get(p, []))
        try:
            with open(f"/proc/{p}/statm") as fh:
                total += int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            pass
    return total


def assess_run(rows: int, engine: str, out: Path) -> None:
    """`privlab assess --engine E` on N rows in a child process; peak RSS of its process tree
    (Spark's JVM included), sampled every 0.5 s."""
    data = path_for(rows)
    cmd = [sys.executable, "-c", "import sys; from privlab.cli.main import main; "
           "sys.exit(main(sys.argv[1:]))", "assess", str(data), "--engine", engine,
           "-q", "age,sex,race", "-s", "education", "--attributes",
           "education,hours,age,sex,race,zip", "--json"]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    t0 = time.perf_counter()
    with open(DATA / "assess.out", "wb") as out_fh, open(DATA / "assess.err", "wb") as err_fh:
        proc = subprocess.Popen(cmd, stdout=out_fh, stderr=err_fh, env=env)
        peak = 0
        while proc.poll() is None:  # the whole process tree (Spark's JVM is a child)
            peak = max(peak, tree_rss(proc.pid))
            time.sleep(0.5)
    stdout = (DATA / "assess.out").read_bytes()
    stderr = (DATA / "assess.err").read_bytes()
    wall = time.perf_counter() - t0
    entry = {"rows": rows, "engine": engine, "wall_s": round(wall, 2), "rc": proc.returncode,
             "peak_rss_mib_process_tree": round(peak / 2**20, 1)}
    if proc.returncode == 0:
        doc = json.loads(stdout)
        entry["rows_used"] = doc["rows_used"]
        entry["k"] = doc["privacy_models"]["k_anonymity"]["k"]
    else:
        entry["error"] = (stderr.decode().strip().splitlines() or ["?"])[-1][:300]
    print(json.dumps(entry), flush=True)
    results = json.loads(out.read_text()) if out.exists() else {"runs": []}
    results["runs"].append(entry)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))


# --------------------------------------------------------------------------- AIM on Spark

#: The AIM table: the generated people minus the identifier and the zip code (5 columns, the
#: default 2- and 3-way workload: 10 maximal marginals, one GROUPING SETS scan on Spark).
AIM_SCHEMA = {"columns": {
    "education": {"type": "categorical", "categories": EDU},
    "hours": {"type": "numeric", "bounds": [1, 99], "bins": 8},
    "age": {"type": "numeric", "bounds": list(AGE), "bins": 8},
    "sex": {"type": "categorical", "categories": ["F", "M"]},
    "race": {"type": "categorical", "categories": ["a", "b", "c", "d", "e"]}}}


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    return children


def _cpu_by_pid(pid: int, reaped: bool = False) -> dict[int, float]:
    """CPU seconds of `pid` and each live descendant (their own), by pid; with `reaped`,
    `pid`'s count includes its reaped children (a Spark worker reaps its executors)."""
    tick = os.sysconf("SC_CLK_TCK")
    children = _children()
    out: dict[int, float] = {}
    stack = [pid]
    while stack:
        p = stack.pop()
        stack.extend(children.get(p, []))
        try:
            with open(f"/proc/{p}/stat") as fh:
                f = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        own = int(f[11]) + int(f[12])
        if reaped and p == pid:
            own += int(f[13]) + int(f[14])
        out[p] = own / tick
    return out


def aim_run(rows: int, engine: str, cluster: Any) -> dict[str, Any]:
    """`privlab synth --method aim` on `rows` generated rows in a child process (in memory,
    or with its marginals on the standalone `cluster`): wall, CPU and peak RSS of the child's
    process tree (Python and, on Spark, its JVM driver) plus, on Spark, of the cluster's
    daemons and executors (sampled each 0.5 s; the executors' CPU is counted exactly when
    their worker reaps them)."""
    data = generate(rows)
    schema = DATA / "aim_schema.json"
    schema.write_text(json.dumps(AIM_SCHEMA))
    cmd = [sys.executable, "-c", "import sys; from privlab.cli.main import main; "
           "sys.exit(main(sys.argv[1:]))", "synth", str(data), "--method", "aim", "--schema",
           str(schema), "--exclude", "id,zip", "--epsilon", "1", "--rows", "100000",
           "--seed", "1", "--out", str(DATA / f"aim_{engine}_{rows}.parquet"), "--json"]
    roots = [p.pid for p in cluster.procs] if cluster is not None else []
    if engine == "spark":
        cmd += ["--engine", "spark", "--master", cluster.master_url]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), PYSPARK_PYTHON=sys.executable,
               PRIVLAB_SPARK_DRIVER_MEMORY="1g")
    def cluster_cpu() -> float:
        return sum(sum(_cpu_by_pid(r, reaped=True).values()) for r in roots)

    cpu0 = cluster_cpu()
    t0 = time.perf_counter()
    seen: dict[int, float] = {}  # the driver's process tree (Python + Spark's JVM driver)
    with open(DATA / "aim.out", "wb") as out_fh, open(DATA / "aim.err", "wb") as err_fh:
        proc = subprocess.Popen(cmd, stdout=out_fh, stderr=err_fh, env=env)
        peak = 0
        while proc.poll() is None:  # the driver's tree and the cluster's, at the same instant
            seen.update(_cpu_by_pid(proc.pid))
            peak = max(peak, tree_rss(proc.pid) + sum(tree_rss(r) for r in roots))
            time.sleep(0.5)
    wall = time.perf_counter() - t0
    time.sleep(3)  # the application's executors exit and are reaped by their workers
    driver = sum(seen.values())  # sampled every 0.5 s: the last half second of each is lost
    cluster = cluster_cpu() - cpu0
    entry: dict[str, Any] = {
        "rows": rows, "engine": engine, "wall_s": round(wall, 1), "rc": proc.returncode,
        "cpu_s_driver": round(driver, 1), "cpu_s_cluster": round(cluster, 1),
        "cpu_s_total": round(driver + cluster, 1), "peak_rss_mib": round(peak / 2**20, 1),
        "load_avg_1m": round(os.getloadavg()[0], 2)}
    if proc.returncode != 0:
        entry["error"] = ((DATA / "aim.err").read_text().strip().splitlines() or ["?"])[-1][:300]
    else:
        doc = json.loads((DATA / "aim.out").read_text())
        entry["rounds"] = len(doc["details"]["rounds"])
        entry["epsilon"] = doc["guarantee"]["epsilon"]
    return entry


def aim_bench(spark_rows: list[int], memory_rows: list[int], out: Path) -> None:
    """AIM's marginals on a local standalone cluster (a master, two workers: the CI
    fixture's `SparkCluster`) beside AIM in memory; phases alternated (memory, spark, ...),
    each in a fresh child process; CPU is the driver's process tree plus, on Spark, the
    cluster's (its daemons and executors)."""
    sys.path.insert(0, str(ROOT / "tests" / "engines"))
    import tempfile

    from spark_cluster import SparkCluster

    results = json.loads(out.read_text()) if out.exists() else {"runs": []}
    with tempfile.TemporaryDirectory(prefix="privlab-cluster-") as tmp, \
            SparkCluster(Path(tmp)) as cluster:
        order: list[tuple[str, int]] = []
        for i in range(max(len(memory_rows), len(spark_rows))):  # memory, spark, memory, ...
            order += [("memory", n) for n in memory_rows[i:i + 1]]
            order += [("spark", n) for n in spark_rows[i:i + 1]]
        for engine, rows in order:
            entry = aim_run(rows, engine, cluster if engine == "spark" else None)
            entry["cpu_us_per_row"] = round(entry["cpu_s_total"] / rows * 1e6, 2)
            print(json.dumps(entry), flush=True)
            results["runs"].append(entry)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(results, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("--rows", type=int, nargs="+", required=True)
    r = sub.add_parser("run")
    r.add_argument("--rows", type=int, nargs="+", required=True)
    r.add_argument("--tools", default="privlab,plain")
    r.add_argument("--python", default=sys.executable,
                   help="interpreter, or TOOL=PATH pairs: tumult=/tmp/tumult-venv/bin/python")
    r.add_argument("--repeat", type=int, default=1)
    r.add_argument("--timeout", type=float, default=1800)
    r.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/spark.json")
    o = sub.add_parser("one")
    o.add_argument("tool", choices=sorted(TOOLS))
    o.add_argument("rows", type=int)
    a = sub.add_parser("assess")
    a.add_argument("--rows", type=int, required=True)
    a.add_argument("--engine", default="duckdb")
    a.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/spark_assess.json")
    m = sub.add_parser("aim", help="AIM with its marginals on a local standalone cluster "
                                   "beside AIM in memory")
    m.add_argument("--spark-rows", type=int, nargs="+", default=[10_000_000])
    m.add_argument("--memory-rows", type=int, nargs="+", default=[1_000_000])
    m.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/spark_aim.json")
    args = ap.parse_args()
    if args.cmd == "gen":
        for n in args.rows:
            t0 = time.perf_counter()
            print(generate(n), f"{time.perf_counter() - t0:.1f}s", flush=True)
    elif args.cmd == "one":
        one(args.tool, args.rows)
    elif args.cmd == "aim":
        aim_bench(args.spark_rows, args.memory_rows, args.out)
    elif args.cmd == "assess":
        assess_run(args.rows, args.engine, args.out)
    else:
        run(args.rows, args.tools.split(","), args.python, args.out, args.timeout, args.repeat)


if __name__ == "__main__":
    main()
