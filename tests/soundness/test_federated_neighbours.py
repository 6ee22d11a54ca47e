"""`privlab federated train --ratings`: neighbouring ratings files give the same output.

D is a small MovieLens-format ratings file (12 users) with a public catalogue and a declared
number of users; each D' changes one rating row (extreme, text, missing, non-integer movie id,
duplicate), adds a user or removes one. With the same seed the JSON must be identical apart
from the values the guarantee names as not covered (the held-out evaluation); with --no-eval
it must be identical, full stop (nothing in it is noised: the model itself is not printed).
In refuse mode a D' may instead be refused (exit 2, one line naming the column).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from neighbours import assert_same_structure, one_row_edits

from privlab.cli.main import main
from privlab.schema import bundled_schema

EVAL_KEYS = ("test_rmse", "n_test", "item_mean_rmse", "local_only_rmse")
N_MOVIES = 1500


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from privlab.data.datasets import load_movielens

    root = tmp_path_factory.mktemp("fed")
    movies = load_movielens("movies").head(N_MOVIES)
    ratings = load_movielens("ratings")
    ratings = ratings[(ratings["userId"] <= 12) & ratings["movieId"].isin(movies["movieId"])]
    ratings = ratings.groupby("userId").head(12).reset_index(drop=True)
    movies.to_csv(root / "movies.csv", index=False)
    ratings.to_csv(root / "ratings.csv", index=False)
    return {"root": root, "ratings": root / "ratings.csv", "movies": root / "movies.csv"}


def _edits(files: dict[str, Path]) -> dict[str, pd.DataFrame]:
    base = pd.read_csv(files["ratings"])
    edits = one_row_edits(base, bundled_schema("movielens-ratings"))

    def rating(value: object) -> pd.DataFrame:
        out = base.copy()
        out["rating"] = out["rating"].astype(object)
        out.at[0, "rating"] = value
        return out

    edits["extreme_rating"] = rating(7.0)
    edits["text_rating"] = rating("four")
    edits["missing_rating"] = rating(None)
    edits["remove_user"] = base[base["userId"] != base["userId"].iloc[0]]
    new = base[base["userId"] == base["userId"].iloc[0]].assign(userId=999)
    edits["add_user"] = pd.concat([base, new], ignore_index=True)
    return edits


def _run(files: dict[str, Path], path: Path, policy: str, *extra: str,
         capsys: pytest.CaptureFixture[str]) -> tuple[int, dict | str]:
    code = main(["federated", "train", "--ratings", str(path), "--movies", str(files["movies"]),
                 "--users", "20", "--epsilon", "4", "--rounds", "1", "--seed", "5",
                 "--on-invalid", policy, "--json", *extra])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else out.err.strip())


def _config_free(doc: dict) -> dict:
    doc = dict(doc)
    doc["config"] = {k: v for k, v in doc["config"].items() if k != "ratings"}
    return doc


@pytest.mark.parametrize("policy", ["refuse", "coerce"])
def test_one_row_edits_leave_the_output_unchanged(files, policy, capsys) -> None:
    code, base = _run(files, files["ratings"], policy, capsys=capsys)
    assert code == 0, base
    code, base_dp = _run(files, files["ratings"], policy, "--no-eval", capsys=capsys)
    assert code == 0, base_dp
    assert base_dp["guarantee"]["is_dp"], base_dp["guarantee"]["headline"]
    refused = []
    for name, frame in _edits(files).items():
        path = files["root"] / f"{name}-{policy}.csv"
        frame.to_csv(path, index=False)
        code, doc = _run(files, path, policy, capsys=capsys)
        if code != 0:
            assert policy == "refuse" and code == 2, (name, doc)
            assert len(doc.splitlines()) == 1 and doc.startswith("error: "), (name, doc)
            refused.append(name)
            continue
        # the exact evaluation may differ, and is named in not_covered
        assert_same_structure(_config_free(base), _config_free(doc), noised=EVAL_KEYS)
        code, doc = _run(files, path, policy, "--no-eval", capsys=capsys)
        assert code == 0, (name, doc)
        assert_same_structure(_config_free(base_dp), _config_free(doc))
    if policy == "coerce":
        assert refused == []
    else:  # the battery does reach the refusals: values outside the schema are refused
        assert {"extreme_rating", "text_rating", "extreme_value"} <= set(refused)


def test_item_mean_rmse_is_never_released_unlabelled(files, capsys) -> None:
    """Regression (issue 14): item_mean_rmse was printed exactly beside a bare DP claim."""
    assert main(["federated", "train", "--epsilon", "4", "--rounds", "1", "--seed", "1",
                 "--max-users", "15", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    g = doc["guarantee"]
    assert "item_mean_rmse" in doc and "test_rmse" in doc
    labelled = {n.split(" ")[0] for n in g["not_covered"]}
    assert {"item_mean_rmse", "local_only_rmse", "test_rmse", "n_test"} <= labelled
    assert g["is_dp"] is False and g["headline"].startswith("NOT differentially private")
    assert g["covers"]


def test_undeclared_user_count_is_labelled(files, capsys) -> None:
    code = main(["federated", "train", "--ratings", str(files["ratings"]), "--movies",
                 str(files["movies"]), "--epsilon", "4", "--rounds", "1", "--seed", "5",
                 "--no-eval", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert any(n.startswith("n_users") for n in doc["guarantee"]["not_covered"])
    assert not doc["guarantee"]["is_dp"]


def test_rating_range_comes_from_the_schema(files, tmp_path, capsys) -> None:
    schema = tmp_path / "ten.yaml"
    schema.write_text("name: ten\nprivacy_unit: userId\ncolumns:\n"
                      "  userId: {type: identifier, missing: false}\n"
                      "  movieId: {type: integer, bounds: [1, 193609], missing: false}\n"
                      "  rating: {type: numeric, bounds: [0, 10], missing: false}\n"
                      "  timestamp: {type: integer, bounds: [0, 2000000000]}\n")
    wide = pd.read_csv(files["ratings"])
    wide.loc[0, "rating"] = 7.0
    path = tmp_path / "wide.csv"
    wide.to_csv(path, index=False)
    code, doc = _run(files, path, "refuse", "--schema", str(schema), "--no-eval",
                     capsys=capsys)
    assert code == 0, doc
    assert doc["config"]["rating_range"] == [0.0, 10.0] and doc["guarantee"]["is_dp"]
    code, err = _run(files, path, "refuse", capsys=capsys)  # movielens-ratings: [0.5, 5]
    assert code == 2 and "rating" in err


def test_the_user_is_the_schemas_privacy_unit(files, tmp_path, capsys) -> None:
    """Issue 21: federated is user-level by construction; its guarantee names the user column,
    and a schema whose privacy unit is another column (one person, several userIds) is refused
    (it used to be accepted and a person-level claim made for a per-userId bound)."""
    code, doc = _run(files, files["ratings"], "refuse", "--no-eval", capsys=capsys)
    assert code == 0, doc
    g = doc["guarantee"]
    assert g["neighbouring"] == "user" and g["is_dp"]
    assert any("same userId" in n for n in g["notes"])
    schema = tmp_path / "hh.yaml"
    schema.write_text("name: hh\nprivacy_unit: household\ncolumns:\n"
                      "  household: {type: identifier, missing: false}\n"
                      "  userId: {type: identifier, missing: false}\n"
                      "  movieId: {type: integer, bounds: [1, 193609], missing: false}\n"
                      "  rating: {type: numeric, bounds: [0.5, 5], missing: false}\n"
                      "  timestamp: {type: integer, bounds: [0, 2000000000]}\n")
    code, err = _run(files, files["ratings"], "refuse", "--schema", str(schema), "--no-eval",
                     capsys=capsys)
    assert code == 2 and "privacy_unit 'household'" in err and "userId" in err
