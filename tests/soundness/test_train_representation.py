"""Issue 29 (1), `privlab train` and `privlab audit`: the codes table (digit codes "01"/"02"/
"06", "true"/"false" flags, ISO times, 19-digit ids) is read as declared, so every row fits
and a cell written another way in one row moves nothing but that row. On 524af6d pandas read
the codes as numbers and the flags as booleans, every row was dropped by --on-invalid coerce
("the training part has 0 rows") and only an edit like one "yes" flag brought rows back."""

from __future__ import annotations

import json

import pytest
from fuzz import CODES_SCHEMA, DATASETS, edits

pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")

from privlab.cli.main import main  # noqa: E402

ARGV = ["--schema", "schema.json", "--target", "flag", "--model", "logreg", "--method", "none",
        "--epochs", "1", "--batch-size", "32", "--epsilon", "1", "--delta", "0",
        "--on-invalid", "coerce", "--seed", "3", "--json"]


@pytest.mark.parametrize("edit", [None, "bool_yes", "text_code", "first_row_z"])
def test_train_reads_the_codes_table_as_declared(edit, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "schema.json").write_text(json.dumps(CODES_SCHEMA))
    frame = DATASETS["codes"].frame() if edit is None else edits(DATASETS["codes"])[edit]
    frame.to_csv(tmp_path / "data.csv", index=False)
    code = main(["train", "data.csv", *ARGV])
    out = capsys.readouterr()
    assert code == 0, out.err
    doc = json.loads(out.out)
    # every row fits the declaration; the edited cell ("yes", "XX") alone is coerced away,
    # a first time with Z is the same instant
    assert doc["rows"] == (89 if edit in ("bool_yes", "text_code") else 90)
    assert doc["classes"] == CODES_SCHEMA["columns"]["flag"]["categories"]  # declared order
