import json
from importlib import resources

import jsonschema
import numpy as np
import pandas as pd
import pytest
from risk_tables import small_frame, small_schema

from privlab.cli.main import main
from privlab.errors import InvalidInputError
from privlab.risk import make_policy
from privlab.risk import pipeline as P

pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")

FAST = ["--epochs", "1", "--shadow-models", "1", "--batch-size", "32", "--seed", "3"]


def schema() -> dict:
    text = resources.files("privlab.risk").joinpath("schema/choose_epsilon.schema.json")
    return json.loads(text.read_text())


def test_cli_json_validates_and_report_has_key_elements(tmp_path, capsys, expected_choice):
    data = tmp_path / "d.csv"
    small_frame().to_csv(data, index=False)
    out = tmp_path / "r.html"
    assert main(["assess", str(data), "--json"]) == 0
    assessed = tmp_path / "assess.json"
    assessed.write_text(capsys.readouterr().out)
    rc = main(["choose-epsilon", str(data), "--target", "label", "--epsilons", "2,8",
               "--policy", "medical", "--report", str(out), "--json",
               "--attack-weights", "loss=3,shadow=1", "--assess-json", str(assessed),
               "--schema", small_schema(tmp_path), *FAST])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    doc = json.loads(captured.out)
    jsonschema.validate(doc, schema())
    assert doc["policy"]["name"] == "medical"
    assert [r["epsilon"] for r in doc["per_epsilon"]] == [2.0, 8.0]
    assert doc["attack_weights"] == {"loss": 0.75, "shadow": 0.25}
    assert doc["chosen_epsilon"] == expected_choice(doc)
    for r in doc["per_epsilon"]:
        assert r["guarantee"]["epsilon"] <= r["epsilon"] * (1 + 1e-6)
        assert r["attacks"]["loss"]["trials"] == 2 * doc["data"]["split"]["target_train"]
    assert doc["baseline"]["guarantee"]["is_dp"] is False
    html = out.read_text()
    for key in ("Answer", "Curves", "Prior sensitivity", "Guarantee and accountant",
                "Pareto", "credible", "Assessment (privlab assess)"):
        assert key in html
    assert html.count("data:image/png;base64,") == 3


def test_schema_rejects_broken_documents():
    s = schema()
    jsonschema.Draft202012Validator.check_schema(s)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"chosen_epsilon": -1}, s)


@pytest.mark.parametrize("args,match", [
    (["--epsilons", "0,1"], "epsilons"),
    (["--epsilons", "-2,1"], "epsilons"),
    (["--w-risk", "0", "--epsilons", "1"], None),
    (["--attacks", "guess"], "attacks"),
    (["--policy", "banking"], "policy"),
    (["--attack-weights", "loss"], "attack-weights"),
    (["--attack-weights", "loss=0,shadow=0"], "positive"),
])
def test_cli_bad_input(tmp_path, capsys, args, match):
    data = tmp_path / "d.csv"
    small_frame(60).to_csv(data, index=False)
    if match is None:  # w_risk = 0 with w_util = 1 is valid weights; the data is too small
        match = "too small|too few"
    rc = main(["choose-epsilon", str(data), "--target", "label", *args,
               "--schema", small_schema(tmp_path), *FAST])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("error:") and len(err.strip().splitlines()) == 1
    import re
    assert re.search(match, err)


def test_weights_not_summing_to_positive():
    with pytest.raises(InvalidInputError, match="positive"):
        make_policy(w_risk=0.0, w_util=0.0)


def test_too_small_to_split():
    with pytest.raises(InvalidInputError, match="too few to split"):
        P.prepare(small_frame(50), "label")
    f = small_frame(300)
    f["label"] = "no"
    f.loc[f.index[:2], "label"] = "yes"  # 2 "yes" rows cannot fill three parts
    with pytest.raises(InvalidInputError, match="too small to split"):
        P.prepare(f, "label")


def test_all_attacks_failing_is_a_clear_error(monkeypatch):
    def broken(*_a, **_k):
        return {}, {}, {"loss": {"error": "RuntimeError: boom"}}

    from privlab.risk import sweep

    monkeypatch.setattr(sweep, "_attack", broken)
    cfg = P.PipelineConfig(epsilons=[4.0], attacks=("loss",), epochs=1, hidden=(4,), seed=0,
                           batch_size=32)
    with pytest.raises(InvalidInputError, match="attacks: no attack produced results"):
        P.choose_epsilon(small_frame(), "label", make_policy("finance"), cfg)


def _fake_training(monkeypatch, calls):
    """Replace training and attacks by the simulator (wiring test: no torch work)."""
    from privlab.risk.simulate import simulator

    ev = simulator(trials=300, seed=5)

    def fake_eval(prep, cfg, epsilons, progress=None, step=(0, 1)):
        calls.append(list(epsilons))
        evs = [ev(e) for e in epsilons]
        return evs, {e: {"attacks": {}, "accuracy_seeds": x.accuracy}
                     for e, x in zip(epsilons, evs, strict=True)}

    monkeypatch.setattr(P, "evaluate_epsilons", fake_eval)
    monkeypatch.setattr(P, "feasible_epsilons", lambda prep, cfg, grid: (list(grid), []))
    monkeypatch.setattr(P, "baseline", lambda prep, cfg: {
        "accuracy": 0.84, "guarantee": {"is_dp": False}, "auc": {}})


def test_adaptive_pipeline_trains_at_most_the_budget(monkeypatch):
    calls: list = []
    _fake_training(monkeypatch, calls)
    grid = [0.1, 0.2, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256]
    cfg = P.PipelineConfig(epsilons=grid, adaptive=True, budget_runs=6, seed=0)
    r = P.choose_epsilon(small_frame(), "label", make_policy("finance"), cfg,
                         relative_utility=True)
    doc = r.to_dict()
    jsonschema.validate(doc, schema())
    assert len(calls) == len(doc["evaluated_order"]) <= 6
    assert all(len(c) == 1 for c in calls)  # one grid point per training call
    assert doc["adaptive"] and doc["utility"]["baseline_accuracy"] == 0.84
    full = P.choose_epsilon(small_frame(), "label", make_policy("finance"),
                            P.PipelineConfig(epsilons=grid, seed=0)).to_dict()
    # the adaptive search looks for the point rule's argmin; the stable recommendation is
    # then taken over the points it evaluated only
    assert abs(grid.index(doc["argmin_epsilon"]) - grid.index(full["argmin_epsilon"])) <= 1
    assert doc["chosen_epsilon"] in doc["evaluated_order"]


def test_public_adult_preprocessing_reads_nothing_from_the_data():
    from privlab.data.datasets import load_adult

    frame = load_adult(drop_missing=True).head(600)
    prep = P.prepare(frame, "salary", public="adult")
    assert prep.info["preprocessing_leaks"] == []
    # the classes are the bundled schema's declared categories, in its order
    assert prep.x_train.shape[1] == 104 and prep.classes == [">50K", "<=50K"]
    assert P.prepare(frame, "salary").info["preprocessing_leaks"]  # data-read ranges are listed
    with pytest.raises(InvalidInputError, match="public"):
        P.prepare(frame, "salary", public="census")


def test_public_adult_classes_come_from_the_schema_not_the_labels():
    """Regression (issue 21): choose-epsilon's Adult path read the class list from the labels
    (`encode_labels(y)`): one replaced label added a class. Now the classes are the bundled
    schema's target categories, read through PublicFacts; an undeclared label is refused."""
    from privlab.data.datasets import load_adult
    from privlab.schema.facts import watch_facts

    frame = load_adult(drop_missing=True).head(600)
    with watch_facts() as reads:
        prep = P.prepare(frame, "salary", public="adult")
    assert ("classes", "schema") in {(r.name, r.origin) for r in reads}
    odd = frame.copy()
    odd["salary"] = odd["salary"].astype(object)
    odd.at[odd.index[0], "salary"] = "unknown"
    with pytest.raises(InvalidInputError, match="outside the declared classes"):
        P.prepare(odd, "salary", public="adult")
    assert prep.n_classes == 2
    # without any declaration the class list is read from the labels, and said so
    assert any("classes of 'salary'" in leak
               for leak in P.prepare(frame, "salary").info["preprocessing_leaks"])


def test_duplicate_rows_cannot_be_member_and_nonmember():
    f = small_frame(200)
    f = pd.concat([f, f.head(40)], ignore_index=True)
    prep = P.prepare(f, "label")
    assert prep.info["duplicates_dropped"] == 40 and prep.info["rows"] == 200
    both = np.r_[prep.x_train, prep.x_test, prep.x_pool]
    assert np.unique(both, axis=0).shape[0] == both.shape[0]


def test_canary_evidence_feeds_the_risk_model(expected_choice):
    cfg = P.PipelineConfig(epsilons=[1.0, 8.0], attacks=("loss", "canary"), epochs=1,
                           batch_size=32, seed=3, seeds=2)
    doc = P.choose_epsilon(small_frame(), "label", make_policy("finance"), cfg).to_dict()
    jsonschema.validate(doc, schema())
    pool = doc["data"]["split"]["attacker_pool"]
    m = min(P.CANARIES, pool)
    for r in doc["per_epsilon"]:
        c = r["attacks"]["canary"]  # in the risk model like any attack
        assert c["trials"] == 2 * max(1, round(0.5 * m / 2))
        det = doc["attack_details"][f"{r['epsilon']:g}"]["canary"]
        assert det["canaries"] == m and 0 <= det["epsilon_lower_bound"] <= r["epsilon"]
        # regression (issue 21): the simulated target's rate uses the exact split size, so
        # each per-epsilon guarantee names it (TrainConfig no longer reads len(x) itself)
        assert any(n.startswith("sample_rate") for n in r["guarantee"]["not_covered"])
    assert "canary" in doc["attack_weights"]
    # two models per epsilon: the uncertainty analysis ran and names every candidate
    u = doc["uncertainty"]
    assert [c["epsilon"] for c in u["candidates"]] == [1.0, 8.0]
    assert sum(c["prob_best"] for c in u["candidates"]) + u["prob_none_feasible"] == \
        pytest.approx(1.0)
    assert doc["rule"] == "stable_one_se" and doc["chosen_epsilon"] == expected_choice(doc)


def test_models_that_learnt_nothing_get_no_recommendation(tmp_path, capsys):
    """Issue 23: on a table whose features carry no signal the models score the majority rate;
    choose-epsilon recommended one anyway ("right 74% of the time"). Now: exit 0, no
    recommendation, the majority-class baseline beside the accuracies, and the reason."""
    rng = np.random.default_rng(5)
    n = 400
    frame = pd.DataFrame(rng.normal(size=(n, 4)), columns=[f"f{i}" for i in range(4)])
    frame["label"] = np.where(rng.random(n) < 0.75, "no", "yes")
    data = tmp_path / "noise.csv"
    frame.to_csv(data, index=False)
    noise_schema = tmp_path / "noise.yaml"
    noise_schema.write_text("name: noise\ncolumns:\n" + "".join(
        f"  f{i}: {{type: numeric, bounds: [-5, 5], missing: false}}\n" for i in range(4))
        + "  label: {type: categorical, categories: ['no', 'yes'], missing: false}\n")
    out = tmp_path / "r.html"
    rc = main(["choose-epsilon", str(data), "--target", "label", "--epsilons", "1,4",
               "--policy", "medical", "--seeds", "2", "--report", str(out), "--json",
               "--schema", str(noise_schema), *FAST])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    doc = json.loads(captured.out)
    jsonschema.validate(doc, schema())
    major = doc["majority_baseline"]
    assert major["majority_class"] == "no"
    assert major["accuracy"] == pytest.approx(0.75, abs=0.08)
    assert all(r["better_than_baseline"] is False for r in doc["per_epsilon"])
    assert doc["chosen_epsilon"] is None and doc["learnt_nothing"] is True
    assert "no better than always predicting 'no'" in doc["reason"]
    assert "no better than always predicting" in " ".join(out.read_text().split())
    rc = main(["choose-epsilon", str(data), "--target", "label", "--epsilons", "1,4",
               "--policy", "medical", "--seeds", "2", "--schema", str(noise_schema), *FAST])
    text = " ".join(capsys.readouterr().out.split())
    assert rc == 0
    assert "majority-class baseline: accuracy" in text and "always predicting 'no'" in text
    assert "recommended epsilon: none (the models learnt nothing)" in text


def test_models_that_learnt_beat_the_baseline(tmp_path, capsys):
    data = tmp_path / "d.csv"
    frame = small_frame(600)
    for i in range(5):  # spread over the declared [-5, 5] so the encoded features are not tiny
        frame[f"f{i}"] = (frame[f"f{i}"] * 3).clip(-5, 5)
    frame.to_csv(data, index=False)
    rc = main(["choose-epsilon", str(data), "--target", "label", "--epsilons", "8",
               "--policy", "medical", "--json", "--epochs", "5", "--lr", "0.05",
               "--schema", small_schema(tmp_path),
               "--shadow-models", "1", "--batch-size", "32", "--seed", "3"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    doc = json.loads(captured.out)
    assert doc["per_epsilon"][0]["better_than_baseline"] is True
    assert doc["baseline"]["better_than_baseline"] is True  # the non-private model too
    assert doc["learnt_nothing"] is False and doc["chosen_epsilon"] == 8.0
