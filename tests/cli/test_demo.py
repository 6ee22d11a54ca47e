"""`privlab demo`, the README's main job: assessment + ledger-charged DP releases + report."""

import json
import sys

import pytest

from privlab.cli.main import main


def test_demo_writes_summary_report_and_charges_every_release(tmp_path, capsys):
    out = tmp_path / "demo"
    code = main(["demo", "--out", str(out), "--epsilon", "0.25", "--budget", "2", "--seed", "7",
                 "--epsilons", "none", "--json"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    saved = json.loads((out / "summary.json").read_text())
    assert printed == saved
    releases = saved["releases"]
    assert len(releases) == 7  # the registry's stddev is the seventh (issue 31)
    # Each release was charged 0.25 in the ledger: 2 - 7 * 0.25 = 0.25 remains, exactly.
    assert saved["ledger"]["remaining_epsilon"] == 0.25
    assert [r["remaining_epsilon"] for r in releases] == [1.75, 1.5, 1.25, 1.0, 0.75, 0.5,
                                                          0.25]
    for r in releases:
        # Regression (issue 21, item 7): the record prints the exact true_value beside the
        # noisy value, so its guarantee names it in not_covered and is_dp is false (it said
        # is_dp true with an empty not_covered); the claim on the value stays epsilon 0.25.
        g = r["guarantee"]
        assert "true_value" in r
        assert g["is_dp"] is False and any(c.startswith("true_value") for c in g["not_covered"])
        assert g["headline"].startswith("NOT differentially private") and g["epsilon"] == 0.25
        assert g["covers"] and "true_value" not in " ".join(g["covers"])
        g = r["granularity"]
        values = r["value"] if isinstance(r["value"], list) else [r["value"]]
        assert all(float(v / g).is_integer() for v in values)
    # The seeded demo says its noise is for testing only.
    assert any("seeded" in n for n in releases[0]["guarantee"]["notes"])
    names = [a["name"] for a in saved["assessment"]["attributes"]]
    assert "salary" not in names and len(names) == 14
    tiers = {a["name"]: a["tier"] for a in saved["assessment"]["attributes"]}
    assert tiers["fnlwgt"] == "hide" and tiers["capital-loss"] == "none"
    assert saved["assessment"]["guarantee"]["is_dp"] is False
    # exact statistics shown beside the noisy ones are named as not protected
    unprotected = " ".join(saved["not_protected"])
    assert "true_value" in unprotected and "rows" in unprotected
    html = (out / "report.html").read_text()
    assert "DP releases" in html and "richness" in html.lower()
    assert html.count("is_dp false (not covered: true value)") == len(releases)
    assert "is_dp true" not in html
    assert "choose_epsilon" not in saved and not (out / "choose_epsilon.html").exists()


def test_demo_chooses_epsilon_by_default(tmp_path, capsys):
    pytest.importorskip("opacus", reason="needs the ml extra: pip install -e '.[ml]'")
    out = tmp_path / "demo"
    # issue 23: the epsilon step also runs in a folder an earlier demo left behind
    assert main(["demo", "--out", str(out), "--seed", "2", "--epsilons", "none", "--json"]) == 0
    capsys.readouterr()
    # the default grid, shortened to one epsilon to keep the test quick
    code = main(["demo", "--out", str(out), "--seed", "3", "--epsilons", "4", "--json"])
    assert code == 0
    saved = json.loads(capsys.readouterr().out)
    assert saved["ledger"]["remaining_epsilon"] == 1.5  # 5 - 7 x 0.5: this run's charges only
    assert saved["ledger"]["fresh"] and saved["ledger"]["replaced_previous"]
    ce = saved["choose_epsilon"]
    assert ce["attacks"] == ["loss", "shadow", "lira"] and ce["policy"] == "finance"
    assert [r["epsilon"] for r in ce["per_epsilon"]] == [4.0]
    chosen = ce["chosen_epsilon"]
    # the answer and its stated reason agree: a refusal says so, a choice names its epsilon
    if chosen is None:  # none acceptable, or the models learnt nothing
        assert ce["reason"].startswith(("no epsilon", "no recommendation"))
    else:
        assert chosen == 4.0 and "epsilon 4 " in ce["reason"]
    g = ce["per_epsilon"][0]["guarantee"]
    assert g["is_dp"] and g["epsilon"] <= 4.0 + 1e-9
    assert (out / "choose_epsilon.html").exists()
    html = (out / "report.html").read_text()
    assert "Choosing epsilon" in html and "choose_epsilon.html" in html


def test_demo_without_torch_skips_only_the_epsilon_step(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    out = tmp_path / "demo"
    code = main(["demo", "--out", str(out), "--seed", "3", "--json"])
    assert code == 0
    saved = json.loads(capsys.readouterr().out)
    assert "ml extra" in saved["choose_epsilon"]["skipped"]
    assert len(saved["releases"]) == 7
    assert "Skipped" in (out / "report.html").read_text()


def test_demo_refuses_a_budget_too_small_for_its_releases(tmp_path, capsys):
    code = main(["demo", "--out", str(tmp_path / "d"), "--epsilon", "1", "--budget", "2"])
    assert code == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "--budget" in err[0]
    # refused before anything was written (it left a charged ledger behind)
    assert not (tmp_path / "d").exists()


def _ledger_history(path, principal="demo-analyst"):
    from privlab.core.ledger import BudgetLedger

    with BudgetLedger(str(path), create=False) as ledger:
        return ledger.principals(), ledger.history(), ledger.remaining(principal)[0]


def test_demo_runs_twice_in_one_folder_with_a_fresh_ledger(tmp_path, capsys):
    # Regression (issue 23): the second run charged the first run's leftover budget and
    # failed with exit 3; the old reports stayed.
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--seed", "1", "--epsilons", "none"]) == 0
    first = capsys.readouterr().out
    assert "started a fresh demo ledger" in first and "replaced" not in first
    (out / "choose_epsilon.html").write_text("an earlier run's epsilon report")
    report_before = (out / "report.html").read_text()
    for seed in ("2", "3"):
        assert main(["demo", "--out", str(out), "--seed", seed, "--epsilons", "none"]) == 0
        printed = capsys.readouterr().out
        assert "replaced the previous demo ledger: started a fresh demo ledger" in printed
        principals, history, remaining = _ledger_history(out / "budget.db")
        # this run's seven charges only, from the full budget of 5
        assert principals == ["demo-analyst"] and len(history) == 7 and remaining == 1.5
    assert json.loads((out / "summary.json").read_text())["ledger"]["remaining_epsilon"] == 1.5
    assert (out / "report.html").read_text() != report_before  # new noise, new report
    # a report of a step this run did not make is not left behind as if it were this run's
    assert not (out / "choose_epsilon.html").exists()
    assert not [p.name for p in out.iterdir() if ".fresh-" in p.name]


def test_demo_never_replaces_a_users_ledger(tmp_path, capsys):
    from privlab.core.ledger import BudgetLedger

    out = tmp_path / "work"
    out.mkdir()
    with BudgetLedger(str(out / "budget.db")) as ledger:
        ledger.set_budget("alice", 3.0)
        ledger.charge("alice", 1.0, description="a real release")
    code = main(["demo", "--out", str(out), "--epsilons", "none"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out" in err[0] and "not a demo ledger" in err[0]
    principals, history, _ = _ledger_history(out / "budget.db", "alice")
    assert principals == ["alice"] and len(history) == 1
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith("budget.db")) == []

