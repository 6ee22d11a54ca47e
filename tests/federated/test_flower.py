"""Flower deployment: 3 client processes on loopback; same result as the simulation; a client
that disconnects mid-round does not stop the run nor skip any privacy charge."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from privlab.errors import InvalidInputError

pytest.importorskip("flwr", reason="needs the federated extra")

from privlab.federated.flower import serve  # noqa: E402
from privlab.federated.simulation import RunConfig, train  # noqa: E402

pytestmark = pytest.mark.slow

USERS = 30


def _free_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _run(config: RunConfig, fail: dict[int, int] | None = None,
         extra: tuple[str, ...] = ()) -> tuple[dict, list[int]]:
    """Start 3 `privlab federated client` processes, serve in this process, clean up."""
    address = _free_address()
    env = dict(os.environ, FLWR_TELEMETRY_ENABLED="0")
    procs = []
    for shard in range(3):
        # a --ratings file is small; --max-users on it would need --users (the public count)
        short = () if "--ratings" in extra else ("--max-users", str(USERS))
        argv = [sys.executable, "-m", "privlab.cli.federated", "client", "--dataset",
                config.dataset, *short, "--shard", str(shard),
                "--num-shards", "3", "--address", address, "--max-wait", "60", *extra]
        if fail and shard in fail:
            argv += ["--fail-at-round", str(fail[shard])]
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE))
    try:
        out = serve(config, address=address, num_clients=3, round_timeout=60,
                    connect_timeout=90)
        codes = [p.wait(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return out, codes


def test_flower_with_three_client_processes_matches_the_simulation():
    config = RunConfig(algorithm="dpam", epsilon=4.0, rounds=2, seed=7, max_users=USERS)
    flower, codes = _run(config)
    sim = train(config, baselines=False)
    assert codes == [0, 0, 0]
    assert flower["client_failures_per_round"] == [0, 0]
    assert flower["client_results_per_round"] == [3, 3]
    assert flower["n_test"] == sim["n_test"]
    assert flower["test_rmse"] == pytest.approx(sim["test_rmse"], rel=1e-9)
    assert flower["guarantee"] == sim["guarantee"]
    assert flower["releases_charged"] == sim["releases_charged"] == 2


@pytest.mark.parametrize("algorithm", ["dpfedavg", "dpam"])
def test_client_disconnecting_mid_round_completes_and_charges_every_round(algorithm):
    config = RunConfig(algorithm=algorithm, epsilon=4.0, rounds=3, seed=7, max_users=USERS,
                       clients_per_round=15 if algorithm == "dpfedavg" else None)
    flower, codes = _run(config, fail={1: 1})  # shard 1 vanishes in round index 1
    sim = train(config, baselines=False)
    assert codes[1] != 0 and codes[0] == codes[2] == 0
    assert flower["client_failures_per_round"] == [0, 1, 0]
    assert flower["client_results_per_round"] == [3, 2, 2]
    # every round was released and charged: the same guarantee as the full simulation
    assert flower["releases_charged"] == sim["releases_charged"] == 3
    assert flower["guarantee"]["epsilon"] == pytest.approx(sim["guarantee"]["epsilon"])
    # the surviving shards were evaluated (2 of 3 nodes' users)
    assert 0 < flower["n_test"] < sim["n_test"] and 0.5 < flower["test_rmse"] < 1.5


def test_flower_on_a_ratings_file_matches_the_simulation(tmp_path):
    """serve/client --ratings --rating-range: every process reads the same file."""
    rng = np.random.default_rng(0)
    rows = [(u, m, float(rng.integers(1, 11))) for u in range(1, 13)
            for m in rng.choice(np.arange(1, 31), 10, replace=False)]
    path = tmp_path / "ratings.csv"
    pd.DataFrame(rows, columns=["userId", "movieId", "rating"]).to_csv(path, index=False)
    config = RunConfig(algorithm="dpam", epsilon=4.0, rounds=2, seed=3, ratings=str(path),
                       rating_range=(1.0, 10.0))
    flower, codes = _run(config, extra=("--ratings", str(path), "--rating-range", "1:10"))
    sim = train(config, baselines=False)
    assert codes == [0, 0, 0] and flower["client_results_per_round"] == [3, 3]
    assert flower["n_users"] == sim["n_users"] == 12 and flower["n_test"] == sim["n_test"]
    assert flower["test_rmse"] == pytest.approx(sim["test_rmse"], rel=1e-9)
    assert flower["guarantee"] == sim["guarantee"]


def test_a_client_on_other_data_than_the_server_stops():
    """The declared range and public feature count travel with the model spec."""
    from privlab.federated.flower import _model_config_json, _model_from_json
    from privlab.federated.simulation import load_task, make_model

    config = RunConfig(max_users=3)
    data = load_task(config)
    spec = _model_config_json(config, make_model(config, data))
    assert _model_from_json(spec, data).rating_range == (0.5, 5.0)
    other = dataclasses.replace(data, rating_range=(1.0, 10.0))
    with pytest.raises(InvalidInputError, match="start server and clients on the same data"):
        _model_from_json(spec, other)
