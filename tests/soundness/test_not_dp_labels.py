"""Commands that are not DP releases say so: `assess`, `anonymize` and `choose-epsilon`.

The neighbour fuzz (test_command_fuzz.py) compares what a DP output may reveal; these three
outputs are evaluations for the data's curator, computed exactly from the rows. Each must
carry a `guarantee` with `is_dp: false` in --json (assess and anonymize also print "NOT
differentially private" first in the console; choose-epsilon is run once, it is slow).

Regression: choose-epsilon's output had no guarantee at all (only the unreleased models' DP
guarantees inside `per_epsilon`), so its exact accuracies and attack results sat unlabelled.
"""

from __future__ import annotations

import json

import pytest
from fuzz import _people, people_schema

from privlab.cli.main import main


@pytest.fixture
def people(tmp_path):
    data, schema = tmp_path / "people.csv", tmp_path / "people.json"
    _people(1).to_csv(data, index=False)
    schema.write_text(json.dumps(people_schema("row")))
    return data, schema


def _run(capsys, argv: list[str]) -> tuple[dict, str]:
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    return doc, capsys.readouterr().out


def test_assess_and_anonymize_are_labelled_not_dp(people, tmp_path, capsys) -> None:
    data, _ = people
    for argv in (["assess", str(data), "-q", "age,sex"],
                 ["anonymize", str(data), "-q", "age,sex", "--k", "2", "--out",
                  str(tmp_path / "anon.csv")]):
        doc, text = _run(capsys, argv)
        assert doc["guarantee"]["is_dp"] is False, argv[0]
        assert text.startswith("NOT differentially private"), argv[0]


def test_choose_epsilon_is_labelled_not_dp_and_names_every_measured_key(people,
                                                                        capsys) -> None:
    pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")
    data, schema = people
    argv = ["choose-epsilon", str(data), "--schema", str(schema), "--target", "label",
            "--epsilons", "2", "--seeds", "1", "--epochs", "1", "--shadow-models", "1",
            "--attacks", "loss", "--batch-size", "16", "--seed", "1"]
    assert main([*argv, "--json"]) == 0  # one run: it trains and attacks several models
    doc = json.loads(capsys.readouterr().out)
    g = doc["guarantee"]
    assert g["is_dp"] is False and g["headline"].startswith("NOT differentially private")
    named = {n.split(" ")[0] for n in g["not_covered"]}
    assert {"chosen_epsilon", "per_epsilon", "uncertainty"} <= named
    settings = {"rule", "policy", "utility", "prior", "credible_level", "attack_weights",
                "grid", "adaptive", "source", "guarantee"}
    assert set(doc) - settings == named  # every measured key, nothing else
