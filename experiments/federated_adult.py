"""Adult split into 600 synthetic users: DP-FedAvg vs DP-FTRL test accuracy vs user-level epsilon.

    .venv/bin/python experiments/federated_adult.py [--seeds 0 1 2] [--eps 1 4 16]

30,162 complete Adult rows dealt at random to 600 users (about 50 rows each), 80/20 split per
user, a 47-16-1 MLP (NumPy, hand-written backprop), 50 rounds of 60 users (DP-FedAvg: expected
60 by Poisson sampling; DP-FTRL: 60 a round in a fixed shuffled order, 10 rounds an epoch,
tree restarted every epoch), 5 local GD steps (lr 0.5), clip 1.0, delta = 1e-5.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from privlab.federated.simulation import RunConfig, train  # noqa: E402
from privlab.federated.tasks import load_task  # noqa: E402

ROUNDS, K = 50, 60


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--eps", type=float, nargs="+", default=[1.0, 4.0, 16.0])
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    data = load_task("adult")
    majority = None
    table = {}
    for algorithm in ("dpfedavg", "dpftrl"):
        for eps in [*args.eps, None]:
            accs = []
            started = time.perf_counter()
            for seed in args.seeds:
                out = train(RunConfig(dataset="adult", algorithm=algorithm, epsilon=eps,
                                      delta=1e-5, rounds=ROUNDS, clients_per_round=K,
                                      seed=seed), data)
                majority = out["majority_accuracy"]
                if eps is not None:
                    assert out["guarantee"]["epsilon"] <= eps
                accs.append(out["test_accuracy"])
            table[(algorithm, eps)] = (float(np.mean(accs)), float(np.std(accs)))
            print(json.dumps({"algorithm": algorithm, "epsilon": eps,
                              "accuracy_mean": np.mean(accs), "accuracy_std": np.std(accs),
                              "seconds_per_run": (time.perf_counter() - started)
                              / len(args.seeds),
                              "command": f"privlab federated train --dataset adult "
                                         f"--algorithm {algorithm} --rounds {ROUNDS} "
                                         f"--clients-per-round {K} "
                                         + ("--non-private" if eps is None else
                                            f"--epsilon {eps:g} --delta 1e-5")
                                         + f" --seed {args.seeds[0]} --json"}), flush=True)
    print(f"\nmajority-class baseline accuracy: {majority:.4f}")
    print("\n| algorithm | eps=" + " | eps=".join(f"{e:g}" for e in args.eps)
          + " | non-private |")
    print("|---|" + "---|" * (len(args.eps) + 1))
    for algorithm in ("dpfedavg", "dpftrl"):
        cells = [table[(algorithm, e)] for e in [*args.eps, None]]
        print(f"| {algorithm} | " + " | ".join(f"{m:.4f} ± {s:.4f}" for m, s in cells) + " |")


if __name__ == "__main__":
    main()
