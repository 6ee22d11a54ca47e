"""`privlab release`: JSON payload, seeded notes, and one-line errors with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from privlab.cli.main import main
from privlab.core.rng import SEEDED_NOTE


@pytest.fixture()
def table(tmp_path: Path) -> Path:
    path = tmp_path / "people.csv"
    rows = ["age,city,income"] + [f"{20 + i % 50},{'ab'[i % 2]}{i % 3},{1000 + 37 * i}"
                                  for i in range(200)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    code = main(["release", *args, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


@pytest.mark.parametrize("args", [
    ["count", "--column", "age"],
    ["sum", "--column", "income", "--bounds", "0:20000"],
    ["mean", "--column", "age", "--bounds", "0:100"],
    ["histogram", "--column", "city", "--categories", "a0,a1,a2,b0,b1,b2"],
    ["histogram", "--column", "age", "--bounds", "0:100", "--bins", "5"],
    ["quantile", "--column", "age", "--bounds", "0:100", "--q", "0.5"],
    ["sum", "--column", "income", "--bounds", "0:20000", "--mechanism", "gaussian",
     "--delta", "1e-6", "--public-size", "1000"],
])
def test_json_payload(table: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    stat, rest = args[0], args[1:]
    payload = run_json(capsys, stat, str(table), *rest, "--epsilon", "1.0", "--seed", "3")
    assert payload["statistic"] == stat
    assert {"value", "granularity", "guarantee"} <= set(payload)
    g = payload["guarantee"]
    assert {"epsilon", "delta", "neighbouring", "model", "mechanism"} <= set(g)
    assert g["epsilon"] == 1.0 and g["model"] == "central" and g["is_dp"]
    assert g["neighbouring"] == "add_remove_record" and g["mechanism"]
    gran = payload["granularity"]
    values = payload["value"] if isinstance(payload["value"], list) else [payload["value"]]
    assert all((v / gran) == round(v / gran) for v in values)  # on the declared grid
    assert SEEDED_NOTE in g["notes"]


def test_unseeded_release_has_no_seeded_note(table: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    payload = run_json(capsys, "count", str(table), "--column", "age", "--epsilon", "2")
    assert SEEDED_NOTE not in payload["guarantee"]["notes"]
    assert abs(payload["value"] - 200) < 40


def test_seeded_release_is_reproducible(table: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    args = ("mean", str(table), "--column", "age", "--bounds", "0:100", "--epsilon", "0.5",
            "--seed", "11")
    assert run_json(capsys, *args)["value"] == run_json(capsys, *args)["value"]


def test_human_output(table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["release", "count", str(table), "--column", "age", "--epsilon", "1"]) == 0
    out = capsys.readouterr().out
    assert "count of age" in out and "guarantee" in out and "-DP" in out


def _error(capsys: pytest.CaptureFixture[str], argv: list[str], *needles: str) -> str:
    code = main(argv)
    out = capsys.readouterr()
    assert code == 2, (code, out.err)
    lines = out.err.strip().splitlines()
    assert len(lines) == 1, out.err  # one line, no traceback
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("eps", ["0", "-1", "nan", "inf"])
def test_bad_epsilon(table: Path, capsys: pytest.CaptureFixture[str], eps: str) -> None:
    _error(capsys, ["release", "count", str(table), "--column", "age", "--epsilon", eps],
           "epsilon")


@pytest.mark.parametrize("delta", ["-0.1", "1", "1.5", "nan"])
def test_bad_delta(table: Path, capsys: pytest.CaptureFixture[str], delta: str) -> None:
    _error(capsys, ["release", "count", str(table), "--column", "age", "--epsilon", "1",
                    "--mechanism", "gaussian", "--delta", delta], "delta")


def test_gaussian_needs_delta(table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _error(capsys, ["release", "count", str(table), "--column", "age", "--epsilon", "1",
                    "--mechanism", "gaussian"], "--delta")


@pytest.mark.parametrize("stat", ["sum", "mean", "quantile"])
def test_missing_bounds(table: Path, capsys: pytest.CaptureFixture[str], stat: str) -> None:
    _error(capsys, ["release", stat, str(table), "--column", "age", "--epsilon", "1"],
           "--bounds")


@pytest.mark.parametrize("stat", ["sum", "mean"])
@pytest.mark.parametrize("bounds", ["10:5", "5:5", "1", "a:b", "0:inf", "1:2:3"])
def test_bad_bounds(table: Path, capsys: pytest.CaptureFixture[str], stat: str,
                    bounds: str) -> None:
    _error(capsys, ["release", stat, str(table), "--column", "age", "--epsilon", "1",
                    "--bounds", bounds], "bounds")


def test_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("")
    _error(capsys, ["release", "count", str(path), "--column", "age", "--epsilon", "1"],
           "empty")


def test_header_only_file_releases_noise_on_zero(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Regression (issue 21, item 6): a table of 0 rows was refused (exit 2) while its one-row
    neighbour released; now both release, with the same keys and guarantee."""
    empty, one = tmp_path / "header.csv", tmp_path / "one.csv"
    empty.write_text("age,city\n")
    one.write_text("age,city\n30,a0\n")
    for argv in (["count"], ["sum", "--bounds", "0:100"], ["mean", "--bounds", "0:100"],
                 ["quantile", "--bounds", "0:100"], ["histogram", "--bounds", "0:100"]):
        docs = [run_json(capsys, argv[0], str(path), "--column", "age", *argv[1:],
                         "--epsilon", "1", "--seed", "2") for path in (empty, one)]
        assert docs[0].keys() == docs[1].keys()
        assert docs[0]["guarantee"] == docs[1]["guarantee"]
        assert docs[0]["granularity"] == docs[1]["granularity"]
    doc = run_json(capsys, "histogram", str(empty), "--column", "city", "--categories",
                   "a0,b0", "--epsilon", "1", "--seed", "2")
    assert doc["details"]["labels"] == ["a0", "b0"]


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _error(capsys, ["release", "count", str(tmp_path / "nope.csv"), "--column", "age",
                    "--epsilon", "1"], "not found")


def test_unknown_column(table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = _error(capsys, ["release", "count", str(table), "--column", "salary",
                           "--epsilon", "1"], "salary")
    assert "age" in line  # names the columns that exist


def test_text_cells_count_as_missing_without_schema(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Regression (issue 21, item 6): without --schema one text cell in a numeric column
    exited 2 while its neighbour (that row removed) released. Text now counts as missing for
    every table (the note says so), so both exit 0 with the same guarantee."""
    clean, dirty = tmp_path / "clean.csv", tmp_path / "dirty.csv"
    clean.write_text("age,city\n30,a\n40,b\n")
    dirty.write_text("age,city\n30,a\n40,b\nforty,c\n")
    for argv in (["sum", "--bounds", "0:100"], ["mean", "--bounds", "0:100"],
                 ["quantile", "--bounds", "0:100"], ["histogram", "--bounds", "0:100"]):
        docs = []
        for path in (clean, dirty):
            code = main(["release", argv[0], str(path), "--column", "age", *argv[1:],
                         "--epsilon", "1", "--seed", "4", "--json"])
            out = capsys.readouterr()
            assert code == 0 and out.err == "", out.err
            docs.append(json.loads(out.out))
        assert docs[0]["guarantee"] == docs[1]["guarantee"]
        assert any("not numbers count as missing" in n for n in docs[0]["guarantee"]["notes"])
    # a wholly text column is the same case: every cell is missing (a sum of nothing)
    doc = run_json(capsys, "sum", str(clean), "--column", "city", "--bounds", "0:10",
                   "--epsilon", "1", "--seed", "4")
    assert doc["guarantee"]["is_dp"]


def test_delta_is_checked_against_the_public_size(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Regression (issue 21, item 1): the delta check used len(rows): 999 rows released and
    1,000 rows were refused (exit 4), and --allow-weak printed the exact row count. Now the
    check uses --public-size (or the schema's public_size) and the outcome and text are the
    same for 999 and 1,000 rows; without a public size the delta is refused (exit 2)."""
    paths = []
    for n in (999, 1000):
        path = tmp_path / f"rows{n}.csv"
        path.write_text("age\n" + "".join(f"{20 + i % 50}\n" for i in range(n)))
        paths.append(path)
    base = ["--column", "age", "--epsilon", "1", "--mechanism", "gaussian", "--delta", "1e-3",
            "--seed", "1", "--json"]
    for extra, expected in (([], 2), (["--allow-weak"], 0), (["--public-size", "500"], 0),
                            (["--public-size", "1000"], 4),
                            (["--public-size", "1000", "--allow-weak"], 0)):
        results = []
        for path in paths:
            code = main(["release", "count", str(path), *base, *extra])
            out = capsys.readouterr()
            results.append((code, out.err))
            assert "999" not in out.err
        assert results[0] == results[1], (extra, results)
        assert results[0][0] == expected, (extra, results)
        if expected == 2:
            assert "--public-size" in results[0][1] and len(results[0][1].splitlines()) == 1
        if extra == ["--public-size", "1000", "--allow-weak"]:
            assert "public size n = 1000" in results[0][1]
        if extra == ["--allow-weak"]:
            assert "without a check against 1/n" in results[0][1]
    # above 1e-3 it is refused whatever the size (exit 4), with or without one
    for extra in ([], ["--public-size", "100000"]):
        code = main(["release", "count", str(paths[0]), *base[:6], "--delta", "0.01", *extra])
        assert code == 4 and "above 0.001" in capsys.readouterr().err


def test_delta_uses_the_schema_public_size(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    schema = tmp_path / "s.yaml"
    schema.write_text("name: s\npublic_size: 100000\ncolumns:\n  age:\n    type: integer\n"
                      "    bounds: [0, 120]\n    missing: false\n")
    path = tmp_path / "t.csv"
    path.write_text("age\n30\n40\n")
    doc = run_json(capsys, "count", str(path), "--column", "age", "--epsilon", "1",
                   "--mechanism", "gaussian", "--delta", "1e-6", "--schema", str(schema))
    assert doc["guarantee"]["delta"] == 1e-6
    code = main(["release", "count", str(path), "--column", "age", "--epsilon", "1",
                 "--mechanism", "gaussian", "--delta", "1e-4", "--schema", str(schema)])
    err = capsys.readouterr().err
    assert code == 4 and "public size n = 100000" in err


def test_mean_prints_its_half_width(table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 23: `release mean` printed "none in closed form" for its 95% half-width."""
    payload = run_json(capsys, "mean", str(table), "--column", "age", "--bounds", "0:100",
                       "--epsilon", "1")
    # Laplace: sum scale 100 (sensitivity 50 at eps 0.5), count scale 2; z = ln 20
    import math

    z = math.log(20)
    want = (z * 100 + 50 * z * 2) / max(payload["details"]["noisy_count"], 1.0)
    # rel 1e-3: the sum sensitivity carries a float-rounding margin above 50
    assert payload["mean_half_width_95_approx"] == pytest.approx(want, rel=1e-3)
    assert main(["release", "mean", str(table), "--column", "age", "--bounds", "0:100", "-e",
                 "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "none in closed form" not in out
    assert "95% noise half-width: about " in out


@pytest.mark.parametrize("cats", ["A0,A1", "a0,a1"])
def test_category_histogram_says_matching_is_exact(table: Path, cats: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 23: categories matching no row (wrong case) gave pure noise with no note. The note
    is the same whether or not rows matched: saying "nothing matched" would reveal the data."""
    payload = run_json(capsys, "histogram", str(table), "--column", "city", "--categories",
                       cats, "-e", "1")
    assert "case-sensitive" in payload["category_matching"]
    assert main(["release", "histogram", str(table), "--column", "city", "--categories",
                 cats, "-e", "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "match exactly and case-sensitively" in out
    assert "not counted" in out
