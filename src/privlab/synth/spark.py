"""MST with its marginals measured on Spark: the rows stay in the cluster; the exact 1-way and
2-way marginal tables (a few thousand cells) come back to this process, where the discrete
Gaussian noise is added and the tree model is fitted exactly as `MSTSynthesizer` does.

Why a declared domain is required: the in-memory MST may estimate categories and bounds
privately from the rows (a thresholded histogram, a log-grid histogram); at this scale the
publisher declares them (`--schema`, no `--estimate-domain`), so every code is computed by a
SQL CASE in Spark and the privacy accounting is exactly MST's (three rho/3 phases, zCDP).

    from privlab.synth.spark import SparkMSTSynthesizer
    synth = SparkMSTSynthesizer(schema="schema.yaml").fit("people.parquet", 1.0, 1e-6)
    synth.sample(100_000)
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from privlab.core.rng import make_rng
from privlab.errors import InvalidInputError
from privlab.synth.aim import AIMSynthesizer
from privlab.synth.base import Prepared, check_privacy
from privlab.synth.domain import ColumnSpec, plan_columns
from privlab.synth.mst import MarginalCounts, MSTSynthesizer

#: Pairs of columns counted per Spark query (GROUPING SETS): one scan serves them all.
PAIRS_PER_QUERY = 64


def _lit(x: float) -> str:
    return f"CAST('{float(x)!r}' AS DOUBLE)"


def _text(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def code_expression(spec: ColumnSpec, spark_type: str) -> str:
    """Spark SQL for `ColumnSpec.encode`: the same code for every value (categories by their
    text, numbers by searchsorted over the edges after clipping, missing last). An unknown
    category without `other` gives -1, refused before anything is measured."""
    col = f"`{spec.name.replace('`', '``')}`"
    is_float = spark_type in ("double", "float")
    missing = f"{col} IS NULL" + (f" OR isnan({col})" if is_float else "")
    when_missing = f"WHEN {missing} THEN {spec.values if spec.missing else -2}"
    if spec.kind == "categorical":
        text = f"(CASE WHEN {col} THEN 'True' ELSE 'False' END)" if spark_type == "boolean" \
            else f"CAST({col} AS STRING)"
        whens = " ".join(f"WHEN {text} = {_text(c)} THEN {i}"
                         for i, c in enumerate(spec.categories))
        other = len(spec.categories) if spec.other else -1
        return f"CASE {when_missing} {whens} ELSE {other} END"
    e = spec.edges
    points = " ".join(f"WHEN CAST({col} AS DOUBLE) = {_lit(v)} THEN {spec.bins + j}"
                      for j, v in enumerate(spec.points))
    whens = points + " " + " ".join(f"WHEN CAST({col} AS DOUBLE) >= {_lit(e[i])} THEN {i}"
                                    for i in range(spec.bins - 1, 0, -1))
    return f"CASE {when_missing} {whens} ELSE 0 END"


class SparkCounts(MarginalCounts):
    """Marginals counted by Spark group-bys over the coded columns (kept on the executors:
    persisted, so the 1-way pass and the pair pass read the Parquet once)."""

    def __init__(self, coded: Any, names: list[str], sizes: list[int]) -> None:
        self.coded = coded
        self.names, self.sizes = names, sizes
        self._one: dict[int, np.ndarray] | None = None
        self._two: dict[tuple[int, int], np.ndarray] = {}

    def _fetch_one(self) -> dict[int, np.ndarray]:
        d = len(self.names)
        out = {j: np.zeros(self.sizes[j], dtype=np.int64) for j in range(d)}
        for sid, code, count in self._grouping([[f"c{j}"] for j in range(d)]):
            out[sid[0]][code[0]] = count
        return out

    def _grouping(self, sets: list[list[str]]) -> list[tuple[list[int], list[int], int]]:
        """(column indices, codes, count) rows of one GROUPING SETS query over `sets`."""
        cols = sorted({c for s in sets for c in s}, key=lambda c: int(c[1:]))
        self.coded.createOrReplaceTempView("__privlab_coded")
        gsets = ", ".join("(" + ", ".join(s) + ")" for s in sets)
        spark = self.coded.sparkSession
        gid_sql = " + ".join(f"GROUPING({c}) * {2 ** i}" for i, c in enumerate(cols))
        rows = spark.sql(f"SELECT {gid_sql} AS __gid, {', '.join(cols)}, COUNT(*) AS __n FROM "
                         f"__privlab_coded GROUP BY GROUPING SETS ({gsets})").collect()
        full = 2 ** len(cols) - 1
        by_gid = {full - sum(2 ** cols.index(c) for c in s): s for s in sets}
        out = []
        for r in rows:
            s = by_gid[int(r["__gid"])]
            out.append(([int(c[1:]) for c in s], [int(r[c]) for c in s], int(r["__n"])))
        return out

    def one(self, j: int) -> np.ndarray:
        if self._one is None:
            self._one = self._fetch_one()
        return self._one[j]

    def _fetch_pairs(self) -> None:
        d = len(self.names)
        pairs = [(a, b) for a in range(d) for b in range(a + 1, d)]
        for start in range(0, len(pairs), PAIRS_PER_QUERY):
            batch = pairs[start:start + PAIRS_PER_QUERY]
            for a, b in batch:
                self._two[a, b] = np.zeros((self.sizes[a], self.sizes[b]), dtype=np.int64)
            for (a, b), (ca, cb), count in self._grouping(
                    [[f"c{a}", f"c{b}"] for a, b in batch]):
                self._two[a, b][ca, cb] = count

    def two(self, a: int, b: int, mappings: list[np.ndarray], csizes: list[int]) -> np.ndarray:
        if not self._two:
            self._fetch_pairs()
        raw = self._two[a, b] if a < b else self._two[b, a].T
        out = np.zeros((csizes[a], csizes[b]), dtype=np.float64)
        np.add.at(out, (mappings[a][:, None], mappings[b][None, :]), raw)
        return out

    def release(self) -> None:
        self.coded.unpersist()


class SparkMarginals:
    """AIM's marginal source on Spark (`privlab.synth.marginals.MarginalSource`): exact counts
    of any cliques of the coded columns, with only the count tables coming back.

    Only the MAXIMAL requested cliques are counted on Spark (GROUPING SETS, `PAIRS_PER_QUERY`
    sets per scan of the persisted coded rows); every other clique is summed out of a counted
    superset here (exact: integer counts below 2^53 in float64), as the in-memory sources do.
    """

    def __init__(self, coded: Any, sizes: list[int]) -> None:
        self.coded = coded
        self.sizes = list(sizes)
        self.queries = 0  # Spark jobs run (one scan of the coded rows each)

    def close(self) -> None:
        self.coded.unpersist()

    def counts(self, cliques: Any) -> dict[tuple[int, ...], np.ndarray]:
        """Dense float64 count arrays (axes in clique order) for every clique."""
        todo = sorted(dict.fromkeys(tuple(c) for c in cliques), key=lambda c: (-len(c), c))
        host: dict[frozenset[int], tuple[int, ...]] = {}
        counted: list[tuple[int, ...]] = []
        for cl in todo:
            if frozenset(cl) not in host:
                counted.append(cl)
                for k in range(1, len(cl) + 1):
                    for sub in itertools.combinations(cl, k):
                        host.setdefault(frozenset(sub), cl)
        out: dict[tuple[int, ...], np.ndarray] = {}
        for start in range(0, len(counted), PAIRS_PER_QUERY):
            out.update(self._count(counted[start:start + PAIRS_PER_QUERY]))
        for cl in todo:
            if cl in out:
                continue
            big = host[frozenset(cl)]
            arr = out[big].sum(axis=tuple(i for i, a in enumerate(big) if a not in cl))
            kept = [a for a in big if a in cl]
            out[cl] = arr.transpose([kept.index(a) for a in cl])
        return {tuple(c): out[tuple(c)] for c in cliques}

    def _count(self, batch: list[tuple[int, ...]]) -> dict[tuple[int, ...], np.ndarray]:
        """One GROUPING SETS query over `batch`, fetched as Arrow (vectorised fill)."""
        used = sorted({a for cl in batch for a in cl})
        cols = [f"c{a}" for a in used]
        gid = " + ".join(f"GROUPING({c}) * {2 ** i}" for i, c in enumerate(cols))
        sets = ", ".join("(" + ", ".join(f"c{a}" for a in cl) + ")" for cl in batch)
        self.coded.createOrReplaceTempView("__privlab_coded")
        table = self.coded.sparkSession.sql(
            f"SELECT {gid} AS __gid, {', '.join(cols)}, COUNT(*) AS __n FROM __privlab_coded "
            f"GROUP BY GROUPING SETS ({sets})").toArrow()
        self.queries += 1
        g = table.column("__gid").to_numpy()
        n = table.column("__n").to_numpy()
        out = {}
        for cl in batch:
            rows = g == sum(2 ** i for i, a in enumerate(used) if a not in cl)
            arr = np.zeros([self.sizes[a] for a in cl], dtype=np.float64)
            idx = tuple(table.column(f"c{a}").filter(rows).to_numpy().astype(np.int64)
                        for a in cl)
            arr[idx] = n[rows]
            out[cl] = arr
        return out


class _SparkRows:
    """What the Spark synthesizers share: `fit` takes a Spark DataFrame, a Parquet file or
    directory, or `table:NAME`; every column's domain is declared; the rows are coded by Spark
    SQL (`code_expression`) and persisted on the executors for the marginal queries."""

    def __init__(self, *, spark: Any = None, master: str | None = None, **kw: Any) -> None:
        super().__init__(**kw)  # type: ignore[call-arg]
        self._spark = spark
        self._master = master
        self._df: Any = None

    def _prepare(self, data: Any, epsilon: float | None, delta: float) -> Prepared:
        from privlab.engines.spark import get_spark, read_source

        unit, _ = self.person_bound()  # type: ignore[attr-defined]
        if unit is not None:  # refused before any Spark work: no per-person bound on Spark
            raise InvalidInputError(
                f"privacy unit {unit!r}: the Spark path has no per-person row bound; run "
                "privlab synth in memory with --max-rows-per-unit M (aim or mst)")

        spark = self._spark or get_spark(self._master)
        df = read_source(spark, data, what="DATA")
        private, epsilon, delta = check_privacy(epsilon, delta)
        empty = df.limit(0).toPandas()  # the schema as pandas dtypes, no rows
        plans = plan_columns(list(empty.columns), self.declaration,  # type: ignore[attr-defined]
                             self.drop)  # type: ignore[attr-defined]
        schema = self.schema  # type: ignore[attr-defined]
        if schema is not None:  # the in-memory order (the schema's): same domain, same draws
            order = {c.name: i for i, c in enumerate(schema.columns)}
            plans.sort(key=lambda p: order.get(p.name, len(order)))
        open_ = [p.name for p in plans if p.needs_bounds or p.needs_categories]
        if open_:
            raise InvalidInputError(f"on Spark every column's domain must be declared; "
                                    f"{', '.join(open_)} is left to --estimate-domain; declare "
                                    "it in the schema (or drop it)")
        df = df.select(*[p.name for p in plans])
        if self.missing == "drop":  # type: ignore[attr-defined]
            df = df.dropna()
        self._df = df
        self.rows_in = -1  # not counted: nothing here depends on the row count
        return Prepared(empty[[p.name for p in plans]], plans, private, float(epsilon),
                        float(delta), make_rng(self.rng))  # type: ignore[attr-defined]

    def _coded(self) -> Any:
        """The coded columns c0..c{d-1}, persisted; values outside the declared domain are
        refused here, before anything is measured."""
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        domain = self.domain  # type: ignore[attr-defined]
        assert domain is not None and self._df is not None
        types = dict(self._df.dtypes)
        exprs = [F.expr(code_expression(c, types[c.name])).alias(f"c{j}")
                 for j, c in enumerate(domain.columns)]
        coded = self._df.select(*exprs).persist(StorageLevel.MEMORY_AND_DISK)
        mins = coded.select(*[F.min(f"c{j}") for j in range(len(exprs))]).first()
        for j, c in enumerate(domain.columns):
            if mins is not None and mins[j] is not None and mins[j] < 0:
                coded.unpersist()
                if mins[j] == -2:
                    raise InvalidInputError(
                        f"column {c.name!r} has missing values but its domain declares none; "
                        "set \"missing\": true or drop those rows")
                raise InvalidInputError(
                    f"column {c.name!r} has values outside its declared categories; add them "
                    "to the domain or set \"other\": true")
        return coded

    def _fit(self, prep: Prepared) -> None:
        try:
            super()._fit(prep)  # type: ignore[misc]
        finally:
            if self._df is not None:
                self._df.unpersist()


class SparkMSTSynthesizer(_SparkRows, MSTSynthesizer):
    """`MSTSynthesizer` whose `fit` takes a Spark DataFrame, a Parquet path or `table:NAME`.

    Same guarantee, same budget lines, same model; `sample(n)` runs here (post-processing).
    """

    mechanism = MSTSynthesizer.mechanism + " (marginals counted on Spark)"

    def _marginals(self, prep: Prepared) -> MarginalCounts:
        assert self.domain is not None
        return SparkCounts(self._coded(), self.domain.names, self.domain.sizes)


class SparkAIMSynthesizer(_SparkRows, AIMSynthesizer):
    """`AIMSynthesizer` whose exact marginals are counted on Spark (`SparkMarginals`); the
    rounds, the model and `sample(n)` run here on the count tables. Same seed, same data:
    the same released table as in memory."""

    mechanism = AIMSynthesizer.mechanism + " (marginals counted on Spark)"

    def _marginal_source(self, prep: Prepared) -> SparkMarginals:
        assert self.domain is not None
        return SparkMarginals(self._coded(), self.domain.sizes)


def make_spark_synthesizer(method: str, *, master: str | None = None,
                           spark: Any = None, **options: Any) -> MSTSynthesizer | AIMSynthesizer:
    """`privlab synth --engine spark`: "aim" or "mst" with its marginals on Spark."""
    if method == "aim":
        return SparkAIMSynthesizer(master=master, spark=spark, **options)
    if method == "mst":
        return SparkMSTSynthesizer(master=master, spark=spark, **options)
    raise InvalidInputError(f"--engine spark runs --method aim or mst (marginals counted on "
                            f"Spark), not {method}; use --engine memory")


def sample_to_parquet(synth: MSTSynthesizer, n: int, path: str,
                      chunk: int = 1_000_000) -> str:
    """Sample n rows in chunks of `chunk` and write them as one Parquet file (post-processing
    of the fitted model; memory stays at one chunk)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from privlab.utils.atomic import atomic_open

    with atomic_open(path, "wb") as handle:
        writer = None
        for i in range(0, n, chunk):
            table = pa.Table.from_pandas(synth.sample(min(chunk, n - i)), preserve_index=False)
            writer = writer or pq.ParquetWriter(handle, table.schema)
            writer.write_table(table)
        if writer is not None:
            writer.close()
    return path
