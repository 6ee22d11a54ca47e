"""Scale-out engines. `privlab.engines.spark`: Apache Spark (pyspark, the `[spark]` extra),
embedded `local[*]` by default, a cluster through `--master` or Spark Connect (`SPARK_REMOTE`).

DuckDB and PostgreSQL live in `privlab.query.engine`; this package holds engines that need an
optional extra and therefore import it lazily.
"""
