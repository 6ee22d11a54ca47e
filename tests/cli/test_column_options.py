"""Issue 23, every column-naming option validated: a column that DATA lacks is one line naming
the option and the column (exit 2), before any training, charge or file is written."""

from __future__ import annotations

import pytest

from privlab.cli.main import main

CASES = {
    "train --target": (["train", "{csv}", "--schema", "adult", "-t", "nosuch", "--model",
                        "logreg", "-e", "1", "--save", "{tmp}/m.pkl"], "--target"),
    "train --exclude": (["train", "{csv}", "--schema", "adult", "-t", "salary", "--exclude",
                         "age,nosuch", "--model", "logreg", "-e", "1"], "--exclude"),
    "train bundled --exclude": (["train", "adult", "--exclude", "nosuch", "--model", "logreg",
                                 "-e", "1"], "--exclude"),
    "train --bounds": (["train", "{csv}", "-t", "salary", "--unsafe-encoding", "--bounds",
                        "age=17:90,nosuch=0:1", "--model", "logreg", "-e", "1"], "--bounds"),
    "audit --target": (["audit", "{csv}", "--schema", "adult", "-t", "nosuch", "-e", "1",
                        "--report", "{tmp}/r.html"], "--target"),
    "audit --exclude": (["audit", "classification", "--exclude", "nosuch", "-e", "1"],
                        "--exclude"),
    "choose-epsilon --target": (["choose-epsilon", "{csv}", "--schema", "adult", "-t", "nosuch",
                                 "--report", "{tmp}/r.html"], "--target"),
    "choose-epsilon bundled --target": (["choose-epsilon", "adult", "-t", "nosuch"],
                                        "--target"),
    "anonymize --quasi-identifiers": (["anonymize", "{csv}", "-q", "age,nosuch", "--k", "5",
                                       "-o", "{tmp}/a.csv"], "--quasi-identifiers"),
    "anonymize --sensitive": (["anonymize", "{csv}", "-q", "age", "--k", "5", "--l", "2", "-s",
                               "nosuch", "-o", "{tmp}/a.csv"], "--sensitive"),
    "anonymize --exclude": (["anonymize", "{csv}", "-q", "age", "--k", "5", "--exclude",
                             "nosuch", "-o", "{tmp}/a.csv"], "--exclude"),
    "assess --quasi-identifiers": (["assess", "{csv}", "-q", "age,nosuch"],
                                   "--quasi-identifiers"),
    "assess --sensitive": (["assess", "{csv}", "-q", "age", "-s", "nosuch"], "--sensitive"),
    "assess --attributes": (["assess", "{csv}", "--attributes", "age,nosuch", "--report",
                             "{tmp}/r.html"], "--attributes"),
    "assess duckdb --quasi-identifiers": (["assess", "{parquet}", "--engine", "duckdb", "-q",
                                           "age,nosuch"], "--quasi-identifiers"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_unknown_column_is_one_line_naming_the_option(case, adult_csv, tmp_path, monkeypatch,
                                                      capsys, skip_without_ml):
    monkeypatch.chdir(tmp_path)
    argv, option = CASES[case]
    if case.startswith("audit"):
        skip_without_ml("audit")  # a missing extra is refused first (exit 5)
    parquet = adult_csv.with_suffix(".parquet")
    if not parquet.exists():
        import pandas as pd

        pd.read_csv(adult_csv).to_parquet(parquet, index=False)
    code = main([a.format(csv=adult_csv, parquet=parquet, tmp=tmp_path) for a in argv]
                + ["--json"])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith(f"error: {option} 'nosuch' is not a column "
                                                    "of "), lines
    assert out == "" and list(tmp_path.iterdir()) == []  # nothing released or written
