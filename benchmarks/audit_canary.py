"""Canary audits of DP-SGD on Adult, and RMIA against LiRA with few reference models.

Part 1, empirical epsilon lower bounds (95% confidence) at accounted epsilon 1, 2, 4, 8 and for
a non-private run, with the demo's DP-SGD settings (Adult MLP 104-64-32-2, --rows training
rows, expected batch 64, 8 epochs, delta 1e-5):
- white-box Dirac gradient canary (privlab.audit.canary.dirac_audit_for), --trials in and as
  many out trials;
- black-box canary: --models models (half with one mislabelled record), final-model loss;
- one-run audit (Steinke, Nasr and Jagielski 2023): --canaries mislabelled records, each in
  with probability 1/2, ONE model.
Part 2, RMIA (offline) vs offline LiRA with 1, 2 and 8 reference models against a
non-private Adult MLP (--members members, as many non-members; 30 epochs so it overfits):
TPR at 0.1% and 1% FPR and AUC.

Usage: .venv/bin/python benchmarks/audit_canary.py [--trials 300000] [--models 64]
       [--canaries 1000] [--rows 1800] [--members 2000] [--json OUT.json]
       [--parts whitebox,blackbox,onerun,mia]   (re-run parts; results merge into --json)
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np


def _adult(seed: int = 0):
    from privlab.data.datasets import load_adult
    from privlab.learn.data import adult_features, adult_preprocessor, encode_labels, split_target

    frame = load_adult(drop_missing=True)
    feats, y_raw = split_target(frame, "salary")
    x = adult_preprocessor().fit_transform(adult_features(feats)).astype(np.float32)
    y, _ = encode_labels(y_raw)
    # identical encoded rows with one label would be a member and a non-member at once
    _, first = np.unique(np.c_[x, y], axis=0, return_index=True)
    keep = np.sort(first)
    x, y = x[keep], y[keep]
    order = np.random.default_rng(seed).permutation(len(y))
    return x[order], y[order].astype(np.int64)


def audits(args, x, y, out):
    from privlab.audit.canary import (
        blackbox_canary_audit,
        dirac_audit_for,
        make_canaries,
        one_run_audit,
    )
    from privlab.learn.dpsgd import TrainConfig
    from privlab.learn.models import SeedMLP

    n = args.rows
    xt, yt, pool_x, pool_y = x[:n], y[:n], x[n:], y[n:]
    d = x.shape[1]

    def model_fn():
        return SeedMLP(d, (64, 32), 2, dropout=0.0)

    canary = make_canaries(pool_x, pool_y, 1, 2, seed=1)
    canaries = make_canaries(pool_x[1:], pool_y[1:], args.canaries, 2, seed=2)
    rows = out.get("audits", [])
    by_eps = {r["accounted_epsilon"]: r for r in rows}
    for eps in (1.0, 2.0, 4.0, 8.0, None):
        if eps is None:
            cfg = TrainConfig(method="none", epochs=8, batch_size=64, lr=5e-3)
        else:
            # public_size: the benchmark's own data, whose size is public
            cfg = TrainConfig(epsilon=eps, delta=1e-5, epochs=8, batch_size=64, lr=5e-3,
                              public_size=n)
        row = by_eps.get(eps) or {"accounted_epsilon": eps}
        if eps not in by_eps:
            rows.append(row)
        t0 = time.perf_counter()
        if "whitebox" in args.parts:
            wb = dirac_audit_for(n, cfg, trials=args.trials, seed=11)
            row["white_box"] = wb.lower_bound
            row["white_box_details"] = wb.details
        if "blackbox" in args.parts:
            bb = blackbox_canary_audit(model_fn, xt, yt, cfg, canary, models=args.models,
                                       seed=12)
            row["black_box"] = bb.lower_bound
            row["black_box_details"] = bb.details
        if "onerun" in args.parts:
            one = one_run_audit(model_fn, xt, yt, cfg, canaries, seed=13)
            row["one_run"] = one.lower_bound
            row["one_run_details"] = one.details
        row["seconds_" + "_".join(args.parts)] = time.perf_counter() - t0
        print(f"eps {'none (not private)' if eps is None else f'{eps:g}':>20}: white-box "
              f"{row.get('white_box', float('nan')):.2f}  black-box "
              f"{row.get('black_box', float('nan')):.2f}  one-run "
              f"{row.get('one_run', float('nan')):.2f}", flush=True)
        out["audits"] = rows


def mia(args, x, y, out):
    from privlab.audit.attacks import lira, rmia
    from privlab.audit.metrics import auc, roc_curve, tpr_at_fpr
    from privlab.audit.trainers import TorchTrainer
    from privlab.learn.dpsgd import TrainConfig
    from privlab.learn.models import SeedMLP
    from privlab.learn.multi import train_many

    m = args.members
    mem, non = (x[:m], y[:m]), (x[m:2 * m], y[m:2 * m])
    pool = (x[2 * m:], y[2 * m:])
    d = x.shape[1]

    def model_fn():
        return SeedMLP(d, (128, 64), 2, dropout=0.0)

    cfg = TrainConfig(method="none", epochs=30, batch_size=64, lr=1e-3)
    target = train_many(model_fn, *mem, config=cfg, seeds=[7]).models[0]
    trainer = TorchTrainer(model_fn, cfg, 2)
    rows = []
    for k in (1, 2, 8):
        for name in ("rmia", "lira"):
            t0 = time.perf_counter()
            if name == "rmia":
                res = rmia(target, mem, non, trainer, n_ref=k, pool=pool, population=5000,
                           rng=3)
            else:
                res = lira(target, mem, non, trainer, n_shadow=k, pool=pool, online=False,
                           rng=3)
            roc = roc_curve(res.scores_in, res.scores_out)
            row = {"attack": name, "reference_models": k,
                   "tpr_at_0.1%_fpr": tpr_at_fpr(roc, 0.001),
                   "tpr_at_1%_fpr": tpr_at_fpr(roc, 0.01),
                   "auc": auc(res.scores_in, res.scores_out),
                   "seconds": time.perf_counter() - t0}
            rows.append(row)
            print(f"{name:5} refs {k}: TPR@0.1% {row['tpr_at_0.1%_fpr']:.4f}  TPR@1% "
                  f"{row['tpr_at_1%_fpr']:.4f}  AUC {row['auc']:.3f}", flush=True)
            out["mia"] = rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=300_000)
    ap.add_argument("--models", type=int, default=64)
    ap.add_argument("--canaries", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=1800)
    ap.add_argument("--members", type=int, default=2000)
    ap.add_argument("--parts", default="whitebox,blackbox,onerun,mia",
                    help="which parts to (re-)run; results merge into an existing --json")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import torch

    torch.set_num_threads(1)
    x, y = _adult()
    args.parts = args.parts.split(",")
    out: dict = json.loads(args.json.read_text()) if args.json and args.json.exists() else {}
    out.setdefault("runs", []).append(vars(args) | {"json": str(args.json)})
    try:
        if {"whitebox", "blackbox", "onerun"} & set(args.parts):
            audits(args, x, y, out)
        if "mia" in args.parts:
            mia(args, x, y, out)
    finally:
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(out, indent=2, default=float) + "\n")


if __name__ == "__main__":
    main()
