"""Neighbouring-dataset harness for `privlab audit`'s target training (tiny model, one epoch).

The audit is an evaluation, not a release: its figures (counts, accuracies, attack scores)
are computed exactly from the rows and are labelled so (`release: false`, `audit_guarantee`
naming each field in `not_covered`). What must not depend on any one row is the TARGET's
training: its features, its classes, and its guarantee. On D and on every one-row edit D'
(same --seed, --members given so the sampling rate is public) the target's guarantee, the
feature count, the classes and the report's keys are identical, or D' is refused (exit 2,
one line naming the column) before the --report file is written.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from neighbours import OUTSIDE, edits_for_policy

pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")

from privlab.cli.main import main  # noqa: E402
from privlab.data.datasets import load_adult  # noqa: E402
from privlab.schema import bundled_schema  # noqa: E402

HOLAND = "Holand-Netherlands"


@pytest.fixture(scope="module")
def sample() -> pd.DataFrame:
    frame = load_adult()
    rows = pd.concat([frame[frame["native-country"] == HOLAND],
                      frame.sample(240, random_state=5)])
    return rows.reset_index(drop=True)


def _audit(capsys, frame: pd.DataFrame, folder, *extra: str,
           report: bool = False) -> tuple[int, dict | None, str]:
    """One audit run; with `report`, an HTML report that a refused run must not write."""
    data, html = folder / "data.csv", folder / "audit.html"
    frame.to_csv(data, index=False)
    html.unlink(missing_ok=True)
    code = main(["audit", str(data), "--schema", "adult", "--target", "salary", "--delimiter",
                 ",", "--members", "60", "--epochs", "1", "--batch-size", "32", "--attacks",
                 "loss", "--epsilon", "2", "--seed", "0", "--json", *extra]
                + (["--report", str(html)] if report else []))
    out = capsys.readouterr()
    if code != 0:
        assert not html.exists(), "a refused audit wrote its report"
        return code, None, out.err
    assert html.exists() == report
    return code, json.loads(out.out), out.err


def _keys(obj):
    """The key structure of a JSON document (values dropped)."""
    if isinstance(obj, dict):
        return {k: _keys(v) for k, v in obj.items()}
    return type(obj).__name__ if obj is not None else None


def _check_same_target(a: dict, b: dict, name: str) -> None:
    assert list(a) == list(b), name
    assert a["guarantee"] == b["guarantee"], f"{name}: the target's guarantee moved"
    assert a["audit_guarantee"] == b["audit_guarantee"], name
    assert b["release"] is False
    for key in ("features", "classes", "schema", "members", "nonmembers"):
        assert a["data"][key] == b["data"][key], f"{name}: data.{key}"
    assert _keys(a["attacks"]) == _keys(b["attacks"]), name


def test_target_features_do_not_depend_on_the_rows(sample, tmp_path, capsys):
    """Regression: the audit read the one-hot categories of the members (fitted encoder)."""
    code, a, err = _audit(capsys, sample, tmp_path)
    assert code == 0, err
    code, b, err = _audit(capsys, sample[sample["native-country"] != HOLAND], tmp_path)
    assert code == 0, err
    assert a["data"]["features"] == b["data"]["features"] == 108
    assert a["guarantee"]["is_dp"] and a["guarantee"]["not_covered"] == []
    # the audit's own figures are exact and labelled as such
    g = a["audit_guarantee"]
    assert g["is_dp"] is False and a["release"] is False
    assert {"data.members", "model.train_accuracy", "model.test_accuracy", "attacks"} <= \
        set(g["not_covered"])
    _check_same_target(a, b, "remove Holand-Netherlands")


@pytest.mark.parametrize("policy", ["refuse", "coerce"])
def test_every_one_row_edit(sample, tmp_path, capsys, policy):
    code, base, err = _audit(capsys, sample, tmp_path, "--on-invalid", policy,
                             report=policy == "refuse")
    assert code == 0, err
    refused = []
    for name, edited in edits_for_policy(sample, policy, bundled_schema("adult")).items():
        code, doc, err = _audit(capsys, edited, tmp_path, "--on-invalid", policy,
                                report=policy == "refuse")
        if code != 0:
            assert policy == "refuse" and code == 2, f"{name}: exit {code} ({err})"
            lines = err.strip().splitlines()
            assert len(lines) == 1 and "column '" in lines[0], f"{name}: {err}"
            refused.append(name)
            continue
        _check_same_target(base, doc, name)
    if policy == "refuse":
        assert set(refused) >= OUTSIDE
