"""`privlab budget ...` and `privlab release ... --ledger`: exit codes and what gets printed."""

from __future__ import annotations

import json
import sqlite3

import pytest

from privlab.cli.main import main
from privlab.core.ledger import BudgetLedger


def run_json(capsys, *argv: str) -> dict:
    capsys.readouterr()
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "people.csv"
    path.write_text("age,city\n" + "".join(f"{20 + i % 50},c{i % 3}\n" for i in range(200)))
    return path


def test_set_show_history_verify(tmp_path, capsys):
    ledger = str(tmp_path / "budget.db")
    out = run_json(capsys, "budget", "set", "--ledger", ledger, "--principal", "alice",
                   "--epsilon", "1", "--delta", "1e-6")
    assert out["budget_epsilon"] == 1.0 and out["remaining_epsilon"] == 1.0
    assert out["budget_delta"] == 1e-6 and out["n_charges"] == 0
    BudgetLedger(ledger).charge("alice", 0.3, description="by hand")
    run_json(capsys, "budget", "set", "--ledger", ledger, "--principal", "bob", "--epsilon", "2")

    shown = run_json(capsys, "budget", "show", "--ledger", ledger)
    assert [p["principal"] for p in shown["principals"]] == ["alice", "bob"]
    alice = shown["principals"][0]
    assert (alice["spent_epsilon"], alice["remaining_epsilon"]) == (0.3, 0.7)
    assert alice["exact"]["remaining_epsilon"] == "0.7"
    assert "sequential" in shown["accountant"]
    one = run_json(capsys, "budget", "show", "--ledger", ledger, "--principal", "bob")
    assert [p["principal"] for p in one["principals"]] == ["bob"]

    hist = run_json(capsys, "budget", "history", "--ledger", ledger, "--principal", "alice")
    assert [(e["epsilon"], e["description"]) for e in hist["entries"]] == [(0.3, "by hand")]
    assert [c["budget_epsilon"] for c in hist["budget_changes"]] == [1.0]
    assert len(run_json(capsys, "budget", "history", "--ledger", ledger)["budget_changes"]) == 2

    assert run_json(capsys, "budget", "verify", "--ledger", ledger)["ok"] is True

    # human output names the numbers too
    assert main(["budget", "show", "--ledger", ledger]) == 0
    assert "alice" in capsys.readouterr().out
    assert main(["budget", "history", "--ledger", ledger]) == 0
    assert "by hand" in capsys.readouterr().out


def test_budget_errors(tmp_path, capsys):
    ledger = str(tmp_path / "budget.db")
    assert main(["budget", "show", "--ledger", ledger]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "budget.db").exists()  # show never creates a ledger
    assert main(["budget", "set", "--ledger", ledger, "--principal", "a", "--epsilon",
                 "abc"]) == 2
    assert "epsilon" in capsys.readouterr().err
    assert main(["budget", "set", "--ledger", ledger, "--principal", "a", "--epsilon", "1",
                 "--delta", "1"]) == 2
    assert main(["budget", "set", "--ledger", ledger, "--principal", "a", "--epsilon", "1"]) == 0
    BudgetLedger(ledger).charge("a", 0.6)
    capsys.readouterr()
    assert main(["budget", "set", "--ledger", ledger, "--principal", "a", "--epsilon",
                 "0.5"]) == 2
    assert "already spent" in capsys.readouterr().err
    assert main(["budget", "show", "--ledger", ledger, "--principal", "zed"]) == 2
    assert "privlab budget set" in capsys.readouterr().err

    con = sqlite3.connect(ledger)
    with con:
        con.execute("UPDATE privlab_principals SET spent_epsilon = '0'")
    con.close()
    assert main(["budget", "verify", "--ledger", ledger]) == 1
    assert "inconsistent" in capsys.readouterr().err


def test_release_charges_then_refuses_with_exit_3(tmp_path, data_file, capsys):
    ledger = str(tmp_path / "budget.db")
    assert main(["budget", "set", "--ledger", ledger, "--principal", "p",
                 "--epsilon", "1"]) == 0
    out = run_json(capsys, "release", "count", str(data_file), "--column", "age",
                   "--epsilon", "0.6", "--ledger", ledger, "--principal", "p", "--seed", "3")
    assert out["ledger"]["remaining_epsilon"] == 0.4
    assert isinstance(out["value"], (int, float))
    entry = BudgetLedger(ledger).history("p")[0]
    assert entry.entry_id == out["ledger"]["entry_id"] and entry.epsilon == 0.6
    assert "count of age" in entry.description

    for extra in ([], ["--json"]):
        capsys.readouterr()
        code = main(["release", "count", str(data_file), "--column", "age", "--epsilon", "0.5",
                     "--ledger", ledger, "--principal", "p", "--seed", "3", *extra])
        captured = capsys.readouterr()
        assert code == 3
        assert captured.out == ""  # no value, no partial JSON
        assert "exceed" in captured.err and "nothing was charged" in captured.err
    assert len(BudgetLedger(ledger).history("p")) == 1
    assert BudgetLedger(ledger).remaining("p") == (0.4, 0.0)

    # the rest of the budget is still usable, exactly
    assert main(["release", "count", str(data_file), "--column", "age", "--epsilon", "0.4",
                 "--ledger", ledger, "--principal", "p", "--seed", "3"]) == 0
    assert BudgetLedger(ledger).remaining("p") == (0.0, 0.0)


def test_release_unknown_principal_is_exit_2(tmp_path, data_file, capsys):
    ledger = str(tmp_path / "budget.db")
    code = main(["release", "count", str(data_file), "--column", "age", "--epsilon", "0.5",
                 "--ledger", ledger, "--principal", "ghost"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert "privlab budget set" in captured.err


@pytest.mark.parametrize("args", [["--epsilon", "-1"], ["--epsilon", "1", "--delta", "1"],
                                  ["--epsilon", "abc"]])
def test_refused_budget_set_leaves_no_ledger_or_lock(tmp_path, args) -> None:
    """Issue 23: nothing written on refusal (was: new.db and new.db-writer.lock left behind)."""
    from privlab.cli.main import main

    rc = main(["budget", "set", "--ledger", str(tmp_path / "new.db"), "--principal", "ana",
               *args])
    assert rc == 2
    assert list(tmp_path.iterdir()) == []


def test_refused_release_on_a_new_ledger_leaves_no_ledger_or_lock(tmp_path, data_file,
                                                                   capsys) -> None:
    """Issue 29: `release --ledger new.db --principal alice` with no budget set is refused
    (exit 2, one line naming `privlab budget set`) and, as for `budget set`, leaves no
    new.db or new.db-writer.lock behind."""
    before = set(tmp_path.iterdir())
    code = main(["release", "count", str(data_file), "--column", "age", "--epsilon", "0.5",
                 "--ledger", str(tmp_path / "new.db"), "--principal", "alice"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1 and "privlab budget set" in captured.err
    assert set(tmp_path.iterdir()) == before
