"""Benchmarks for privlab.learn, printed as ratios measured in ONE run (same machine, same load).

1. DP-SGD epoch time on Adult (MLP 104-128-64-2 with LayerNorm, expected batch 256):
   privlab (fast per-example norms, tensor batching, Poisson sampling) vs Opacus used directly
   (default hooks, and ghost clipping) vs non-private training (plain DataLoader loop and
   privlab's tensor-batched plain mode). Test accuracy after the timed epochs is printed too,
   so speed is compared at equal accuracy.
2. 16 models trained at once (`MultiModelTrainer`, vmap over stacked modules) vs the same 16
   trained one after another, DP and non-DP, with the maximum parameter difference.
3. Epsilon of the same (sigma, q, steps) from privlab vs Opacus' RDP accountant vs
   dp-accounting's PLD, and the sigma each calibration needs for a target epsilon.

Usage:  .venv/bin/python benchmarks/learn.py [--part all|epoch|multi|accounting]
        [--epochs 2] [--threads 1] [--repeats 3] [--json OUT.json]
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
import torch.nn.functional as F

warnings.filterwarnings("ignore")


def _adult():
    from privlab.learn.data import adult_split

    return adult_split(seed=0)


def _model(d: int, seed: int):
    from privlab.learn.models import adult_mlp

    torch.manual_seed(seed)
    return adult_mlp(d)


def _acc(model, x, y) -> float:
    from privlab.learn.dpsgd import accuracy

    return accuracy(model, x, y)


# ------------------------------------------------------------------------------ 1. epoch time
def run_plain_dataloader(split, epochs: int, seed: int) -> tuple[float, float]:
    from torch.utils.data import DataLoader, TensorDataset

    model = _model(split.X_train.shape[1], seed)
    ds = TensorDataset(torch.from_numpy(split.X_train), torch.from_numpy(split.y_train))
    loader = DataLoader(ds, batch_size=256, shuffle=True,
                        generator=torch.Generator().manual_seed(seed))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    t = time.perf_counter()
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    return (time.perf_counter() - t) / epochs, _acc(model, split.X_test, split.y_test)


def run_opacus(split, epochs: int, seed: int, sigma: float, mode: str) -> tuple[float, float]:
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    model = _model(split.X_train.shape[1], seed)
    ds = TensorDataset(torch.from_numpy(split.X_train), torch.from_numpy(split.y_train))
    loader = DataLoader(ds, batch_size=256, shuffle=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    engine = PrivacyEngine(accountant="rdp")
    criterion = torch.nn.CrossEntropyLoss()
    if mode == "ghost":
        model, opt, criterion, loader = engine.make_private(
            module=model, optimizer=opt, data_loader=loader, criterion=criterion,
            noise_multiplier=sigma, max_grad_norm=1.0, grad_sample_mode="ghost")
    else:
        model, opt, loader = engine.make_private(
            module=model, optimizer=opt, data_loader=loader, noise_multiplier=sigma,
            max_grad_norm=1.0)
    model.train()
    t = time.perf_counter()
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            opt.step()
    sec = (time.perf_counter() - t) / epochs
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(split.X_test))
    return sec, float((logits.argmax(1).numpy() == split.y_test).mean())


def run_privlab(split, epochs: int, seed: int, method: str, sigma: float | None,
                engine: str = "auto") -> tuple[float, float]:
    from privlab.learn.dpsgd import TrainConfig, train_classifier

    model = _model(split.X_train.shape[1], seed)
    # public_size: the benchmark's own data, whose size is public
    cfg = TrainConfig(method=method, noise_multiplier=sigma if method == "dpsgd" else None,
                      epochs=epochs, batch_size=256, lr=1e-3, engine=engine,
                      public_size=len(split.y_train) if method == "dpsgd" else None)
    res = train_classifier(model, split.X_train, split.y_train, cfg, rng=seed)
    return res.loop_seconds / epochs, _acc(model, split.X_test, split.y_test)


def bench_epoch(epochs: int, repeats: int) -> dict:
    from privlab.core.accounting import calibrate_noise_multiplier

    split = _adult()
    n = len(split.y_train)
    q = 256 / n
    steps = math.ceil(n / 256) * epochs
    sigma = calibrate_noise_multiplier(1.0, 1e-5, q, steps)
    runs: dict[str, list[tuple[float, float]]] = {k: [] for k in (
        "plain_dataloader", "privlab_plain", "opacus_hooks", "opacus_ghost", "privlab_dpsgd",
        "privlab_dpsgd_vmap")}
    for r in range(repeats):  # interleaved, so a load spike hits every variant alike
        runs["plain_dataloader"].append(run_plain_dataloader(split, epochs, r))
        runs["privlab_plain"].append(run_privlab(split, epochs, r, "none", None))
        runs["opacus_hooks"].append(run_opacus(split, epochs, r, sigma, "hooks"))
        runs["opacus_ghost"].append(run_opacus(split, epochs, r, sigma, "ghost"))
        runs["privlab_dpsgd"].append(run_privlab(split, epochs, r, "dpsgd", sigma))
        runs["privlab_dpsgd_vmap"].append(run_privlab(split, epochs, r, "dpsgd", sigma, "vmap"))
    out = {"rows": n, "batch": 256, "epochs_per_run": epochs, "repeats": repeats,
           "noise_multiplier": sigma, "target_epsilon": 1.0, "delta": 1e-5, "variants": {}}
    base = statistics.median(t for t, _ in runs["plain_dataloader"])
    for name, vals in runs.items():
        sec = statistics.median(t for t, _ in vals)
        acc = statistics.mean(a for _, a in vals)
        out["variants"][name] = {"epoch_seconds": sec, "x_plain_dataloader": sec / base,
                                 "test_accuracy": acc}
    v = out["variants"]
    out["speedup_privlab_vs_opacus_hooks"] = (v["opacus_hooks"]["epoch_seconds"]
                                              / v["privlab_dpsgd"]["epoch_seconds"])
    out["speedup_privlab_vs_opacus_ghost"] = (v["opacus_ghost"]["epoch_seconds"]
                                              / v["privlab_dpsgd"]["epoch_seconds"])
    out["privlab_dp_overhead_vs_privlab_plain"] = (v["privlab_dpsgd"]["epoch_seconds"]
                                                   / v["privlab_plain"]["epoch_seconds"])
    return out


# ------------------------------------------------------------------------------ 2. many models
def bench_multi(repeats: int, models: int = 16, epochs: int = 1,
                batches: tuple[int, ...] = (64, 32, 16)) -> dict:
    """Kobylianska (2025) trains shadow models with batch 32 and the loss-attack target with 16."""
    from privlab.learn.data import classification_benchmark_split
    from privlab.learn.dpsgd import TrainConfig
    from privlab.learn.models import SeedMLP
    from privlab.learn.multi import shadow_subsets, train_many, train_one

    split = classification_benchmark_split("shadow")
    x, y = split.extra["X_shadow"], split.extra["y_shadow"]
    subsets = shadow_subsets(len(y), models, 1000, seed=1)
    seeds = list(range(models))

    def model_fn():
        # Kobylianska's (2025) MLP; dropout 0 so that "same result" can be checked parameter by
        # parameter (with dropout, the stacked run draws its masks differently)
        return SeedMLP(100, (128, 64), 2, dropout=0.0)

    out: dict = {"models": models, "rows_per_model": 1000, "epochs": epochs,
                 "architecture": "SeedMLP 100-128-64-2, LayerNorm, ReLU (dropout 0)",
                 "repeats": repeats, "runs": []}
    for batch in batches:
        for method in ("none", "dpsgd"):
            # public_size: the benchmark's own data, whose size is public
            cfg = TrainConfig(method=method, epsilon=4.0 if method == "dpsgd" else None,
                              delta=1e-5, epochs=epochs, batch_size=batch, lr=1e-3,
                              public_size=1000 if method == "dpsgd" else None)
            together, apart, diff = [], [], 0.0
            for _ in range(repeats):  # alternate, so load changes hit both sides
                many = train_many(model_fn, x, y, config=cfg, subsets=subsets, seeds=seeds)
                together.append(many.loop_seconds)
                total = 0.0
                for i, seed in enumerate(seeds):
                    alone, res = train_one(model_fn, x[subsets[i]], y[subsets[i]], cfg,
                                           seed=seed)
                    total += res.loop_seconds
                    diff = max(diff, max(float((p - q).detach().abs().max()) for p, q in
                                         zip(alone.parameters(), many.models[i].parameters(),
                                             strict=True)))
                apart.append(total)
            t_many, t_apart = statistics.median(together), statistics.median(apart)
            row = {"batch": batch, "method": method, "together_seconds": t_many,
                   "one_after_another_seconds": t_apart, "speedup": t_apart / t_many,
                   "speedups_per_repeat": [a / t for a, t in zip(apart, together,
                                                                   strict=True)],
                   "max_parameter_difference": diff, "engine": many.engine}
            out["runs"].append(row)
            print(json.dumps(row), flush=True)
    return out


# ------------------------------------------------------------------------------ 3. accounting
def bench_accounting() -> dict:
    from dp_accounting import dp_event
    from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
    from opacus.accountants import RDPAccountant
    from opacus.accountants.utils import get_noise_multiplier

    from privlab.core import accounting
    from privlab.learn.dpsgd import quiet_rdp_warnings

    delta = 1e-5
    settings = [
        ("adult: q=256/24130, 20 epochs", 256 / 24130, 20 * math.ceil(24130 / 256)),
        ("Kobylianska (2025) DP: q=64/1000, 50 epochs", 64 / 1000, 50 * math.ceil(1000 / 64)),
        ("Kobylianska (2025) long: q=16/1000, 150 epochs", 16 / 1000, 150 * math.ceil(1000 / 16)),
    ]
    rows = []
    for name, q, steps in settings:
        for sigma in (0.8, 1.0, 2.0):
            t = time.perf_counter()
            ours = accounting.dpsgd_epsilon(sigma, q, steps, delta, "pld")
            t_ours = time.perf_counter() - t
            acc = RDPAccountant()
            acc.history = [(sigma, q, steps)]
            opacus_rdp = acc.get_epsilon(delta)
            pld = PLDAccountant()  # dp-accounting's defaults (value_discretization 1e-4)
            pld.compose(dp_event.SelfComposedDpEvent(
                dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), steps))
            t = time.perf_counter()
            reference = pld.get_epsilon(delta)
            t_ref = time.perf_counter() - t
            rows.append({"setting": name, "sigma": sigma, "q": q, "steps": steps,
                         "privlab": ours, "opacus_rdp": opacus_rdp, "dp_accounting_pld": reference,
                         "privlab_vs_pld": ours / reference - 1,
                         "rdp_overstates_by": opacus_rdp / reference - 1,
                         "privlab_seconds": t_ours, "pld_seconds": t_ref})
    calib = []
    for name, q, steps in settings:
        for target in (1.0, 4.0, 8.0):
            with quiet_rdp_warnings():
                ours = accounting.calibrate_noise_multiplier(target, delta, q, steps)
            rdp = get_noise_multiplier(target_epsilon=target, target_delta=delta, sample_rate=q,
                                       steps=steps, accountant="rdp", epsilon_tolerance=0.001)
            calib.append({"setting": name, "target_epsilon": target, "sigma_privlab_pld": ours,
                          "sigma_opacus_rdp": rdp, "rdp_extra_noise": rdp / ours - 1})
    return {"delta": delta, "epsilon": rows, "calibration": calib}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default="all", choices=["all", "epoch", "multi", "accounting"])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    try:  # BLAS threads too: the machine is shared, one thread each keeps ratios stable
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads)
    except ImportError:
        pass
    logging.getLogger("absl").setLevel(logging.ERROR)
    results: dict = {"threads": args.threads, "torch": torch.__version__}
    if args.part in ("all", "epoch"):
        results["epoch"] = bench_epoch(args.epochs, args.repeats)
        print(json.dumps(results["epoch"], indent=2))
    if args.part in ("all", "multi"):
        results["multi"] = bench_multi(args.repeats)
        print(json.dumps(results["multi"], indent=2))
    if args.part in ("all", "accounting"):
        results["accounting"] = bench_accounting()
        print(json.dumps(results["accounting"], indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
