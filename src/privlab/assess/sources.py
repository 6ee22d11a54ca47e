"""The tables the grouped assessment counts: a `CountSource` (the engine protocol's
grouped-counts capability, `privlab.engines.grouped.GroupedCounts`) answers SQL over `__data`
with rows or a pandas frame, and only counts ever come back (DuckDB over Parquet in place,
Spark).

Why a module of its own: `privlab.assess.grouped` (the assessment) and
`privlab.assess.declared_sql` (the schema's conforming as SQL) both build on these sources and
on the same SQL spelling (`q`, `lit`, the engine's type names); neither imports the other for
them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from privlab.engines.grouped import FLOAT_TYPES, INT_TYPES, GroupedCounts
from privlab.errors import InvalidInputError


def q(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def lit(x: float) -> str:
    """An exact double literal in both DuckDB and Spark (a bare 0.1 is a DECIMAL there)."""
    return f"CAST('{float(x)!r}' AS DOUBLE)"


#: The grouped-counts capability of the one engine protocol, by the name assess has used.
CountSource = GroupedCounts


class DuckDBSource(CountSource):
    """Parquet file(s) read by DuckDB in place: out-of-core group-bys, no pandas load."""

    name = "duckdb"

    def __init__(self, path: str | Path, what: str = "DATA") -> None:
        import duckdb

        from privlab.utils.duck import connect

        p = Path(path)
        if not p.exists():
            raise InvalidInputError(f"{what}: {p} does not exist; pass a Parquet file or a "
                                    "directory of Parquet files")
        files = dataset_files(p, what) if p.is_dir() else [p]
        hive = any("=" in part for f in files for part in f.relative_to(p).parts[:-1]) \
            if p.is_dir() else False
        self.con = connect()  # no progress bar: it would land inside `--json` output
        self._hold(self.con.close, f"DuckDBSource({str(p)!r})")
        # naive text times are UTC (docs/schema.md, "How values are read")
        self.con.execute("SET TimeZone = 'UTC'")
        self.what, self.path = what, str(p)
        try:
            listed = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
            self.con.execute(f"CREATE VIEW __data AS SELECT * FROM read_parquet([{listed}], "
                             f"hive_partitioning = {'true' if hive else 'false'})")
            described = self.con.execute("DESCRIBE __data").fetchall()
        except duckdb.Error as exc:
            self.close()
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise InvalidInputError(f"{what}: cannot read {p} as Parquet ({first}); pass a "
                                    "Parquet file or a directory of them") from None
        self.columns = {r[0]: str(r[1]) for r in described}

    def _run(self, text: str) -> Any:
        import duckdb

        try:
            return self.con.execute(text)
        except duckdb.Error as exc:  # a file that reads but does not fit: one line, exit 2
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise InvalidInputError(f"{self.what}: cannot read {self.path} as one table "
                                    f"({first}); pass a Parquet file or a directory holding "
                                    "one table's files") from None

    def sql(self, text: str) -> list[tuple[Any, ...]]:
        return self._run(text).fetchall()

    def frame(self, text: str) -> pd.DataFrame:
        return self._run(text).fetch_df()


def dataset_files(root: Path, what: str = "DATA") -> list[Path]:
    """The Parquet files of ONE table stored as a directory: files directly in it and in
    Hive partition folders (`key=value/...`), never other sub-folders (a foreign table kept
    beside it, `_temporary`, hidden folders). Every file must have the first file's columns
    and types: a foreign file is refused with its name (exit 2), not read."""
    import pyarrow.parquet as pq

    def walk(folder: Path) -> list[Path]:
        out = []
        for child in sorted(folder.iterdir()):
            if child.name.startswith((".", "_")):
                continue
            if child.is_file() and child.suffix.lower() == ".parquet":
                out.append(child)
            elif child.is_dir() and "=" in child.name:
                out.extend(walk(child))
        return out

    files = walk(root)
    if not files:
        raise InvalidInputError(f"{what}: {root} holds no .parquet file (directly or in "
                                "key=value partition folders)")
    try:
        first = pq.read_schema(files[0])
    except Exception as exc:  # noqa: BLE001 - any reader failure is a bad input file
        raise InvalidInputError(f"{what}: cannot read {files[0]} as Parquet "
                                f"({type(exc).__name__})") from None
    for f in files[1:]:
        try:
            other = pq.read_schema(f)
        except Exception as exc:  # noqa: BLE001
            raise InvalidInputError(f"{what}: cannot read {f} as Parquet "
                                    f"({type(exc).__name__}); move it out of {root}") from None
        if not other.equals(first, check_metadata=False):
            raise InvalidInputError(
                f"{what}: {f} does not have the columns of {files[0]} ({', '.join(other.names)}"
                f" vs {', '.join(first.names)}): a directory must hold one table's files; move "
                "the foreign file out or pass a single file")
    return files


class SparkSource(CountSource):
    """A Spark DataFrame (Parquet, catalog table) counted by Spark; results come back as
    Arrow."""

    name = "spark"

    def __init__(self, df: Any) -> None:
        import uuid

        self.df = df
        self.spark = df.sparkSession
        self.view = f"__privlab_assess_{uuid.uuid4().hex[:12]}"
        df.createOrReplaceTempView(self.view)
        self.columns = {f.name: f.dataType.simpleString() for f in df.schema.fields}

    def _text(self, text: str) -> str:
        from privlab.engines.spark import to_spark_sql

        return to_spark_sql(read_from(text, q(self.view)))

    @contextmanager
    def _utc(self) -> Iterator[None]:
        """Spark reads a datetime text cell with an offset or Z, and shows a timestamp, in the
        session's time zone: the reading rule (offsets and Z to UTC; naive = UTC) holds only
        in UTC, whatever zone the caller's session was opened with (restored afterwards)."""
        key = "spark.sql.session.timeZone"
        before = self.spark.conf.get(key)
        if before == "UTC":
            yield
            return
        self.spark.conf.set(key, "UTC")
        try:
            yield
        finally:
            self.spark.conf.set(key, before)

    def sql(self, text: str) -> list[tuple[Any, ...]]:
        with self._utc():
            return [tuple(r) for r in self.spark.sql(self._text(text)).collect()]

    def frame(self, text: str) -> pd.DataFrame:
        with self._utc():
            return self.spark.sql(self._text(text)).toArrow().to_pandas()


#: The relation every grouped query reads (`FROM __data`); a column may contain the same
#: letters ("my__data"), so only the relation after FROM is ever rewritten.
_RELATION = re.compile(r"\bFROM __data\b")


def read_from(text: str, relation: str) -> str:
    """A grouped query with its `FROM __data` pointed at `relation`."""
    return _RELATION.sub(lambda _m: f"FROM {relation}", text)


def is_parquet(path: str | Path) -> bool:
    """A .parquet file, or a directory holding .parquet files (a Spark / Hive dataset)."""
    p = Path(path)
    if p.suffix.lower() == ".parquet":
        return True
    return p.is_dir() and (any(p.glob("*.parquet")) or any(
        c.is_dir() and "=" in c.name for c in p.iterdir()))


__all__ = ["FLOAT_TYPES", "INT_TYPES", "CountSource", "DuckDBSource", "SparkSource",
           "dataset_files", "is_parquet", "lit", "q", "read_from"]
