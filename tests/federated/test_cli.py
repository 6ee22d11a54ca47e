"""`privlab federated train` JSON and its one-line errors."""

from __future__ import annotations

import json

import pytest

from privlab.cli.main import main


def test_train_json_has_rmse_baseline_and_user_level_guarantee(capsys):
    code = main(["federated", "train", "--dataset", "movielens", "--algorithm", "dpam",
                 "--epsilon", "4", "--delta", "1e-5", "--rounds", "2", "--seed", "3",
                 "--max-users", "30", "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    doc = json.loads(out)
    assert 0.5 < doc["test_rmse"] < 1.5 and 0.5 < doc["item_mean_rmse"] < 1.5
    g = doc["guarantee"]
    # the exact held-out metrics are outside the claim: named, and the run is not DP as a whole
    assert not g["is_dp"] and g["headline"].startswith("NOT differentially private")
    assert {n.split(" ")[0] for n in g["not_covered"]} == {
        "test_rmse", "n_test", "item_mean_rmse", "local_only_rmse"}
    assert g["neighbouring"] == "user" and 3.9 < g["epsilon"] <= 4.0
    assert g["delta"] == 1e-5 and "dp-accounting" in g["accountant"]
    assert g["covers"] and "item table" in g["covers"][0]
    assert doc["config"]["algorithm"] == "dpam" and doc["releases_charged"] == 2
    assert "train_seconds" not in doc  # timings grow with the data: not in the CLI output


def test_train_no_eval_is_a_dp_release(capsys):
    code = main(["federated", "train", "--epsilon", "4", "--rounds", "1", "--seed", "3",
                 "--max-users", "20", "--no-eval", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    g = doc["guarantee"]
    assert g["is_dp"] and g["not_covered"] == [] and g["headline"].startswith("(4")
    assert not {"test_rmse", "n_test", "item_mean_rmse", "local_only_rmse"} & set(doc)


def test_train_dpftrl_and_non_private_and_settings(capsys):
    assert main(["federated", "train", "--dataset", "adult", "--algorithm", "dpftrl",
                 "--epsilon", "8", "--rounds", "3", "--clients-per-round", "20",
                 "--max-users", "60", "--seed", "1", "--set", "hidden=4", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert 0 <= doc["test_accuracy"] <= 1 and doc["config"]["mlp"]["hidden"] == 4
    assert main(["federated", "train", "--non-private", "--rounds", "1", "--max-users", "20",
                 "--set", "item_reg=20"]) == 0
    captured = capsys.readouterr()
    assert "test RMSE" in captured.out and "NOT differentially private" in captured.err


@pytest.mark.parametrize("argv, message", [
    (["--rounds", "2"], "--epsilon is required"),
    (["--rounds", "2", "--epsilon", "1", "--non-private"], "exclude each other"),
    (["--rounds", "0", "--epsilon", "1"], "rounds must be"),
    (["--rounds", "2", "--epsilon", "-1"], "epsilon must be"),
    (["--rounds", "2", "--epsilon", "1", "--delta", "0"], "delta must be > 0"),
    (["--rounds", "2", "--epsilon", "1", "--algorithm", "dpsgd"], "algorithm must be"),
    (["--rounds", "2", "--epsilon", "1", "--dataset", "adult"], "dpam needs a factorized"),
    (["--rounds", "2", "--epsilon", "1", "--set", "bogus=1"], "--set must be KEY=VALUE"),
    (["--rounds", "2", "--epsilon", "1", "--set", "dim=0"], "dim must be"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, message):
    assert main(["federated", "train", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_serve_and_client_reject_bad_input_before_starting(capsys):
    pytest.importorskip("flwr", reason="needs the federated extra")
    assert main(["federated", "serve", "--rounds", "1", "--epsilon", "1",
                 "--num-clients", "0"]) == 2
    assert "num_clients must be >= 1" in capsys.readouterr().err
    assert main(["federated", "client", "--shard", "3", "--num-shards", "3",
                 "--max-users", "5"]) == 2
    assert "shard must be in [0, 3)" in capsys.readouterr().err


# ------------------------------------------------------------------ --ratings / --movies files

RATINGS = """userId,movieId,rating,timestamp
1,1,4.0,0
1,2,3.5,0
1,3,5.0,0
1,4,2.0,0
1,5,4.0,0
2,1,3.0,0
2,3,4.5,0
2,4,1.0,0
2,6,2.5,0
2,7,3.0,0
3,2,4.0,0
3,5,3.0,0
3,6,5.0,0
3,7,2.0,0
3,8,4.0,0
4,1,1.5,0
4,2,2.0,0
4,3,4.0,0
4,6,4.5,0
4,8,3.5,0
"""
MOVIES = "movieId,title,genres\n" + "".join(
    f'{m},"Film {m}, The ({1990 + m})",{"Drama|Comedy" if m % 2 else "Drama"}\n'
    for m in range(1, 10))


def _file(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _train_json(capsys, *argv):
    code = main(["federated", "train", "--epsilon", "4", "--rounds", "1", "--seed", "0",
                 "--json", *argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def test_ratings_files_give_the_same_run_as_the_bundled_movielens(capsys):
    from privlab.data.datasets import bundled_path

    folder = bundled_path("movielens", "ratings.csv.gz").parent
    files = _train_json(capsys, "--max-users", "10", "--users", "610", "--ratings",
                        str(folder / "ratings.csv.gz"), "--movies", str(folder / "movies.csv.gz"))
    bundled = _train_json(capsys, "--max-users", "10")
    # --max-users keeps each user's data by a keyed hash; the enrolled count stays public
    assert files["n_users"] == bundled["n_users"] == 610
    for key in ("test_rmse", "item_mean_rmse", "n_test", "guarantee"):
        assert files[key] == bundled[key], key
    assert files["config"]["ratings"].endswith("ratings.csv.gz")


def test_ratings_file_users_without_ratings_no_catalogue_and_declared_range(tmp_path, capsys):
    # user 5 is listed with neither a movie nor a rating: an enrolled client with no data
    path = _file(tmp_path, "r.csv", RATINGS + "5,,,\n")
    doc = _train_json(capsys, "--ratings", path)
    assert doc["n_users"] == 5 and doc["releases_charged"] == 1
    assert 0 < doc["test_rmse"] < 4.5 and not doc["guarantee"]["is_dp"]
    notes = " ".join(doc["guarantee"]["notes"])
    assert "rated movie ids sizes the released item table" in notes
    assert "genres, year" not in notes
    missing = " ".join(doc["guarantee"]["not_covered"])
    assert "n_users" in missing and "item table's size" in missing
    # with a catalogue the public features are used and said so
    movies = _file(tmp_path, "m.csv", MOVIES)
    doc = _train_json(capsys, "--ratings", path, "--movies", movies, "--algorithm", "dpfedavg",
                      "--clients-per-round", "2")
    notes = " ".join(doc["guarantee"]["notes"])
    assert "genres, year" in notes and "sizes the released item table" not in notes
    # a 7 is fine once the declared range holds it (and the range is recorded)
    wide = _file(tmp_path, "wide.csv", RATINGS.replace("2,4,1.0", "2,4,7.0"))
    doc = _train_json(capsys, "--ratings", wide, "--rating-range", "0:10")
    assert doc["config"]["rating_range"] == [0.0, 10.0]


@pytest.mark.parametrize("files, extra, message", [
    ({"r.csv": RATINGS.replace("2,4,1.0", "2,4,7.0")}, [],
     "rating: a value outside the declared range [0.5, 5]; fix or drop such values, declare "
     "the right range, or pass --on-invalid coerce"),
    ({"r.csv": RATINGS}, ["--rating-range", "2:5"],
     "rating: a value outside the declared range [2, 5]"),
    ({"r.csv": RATINGS.replace("2,4,1.0", "2,4,")}, [],
     "rating: a row with a movieId but no rating; fill them in or drop those rows"),
    ({"r.csv": RATINGS.replace("2,4,1.0", "2,,1.0")}, [],
     "movieId: a row with a rating but no movieId"),
    ({"r.csv": RATINGS.replace("3,2,4.0", ",2,4.0")}, [],
     "userId: a row without a userId;"),
    ({"r.csv": RATINGS.replace("3,2,4.0", "u3,2,4.0")}, [],
     "userId: a value in the ratings table is not a number; ids must be integers"),
    ({"r.csv": RATINGS.replace("3,2,4.0", "3,2,four")}, [],
     "rating: a value is not a number; ratings must be numeric"),
    ({"r.csv": "userId,movieId,rating\n5,,\n6,,\n"}, [],
     "rating: the table has no ratings (only users without any)"),
    ({"r.csv": "userId,movieId,stars\n1,1,4\n"}, [],
     "ratings table needs column 'rating' (userId,movieId,rating[,timestamp]); it has: "
     "userId, movieId, stars; rename or add the column"),
    ({"r.csv": ""}, [], "--ratings: {tmp}/r.csv is empty: it needs a header line"),
    ({"r.csv": "userId,movieId,rating\n"}, [], "--ratings: {tmp}/r.csv has no data rows"),
    ({}, [], "--ratings: file not found: {tmp}/r.csv"),
    ({"r.csv": RATINGS, "m.csv": MOVIES.replace("8,", "18,")}, ["--movies", "{tmp}/m.csv"],
     "movieId: a rating refers to a movie missing from the catalogue"),
    ({"r.csv": RATINGS, "m.csv": "movieId,name\n1,x\n"}, ["--movies", "{tmp}/m.csv"],
     "movies table needs column 'title'"),
    ({"r.csv": RATINGS}, ["--rating-range", "5:1"], "--rating-range: LO=5 must be below HI=1"),
    ({"r.csv": RATINGS}, ["--max-users", "0"], "--max-users must be >= 1, got 0"),
    ({"r.csv": RATINGS}, ["--clients-per-round", "0"], "--clients-per-round must be >= 1"),
    ({"r.csv": RATINGS}, ["--delta", "0"], "--delta must be > 0"),
    ({"r.csv": RATINGS}, ["--dataset", "adult", "--algorithm", "dpam"],
     "--algorithm: dpam needs a factorized model"),
    ({"r.csv": RATINGS}, ["--rating-range", "1-5"], "--rating-range must be a range LO:HI"),
    ({"r.csv": RATINGS}, ["--dataset", "adult", "--algorithm", "dpfedavg"],
     "use them with --dataset movielens"),
])
def test_bad_ratings_files_are_one_line_exit_2(tmp_path, capsys, files, extra, message):
    """One line naming the field and the fix; since issue 21 a refusal about the private
    ratings prints no count, value, row number or user id (the public catalogue's may)."""
    for name, text in files.items():
        _file(tmp_path, name, text)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    code = main(["federated", "train", "--epsilon", "4", "--rounds", "1", "--ratings",
                 str(tmp_path / "r.csv"), *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("error: ")
    assert message.replace("{tmp}", str(tmp_path)) in err
    if files.get("r.csv", "").count("\n") > 1 and "m.csv" not in files:
        assert not any(x in err for x in ("value(s)", "row(s)", "first:", "data row")), err


@pytest.mark.parametrize("argv, message", [
    (["--movies", "m.csv"], "--movies is the catalogue of a --ratings file; pass --ratings"),
    (["--rating-range", "1:5"], "--rating-range declares the range of a --ratings file"),
])
def test_file_options_need_ratings(capsys, argv, message):
    assert main(["federated", "train", "--epsilon", "4", "--rounds", "1", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_serve_and_client_check_the_ratings_file_before_starting(tmp_path, capsys):
    pytest.importorskip("flwr", reason="needs the federated extra")
    bad = _file(tmp_path, "r.csv", RATINGS.replace("2,4,1.0", "2,4,7.0"))
    assert main(["federated", "serve", "--rounds", "1", "--epsilon", "1", "--ratings", bad,
                 "--connect-timeout", "1"]) == 2
    assert "rating: a value outside the declared range" in capsys.readouterr().err
    assert main(["federated", "client", "--ratings", bad, "--max-wait", "1"]) == 2
    assert "rating: a value outside the declared range" in capsys.readouterr().err
