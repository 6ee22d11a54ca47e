"""Kobylianska's (2025) membership-inference figures, measured with privlab.audit
(tables in docs/audit.md).

Setup (Kobylianska 2025, section 2.1, our reading): make_classification(100 features,
20 informative, 10 redundant, 5 repeated, 2 classes, n_clusters_per_class=3, random_state=42),
a seeded split (`privlab.learn.data.classification_benchmark_split`), StandardScaler fitted on
the TARGET's training rows, the MLP 100-128-64-2 (LayerNorm, ReLU, Dropout 0.2). Losses in
float64 (float32 softmax
cross-entropy rounds many member losses to exactly 0; the float32 AUC is printed too).

--part loss:   train 1,000 / test 3,000, 150 epochs, batch 16, Adam lr 0.01 (overfit), one
               model per seed (trained together); loss-attack AUC members vs test. Then
               DP-SGD at each --epsilons (delta 1e-5, clip 1, expected batch 64, --dp-epochs,
               Adam lr 1e-3): accuracy, loss-attack AUC, empirical epsilon next to the
               accounted one.
--part shadow: target train 2,000 / test 4,500 / attacker pool 5,250; 50 epochs, batch 32,
               lr 1e-3. Attacks on members vs 2,000 test rows: loss, confidence, modified
               entropy, shadow (5 shadows on pool halves, RandomForest(200) on the softmax
               vector: Kobylianska's attack), shadow with label-aware features, LiRA online and
               offline (--lira-models shadows trained at once). Optionally DP at --shadow-eps.

--part dpsweep: DP-SGD at eps 1 over a few (batch, epochs, lr, dropout): best honest accuracy.

Usage: .venv/bin/python experiments/audit_classification.py --part loss|shadow|dpsweep|all
       [--seeds 3] [--epsilons 1] [--dp-epochs 30] [--lira-models 16] [--shadow-eps 1] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
import torch


def _scale(split):
    from sklearn.preprocessing import StandardScaler

    sc = StandardScaler().fit(split.X_train)
    f = lambda a: sc.transform(a).astype(np.float32)  # noqa: E731
    return f


def _acc(model, x, y) -> float:
    from privlab.learn.dpsgd import accuracy

    return accuracy(model, x, y)


def _float32_loss_auc(model, mem, non) -> float:
    from privlab.audit.metrics import auc

    def loss32(x, y):
        with torch.no_grad():
            logits = model(torch.from_numpy(x)).float()
            return torch.nn.functional.cross_entropy(logits, torch.from_numpy(y),
                                                     reduction="none").numpy()

    model.eval()
    return auc(-loss32(*mem), -loss32(*non))


def _attack_row(res, delta: float, fprs=(0.001, 0.01, 0.1)) -> dict:
    d = res.to_dict(fprs=fprs, delta=delta)
    e = d["empirical_epsilon"]
    return {"attack": res.name, "auc": d["auc"], "advantage": d["advantage"],
            **{f"tpr@{k}": v for k, v in d["tpr_at_fpr"].items()},
            "balanced_accuracy": d.get("balanced_accuracy"),
            "eps_point": e["point"], "eps_cp": e["clopper_pearson"], "eps_bayes": e["bayesian"]}


def part_loss(args, out: dict) -> None:
    from privlab.audit import threshold_attack
    from privlab.learn.data import classification_benchmark_split
    from privlab.learn.dpsgd import TrainConfig
    from privlab.learn.models import SeedMLP
    from privlab.learn.multi import train_many

    split = classification_benchmark_split("loss", random_state=42, split_seed=args.split_seed)
    f = _scale(split)
    xtr, xte = f(split.X_train), f(split.X_test)
    mem, non = (xtr, split.y_train), (xte, split.y_test)
    seeds = list(range(args.seeds))
    mlp = lambda: SeedMLP(100, (128, 64), 2, dropout=0.2)  # noqa: E731
    t = time.perf_counter()
    cfg = TrainConfig(method="none", epochs=args.baseline_epochs, batch_size=16, lr=0.01)
    many = train_many(mlp, xtr, split.y_train, config=cfg, seeds=seeds)
    rows = []
    for s, model in zip(seeds, many.models, strict=True):
        res = threshold_attack("loss", model, mem, non)
        rows.append({"seed": s, "train": _acc(model, xtr, split.y_train),
                     "test": _acc(model, xte, split.y_test), **_attack_row(res, 1e-5),
                     "auc_float32_loss": _float32_loss_auc(model, mem, non)})
        print(json.dumps(rows[-1]), flush=True)
    aucs = [r["auc"] for r in rows]
    out["loss_setting_baseline"] = {
        "runs": rows, "auc_mean": statistics.mean(aucs),
        "auc_sd": statistics.stdev(aucs) if len(aucs) > 1 else 0.0,
        "test_mean": statistics.mean(r["test"] for r in rows), "seconds":
        time.perf_counter() - t, "thesis": {"train": 1.0, "test": 0.81, "auc": 0.7309}}
    eps_list = [float(e) for e in args.epsilons.split(",") if e]
    if not eps_list:
        return
    configs, tags = [], []
    for eps in eps_list:
        for s in seeds:
            # public_size: the benchmark's own data, whose size is public
            configs.append(TrainConfig(epsilon=eps, delta=1e-5, clip=1.0, epochs=args.dp_epochs,
                                       batch_size=64, lr=1e-3,
                                       public_size=len(split.y_train)))
            tags.append((eps, s))
    t = time.perf_counter()
    many = train_many(mlp, xtr, split.y_train, config=configs, seeds=[s for _, s in tags])
    dp = []
    for (eps, s), model, g in zip(tags, many.models, many.guarantees, strict=True):
        res = threshold_attack("loss", model, mem, non)
        row = {"target_epsilon": eps, "seed": s, "accounted_epsilon": g.epsilon,
               "delta": g.delta, "accountant": g.accountant,
               "train": _acc(model, xtr, split.y_train), "test": _acc(model, xte, split.y_test),
               **_attack_row(res, g.delta)}
        dp.append(row)
        print(json.dumps(row), flush=True)
    out["loss_setting_dpsgd"] = {"runs": dp, "epochs": args.dp_epochs, "batch": 64,
                                 "lr": 1e-3, "clip": 1.0, "seconds": time.perf_counter() - t}


def part_shadow(args, out: dict) -> None:
    from privlab.audit import TorchTrainer, lira, shadow_attack, threshold_attack
    from privlab.learn.data import classification_benchmark_split
    from privlab.learn.dpsgd import TrainConfig
    from privlab.learn.models import SeedMLP
    from privlab.learn.multi import train_one

    split = classification_benchmark_split("shadow", random_state=42, split_seed=args.split_seed)
    f = _scale(split)
    xtr, xte = f(split.X_train), f(split.X_test)
    xsh, ysh = f(split.extra["X_shadow"]), split.extra["y_shadow"]
    n_non = len(split.y_train)
    mem, non = (xtr, split.y_train), (xte[:n_non], split.y_test[:n_non])
    pool = (xsh, ysh)
    mlp = lambda: SeedMLP(100, (128, 64), 2, dropout=0.2)  # noqa: E731
    settings = [("none", None)] + [("dp", float(e)) for e in args.shadow_eps.split(",") if e]
    for kind, eps in settings:
        if kind == "none":
            cfg = TrainConfig(method="none", epochs=50, batch_size=32, lr=1e-3)
        else:
            # public_size: the benchmark's own data, whose size is public
            cfg = TrainConfig(epsilon=eps, delta=1e-5, clip=1.0, epochs=args.dp_epochs,
                              batch_size=64, lr=1e-3, public_size=len(split.y_train))
        t = time.perf_counter()
        target, res = train_one(mlp, xtr, split.y_train, cfg, seed=100)
        g = res.guarantee
        delta = g.delta if g.is_dp else 1e-5
        info = {"setting": kind, "target_epsilon": eps, "accounted_epsilon":
                g.epsilon if g.is_dp else None, "train": _acc(target, xtr, split.y_train),
                "test": _acc(target, xte, split.y_test), "attacks": []}
        print(json.dumps({k: v for k, v in info.items() if k != "attacks"}), flush=True)
        trainer = TorchTrainer(mlp, cfg, n_classes=2, at_once=True)
        sh = shadow_attack(target, mem, non, pool, trainer, n_shadow=5, rng=0)
        info["shadow_seconds"] = trainer.seconds
        results = [sh, shadow_attack(target, mem, non, pool, trainer, n_shadow=5,
                                     features="label", rng=0)]
        for k in ("loss", "confidence", "mentr"):
            results.append(threshold_attack(k, target, mem, non, calibration=sh.calibration))
        for online in (True, False):
            results.append(lira(target, mem, non, trainer, n_shadow=args.lira_models,
                                pool=pool, online=online, rng=0))
            info[f"lira_{'online' if online else 'offline'}_seconds"] = trainer.seconds
        for r in results:
            row = _attack_row(r, delta)
            info["attacks"].append(row)
            print(json.dumps(row), flush=True)
        info["seconds"] = time.perf_counter() - t
        out[f"shadow_setting_{kind}" + (f"_eps{eps:g}" if eps else "")] = info


SWEEP = [(64, 50, 1e-3, 0.2), (256, 100, 3e-3, 0.2), (256, 100, 3e-3, 0.0),
         (128, 50, 3e-3, 0.0), (500, 200, 1e-2, 0.0), (1000, 300, 1e-2, 0.0)]


def part_dpsweep(args, out: dict) -> None:
    """DP-SGD at eps 1 on the loss setting over (expected batch, epochs, lr, dropout): the
    best accuracy we could reach honestly (each config accounted to eps 1 on its own)."""
    from privlab.audit import threshold_attack
    from privlab.learn.data import classification_benchmark_split
    from privlab.learn.dpsgd import TrainConfig
    from privlab.learn.models import SeedMLP
    from privlab.learn.multi import train_many

    split = classification_benchmark_split("loss", random_state=42, split_seed=args.split_seed)
    f = _scale(split)
    xtr, xte = f(split.X_train), f(split.X_test)
    seeds = list(range(args.seeds))
    rows = []
    for batch, epochs, lr, drop in SWEEP:
        # public_size: the benchmark's own data, whose size is public
        cfg = TrainConfig(epsilon=1.0, delta=1e-5, epochs=epochs, batch_size=batch, lr=lr,
                          public_size=len(split.y_train))
        many = train_many(lambda d=drop: SeedMLP(100, (128, 64), 2, dropout=d), xtr,
                          split.y_train, config=[cfg] * len(seeds), seeds=seeds)
        accs = [_acc(m, xte, split.y_test) for m in many.models]
        aucs = [threshold_attack("loss", m, (xtr, split.y_train), (xte, split.y_test))
                .summary((0.1,))["auc"] for m in many.models]
        row = {"batch": batch, "epochs": epochs, "lr": lr, "dropout": drop,
               "noise_multiplier": many.plans[0].noise_multiplier,
               "accounted_epsilon": many.guarantees[0].epsilon,
               "test_mean": float(np.mean(accs)), "test_sd": float(np.std(accs, ddof=1))
               if len(accs) > 1 else 0.0, "auc_mean": float(np.mean(aucs))}
        rows.append(row)
        print(json.dumps(row), flush=True)
    out["dp_eps1_sweep"] = rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default="all", choices=["loss", "shadow", "dpsweep", "all"])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--split-seed", type=int, default=0)
    ap.add_argument("--baseline-epochs", type=int, default=150)
    ap.add_argument("--epsilons", default="1")
    ap.add_argument("--dp-epochs", type=int, default=30)
    ap.add_argument("--lira-models", type=int, default=16)
    ap.add_argument("--shadow-eps", default="1")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    logging.getLogger("absl").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    out: dict = {"args": vars(args) | {"json": str(args.json)}}
    started = time.perf_counter()
    if args.part in ("loss", "all"):
        part_loss(args, out)
    if args.part in ("shadow", "all"):
        part_shadow(args, out)
    if args.part in ("dpsweep", "all"):
        part_dpsweep(args, out)
    out["seconds"] = time.perf_counter() - started
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
