"""Issue 29 (3): on Spark a datetime text cell with an offset or Z was read by Spark's session
time zone, and the planner's TIMESTAMP (Spark's TIMESTAMP_NTZ) dropped the offset. privlab's
reading rule (offsets and Z to UTC; naive = UTC) must hold there whatever time zone the session
was opened with: `privlab assess --schema --engine spark` on a session set to Tokyo time gives
the pandas path's JSON, and leaves the session's own setting as it was. One shared local Spark
session (the `spark` fixture)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "assess"))

from test_assess_schema_grouped import _json, assert_close

SCHEMA = {"name": "stamps", "columns": {
    "pid": {"type": "identifier", "missing": False},
    "day": {"type": "datetime", "bounds": ["2020-01-01", "2020-12-31"], "missing": False}}}

#: Near the lower bound and a bin edge: by the rule the offset / Z cells fall on other sides of
#: them than in Tokyo time (UTC+9), and a naive cell is UTC.
DAYS = ["2020-01-01T03:00:00+05:00", "2020-01-01T05:00:00Z", "2020-07-01T02:00:00+04:00",
        "2020-06-30T20:00:00-06:00", "2020-07-01 06:00:00", "2020-03-01T00:00:00Z",
        "2020-12-30T23:30:00-02:00", "2020-09-01 12:00:00"]


def test_spark_reads_offsets_as_utc_in_any_session_time_zone(spark, capsys, tmp_path):
    schema = tmp_path / "stamps.yaml"
    schema.write_text(yaml.safe_dump(SCHEMA, sort_keys=False))
    frame = pd.DataFrame({"pid": [f"P{i}" for i in range(len(DAYS))], "day": DAYS})
    csv, parquet = tmp_path / "stamps.csv", tmp_path / "stamps.parquet"
    frame.to_csv(csv, index=False)
    frame.to_parquet(parquet, index=False)
    opts = ["--schema", str(schema), "--on-invalid", "coerce", "-q", "day",
            "--bin-numeric", "2"]
    pandas_doc = _json(capsys, ["assess", str(csv), *opts])
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Tokyo")
    try:
        spark_doc = _json(capsys, ["assess", str(parquet), "--engine", "spark", *opts])
        assert spark.conf.get("spark.sql.session.timeZone") == "Asia/Tokyo"
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
    assert_close(pandas_doc, spark_doc)
