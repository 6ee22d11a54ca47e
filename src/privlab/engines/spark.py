"""Apache Spark as a third engine: one SparkSession, Parquet (or catalog) tables, and the
gateway's generated SQL transpiled to Spark SQL.

Why Spark and not a home-made cluster: the data no longer fits one machine's disk or memory,
and Spark already partitions, shuffles and recovers. privlab only ever asks it for
*aggregates* (group-by counts and sums, contribution-bounded); noise is added on the driver
with the grid-valued samplers, so the privacy code is the same on every engine.

Where it runs:
- default: an embedded `local[*]` session (a laptop or CI needs Java 17 and nothing else);
- `master="spark://host:7077"`, `yarn`, `k8s://...`: a classic cluster;
- `SPARK_REMOTE=sc://host:15002` (or `master="sc://..."`): Spark Connect (needs
  `pip install 'privlab[spark]'`, which brings pyspark[connect]).

Every failure the user can fix (no Java, a missing or unreadable Parquet path, a column the
file lacks) is an `InvalidInputError` with one line that names the fix.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
import uuid
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from privlab.engines.base import Engine, EngineError
from privlab.errors import InvalidInputError, missing_extra

APP_NAME = "privlab"
_SESSION_LOCK = threading.Lock()


# --------------------------------------------------------------------------- the session

def _pyspark() -> Any:
    try:
        import pyspark
    except ImportError:
        raise missing_extra("pyspark", "--engine spark") from None
    return pyspark


def find_java(env: Mapping[str, str] | None = None) -> str:
    """The java executable Spark will start (JAVA_HOME first, then PATH), or a one-line
    InvalidInputError naming the fix. Checked before Spark tries, because Spark's own
    failure is a Py4J stack trace about a gateway that exited."""
    env = os.environ if env is None else env
    home = env.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if java.is_file() and os.access(java, os.X_OK):
            return str(java)
        raise InvalidInputError(f"Spark cannot start: JAVA_HOME={home} has no bin/java; point "
                                "JAVA_HOME at a Java 17+ install (apt-get install "
                                "openjdk-17-jre-headless) or unset it")
    found = shutil.which("java", path=env.get("PATH", ""))
    if found is None:
        raise InvalidInputError("Spark cannot start: no Java found (JAVA_HOME unset, no java on "
                                "PATH); install Java 17 (apt-get install openjdk-17-jre-headless"
                                ") or set JAVA_HOME, or use --engine duckdb")
    return found


def get_spark(master: str | None = None, *, conf: Mapping[str, str] | None = None) -> Any:
    """The process's SparkSession, created on first use.

    `master`: None -> `$SPARK_REMOTE` (Spark Connect) if set, else `$PRIVLAB_SPARK_MASTER`,
    else `local[*]`. A URL starting with `sc://` is Spark Connect. `conf` adds Spark settings
    (only honoured when this call creates the session)."""
    _pyspark()
    from pyspark.sql import SparkSession

    remote = None
    if master is None:
        remote = os.environ.get("SPARK_REMOTE") or None
        master = os.environ.get("PRIVLAB_SPARK_MASTER") or "local[*]"
    if master.startswith("sc://"):
        remote = master
    with _SESSION_LOCK:
        if remote is None:
            active = SparkSession.getActiveSession()
            if active is not None:
                return active
            find_java()
        if remote is None and master.startswith("local"):
            # Python UDF workers (applyInPandas) must run this interpreter, not `python3`
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder.appName(APP_NAME)
        if remote is not None:
            # Connect's own builder: a gRPC client, no JVM, so it also opens in a process
            # that already runs a classic session (the generic builder refuses that)
            try:
                from pyspark.sql.connect.session import SparkSession as RemoteSession
            except ImportError as exc:
                raise InvalidInputError(f"Spark Connect needs extra packages ({exc.name}); "
                                        "pip install 'privlab[spark]'") from None
            builder = RemoteSession.builder.remote(remote).appName(APP_NAME)
        else:
            local = master.startswith("local")
            settings = {
                "spark.ui.enabled": "false",
                "spark.ui.showConsoleProgress": "false",
                "spark.sql.execution.arrow.pyspark.enabled": "true",
                "spark.sql.session.timeZone": "UTC",
                # AQE coalesces the shuffle; a few partitions per core is plenty in local mode
                "spark.sql.shuffle.partitions": str(max(4, 2 * (os.cpu_count() or 2)))
                if local else "200",
                "spark.driver.memory": os.environ.get("PRIVLAB_SPARK_DRIVER_MEMORY", "2g"),
            }
            settings.update(conf or {})
            builder = builder.master(master)
            for k, v in settings.items():
                builder = builder.config(k, v)
        try:
            session = builder.getOrCreate()
            if remote is None:
                session.sparkContext.setLogLevel(os.environ.get("PRIVLAB_SPARK_LOG", "ERROR"))
            return session
        except ImportError as exc:  # Spark Connect extras missing
            raise InvalidInputError(f"Spark Connect needs extra packages ({exc.name}); pip "
                                    "install 'privlab[spark]'") from None
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            where = remote or master
            raise InvalidInputError(f"Spark could not start on {where}: {first}; check the "
                                    "master URL (--master / SPARK_REMOTE) and Java 17") from None


# --------------------------------------------------------------------------- reading data

def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


def _is_remote_uri(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def check_parquet_path(path: str | Path, what: str = "DATA") -> str:
    """Local paths are checked here (Spark's own errors are long); URIs (s3a://, hdfs://)
    are left to Spark. Returns the path as Spark wants it."""
    text = str(path)
    if _is_remote_uri(text):
        return text
    local = Path(text[len("file://"):] if text.startswith("file://") else text).expanduser()
    if not local.exists():
        raise InvalidInputError(f"{what}: {local} does not exist; pass a Parquet file or a "
                                "directory of Parquet files")
    if local.is_file() and not os.access(local, os.R_OK):
        raise InvalidInputError(f"{what}: {local} is not readable (permission denied); fix its "
                                f"permissions (chmod a+r {local})")
    if local.is_dir():
        if not os.access(local, os.R_OK | os.X_OK):
            raise InvalidInputError(f"{what}: directory {local} is not readable; fix its "
                                    "permissions")
        unreadable = [p for p in local.rglob("*.parquet") if not os.access(p, os.R_OK)]
        if unreadable:
            raise InvalidInputError(f"{what}: {unreadable[0]} is not readable (permission "
                                    "denied); fix its permissions")
    return str(local.resolve())


def read_source(spark: Any, source: Any, *, what: str = "DATA",
                columns: Iterable[str] | None = None) -> Any:
    """A Spark DataFrame from a DataFrame, a catalog table (`table:db.name`), or a Parquet
    file / directory; `columns` must all exist (case-insensitively, as Spark resolves)."""
    if hasattr(source, "schema") and hasattr(source, "select"):
        df = source
        where = "the DataFrame"
    elif isinstance(source, str) and source.startswith("table:"):
        name = source[len("table:"):]
        try:
            df = spark.table(name)
        except Exception:
            raise InvalidInputError(f"{what}: catalog table {name!r} does not exist; create it "
                                    "or pass a Parquet path") from None
        where = f"catalog table {name}"
    else:
        path = check_parquet_path(source, what)
        try:
            df = spark.read.parquet(path)
        except Exception as exc:
            raise InvalidInputError(f"{what}: cannot read {path} as Parquet ({_first_line(exc)}"
                                    "); pass a Parquet file or a directory of them") from None
        where = f"Parquet {path}"
    if columns is not None:
        have = {c.lower() for c in df.columns}
        for c in columns:
            if c.lower() not in have:
                shown = ", ".join(df.columns[:20])
                raise InvalidInputError(f"{what}: column {c!r} is missing from {where} (it has: "
                                        f"{shown}); fix the column name or the data")
    return df


# --------------------------------------------------------------------------- SQL

@lru_cache(maxsize=1024)
def to_spark_sql(sql: str) -> str:
    """The planner's SQL (DuckDB dialect, `?` placeholders) in Spark SQL. Spark binds `?`
    positionally (`spark.sql(text, args=[...])`), so literals stay parameters."""
    import sqlglot

    return sqlglot.transpile(sql, read="duckdb", write="spark")[0]


def _tables_in(sql: str) -> list[tuple[str | None, str]]:
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(sql, read="spark")
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    out = []
    for t in tree.find_all(exp.Table):
        if t.name in ctes and not t.db:
            continue
        out.append((t.db or None, t.name))
    return out


class SparkEngine(Engine):
    """Runs the planner's SQL on Spark.

    Tables come from `sources` ({table source name: Parquet path, `table:db.name`, or a Spark
    DataFrame}), from `root` (a directory or URI holding `<source>.parquet` or `<source>/`
    for each declared table), or from the Spark catalog (`catalog=True`). Each is registered
    as a temporary view named after the table's `source` the first time a query needs it.

    The planner is told this engine speaks DuckDB (`dialect`), and `run` transpiles: one
    planner, one set of DP plans, three engines.
    """

    dialect = "duckdb"

    def __init__(self, sources: Mapping[str, Any] | None = None, *, root: str | None = None,
                 catalog: bool = False, spark: Any = None, master: str | None = None,
                 timeout_s: float | None = None) -> None:
        if root is not None and not _is_remote_uri(root):
            local = Path(root).expanduser()
            if not local.is_dir():
                raise InvalidInputError(f"database.url: spark:{root} is not a directory; point "
                                        "it at the directory holding <table>.parquet files")
            root = str(local.resolve())
        self.spark = spark if spark is not None else get_spark(master)
        self.sources = dict(sources or {})
        self.root = root
        self.catalog = catalog
        self.timeout_s = timeout_s
        self._views: dict[str, Any] = {}
        self._lock = threading.Lock()

    # -- tables -----------------------------------------------------------------------------

    def _locate(self, source: str) -> Any:
        if source in self.sources:
            return self.sources[source]
        if self.root is not None:
            if _is_remote_uri(self.root):
                return f"{self.root.rstrip('/')}/{source}"
            for candidate in (Path(self.root) / f"{source}.parquet", Path(self.root) / source):
                if candidate.exists():
                    return str(candidate)
            raise InvalidInputError(f"table {source!r}: neither {source}.parquet nor {source}/ "
                                    f"exists under {self.root}; add it or fix tables.*.source")
        if self.catalog:
            return f"table:{source}"
        raise InvalidInputError(f"table {source!r} has no data: pass it in sources= or give "
                                "the engine a root directory")

    def view(self, source: str, columns: Iterable[str] | None = None) -> Any:
        """The DataFrame behind `source`, registered as a temp view on first use."""
        with self._lock:
            df = self._views.get(source)
            if df is None:
                df = read_source(self.spark, self._locate(source), what=f"table {source!r}",
                                 columns=columns)
                df.createOrReplaceTempView(source)
                self._views[source] = df
            elif columns is not None:
                read_source(self.spark, df, what=f"table {source!r}", columns=columns)
        return df

    def check_tables(self, config: Any) -> None:
        """Every declared table's data exists and holds every declared column."""
        for spec in config.tables.values():
            try:
                if self.catalog and config.schema:
                    read_source(self.spark, f"table:{config.schema}.{spec.source}",
                                what=f"tables.{spec.name}", columns=spec.columns)
                else:
                    self.view(spec.source, spec.columns)
            except InvalidInputError as exc:
                raise InvalidInputError(f"tables.{spec.name}: {exc}") from None

    # -- queries ----------------------------------------------------------------------------

    def _ensure_views(self, spark_sql: str) -> None:
        if self.catalog and not self.sources and self.root is None:
            return
        for db, name in _tables_in(spark_sql):
            if db is None and name not in self._views:
                self.view(name)

    def dataframe(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        """The lazy Spark DataFrame of the planner's `sql` (nothing runs yet)."""
        text = to_spark_sql(sql)
        self._ensure_views(text)
        return self.spark.sql(text, args=list(params)) if params else self.spark.sql(text)

    @contextlib.contextmanager
    def _deadline(self) -> Any:
        """Cancel this thread's Spark jobs past `timeout_s`: a job group (interruptible) on
        classic Spark, a job tag on Spark Connect."""
        if not self.timeout_s:
            yield
            return
        group = f"privlab-{uuid.uuid4().hex}"
        try:
            sc = self.spark.sparkContext  # classic; Spark Connect has none
        except Exception:
            sc = None
        if sc is not None:
            sc.setJobGroup(group, "privlab query", interruptOnCancel=True)
            cancel = lambda: sc.cancelJobGroup(group)  # noqa: E731
        else:
            self.spark.addTag(group)
            cancel = lambda: self.spark.interruptTag(group)  # noqa: E731
        timer = threading.Timer(self.timeout_s, cancel)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
            if sc is None:
                with contextlib.suppress(Exception):
                    self.spark.removeTag(group)

    def run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            self._ensure_views(to_spark_sql(sql))  # reading schemas is not the query's time
            with self._deadline():
                df = self.dataframe(sql, params)
                if "COUNT(*) AS __n" not in sql:
                    return arrow_rows(df)  # row-level values (quantiles): Arrow, not Py4J
                return [tuple(r) for r in df.collect()]
        except InvalidInputError:
            raise
        except Exception as exc:
            raise EngineError(f"spark: {type(exc).__name__}") from None

    def close(self) -> None:
        for name in list(self._views):
            with contextlib.suppress(Exception):
                self.spark.catalog.dropTempView(name)
        self._views.clear()


def arrow_rows(df: Any) -> list[tuple[Any, ...]]:
    """Collect a DataFrame as row tuples through Arrow (columnar; far faster than Row
    objects for many rows)."""
    table = df.toArrow()
    cols = [c.to_pylist() for c in table.columns]
    return list(zip(*cols, strict=True)) if cols else []


def open_spark_engine(url: str, timeout_s: float | None = None) -> SparkEngine:
    """`spark:DIR` (Parquet files under DIR, local or a URI such as s3a://bucket/dir) or
    `spark:catalog` (catalog tables; `database.schema` names the database)."""
    target = url[len("spark:"):]
    if target.startswith("///"):
        target = target[2:]
    if target in ("catalog", "//catalog"):
        return SparkEngine(catalog=True, timeout_s=timeout_s)
    if not target:
        raise InvalidInputError("database.url: spark: needs a directory (spark:/data/lake) or "
                                "'spark:catalog'")
    return SparkEngine(root=target, timeout_s=timeout_s)
