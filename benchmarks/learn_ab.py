"""A/B timing of the DP-SGD hot path between two privlab source trees, for a change that moves it.

Each sample is a fresh process with PYTHONPATH set to one tree, running
1. the DP-SGD epoch of `benchmarks/learn.py --part epoch` (Adult, MLP 104-128-64-2, expected
   batch 256, sigma for eps 1 at 2 epochs, privlab's fast engine, seed 0): loop seconds per
   epoch, wall and CPU, and the test accuracy (equal on both sides when the change keeps every
   random draw);
2. `train_many` of 16 DP models (the `--part multi` setting, batch 32, eps 4): loop seconds.
Samples alternate A, B, A, B, ... so that load from other work hits both sides alike; the
report gives medians and the per-pair ratios B / A. One torch and one BLAS thread.

Usage:  .venv/bin/python benchmarks/learn_ab.py --a OLD/src --b NEW/src [--pairs 6]
        [--json OUT.json]       (OLD/src e.g. from `git archive <commit> src | tar -x -C OLD`)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

KEYS = ("epoch_seconds", "epoch_cpu_seconds", "many16_dp_seconds", "many16_cpu_seconds")


def sample() -> dict:
    """One measurement with whatever privlab PYTHONPATH points at."""
    import importlib.util

    import torch

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:
        pass
    spec = importlib.util.spec_from_file_location("bench_learn",
                                                  Path(__file__).with_name("learn.py"))
    bl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bl)
    import privlab
    from privlab.core.accounting import calibrate_noise_multiplier
    from privlab.learn.data import classification_benchmark_split
    from privlab.learn.dpsgd import TrainConfig
    from privlab.learn.models import SeedMLP
    from privlab.learn.multi import shadow_subsets, train_many

    split = bl._adult()
    n = len(split.y_train)
    sigma = calibrate_noise_multiplier(1.0, 1e-5, 256 / n, math.ceil(n / 256) * 2)
    c0 = time.process_time()
    sec, acc = bl.run_privlab(split, 2, 0, "dpsgd", sigma)
    cpu_epoch = (time.process_time() - c0) / 2
    shadow = classification_benchmark_split("shadow")
    x, y = shadow.extra["X_shadow"], shadow.extra["y_shadow"]
    subsets = shadow_subsets(len(y), 16, 1000, seed=1)
    # public_size: the benchmark's own data, whose size is public
    cfg = TrainConfig(method="dpsgd", epsilon=4.0, delta=1e-5, epochs=1, batch_size=32,
                      lr=1e-3, public_size=1000)
    c0 = time.process_time()
    many = train_many(lambda: SeedMLP(100, (128, 64), 2, dropout=0.0), x, y, config=cfg,
                      subsets=subsets, seeds=list(range(16)))
    return {"privlab": privlab.__file__, "epoch_seconds": sec, "epoch_cpu_seconds": cpu_epoch,
            "test_accuracy": acc, "many16_dp_seconds": many.loop_seconds,
            "many16_cpu_seconds": time.process_time() - c0}


def run_side(src: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, __file__, "--sample"], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", type=Path, help="baseline source tree (its src/ directory)")
    ap.add_argument("--b", type=Path, help="changed source tree (its src/ directory)")
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--sample", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.sample:
        print(json.dumps(sample()))
        return
    if args.a is None or args.b is None:
        ap.error("--a and --b are required")
    runs: dict[str, list[dict]] = {"a": [], "b": []}
    for _ in range(args.pairs):
        for side in ("a", "b"):
            runs[side].append(run_side(getattr(args, side).resolve()))
            print(side, json.dumps(runs[side][-1]), flush=True)
    summary: dict = {"pairs": args.pairs, "a": str(args.a), "b": str(args.b),
                     "test_accuracy": {s: sorted({r["test_accuracy"] for r in runs[s]})
                                       for s in runs}}
    for key in KEYS:
        a = [r[key] for r in runs["a"]]
        b = [r[key] for r in runs["b"]]
        ratios = [y / x for x, y in zip(a, b, strict=True)]
        summary[key] = {"a_median": statistics.median(a), "b_median": statistics.median(b),
                        "b_over_a_medians": statistics.median(b) / statistics.median(a),
                        "pair_ratios": ratios, "median_pair_ratio": statistics.median(ratios)}
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
