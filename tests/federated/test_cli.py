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
    assert g["is_dp"] and g["neighbouring"] == "user" and 3.9 < g["epsilon"] <= 4.0
    assert g["delta"] == 1e-5 and "dp-accounting" in g["accountant"]
    assert doc["config"]["algorithm"] == "dpam" and doc["releases_charged"] == 2


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
    pytest.importorskip("flwr")
    assert main(["federated", "serve", "--rounds", "1", "--epsilon", "1",
                 "--num-clients", "0"]) == 2
    assert "num_clients must be >= 1" in capsys.readouterr().err
    assert main(["federated", "client", "--shard", "3", "--num-shards", "3",
                 "--max-users", "5"]) == 2
    assert "shard must be in [0, 3)" in capsys.readouterr().err
