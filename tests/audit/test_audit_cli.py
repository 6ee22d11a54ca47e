"""`privlab audit` end to end on a small table (tiny MLP, few epochs), JSON shape and errors."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")

from privlab.cli.main import main  # noqa: E402


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    from sklearn.datasets import make_classification

    x, y = make_classification(700, 12, n_informative=6, random_state=3)
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(12)])
    frame["colour"] = np.where(x[:, 0] > 0, "red", "blue")
    frame["label"] = np.where(y == 1, "yes", "no")
    folder = tmp_path_factory.mktemp("audit")
    path = folder / "t.csv"
    frame.to_csv(path, index=False)
    cols = {f"f{i}": {"type": "numeric", "bounds": [-50, 50], "missing": False}
            for i in range(12)}
    cols["colour"] = {"type": "categorical", "categories": ["red", "blue", "green"]}
    cols["label"] = {"type": "categorical", "categories": ["no", "yes"], "missing": False}
    (folder / "t.json").write_text(json.dumps({"name": "t", "columns": cols}))
    return path


def _schema(table):
    return ["--schema", str(table.with_suffix(".json"))]


BASE = ["--target", "label", "--members", "150", "--epochs", "4", "--batch-size", "32",
        "--shadow-models", "1", "--lira-models", "4", "--lr", "0.01", "--json"]


def _run(capsys, args):
    code = main(["audit", *args])
    out = capsys.readouterr()
    return code, out


def test_non_private_audit_json(table, capsys, tmp_path):
    html = tmp_path / "r.html"
    code, out = _run(capsys, [str(table), *_schema(table), *BASE, "--no-dp",
                              "--attacks", "loss,confidence,mentr,shadow,lira",
                              "--report", str(html)])
    assert code == 0, out.err
    doc = json.loads(out.out)
    assert doc["guarantee"]["is_dp"] is False
    assert doc["audit_guarantee"]["is_dp"] is False
    assert set(doc["attacks"]) == {"loss", "confidence", "mentr", "shadow", "lira"}
    for name, a in doc["attacks"].items():
        assert 0 <= a["auc"] <= 1 and 0 <= a["advantage"] <= 1, name
        assert a["tpr_at_fpr"]["0.001"] is None  # 150 non-members cannot support 0.1%
        assert a["tpr_at_fpr"]["0.01"] is not None and a["tpr_at_fpr"]["0.1"] is not None
        assert a["counts"]["trials"] == 300
        e = a["empirical_epsilon"]
        assert e["lower"] == e["clopper_pearson"][0] and len(e["bayesian"]) == 2
    assert doc["summary"]["accounted_epsilon"] is None
    assert doc["data"]["members"] == 150 and doc["data"]["nonmembers"] == 150
    # the audit is labelled as no release; features from the schema: 12 + 3 colours + missing
    assert doc["release"] is False and "summary" in doc["audit_guarantee"]["not_covered"]
    assert doc["data"]["features"] == 16 and doc["data"]["classes"] == ["no", "yes"]
    assert "<html" in html.read_text().lower() and "ROC" in html.read_text()
    first = _plain_words(html.read_text())
    assert "WITHOUT differential privacy" in first
    _check_plain_facts(first, doc)


def _plain_words(page: str) -> str:
    """The text of the report's first section, which must be 'In plain words'."""
    import re

    headings = re.findall(r"<h2>(.*?)</h2>", page)
    assert headings[:2] == ["In plain words", "Summary"], headings
    return page[page.index("<h2>In plain words</h2>"):page.index("<h2>Summary</h2>")]


def _check_plain_facts(first: str, doc: dict) -> None:
    """What was measured, what an attacker could learn, how sure we are: rounded figures
    that match the JSON, and the terms defined."""
    import re

    for words in ("What was measured", "What an attacker could learn", "How sure we are",
                  "membership attack", "a coin toss does so 50%", "the empirical epsilon"):
        assert words in first, words
    d, s = doc["data"], doc["summary"]
    assert f"records of {d['members']} people" in first
    assert f"from {d['nonmembers']} similar people" in first
    name, best = max(doc["attacks"].items(), key=lambda kv: kv[1]["auc"])
    assert f"strongest attack ({name}) ranked a member above a non-member " \
           f"{best['auc']:.0%} of the time" in first
    lower = s["empirical_epsilon_lower"]
    assert f"real epsilon is at least {lower:.2g}" in first
    assert f"never show more than {s['max_attainable_lower_bound']:.2g}" in first
    assert f"with {s['level']:.0%} confidence" in first
    assert not re.search(r"\d\.\d{3,}", first)  # rounded for people


def test_dp_audit_reports_accounted_epsilon_and_a_consistent_bound(table, capsys, tmp_path):
    html = tmp_path / "dp.html"
    code, out = _run(capsys, [str(table), *_schema(table), *BASE, "--epsilon", "1",
                              "--attacks", "loss", "--fprs", "0.01,0.1", "--report", str(html)])
    assert code == 0, out.err
    doc = json.loads(out.out)
    g = doc["guarantee"]
    assert g["is_dp"] and g["epsilon"] <= 1.0 * 1.001 and g["delta"] == 1e-5
    assert g["not_covered"] == [] and "target model weights" in g["covers"]
    # regression (issue 21): the rate is batch / --members (public), not the rows passed
    assert any("batch_size / public_size 150" in n for n in g["notes"])
    assert not any("number of rows passed" in n for n in g["notes"])
    s = doc["summary"]
    assert s["accounted_epsilon"] == g["epsilon"]
    assert s["consistent"] is True and s["empirical_epsilon_lower"] <= g["epsilon"]
    assert set(doc["attacks"]["loss"]["tpr_at_fpr"]) == {"0.01", "0.1"}
    first = _plain_words(html.read_text())
    _check_plain_facts(first, doc)
    # regression (issue 29, item 7): a DP-trained model's audit page shows exact member
    # counts, accuracies, AUCs and ROC curves, so it carries the NOT-DP banner
    assert 'id="not-dp"' in html.read_text()
    assert "NOT differentially private: this page shows exact values" in html.read_text()
    assert f"with differential privacy (DP-SGD) at epsilon {g['epsilon']:.2g}" in first
    assert f"below the promised epsilon {g['epsilon']:.2g}, as it must be" in first
    assert "ALARM" not in first


@pytest.mark.parametrize("args, needle", [
    (["--epsilon", "1", "--no-dp"], "exactly one of --epsilon"),
    ([], "exactly one of --epsilon"),
    (["--no-dp", "--attacks", "loss,magic"], "--attacks must be"),
    (["--no-dp", "--fprs", "0.001"], "FPR 0.001 needs at least 1000 non-members"),
    (["--no-dp", "--attacks", "lira", "--lira-models", "3"], "must be even"),
    (["--no-dp", "--members", "400"], "--members 400 is too large"),
])
def test_bad_input_gives_one_line_errors(table, capsys, args, needle):
    argv = [str(table), *_schema(table), "--target", "label", "--members", "150", "--epochs",
            "1", "--json", *args]
    code, out = _run(capsys, argv)
    assert code == 2
    lines = [ln for ln in out.err.strip().splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and needle in lines[0], out.err


def test_missing_target_and_duplicates(tmp_path, capsys):
    frame = pd.DataFrame({"a": [1, 2] * 30, "y": ["p", "q"] * 30})
    path = tmp_path / "dup.csv"
    frame.to_csv(path, index=False)
    code, out = _run(capsys, [str(path), "--no-dp", "--json"])
    assert code == 2 and "--target is required" in out.err
    code, out = _run(capsys, [str(path), "--target", "y", "--no-dp", "--json"])
    assert code == 2 and "privlab schema draft" in out.err
    code, out = _run(capsys, [str(path), "--target", "y", "--no-dp", "--json",
                              "--unsafe-encoding"])
    assert code == 2 and "too few distinct rows" in out.err and "2" not in out.err


def test_unsafe_encoding_and_data_sized_members_are_not_covered(table, capsys):
    code, out = _run(capsys, [str(table), "--unsafe-encoding", "--target", "label",
                              "--epochs", "2", "--batch-size", "32", "--attacks", "loss",
                              "--epsilon", "2", "--json"])
    assert code == 0, out.err
    g = json.loads(out.out)["guarantee"]
    assert g["is_dp"] is False and g["headline"].startswith("NOT differentially private")
    assert any(c.startswith("feature encoding") for c in g["not_covered"])
    assert any(c.startswith("sample_rate") for c in g["not_covered"])
    # regression: without --members the rate's size is the exact member count; the note must
    # neither call it public nor print it
    doc = json.loads(out.out)
    rate = [n for n in g["notes"] if n.startswith("sample rate")]
    assert rate and not any("public" in n.replace("no public count", "") for n in rate)
    assert not any(str(doc["data"]["members"]) in n for n in rate), rate


def test_lm_audit_quick_json(capsys):
    pytest.importorskip("transformers", reason="needs the ml extra: pip install -e '.[ml]'")
    code, out = _run(capsys, ["lm", "--epsilon", "8", "--quick", "--json", "--delta", "1e-4"])
    assert code == 0, out.err
    doc = json.loads(out.out)
    g = doc["guarantee"]
    assert g["is_dp"] and g["epsilon"] <= 8 * 1.001 and g["delta"] == 1e-4
    assert doc["extraction"]["of"] == 15 and 0 <= doc["extraction"]["extracted"] <= 15
    assert len(doc["exposure"]) == 15 and doc["quick"] is True
    sl = doc["secret_level_guarantee"]
    assert sl["repeats"] == 10 and sl["epsilon"] == pytest.approx(10 * g["epsilon"])


def test_target_beside_majority_baseline_and_one_line_warning(table, tmp_path, capsys):
    """Issue 23: the target's accuracies sit beside the majority-class baseline; a target on
    features without signal is called "no better than always predicting ..."; the --no-dp
    warning is one clean line, not Python's `file:line: UserWarning` plus source line."""
    code, out = _run(capsys, [str(table), *_schema(table), *BASE, "--no-dp",
                              "--attacks", "loss"])
    assert code == 0, out.err
    doc = json.loads(out.out)
    base = doc["model"]["baseline"]
    assert base["majority_class"] in ("no", "yes")
    assert base["better_than_baseline"] is True  # make_classification has signal
    assert doc["model"]["test_accuracy"] > base["test_accuracy"]
    assert "model.baseline" in doc["audit_guarantee"]["not_covered"]
    assert "UserWarning" not in out.err
    assert out.err.strip() == ("warning: the audited model was trained WITHOUT differential "
                               "privacy (--no-dp)")
    rng = np.random.default_rng(1)
    n = 600
    noise = pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"])
    noise["label"] = np.where(rng.random(n) < 0.75, "no", "yes")
    path = tmp_path / "noise.csv"
    noise.to_csv(path, index=False)
    cols = {c: {"type": "numeric", "bounds": [-10, 10], "missing": False} for c in "abc"}
    cols["label"] = {"type": "categorical", "categories": ["no", "yes"], "missing": False}
    (tmp_path / "noise.json").write_text(json.dumps({"name": "n", "columns": cols}))
    args = [str(path), "--schema", str(tmp_path / "noise.json"), "--target", "label",
            "--members", "150", "--epochs", "2", "--batch-size", "32", "--epsilon", "1",
            "--attacks", "loss"]
    code, out = _run(capsys, [*args, "--json"])
    assert code == 0, out.err
    base = json.loads(out.out)["model"]["baseline"]
    assert base["majority_class"] == "no" and base["better_than_baseline"] is False
    assert base["verdict"] == "no better than always predicting 'no'"
    code, out = _run(capsys, args)
    assert code == 0, out.err
    text = " ".join(out.out.split())
    assert re.search(r"majority-class baseline: test accuracy \d\.\d{3} \(train \d\.\d{3}\) "
                     r"by always predicting 'no'", text), text
    assert "the target is no better than always predicting 'no'" in text


def test_audit_steps_match_the_stage_calls(table):
    """The progress bar's total is the number of stages audit_table reports."""
    from privlab.audit.runner import TableAuditConfig, audit_steps, audit_table
    from privlab.schema import load_schema

    frame = pd.read_csv(table)
    for attacks in (["loss"], ["shadow", "loss"], ["lira", "confidence"]):
        cfg = TableAuditConfig(target="label", epsilon=None, attacks=attacks, members=100,
                               epochs=1, batch_size=32, shadow_models=1, lira_models=2,
                               schema=load_schema(str(table.with_suffix(".json"))))
        stages: list[str] = []
        epochs: list[int] = []
        audit_table(frame, cfg, stage=stages.append,
                    progress=lambda e, n, row, seen=epochs: seen.append(e))
        assert len(stages) == audit_steps(cfg), (attacks, stages)
        assert epochs == [1]


@pytest.mark.parametrize("members", [None, "20"])
def test_refusals_carry_no_row_count(tmp_path, capsys, members):
    """Regression (issue 21): the audit's size refusals printed the exact number of distinct
    rows ("only 19 distinct rows", "2..14 for 48 distinct rows"), so a one-row neighbour
    changed the error text. Now D and D' (one row fewer) get the same line."""
    rng = np.random.default_rng(0)
    rows = 48 if members else 20
    frame = pd.DataFrame({"a": np.arange(rows), "b": rng.normal(size=rows),
                          "y": ["p", "q"] * (rows // 2)})
    errors = []
    for name, part in (("d.csv", frame), ("d1.csv", frame.iloc[:-1])):
        path = tmp_path / name
        part.to_csv(path, index=False)
        argv = [str(path), "--target", "y", "--no-dp", "--json", "--unsafe-encoding"]
        code, out = _run(capsys, argv + (["--members", members] if members else []))
        assert code == 2
        errors.append(out.err)
    assert errors[0] == errors[1], errors
