"""Rows are read as the schema declares, never as the data suggests (issue 29, items 1-2).

Each neighbour pair below differs in one row; on 524af6d pandas' inference (a column's type
read from all its rows) or `pd.to_datetime` (a format taken from the first value) changed how
every OTHER row was read. Here every non-edited row must read the same on D and D'.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privlab.cli.main import main
from privlab.errors import InvalidInputError
from privlab.schema import read_declared, schema_from_columns

CODES = ["01", "02", "06"]


def _states(n: int = 300) -> list[str]:
    gen = np.random.default_rng(1)
    return [CODES[i] for i in gen.integers(0, 3, n)]


def _write(path: Path, header: str, cells: list[str]) -> Path:
    path.write_text(header + "\n" + "\n".join(cells) + "\n", encoding="utf-8")
    return path


def _schema_file(path: Path, columns: dict, **extra: object) -> Path:
    path.write_text(json.dumps({"name": path.stem, "columns": columns, **extra}))
    return path


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    capsys.readouterr()
    code = main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


# --------------------------------------------------------------------------- the cell rules


def test_digit_codes_stay_the_declared_strings_with_or_without_a_text_row(tmp_path: Path
                                                                          ) -> None:
    sch = schema_from_columns("s", {"state": {"type": "categorical", "categories": CODES,
                                              "other": True}})
    d = read_declared(_write(tmp_path / "d.csv", "state", _states()), sch)
    d2 = read_declared(_write(tmp_path / "d2.csv", "state", [*_states(), "XX"]), sch)
    assert d["state"].tolist() == _states()
    assert d2["state"].tolist() == [*_states(), "<other>"]


def test_iso_first_row_with_z_does_not_change_the_other_rows(tmp_path: Path) -> None:
    sch = schema_from_columns("t", {"when": {"type": "datetime",
                                             "bounds": ["2009-01-01", "2010-01-01"]}})
    rows = [f"2009-05-{d:02d} 08:00:00" for d in range(1, 29)]
    d = read_declared(_write(tmp_path / "d.csv", "when", rows), sch, "coerce")
    d2 = read_declared(_write(tmp_path / "d2.csv", "when", ["2009-06-01T08:00:00Z", *rows]),
                       sch, "coerce")
    assert d2["when"].iloc[1:].tolist() == d["when"].tolist()
    assert d["when"].notna().all()
    assert d2["when"].iloc[0] == pd.Timestamp("2009-06-01 08:00:00")


def test_offsets_and_z_are_converted_to_utc() -> None:
    sch = schema_from_columns("t", {"when": {"type": "datetime",
                                             "bounds": ["2009-01-01", "2010-01-01"]}})
    frame = pd.DataFrame({"when": ["2009-06-01T10:00:00+02:00", "2009-06-01T08:00:00Z",
                                   "2009-06-01 08:00"]})
    out = read_declared(frame, sch)
    assert out["when"].tolist() == [pd.Timestamp("2009-06-01 08:00")] * 3


def test_a_day_first_first_row_is_invalid_alone_and_never_flips_the_others(tmp_path: Path
                                                                           ) -> None:
    sch = schema_from_columns("t", {"when": {"type": "datetime", "missing": False,
                                             "bounds": ["2009-01-01", "2010-01-01"]}})
    d2 = read_declared(_write(tmp_path / "d2.csv", "when", ["13/01/2009", "2009-01-05"]), sch,
                       "coerce")
    assert d2["when"].tolist() == [pd.Timestamp("2009-01-05")]  # the invalid row alone dropped
    with pytest.raises(InvalidInputError, match="'when'.*ISO 8601"):
        read_declared(tmp_path / "d2.csv", sch)


def test_a_declared_day_first_format_reads_every_row_day_first(tmp_path: Path) -> None:
    sch = schema_from_columns("t", {"when": {"type": "datetime", "format": "%d/%m/%Y",
                                             "bounds": ["2009-01-01", "2010-01-01"]}})
    for first in ("13/01/2009", "01/02/2009"):
        out = read_declared(_write(tmp_path / "d.csv", "when", [first, "05/01/2009"]), sch)
        assert out["when"].iloc[1] == pd.Timestamp("2009-01-05")
    assert sch.column("when").to_dict()["format"] == "%d/%m/%Y"
    with pytest.raises(InvalidInputError, match="format"):
        schema_from_columns("t", {"n": {"type": "integer", "bounds": [0, 1], "format": "%Y"}})


def test_boolean_spellings_are_codes_declared_as_written(tmp_path: Path) -> None:
    sch = schema_from_columns("b", {"flag": {"type": "categorical", "missing": False,
                                             "categories": ["true", "false"]}})
    rows = ["true", "false"] * 20
    d = read_declared(_write(tmp_path / "d.csv", "flag", rows), sch, "coerce")
    d2 = read_declared(_write(tmp_path / "d2.csv", "flag", [*rows, "maybe"]), sch, "coerce")
    assert d["flag"].tolist() == rows and d2["flag"].tolist() == rows
    # "True", "1", "yes" are other codes, each invalid alone here; booleans are not numbers
    d3 = read_declared(_write(tmp_path / "d3.csv", "flag", ["True", "1", "yes", *rows]), sch,
                       "coerce")
    assert d3["flag"].tolist() == rows
    num = schema_from_columns("n", {"flag": {"type": "integer", "bounds": [0, 1],
                                             "missing": False}})
    assert read_declared(pd.DataFrame({"flag": ["1", "true", True, 0]}), num, "coerce"
                         )["flag"].tolist() == [1.0, 0.0]


def test_nineteen_digit_ids_keep_every_digit(tmp_path: Path) -> None:
    sch = schema_from_columns("p", {"pid": {"type": "identifier"},
                                    "age": {"type": "integer", "bounds": [0, 100]}},
                              privacy_unit="pid")
    ids = ["1234567890123456789", "1234567890123456788", "9999999999999999999"]
    cells = [f"{i},{a}" for i, a in zip(ids, (30, 40, 50), strict=True)]
    d = read_declared(_write(tmp_path / "d.csv", "pid,age", cells), sch)
    d2 = read_declared(_write(tmp_path / "d2.csv", "pid,age", [*cells, ",60"]), sch)
    assert d["pid"].tolist() == ids and d2["pid"].tolist()[:3] == ids
    pq = tmp_path / "d.parquet"
    pd.DataFrame({"pid": pd.array([1234567890123456789, 1234567890123456788, None],
                                  dtype="Int64"), "age": [1, 2, 3]}).to_parquet(pq)
    assert read_declared(pq, sch)["pid"].tolist()[:2] == ids[:2]
    big = schema_from_columns("i", {"n": {"type": "integer",
                                          "bounds": [0, 1234567890123456788]}})
    with pytest.raises(InvalidInputError, match="outside its declared bounds"):
        read_declared(pd.DataFrame({"n": ["1234567890123456789"]}), big)


def test_blank_and_whitespace_cells_are_the_same_missing_value(tmp_path: Path) -> None:
    sch = schema_from_columns("w", {"a": {"type": "categorical", "categories": ["x"]},
                                    "b": {"type": "integer", "bounds": [0, 9]}})
    path = tmp_path / "w.csv"
    path.write_text("a,b\n,1\n   ,2\nx,\nx, \n")
    out = read_declared(path, sch)
    assert out["a"].isna().tolist() == [True, True, False, False]
    assert out["b"].isna().tolist() == [False, False, True, True]


def test_numbers_follow_one_rule_per_cell() -> None:
    sch = schema_from_columns("n", {"x": {"type": "numeric", "bounds": [-10, 10]}})
    cells = ["1", "-2.5", "+.5", "1e1", "1,5", "inf", "0x1", "nan", "", "3 "]
    out = read_declared(pd.DataFrame({"x": cells}), sch, "coerce")
    assert out["x"].tolist()[:4] == [1.0, -2.5, 0.5, 10.0]
    assert out["x"].iloc[4:-1].isna().all() and out["x"].iloc[-1] == 3.0


# --------------------------------------------------------------------------- the commands


def test_release_histogram_of_digit_codes_moves_by_one_row(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    schema = _schema_file(tmp_path / "S.json", {"state": {
        "type": "categorical", "categories": CODES, "other": True}})
    values = []
    for name, rows in (("d", _states()), ("d2", [*_states(), "XX"])):
        data = _write(tmp_path / f"{name}.csv", "state", rows)
        values.append(_json(capsys, ["release", "histogram", str(data), "--column", "state",
                                     "--schema", str(schema), "--epsilon", "2", "--seed", "1",
                                     "--json"])["value"])
    l1 = sum(abs(a - b) for a, b in zip(*values, strict=True))
    assert l1 <= 1 + 1e-9, values  # the same seed: only the added row's bin moves


def test_release_count_coerce_of_digit_codes(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    schema = _schema_file(tmp_path / "S.json", {"state": {
        "type": "categorical", "categories": CODES, "missing": False}})
    values = []
    for name, rows in (("d", _states()), ("d2", [*_states(), "XX"])):
        data = _write(tmp_path / f"{name}.csv", "state", rows)
        values.append(_json(capsys, ["release", "count", str(data), "--column", "state",
                                     "--schema", str(schema), "--on-invalid", "coerce",
                                     "--mechanism", "geometric", "--epsilon", "2", "--seed",
                                     "1", "--json"])["value"])
    assert abs(values[0] - values[1]) <= 1, values


def test_release_count_coerce_with_a_z_first_row(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    schema = _schema_file(tmp_path / "S.json", {"when": {
        "type": "datetime", "bounds": ["2009-01-01", "2010-01-01"], "missing": False}})
    rows = [f"2009-05-{1 + i % 28:02d} 08:{i % 60:02d}:00" for i in range(300)]
    values = []
    for name, cells in (("d", rows), ("d2", ["2009-06-01T08:00:00Z", *rows])):
        data = _write(tmp_path / f"{name}.csv", "when", cells)
        values.append(_json(capsys, ["release", "count", str(data), "--column", "when",
                                     "--schema", str(schema), "--on-invalid", "coerce",
                                     "--mechanism", "geometric", "--epsilon", "2", "--seed",
                                     "1", "--json"])["value"])
    assert abs(values[0] - values[1]) <= 1, values


def test_synth_estimate_domain_releases_the_codes_as_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schema = _schema_file(tmp_path / "S.json", {
        "state": {"type": "categorical", "categories": CODES, "missing": False},
        "age": {"type": "integer", "bounds": [0, 99], "missing": False}})
    gen = np.random.default_rng(2)
    rows = [f"{s},{a}" for s, a in zip(_states(), gen.integers(20, 60, 300), strict=True)]
    for name in ("d", "d2"):
        cells = rows if name == "d" else [*rows, "XX,40"]
        data = _write(tmp_path / f"{name}.csv", "state,age", cells)
        out = tmp_path / f"{name}.parquet"
        _json(capsys, ["synth", str(data), "--schema", str(schema), "--method", "mst",
                       "--epsilon", "6", "--rows", "200", "--estimate-domain", "state",
                       "--out", str(out), "--seed", "1", "--json"])
        released = set(pd.read_parquet(out)["state"].dropna())
        # the estimated categories are the codes as written (never "1", "2", "6"), plus the
        # estimate's own bucket for the rest
        assert released <= {*CODES, "<other>"} and released & set(CODES), released


def test_schema_draft_reads_text_and_keeps_digit_codes(tmp_path: Path) -> None:
    """The draft looks at values but reads them as text: codes with a leading zero are drafted
    as the categorical codes written, numbers and ISO times by the same per-cell rules."""
    from privlab.data.io import read_table
    from privlab.schema import draft_schema

    cells = [f"{s},{20 + i % 50},2009-05-{1 + i % 28:02d} 08:00:00"
             for i, s in enumerate(_states(60))]
    frame = read_table(_write(tmp_path / "d.csv", "state,age,when", cells))
    draft = draft_schema(frame)
    assert draft.column("state").type == "categorical"
    assert set(draft.column("state").categories) == set(CODES)
    assert draft.column("age").type == "integer" and draft.column("age").bounds == (20, 69)
    assert draft.column("when").type == "datetime"


def test_the_studio_reads_a_workspace_file_as_the_cli_does(tmp_path: Path) -> None:
    """The studio's rows for a workspace file are the same text cells: the released column
    conformed by `privlab release`'s schema step keeps "01"/"02"/"06" with or without "XX"."""
    from privlab.schema.release import ReleaseDomain, conform_for_release
    from privlab.studio.sources import Source

    sch = schema_from_columns("s", {"state": {"type": "categorical", "categories": CODES,
                                              "other": True}})
    declared = ReleaseDomain(None, None, None, 1, None)
    counts = []
    for name, rows in (("d", _states()), ("d2", [*_states(), "XX"])):
        path = _write(tmp_path / f"{name}.csv", "state", rows)
        frame = Source("workspace", path.name, path).load()
        kept, _ = conform_for_release(frame, sch, "coerce", "state", "histogram", declared,
                                      None, None)
        counts.append(kept["state"].value_counts().reindex([*CODES, "<other>"], fill_value=0))
    assert (counts[1] - counts[0]).abs().sum() == 1
