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
    ["sum", "--column", "income", "--bounds", "0,20000"],
    ["mean", "--column", "age", "--bounds", "0,100"],
    ["histogram", "--column", "city", "--categories", "a0,a1,a2,b0,b1,b2"],
    ["histogram", "--column", "age", "--bounds", "0,100", "--bins", "5"],
    ["quantile", "--column", "age", "--bounds", "0,100", "--q", "0.5"],
    ["sum", "--column", "income", "--bounds", "0,20000", "--mechanism", "gaussian",
     "--delta", "1e-6"],
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
    args = ("mean", str(table), "--column", "age", "--bounds", "0,100", "--epsilon", "0.5",
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
@pytest.mark.parametrize("bounds", ["10,5", "5,5", "1", "a,b", "0,inf"])
def test_bad_bounds(table: Path, capsys: pytest.CaptureFixture[str], stat: str,
                    bounds: str) -> None:
    _error(capsys, ["release", stat, str(table), "--column", "age", "--epsilon", "1",
                    "--bounds", bounds], "bounds")


def test_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("")
    _error(capsys, ["release", "count", str(path), "--column", "age", "--epsilon", "1"],
           "empty")


def test_header_only_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "header.csv"
    path.write_text("age,city\n")
    _error(capsys, ["release", "count", str(path), "--column", "age", "--epsilon", "1"],
           "no data rows")


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _error(capsys, ["release", "count", str(tmp_path / "nope.csv"), "--column", "age",
                    "--epsilon", "1"], "not found")


def test_unknown_column(table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = _error(capsys, ["release", "count", str(table), "--column", "salary",
                           "--epsilon", "1"], "salary")
    assert "age" in line  # names the columns that exist


def test_non_numeric_column(table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _error(capsys, ["release", "sum", str(table), "--column", "city", "--epsilon", "1",
                    "--bounds", "0,10"], "not numeric")


def test_numeric_histogram_of_text_column(table: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    _error(capsys, ["release", "histogram", str(table), "--column", "city", "--epsilon", "1",
                    "--bounds", "0,10"], "not numeric")


def test_non_utf8_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes("name,age\nJos\u00e9,31\nG\u00fcl,40\n".encode("latin-1"))
    _error(capsys, ["release", "count", str(path), "--column", "age", "--epsilon", "1"],
           "UTF-8")


def test_histogram_needs_a_domain(table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _error(capsys, ["release", "histogram", str(table), "--column", "age", "--epsilon", "1"],
           "domain")


def test_quantile_rejects_mechanism(table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _error(capsys, ["release", "quantile", str(table), "--column", "age", "--epsilon", "1",
                    "--bounds", "0,100", "--mechanism", "gaussian", "--delta", "1e-6"],
           "exponential mechanism")


def test_delta_without_gaussian(table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _error(capsys, ["release", "sum", str(table), "--column", "age", "--epsilon", "1",
                    "--bounds", "0,100", "--mechanism", "laplace", "--delta", "1e-6"],
           "--delta")


def test_geometric_sum_needs_integer_bounds(table: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    _error(capsys, ["release", "sum", str(table), "--column", "age", "--epsilon", "1",
                    "--bounds", "0,99.5", "--mechanism", "geometric"], "integer bounds")


def test_negative_seed(table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _error(capsys, ["release", "count", str(table), "--column", "age", "--epsilon", "1",
                    "--seed", "-4"], "seed")


def test_json_error_keeps_stdout_clean(table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["release", "count", str(table), "--column", "nope", "--epsilon", "1",
                 "--json"])
    out = capsys.readouterr()
    assert code == 2 and out.out == ""


@pytest.mark.parametrize("extra", [
    ["sum", "--bounds", "10,0"],
    ["histogram"],
    ["histogram", "--bounds", "0,100", "--bins", "0"],
    ["quantile", "--bounds", "0,100", "--q", "1.5"],
    ["sum", "--bounds", "0,99.5", "--mechanism", "geometric"],
])
def test_refused_release_charges_nothing(table: Path, tmp_path: Path, extra: list[str],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from privlab.core.ledger import BudgetLedger

    ledger = str(tmp_path / "budget.sqlite")
    assert main(["budget", "set", "--ledger", ledger, "--principal", "ana",
                 "--epsilon", "3"]) == 0
    stat, rest = extra[0], extra[1:]
    _error(capsys, ["release", stat, str(table), "--column", "age", "--epsilon", "1",
                    "--ledger", ledger, "--principal", "ana", *rest])
    assert BudgetLedger(ledger).remaining("ana")[0] == pytest.approx(3.0)
    # and a valid release is charged
    assert main(["release", "count", str(table), "--column", "age", "--epsilon", "1",
                 "--ledger", ledger, "--principal", "ana"]) == 0
    assert BudgetLedger(ledger).remaining("ana")[0] == pytest.approx(2.0)
