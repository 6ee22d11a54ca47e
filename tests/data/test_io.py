"""`read_table`: good files read, bad files give one-line InvalidInputErrors naming the problem."""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd
import pytest

from privlab.data.io import read_table, require_columns
from privlab.errors import InvalidInputError


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _bad(path: Path, match: str, **kwargs: object) -> str:
    with pytest.raises(InvalidInputError, match=match) as info:
        read_table(path, **kwargs)  # type: ignore[arg-type]
    message = str(info.value)
    assert "\n" not in message, message
    return message


# --- bad input -------------------------------------------------------------------------------

def test_empty_file(tmp_path: Path) -> None:
    _bad(_write(tmp_path / "e.csv", b""), "is empty")


def test_blank_lines_only(tmp_path: Path) -> None:
    _bad(_write(tmp_path / "b.csv", b"\n  \n\n"), "is empty")


def test_header_only(tmp_path: Path) -> None:
    _bad(_write(tmp_path / "h.csv", b"a,b,c\n"), "no data rows")


def test_header_only_without_newline(tmp_path: Path) -> None:
    _bad(_write(tmp_path / "h.csv", b"a,b,c"), "no data rows")


def test_non_utf8(tmp_path: Path) -> None:
    msg = _bad(_write(tmp_path / "l.csv", "a,b\n1,café\n".encode("latin-1")), "not valid UTF-8")
    assert "byte 9" in msg


def test_utf16_is_not_utf8(tmp_path: Path) -> None:
    _bad(_write(tmp_path / "u.csv", "a,b\n1,2\n".encode("utf-16")), "not valid UTF-8")


def test_wrong_delimiter_given(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.csv", b"a;b;c\n1;2;3\n4;5;6\n")
    _bad(path, "looks delimited by ';'", delimiter=",")


def test_semicolon_file_is_sniffed(tmp_path: Path) -> None:
    frame = read_table(_write(tmp_path / "s.csv", b"a;b;c\n1;2;3\n4;5;6\n"))
    assert list(frame.columns) == ["a", "b", "c"]
    assert frame["c"].tolist() == ["3", "6"]  # cells are text until a declaration types them


def test_bad_delimiter_argument(tmp_path: Path) -> None:
    path = _write(tmp_path / "a.csv", b"a,b\n1,2\n")
    _bad(path, "delimiter must be one character", delimiter=";;")
    _bad(path, "delimiter must be one character", delimiter="")


def test_duplicate_column_names(tmp_path: Path) -> None:
    msg = _bad(_write(tmp_path / "d.csv", b"a,b,a\n1,2,3\n"), "duplicate column names: a")
    assert "rename" in msg


def test_duplicate_after_stripping_spaces(tmp_path: Path) -> None:
    _bad(_write(tmp_path / "d.csv", b"a, a \n1,2\n"), "duplicate column names: a")


def test_empty_column_name(tmp_path: Path) -> None:
    _bad(_write(tmp_path / "n.csv", b"a,,c\n1,2,3\n"), r"empty column name \(column 2\)")


def test_row_with_extra_field_is_not_an_index(tmp_path: Path) -> None:
    # pandas would silently turn the first column into the index here.
    _bad(_write(tmp_path / "r.csv", b"a,b\n1,2,3\n4,5,6\n"), "more fields than the 2")


def test_ragged_later_row(tmp_path: Path) -> None:
    _bad(_write(tmp_path / "r.csv", b"a,b\n1,2\n3,4,5\n"), "Expected 2 fields in line 3")


def test_missing_file(tmp_path: Path) -> None:
    _bad(tmp_path / "nope.csv", "file not found")


def test_missing_parquet(tmp_path: Path) -> None:
    _bad(tmp_path / "nope.parquet", "file not found")


def test_directory(tmp_path: Path) -> None:
    (tmp_path / "d.csv").mkdir()
    _bad(tmp_path / "d.csv", "got a directory")


def test_gz_that_is_not_gzip(tmp_path: Path) -> None:
    _bad(_write(tmp_path / "x.csv.gz", b"a,b\n1,2\n"), "not a valid gzip file")


def test_truncated_gzip(tmp_path: Path) -> None:
    data = gzip.compress(b"a,b\n" + b"1,2\n" * 1000)
    _bad(_write(tmp_path / "t.csv.gz", data[: len(data) // 2]), "not a valid gzip file")


def test_bad_parquet(tmp_path: Path) -> None:
    _bad(_write(tmp_path / "x.parquet", b"this is not parquet"), "cannot read Parquet file")


def test_empty_parquet(tmp_path: Path) -> None:
    path = tmp_path / "e.parquet"
    pd.DataFrame({"a": pd.Series([], dtype="int64")}).to_parquet(path)
    _bad(path, "no data rows")


def test_spreadsheet(tmp_path: Path) -> None:
    _bad(_write(tmp_path / "x.xlsx", b"PK\x03\x04"), "spreadsheet")


# --- good input ------------------------------------------------------------------------------

def test_single_row(tmp_path: Path) -> None:
    frame = read_table(_write(tmp_path / "one.csv", b"a,b\n1,x\n"))
    assert frame.shape == (1, 2)
    assert frame["a"].tolist() == ["1"] and frame["b"].tolist() == ["x"]


def test_single_column(tmp_path: Path) -> None:
    frame = read_table(_write(tmp_path / "c.csv", b"age\n30\n41\n"))
    assert list(frame.columns) == ["age"] and frame["age"].tolist() == ["30", "41"]


def test_gzip_tsv_bom_crlf(tmp_path: Path) -> None:
    raw = "\ufeffx\ty\r\n1\t2\r\n3\t4\r\n".encode()
    frame = read_table(_write(tmp_path / "t.tsv.gz", gzip.compress(raw)))
    assert list(frame.columns) == ["x", "y"] and frame["y"].tolist() == ["2", "4"]


def test_missing_markers_and_stripping(tmp_path: Path) -> None:
    frame = read_table(_write(tmp_path / "m.csv", b" a , b \n ?, x \nNA,y\n3,\n"))
    assert list(frame.columns) == ["a", "b"]
    assert frame["a"].iloc[0] is None and frame["a"].iloc[1] is None
    assert frame["a"].iloc[2] == "3"
    assert frame["b"].iloc[0] == "x" and pd.isna(frame["b"].iloc[2])


def test_infer_keeps_pandas_types_for_not_dp_paths(tmp_path: Path) -> None:
    frame = read_table(_write(tmp_path / "i.csv", b"a,b\n1,x\n2,y\n"), infer=True)
    assert frame["a"].tolist() == [1, 2]


def test_quoted_delimiters(tmp_path: Path) -> None:
    frame = read_table(_write(tmp_path / "q.csv", b'name,city\n"Kaya, A.",Rize\n'))
    assert frame["name"].tolist() == ["Kaya, A."]


def test_comma_file_with_semicolons_in_values(tmp_path: Path) -> None:
    frame = read_table(_write(tmp_path / "v.csv", b"name,notes\nx,a;b;c\ny,d;e\nz,f\n"))
    assert list(frame.columns) == ["name", "notes"] and frame["notes"].iloc[0] == "a;b;c"


def test_parquet_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "p.parquet"
    original = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    original.to_parquet(path)
    frame = read_table(path)
    assert frame["a"].tolist() == [1, 2] and frame["b"].tolist() == ["x", "y"]


def test_turkish_text(tmp_path: Path) -> None:
    frame = read_table(_write(tmp_path / "t.csv", "isim,şehir\nAyşe,İzmir\n".encode()))
    assert frame["şehir"].tolist() == ["İzmir"]


def test_require_columns() -> None:
    frame = pd.DataFrame({"age": [1], "sex": ["F"]})
    require_columns(frame, ["age", "sex"])
    with pytest.raises(InvalidInputError, match="unknown quasi-identifier 'zip'.*age, sex"):
        require_columns(frame, ["age", "zip"], field="quasi-identifier")
