"""Issue 23, one CLI grammar: a numeric range is `LO:HI` in every command (one parser); the
old `LO,HI` still works with exactly one warning line naming the new spelling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from privlab.cli.common import parse_column_ranges, parse_range
from privlab.cli.main import main
from privlab.errors import InvalidInputError


@pytest.mark.parametrize(("text", "expected"), [
    ("0:100", (0.0, 100.0)), ("-5:5", (-5.0, 5.0)), ("-10:-2.5", (-10.0, -2.5)),
    (" 1e-3 : 2 ", (1e-3, 2.0)), ("350:10", (350.0, 10.0)),  # a heading range may wrap
])
def test_range_is_lo_colon_hi(text, expected, capsys):
    assert parse_range(text, "--bounds") == expected
    assert capsys.readouterr().err == ""  # the one spelling warns about nothing


@pytest.mark.parametrize("text", ["1", "a:b", "1:2:3", ":5", "", "1,2,3", "1;2"])
def test_a_bad_range_is_one_error_naming_the_option_and_the_spelling(text):
    with pytest.raises(InvalidInputError, match=r"--heading must be a range LO:HI"):
        parse_range(text, "--heading")


def test_old_spelling_is_accepted_with_one_warning_line(capsys):
    assert parse_range("-5,5", "--rating-range") == (-5.0, 5.0)
    err = capsys.readouterr().err.splitlines()
    assert err == ["warning: --rating-range LO,HI is deprecated: use --rating-range LO:HI "
                   "(here --rating-range -5:5)"]


def test_per_column_ranges():
    assert parse_column_ranges("age=17:90, hours=-1:99", "--bounds") == {
        "age": (17.0, 90.0), "hours": (-1.0, 99.0)}
    assert parse_column_ranges(None, "--bounds") == {}
    for bad in ("age=17,90", "age:17:90", "=1:2", "age=1:2,age=3:4", "age=a:b"):
        with pytest.raises(InvalidInputError, match=r"--bounds"):
            parse_column_ranges(bad, "--bounds")


@pytest.fixture()
def table(tmp_path: Path) -> Path:
    path = tmp_path / "t.csv"
    path.write_text("x\n" + "\n".join(str(v) for v in range(-4, 5)) + "\n")
    return path


def _mean(capsys, table: Path, bounds: str) -> tuple[dict, list[str]]:
    code = main(["release", "mean", str(table), "--column", "x", "--bounds", bounds,
                 "--epsilon", "1", "--seed", "3", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out), out.err.splitlines()


def test_release_takes_a_negative_range_and_the_old_spelling_gives_the_same_release(
        table, capsys):
    new, err_new = _mean(capsys, table, "-5:5")
    old, err_old = _mean(capsys, table, "-5,5")
    assert new["value"] == old["value"] and new["guarantee"] == old["guarantee"]
    assert err_new == []
    assert len(err_old) == 1 and err_old[0].startswith("warning: --bounds LO,HI is deprecated")
    assert "--bounds -5:5" in err_old[0]


def test_federated_and_trajectory_ranges_use_the_one_parser(capsys):
    from privlab.cli.federated import _range
    from privlab.cli.trajectory import _filters

    assert _range("1:10") == (1.0, 10.0)
    assert _filters(None, None, "350:10", None).heading == (350.0, 10.0)
    assert capsys.readouterr().err == ""
    assert _filters(None, None, "350,10", None).heading == (350.0, 10.0)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "use --heading LO:HI" in err[0]
