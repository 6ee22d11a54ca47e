"""LiRA with 16 shadow models on Adult: shadows trained all at once vs one after another.

Both variants run the SAME attack (same subsets, seeds, configs): `TorchTrainer(at_once=True)`
trains the 16 MLPs in one vectorised run (`privlab.learn.multi.train_many`),
`at_once=False` calls `train_one` 16 times. Printed: seconds of each (shadow training only),
the ratio, and both attacks' AUC / TPR at 1% FPR, which must agree (dropout is off, so the
models match to float rounding).

Setup: bundled Adult (rows with missing values dropped, fnlwgt dropped, duplicates removed),
public data-independent preprocessing (104 features), seeded split: 2,000 members, 2,000
non-members, the rest as the attacker pool. MLP 104-128-64-2 (LayerNorm), Adam lr 1e-3,
batch 64, --epochs epochs, plain (overfit target) or DP-SGD with --epsilon.

Usage: .venv/bin/python benchmarks/audit.py [--epochs 10] [--models 16] [--members 2000]
       [--epsilon E] [--threads 1] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--models", type=int, default=16)
    ap.add_argument("--members", type=int, default=2000)
    ap.add_argument("--epsilon", type=float, default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")

    from privlab.audit import TorchTrainer, lira
    from privlab.audit.runner import split_for_audit
    from privlab.data.datasets import load_adult
    from privlab.learn.dpsgd import TrainConfig
    from privlab.learn.models import SeedMLP
    from privlab.learn.multi import train_one

    data = split_for_audit(load_adult(drop_missing=True), "salary", args.members, seed=0,
                           adult=True)
    d = data["features"]
    fn = lambda: SeedMLP(d, (128, 64), 2, dropout=0.0)  # noqa: E731
    if args.epsilon is None:
        cfg = TrainConfig(method="none", epochs=args.epochs, batch_size=64, lr=1e-3)
    else:
        # public_size: the benchmark's own data, whose size is public
        cfg = TrainConfig(epsilon=args.epsilon, delta=1e-5, epochs=args.epochs, batch_size=64,
                          lr=1e-3, public_size=len(data["y_mem"]))
    mem = (data["x_mem"], data["y_mem"])
    non = (data["x_non"], data["y_non"])
    pool = (data["x_pool"], data["y_pool"])
    target, _ = train_one(fn, *mem, cfg, seed=12345)
    out = {"rows": data["rows"], "duplicates_removed": data["removed"],
           "members": args.members, "models": args.models, "epochs": args.epochs,
           "epsilon": args.epsilon, "threads": torch.get_num_threads(), "variants": {}}
    for name, at_once in (("at_once", True), ("one_after_another", False)):
        trainer = TorchTrainer(fn, cfg, n_classes=2, at_once=at_once)
        t = time.perf_counter()
        res = lira(target, mem, non, trainer, n_shadow=args.models, pool=pool, rng=0)
        total = time.perf_counter() - t
        s = res.summary((0.001, 0.01, 0.1))
        out["variants"][name] = {"shadow_training_seconds": trainer.seconds,
                                 "attack_seconds": total, "auc": s["auc"],
                                 "tpr_at_fpr": s["tpr_at_fpr"]}
        print(json.dumps({name: out["variants"][name]}), flush=True)
    a, b = out["variants"]["at_once"], out["variants"]["one_after_another"]
    out["speedup"] = b["shadow_training_seconds"] / a["shadow_training_seconds"]
    out["auc_difference"] = abs(a["auc"] - b["auc"])
    print(f"LiRA, {args.models} shadow models on Adult ({args.members} rows each, "
          f"{args.epochs} epochs, {'plain' if args.epsilon is None else f'DP eps={args.epsilon}'}"
          f"): at once {a['shadow_training_seconds']:.1f} s, one after another "
          f"{b['shadow_training_seconds']:.1f} s, ratio {out['speedup']:.2f}x; AUC "
          f"{a['auc']:.4f} vs {b['auc']:.4f}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
