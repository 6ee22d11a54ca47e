"""MovieLens ml-latest-small: test RMSE vs user-level epsilon for DPAM, DP-FedAvg and DP-FTRL.

    .venv/bin/python experiments/federated_movielens.py [--seeds 0 1 2] [--eps 1 4 16]

Per-user 80/20 split (split seed 0), all 610 users, delta = 1e-5. Each cell is the mean (and
std) over the noise seeds of the test RMSE; every run's user-level guarantee is checked to be
<= the target epsilon. Also prints the non-private baselines (item mean, local-only billboard
model, non-private ALS and FedAvg/FTRL without clipping or noise) and the CLI command of every
cell. Hyperparameters are the package defaults (chosen on a validation split carved out of
the training ratings, never on the test ratings), except those passed on the command lines
printed below.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from dataclasses import replace

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from privlab.federated.factorized import FactorizedConfig  # noqa: E402
from privlab.federated.simulation import RunConfig, train  # noqa: E402
from privlab.federated.tasks import load_task  # noqa: E402
from privlab.utils.atomic import atomic_write_text  # noqa: E402

ROUNDS = {"dpam": 3, "dpfedavg": 50, "dpftrl": 50}
NONPRIVATE_SET = {"dpam": {"item_reg": 20.0}, "dpfedavg": {}, "dpftrl": {}}


EVAL = {"test_rmse", "n_test", "item_mean_rmse", "local_only_rmse", "wall-clock"}


def command(algorithm: str, eps: float | None, seed: int) -> str:
    parts = ["privlab federated train --dataset movielens", f"--algorithm {algorithm}",
             f"--rounds {ROUNDS[algorithm]}"]
    parts.append("--non-private" if eps is None else f"--epsilon {eps:g} --delta 1e-5")
    if algorithm != "dpam":
        parts.append("--clients-per-round 61")
    if eps is None:
        parts += [f"--set {k}={v:g}" for k, v in NONPRIVATE_SET[algorithm].items()]
    parts += [f"--seed {seed}", "--json"]
    return " ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--eps", type=float, nargs="+", default=[1.0, 4.0, 16.0])
    parser.add_argument("--algorithms", nargs="+", default=["dpam", "dpfedavg", "dpftrl"])
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    data = load_task("movielens")
    rows, baselines = [], {}
    for algorithm in args.algorithms:
        for eps in [*args.eps, None]:
            rmses, eps_seen = [], []
            started = time.perf_counter()
            for seed in args.seeds:
                base = RunConfig(algorithm=algorithm, epsilon=eps, delta=1e-5,
                                 rounds=ROUNDS[algorithm],
                                 clients_per_round=None if algorithm == "dpam" else 61,
                                 seed=seed)
                if eps is None and NONPRIVATE_SET[algorithm]:
                    base = replace(base, factorized=FactorizedConfig(
                        **NONPRIVATE_SET[algorithm]))
                out = train(base, data, baselines=not baselines)
                if not baselines:
                    baselines = {"item_mean_rmse": out["item_mean_rmse"],
                                 "local_only_rmse": out["local_only_rmse"]}
                g = out["guarantee"]
                if eps is not None:
                    # the claim on the published item table; the held-out metrics are exact
                    # and named in not_covered (they are this experiment's measurement)
                    assert g["epsilon"] <= eps and g["covers"], g
                    assert all(n.split(" ")[0] in EVAL for n in g["not_covered"]), g
                    eps_seen.append(g["epsilon"])
                rmses.append(out["test_rmse"])
            row = {"algorithm": algorithm, "epsilon": eps, "rounds": ROUNDS[algorithm],
                   "rmse_mean": float(np.mean(rmses)), "rmse_std": float(np.std(rmses)),
                   "seeds": args.seeds, "reported_epsilon": max(eps_seen) if eps_seen else None,
                   "seconds_per_run": (time.perf_counter() - started) / len(args.seeds),
                   "command": command(algorithm, eps, args.seeds[0])}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\nbaselines (non-private):", json.dumps(baselines))
    print("\n| algorithm | rounds | eps=" + " | eps=".join(f"{e:g}" for e in args.eps)
          + " | non-private |")
    print("|---|---|" + "---|" * (len(args.eps) + 1))
    for algorithm in args.algorithms:
        cells = [r for r in rows if r["algorithm"] == algorithm]
        text = [f"{r['rmse_mean']:.4f} ± {r['rmse_std']:.4f}" for r in cells]
        print(f"| {algorithm} | {ROUNDS[algorithm]} | " + " | ".join(text) + " |")
    if args.json_out:
        atomic_write_text(args.json_out, json.dumps({"rows": rows, "baselines": baselines},
                                                     indent=2))


if __name__ == "__main__":
    main()
