"""Analysis plans: one budget split by weights, composed by the tightest valid accountant
(checked against dp-accounting's public API), previewed without the rows, charged once,
packaged once, rerunnable; a refused plan writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from privlab.cli.main import main
from privlab.errors import InvalidInputError
from privlab.measure.analysis import Analysis, plan_rho

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "analysis.yaml"


@pytest.fixture(scope="module")
def adult_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from privlab.data.datasets import load_dataset

    path = tmp_path_factory.mktemp("plan") / "adult.csv"
    load_dataset("adult").head(200).to_csv(path, index=False)
    return path


def _plan(delta: float = 0.0) -> Analysis:
    return (Analysis("adult", epsilon=1.0, delta=delta).add("count")
            .add("mean", "age", weight=2).add("histogram", "education"))


def test_weights_split_one_budget() -> None:
    ms = _plan().measurements()
    assert [m.epsilon for m in ms] == pytest.approx([0.25, 0.5, 0.25])
    total = _plan().composed()
    assert (total.epsilon, total.delta) == (pytest.approx(1.0), 0.0)
    assert "sum of epsilons" in total.accountant


def test_shares_charge_exactly_the_budget(adult_csv: Path, tmp_path: Path) -> None:
    """Nine shares of 1 sum to 1.0000000000000002 in floating point: the charge is the
    budget itself, so a ledger holding exactly 1 accepts the plan."""
    a = Analysis("adult", epsilon=1.0)
    for _ in range(9):
        a.add("count")
    assert sum(m.epsilon for m in a.measurements()) > 1.0
    led = _ledger(tmp_path, 1.0)
    a.run(adult_csv, ledger=str(led), principal="alice", rng=1)
    assert [float(e.epsilon) for e in _history(led)] == [1.0]


def test_pure_plan_matches_dp_accounting_pld() -> None:
    """dp-accounting's PLD of the same draws (each Laplace at its drawn scale / sensitivity)
    gives the sum of the drawn epsilons; the plan's claim is the sum of the planned ones, and
    a planned epsilon exceeds its drawn one only by the grid rounding of the scale."""
    import dp_accounting  # a core dependency: never skipped
    from dp_accounting.pld import pld_privacy_accountant

    a = _plan().add("sum", "hours-per-week")
    ms = a.measurements()
    draws = [n for m in ms for n in m.noise]
    events = [dp_accounting.LaplaceDpEvent(n.scale / n.sensitivity) for n in draws]
    interval = 1e-4
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
    acc.compose(dp_accounting.ComposedDpEvent(events))
    pld = acc.get_epsilon(1e-12)
    composed = a.composed(ms).epsilon
    rounding = sum(n.epsilon - n.sensitivity / n.scale for n in draws)
    assert pld <= composed + len(draws) * interval
    assert composed - pld <= rounding + len(draws) * interval


def test_gaussian_plan_matches_dp_accounting_rdp() -> None:
    """With Gaussian noise the plan composes by zCDP: the same as dp-accounting's RDP
    accountant on the same Gaussian events (its conversion over a fine grid of orders), and
    tighter than the sum of the items' (epsilon, delta)."""
    import dp_accounting  # a core dependency: never skipped
    from dp_accounting.rdp import rdp_privacy_accountant

    a = _plan(delta=1e-6)
    ms = a.measurements()
    assert all(n.mechanism == "gaussian" for m in ms for n in m.noise)
    events = [dp_accounting.GaussianDpEvent(n.scale / n.sensitivity) for m in ms
              for n in m.noise]
    acc = rdp_privacy_accountant.RdpAccountant(orders=[1 + k / 100 for k in range(1, 10000)])
    acc.compose(dp_accounting.ComposedDpEvent(events))
    total = a.composed(ms)
    assert total.delta == pytest.approx(1e-6)
    assert total.epsilon == pytest.approx(acc.get_epsilon(1e-6), rel=1e-5)
    assert total.epsilon < sum(m.epsilon for m in ms)
    assert plan_rho(ms) > 0


def test_preview_reads_no_row(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    missing = tmp_path / "no-such-file.csv"
    code = main(["release", "plan", str(missing), "--plan", str(EXAMPLE), "--preview",
                 "--json"])
    assert code == 0
    stated = json.loads(capsys.readouterr().out)
    assert stated["guarantee"]["epsilon"] == pytest.approx(1.0)
    assert [m["statistic"] for m in stated["measurements"]] == ["count", "mean", "histogram"]
    assert stated["measurements"][0]["half_width_95"] > 0
    assert not missing.exists()


def _ledger(tmp_path: Path, budget: float) -> Path:
    from privlab.core.ledger import BudgetLedger

    path = tmp_path / "budget.db"
    with BudgetLedger(str(path)) as book:
        book.set_budget("alice", budget)
    return path


def _history(path: Path) -> list:
    from privlab.core.ledger import BudgetLedger

    with BudgetLedger(str(path), create=False) as book:
        return book.history("alice")


def test_one_charge_of_the_total_and_one_package(adult_csv: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    led = _ledger(tmp_path, 3.0)
    out = tmp_path / "pkg"
    code = main(["release", "plan", str(adult_csv), "--plan", str(EXAMPLE), "--ledger",
                 str(led), "--principal", "alice", "-o", str(out), "--seed", "3", "--json"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    entries = _history(led)
    assert len(entries) == 1 and float(entries[0].epsilon) == pytest.approx(1.0)
    package = json.loads((out / "release.json").read_text())
    assert package == json.loads(json.dumps(printed))
    assert [r["statistic"] for r in package["releases"]] == ["count", "mean", "histogram"]
    assert [r["guarantee"]["epsilon"] for r in package["releases"]] == \
        pytest.approx([0.25, 0.5, 0.25])
    assert package["guarantee"]["epsilon"] == pytest.approx(1.0)
    assert package["ledger"]["remaining_epsilon"] == pytest.approx(2.0)


def test_package_reruns(adult_csv: Path, tmp_path: Path) -> None:
    first = _plan().run(adult_csv, rng=11, out=tmp_path)
    saved = json.loads((tmp_path / "release.json").read_text())
    again = Analysis.from_plan(saved["plan"]).run(adult_csv, rng=11)
    assert [r["value"] for r in again["releases"]] == [r["value"] for r in first["releases"]]


@pytest.mark.parametrize("edit, code", [
    ({"epsilon": 1.0}, 3),  # over the budget of 0.5
    ({"epsilon": 0.2, "column": "no_such_column"}, 2),
])
def test_refused_plans_write_nothing(adult_csv: Path, tmp_path: Path, edit: dict,
                                     code: int) -> None:
    import yaml

    plan = yaml.safe_load(EXAMPLE.read_text())
    plan["epsilon"] = edit["epsilon"]
    if "column" in edit:
        plan["statistics"][1]["column"] = edit["column"]
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(yaml.safe_dump(plan))
    led = _ledger(tmp_path, 0.5)
    out = tmp_path / "pkg"
    got = main(["release", "plan", str(adult_csv), "--plan", str(plan_file), "--ledger",
                str(led), "--principal", "alice", "-o", str(out), "--seed", "1"])
    assert got == code
    assert not out.exists()
    assert _history(led) == []


def test_plan_refuses_unknown_keys_and_statistics() -> None:
    with pytest.raises(InvalidInputError, match="unknown plan key 'epsilons'"):
        Analysis.from_plan({"schema": "adult", "epsilons": 1, "statistics": []})
    with pytest.raises(InvalidInputError, match="statistics item 1: unknown key 'colum'"):
        Analysis.from_plan({"schema": "adult", "statistics": [{"statistic": "count",
                                                               "colum": "age"}]})
    with pytest.raises(InvalidInputError, match="weight"):
        Analysis("adult").add("count", weight=0)
    with pytest.raises(InvalidInputError):
        Analysis("adult").add("median", "age")


def test_invalid_row_refused_before_the_charge(adult_csv: Path, tmp_path: Path) -> None:
    frame = pd.read_csv(adult_csv)
    frame["age"] = frame["age"].astype(object)
    frame.loc[0, "age"] = "old"
    bad = tmp_path / "bad.csv"
    frame.to_csv(bad, index=False)
    led = _ledger(tmp_path, 3.0)
    assert main(["release", "plan", str(bad), "--plan", str(EXAMPLE), "--ledger", str(led),
                 "--principal", "alice", "--seed", "1"]) == 2
    assert _history(led) == []


def test_text_output_and_person_bound_from_the_command_line(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture
                                                            ) -> None:
    """A person-level schema needs the bound M: refused (exit 2, nothing read) without one,
    released per person with `--max-rows-per-unit`; the console names each statistic."""
    from privlab.data.datasets import load_dataset

    frame = load_dataset("adult").head(60)
    frame["pid"] = [i // 3 for i in range(len(frame))]
    spec = {"name": "adult-people", "privacy_unit": "pid",
            "columns": {"pid": {"type": "identifier"},
                        "age": {"type": "integer", "bounds": [17, 90]}}}
    (tmp_path / "schema.json").write_text(json.dumps(spec))
    frame[["pid", "age"]].to_csv(tmp_path / "people.csv", index=False)
    (tmp_path / "plan.yaml").write_text("epsilon: 1\nstatistics:\n  - statistic: count\n"
                                        "  - statistic: mean\n    column: age\n")
    argv = ["release", "plan", str(tmp_path / "people.csv"), "--plan",
            str(tmp_path / "plan.yaml"), "--schema", str(tmp_path / "schema.json"),
            "--seed", "2"]
    assert main(argv) == 2
    assert "max_rows_per_unit" in capsys.readouterr().err
    assert main([*argv, "--max-rows-per-unit", "3"]) == 0
    text = capsys.readouterr().out
    assert "(1)-DP in total" in text and "count of rows:" in text and "mean of age:" in text
