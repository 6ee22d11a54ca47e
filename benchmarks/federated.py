"""Vectorized federated simulation vs the same algorithm looping over clients one by one.

    .venv/bin/python benchmarks/federated.py [--rounds 20] [--loop-rounds 20] [--repeat 1]

(a) DPAM on all 610 MovieLens users, `--rounds` rounds (default 20): wall time of the
    vectorized engine (one Client holding all users, every computation batched per user) and of
    the loop engine (610 Clients called one by one; `--loop-rounds` of them, scaled to per round).
(b) DP-FedAvg (61 expected users a round) rounds per second, both engines.
Both engines run the same code path (same roles, same aggregator, same seed) and must give the
same parameters; the script checks that before printing the ratio. Times are wall-clock
(time.perf_counter) on whatever else the machine is doing: compare the ratio, not the seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from dataclasses import replace

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from privlab.federated.simulation import RunConfig, train  # noqa: E402
from privlab.federated.tasks import load_task  # noqa: E402


def _timed(config: RunConfig, data, engine: str, repeat: int) -> tuple[float, dict]:
    best, out = float("inf"), {}
    for _ in range(repeat):
        started = time.perf_counter()
        out = train(config, data, engine=engine, baselines=False)
        best = min(best, time.perf_counter() - started - out["calibration_seconds"])
    return best, out


def _compare(name: str, config: RunConfig, loop_rounds: int, data, repeat: int) -> None:
    fast_s, fast = _timed(config, data, "vectorized", repeat)
    loop_cfg = replace(config, rounds=loop_rounds)
    loop_s, loop = _timed(loop_cfg, data, "loop", 1)
    # correctness: on the common rounds both engines give the same model
    check = train(loop_cfg, data, engine="vectorized", baselines=False)
    same = np.allclose(check["_side"].server.params["items"],
                       loop["_side"].server.params["items"], rtol=1e-9, atol=1e-12)
    per_fast = fast_s / config.rounds
    per_loop = loop_s / loop_rounds
    print(f"{name}: vectorized {config.rounds} rounds in {fast_s:.2f} s "
          f"({1 / per_fast:.2f} rounds/s, test RMSE {fast['test_rmse']:.4f}); loop "
          f"{loop_rounds} rounds in {loop_s:.2f} s ({1 / per_loop:.3f} rounds/s); "
          f"ratio {per_loop / per_fast:.1f}x; same parameters: {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--loop-rounds", type=int, default=20)
    parser.add_argument("--fedavg-rounds", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    data = load_task("movielens")
    print(f"MovieLens: {data.n_users} users, {data.n_items} items, {data.train.nnz} train "
          f"ratings; CPUs: {os.cpu_count()}; load average: {os.getloadavg()[0]:.1f}")
    _compare("(a) DPAM eps=4", RunConfig(algorithm="dpam", epsilon=4.0, rounds=args.rounds,
                                         seed=0), args.loop_rounds, data, args.repeat)
    _compare("(b) DP-FedAvg eps=4 (K=61)",
             RunConfig(algorithm="dpfedavg", epsilon=4.0, rounds=args.fedavg_rounds,
                       clients_per_round=61, seed=0),
             min(args.loop_rounds, args.fedavg_rounds), data, args.repeat)


if __name__ == "__main__":
    main()
