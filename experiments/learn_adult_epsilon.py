"""Accuracy vs epsilon on UCI Adult: DP-SGD MLP, objective- and output-perturbation logistic
regression, and their non-private twins.

Data: Adult, rows with missing values removed (30,162), seeded 80/20 split, the public
(data-independent) pipeline of `privlab.learn.data.adult_preprocessor` (104 features).
Hyperparameters are fixed in advance (not tuned on the test set, which would leak):
- MLP 104-128-64-2 (LayerNorm, ReLU, no dropout), Adam lr 1e-3, expected batch 256,
  clip 1.0, delta 1e-5, `--epochs` epochs (default 10), sigma calibrated by PLD;
- logistic regression: alpha (L2) 1e-4, row-norm bound sqrt(13) (5 numeric columns in
  [0, 1] + 8 one-hot blocks), delta 1e-5 (Gaussian objective perturbation) and delta 0
  (Chaudhuri et al.'s pure version); output perturbation at the same alpha.
Each cell: mean (and sd) test accuracy over `--seeds` seeds (noise and initialisation).

Usage: .venv/bin/python experiments/learn_adult_epsilon.py [--epochs 10] [--seeds 3]
       [--epsilons 0.5,1,2,4,8] [--json OUT.json] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import statistics
import time
import warnings
from pathlib import Path

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epsilons", default="0.5,1,2,4,8")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from threadpoolctl import threadpool_limits

    threadpool_limits(args.threads)
    logging.getLogger("absl").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")

    from privlab.learn.data import adult_split
    from privlab.learn.dpsgd import TrainConfig, accuracy, train_classifier
    from privlab.learn.models import adult_mlp
    from privlab.learn.objective import (
        logistic_objective_perturbation,
        logistic_output_perturbation,
        logistic_plain,
    )

    split = adult_split(seed=0)
    d = split.X_train.shape[1]
    norm = math.sqrt(13)
    epsilons = [float(e) for e in args.epsilons.split(",")]
    seeds = list(range(args.seeds))

    def lin_acc(model) -> float:
        return float((model.predict_proba(split.X_test).argmax(1) == split.y_test).mean())

    def mlp_acc(cfg: TrainConfig, seed: int) -> tuple[float, dict]:
        torch.manual_seed(seed)
        model = adult_mlp(d)
        res = train_classifier(model, split.X_train, split.y_train, cfg, rng=seed)
        info = res.plan.to_dict() if res.plan else {}
        return accuracy(model, split.X_test, split.y_test), info

    rows = []
    started = time.perf_counter()
    for eps in [None, *epsilons]:
        row: dict = {"epsilon": eps}
        cells = {"dpsgd_mlp": [], "objective_logreg_delta1e-5": [], "objective_logreg_pure": [],
                 "output_logreg_delta1e-5": []}
        for seed in seeds:
            if eps is None:
                cfg = TrainConfig(method="none", epochs=args.epochs, batch_size=256, lr=1e-3)
                cells["dpsgd_mlp"].append(mlp_acc(cfg, seed)[0])
                if seed == 0:
                    plain = lin_acc(logistic_plain(split.X_train, split.y_train, l2=1e-4,
                                                   data_norm=norm))
                for key in list(cells)[1:]:
                    cells[key].append(plain)
                continue
            # public_size: the benchmark's own data, whose size is public
            cfg = TrainConfig(epsilon=eps, delta=1e-5, clip=1.0, epochs=args.epochs,
                              batch_size=256, lr=1e-3, public_size=len(split.y_train))
            acc, info = mlp_acc(cfg, seed)
            cells["dpsgd_mlp"].append(acc)
            row["dpsgd"] = {k: info[k] for k in ("noise_multiplier", "sample_rate", "steps",
                                                  "epsilon_pld", "epsilon_rdp")}
            kw = dict(l2=1e-4, data_norm=norm, rng=seed, classes=[0, 1])
            cells["objective_logreg_delta1e-5"].append(lin_acc(logistic_objective_perturbation(
                split.X_train, split.y_train, eps, 1e-5, **kw)))
            cells["objective_logreg_pure"].append(lin_acc(logistic_objective_perturbation(
                split.X_train, split.y_train, eps, 0.0, **kw)))
            cells["output_logreg_delta1e-5"].append(lin_acc(logistic_output_perturbation(
                split.X_train, split.y_train, eps, 1e-5, **kw)))
        for key, vals in cells.items():
            row[key] = {"mean": statistics.mean(vals),
                        "sd": statistics.stdev(vals) if len(vals) > 1 else 0.0}
        rows.append(row)
        print(json.dumps(row), flush=True)
    out = {"dataset": split.info, "epochs": args.epochs, "seeds": seeds, "rows": rows,
           "seconds": time.perf_counter() - started, "threads": args.threads}
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    if args.markdown:
        print("\n| epsilon | DP-SGD MLP | objective logreg (delta 1e-5) | objective logreg "
              "(pure) | output logreg (delta 1e-5) | DP-SGD sigma (PLD) | eps RDP same run |")
        print("|---|---|---|---|---|---|---|")
        def cell(r: dict, k: str) -> str:
            return f"{r[k]['mean']:.4f} +- {r[k]['sd']:.4f}"

        for r in rows:
            sig = f"{r['dpsgd']['noise_multiplier']:.3f}" if "dpsgd" in r else "-"
            rdp = f"{r['dpsgd']['epsilon_rdp']:.3f}" if "dpsgd" in r else "-"
            eps = "non-private" if r["epsilon"] is None else f"{r['epsilon']:g}"
            print(f"| {eps} | {cell(r, 'dpsgd_mlp')} | {cell(r, 'objective_logreg_delta1e-5')} | "
                  f"{cell(r, 'objective_logreg_pure')} | {cell(r, 'output_logreg_delta1e-5')} | "
                  f"{sig} | {rdp} |")


if __name__ == "__main__":
    main()
