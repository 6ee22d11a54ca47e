"""`privlab datasets list|export`: JSON output, formats, and atomic failure (exit 2, no file)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from privlab.cli.main import main
from privlab.data.census import generate_census
from privlab.data.datasets import load_movielens
from privlab.data.io import read_table


def test_list_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["datasets", "list", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    names = [d["name"] for d in payload["datasets"]]
    assert {"adult", "geolife", "movielens", "digits", "classification", "census"} <= set(names)


def test_list_human(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["datasets", "list"]) == 0
    assert "geolife" in capsys.readouterr().out


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".parquet"])
def test_export_census_formats(tmp_path: Path, suffix: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / f"census{suffix}"
    code = main(["datasets", "export", "census", str(path), "--rows", "40", "--seed", "3",
                 "--json"])
    assert code == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["rows"] == 40 and payload["columns"][0] == "tckno"
    frame = read_table(path)
    expected = generate_census(n=40, seed=3)
    assert frame.shape == expected.shape
    assert frame["surname"].tolist() == expected["surname"].tolist()
    assert frame["tckno"].astype(str).tolist() == expected["tckno"].tolist()
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temp files left


def test_export_adult_drop_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "adult.parquet"
    assert main(["datasets", "export", "adult", str(path), "--drop-missing", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 30_162
    assert pd.read_parquet(path).shape == (30_162, 15)


def test_export_movielens_movies_table(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "movies.csv"
    assert main(["datasets", "export", "movielens", str(path), "--table", "movies",
                 "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    expected = load_movielens(table="movies")
    assert payload["table"] == "movies" and payload["rows"] == len(expected) == 9742
    assert payload["columns"] == ["movieId", "title", "genres"]
    pd.testing.assert_frame_equal(pd.read_csv(path), expected)  # read_table strips cells
    assert main(["datasets", "export", "movielens", str(path), "--table", "ratings"]) == 0
    assert "(ratings)" in capsys.readouterr().out
    assert list(read_table(path).columns) == ["userId", "movieId", "rating", "timestamp"]


def test_export_replaces_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("old\n")
    assert main(["datasets", "export", "census", str(path), "--rows", "5"]) == 0
    assert len(read_table(path)) == 5


@pytest.mark.parametrize("name", ["out.xlsx", "out.json", "out"])
def test_unsupported_extension_writes_nothing(tmp_path: Path, name: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["datasets", "export", "census", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err
    assert "unsupported output format" in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_missing_directory_writes_nothing(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "no" / "such" / "dir" / "c.csv"
    assert main(["datasets", "export", "census", str(target)]) == 2
    assert "output directory does not exist" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_failed_export_keeps_old_file(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("old\n")
    assert main(["datasets", "export", "census", str(path), "--rows", "0"]) == 2
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["c.csv"]


@pytest.mark.parametrize("argv, message", [
    (["datasets", "export", "iris", "X"], "unknown dataset 'iris'"),
    (["datasets", "export", "census", "X", "--rows", "0"], "--rows must be >= 1"),
    (["datasets", "export", "census", "X", "--drop-missing"], "adult dataset only"),
    (["datasets", "export", "adult", "X", "--rows", "10"], "census and classification"),
    (["datasets", "export", "census", "X", "--seed", "-1"], "seed must be a non-negative"),
    (["datasets", "export", "census", "X", "--table", "movies"],
     "--table applies only to datasets with several tables (movielens); census has one"),
    (["datasets", "export", "movielens", "X", "--table", "tags"],
     "--table for movielens must be one of ratings, movies, got 'tags'"),
    (["datasets", "export", "iris", "X", "--table", "movies"], "unknown dataset 'iris'"),
])
def test_bad_options(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                     message: str) -> None:
    argv = [str(tmp_path / "out.csv") if a == "X" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
