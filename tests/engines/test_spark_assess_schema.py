"""Issue 23: `privlab assess --schema --engine spark` conforms the rows in Spark SQL and gives
the pandas path's JSON (the table of tests/assess/test_assess_schema_grouped.py, with invalid
values coerced, and a refusal with the same one line). One shared local Spark session."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "assess"))

from test_assess_schema_grouped import SCHEMA, _frame, _invalid, _json, _run, _write, assert_close


def test_spark_equals_pandas_under_a_schema(spark, capsys, tmp_path):  # noqa: ARG001 - session
    schema = tmp_path / "visits.yaml"
    schema.write_text(yaml.safe_dump(SCHEMA, sort_keys=False))
    csv, parquet = _write(_invalid(_frame()), tmp_path, "invalid")
    opts = ["--schema", str(schema), "--on-invalid", "coerce", "-q", "age,sex,region",
            "-s", "income", "--bin-numeric", "3"]
    pandas_doc = _json(capsys, ["assess", str(csv), *opts])
    spark_doc = _json(capsys, ["assess", str(parquet), "--engine", "spark", *opts])
    assert_close(pandas_doc, spark_doc)
    assert spark_doc["schema"]["rows_dropped"] == 2
    lines = []
    for path, engine in ((csv, "pandas"), (parquet, "spark")):
        code, _, err = _run(capsys, ["assess", str(path), "--schema", str(schema),
                                     "--engine", engine])
        assert code == 2, err
        lines.append(err.strip())
    assert lines[0] == lines[1] and lines[1].startswith("error: DATA: column 'age'")
