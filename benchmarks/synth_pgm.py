"""privlab's graphical-model estimator (`privlab.synth.pgm`, NumPy) vs mbi 2.0's MirrorDescent
(JAX), fitted to the SAME noisy marginals: loss, error against the true marginals, seconds.

The noisy marginals are the measurements of one privlab AIM run on the Adult training split
(80% of the 30,162 rows, seed 0; public Adult domain) at the given epsilon. Both estimators
minimise the same objective, sum_i 0.5 ||(mu_i - y_i) / sigma_i||^2 over the marginal
polytope, from zero potentials, for the same number of iterations. "true TVD" is the mean
total-variation distance between the fitted model's marginals and the training rows' exact
marginals over every 2- and 3-way marginal (560 on Adult). mbi runs in its own venv (it
pulls jax): pass its interpreter with --mbi-python. mbi is timed twice in one process (the
first run includes JAX compilation, which AIM pays again whenever its cliques change). CPU
seconds (all threads) are the comparable figure on a shared machine.

    python benchmarks/synth_pgm.py --mbi-python /tmp/mbienv/bin/python \\
        --json benchmarks/results/synth_pgm.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from privlab.data.datasets import load_dataset
from privlab.schema import bundled_schema
from privlab.synth.aim import AIMSynthesizer
from privlab.synth.pgm import mirror_descent, model_loss
from privlab.utils.atomic import atomic_write_text


def split(seed: int = 0):
    df = load_dataset("adult", drop_missing=True)
    order = np.random.default_rng(seed).permutation(len(df))
    cut = int(round(0.8 * len(df)))
    return df.iloc[order[:cut]].reset_index(drop=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epsilons", default="1,4")
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--mbi-python", default=None)
    ap.add_argument("--mbi-repeats", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    train = split(0)
    results = {"cpus": os.cpu_count(), "load_1min": os.getloadavg()[0], "iters": args.iters,
               "runs": []}
    for eps in (float(e) for e in args.epsilons.split(",")):
        aim = AIMSynthesizer(schema=bundled_schema("adult").allowing_missing(), rng=1).fit(
            train, eps, 1e-6)
        sizes = aim.domain.sizes
        meas = aim.measurements
        codes = aim.domain.encode(train)
        d = len(sizes)
        true = {}
        for cl in (c for k in (2, 3) for c in itertools.combinations(range(d), k)):
            flat = np.ravel_multi_index(tuple(codes[:, a] for a in cl), [sizes[a] for a in cl])
            true[cl] = np.bincount(flat, minlength=int(np.prod([sizes[a] for a in cl])))
        t0, c0 = time.perf_counter(), time.process_time()
        model, stats = mirror_descent(sizes, meas, iters=args.iters)
        t1, c1 = time.perf_counter(), time.process_time()
        errs = []
        for cl, x in true.items():
            est = model.marginal(cl).ravel()
            errs.append(0.5 * float(np.abs(est / est.sum() - x / x.sum()).sum()))
        row = {"epsilon": eps, "measurements": len(meas),
               "model_cliques": [list(c) for c in model.tree.cliques],
               "model_cells": model.tree.size,
               "privlab": {"seconds": t1 - t0, "cpu_s": c1 - c0,
                           "loss": model_loss(model, meas),
                           "true_tvd_mean": float(np.mean(errs))}}
        print(f"eps {eps}: {len(meas)} measurements, model {model.tree.size} cells; privlab "
              f"{t1 - t0:.1f} s ({c1 - c0:.1f} CPU-s), loss {row['privlab']['loss']:.1f}, true TVD "
              f"{row['privlab']['true_tvd_mean']:.4f}", file=sys.stderr, flush=True)
        if args.mbi_python:
            with tempfile.TemporaryDirectory() as tmp:
                arrays = {"sizes": np.array(sizes), "count": len(meas),
                          "true_count": len(true)}
                for i, m in enumerate(meas):
                    arrays[f"clique{i}"] = np.array(m.clique)
                    arrays[f"y{i}"] = m.y
                    arrays[f"sigma{i}"] = m.sigma
                for k, (cl, x) in enumerate(true.items()):
                    arrays[f"tclique{k}"] = np.array(cl)
                    arrays[f"tx{k}"] = x
                np.savez(Path(tmp) / "m.npz", **arrays)
                job = {"job": "estimate", "npz": str(Path(tmp) / "m.npz"),
                       "iters": args.iters, "repeats": args.mbi_repeats,
                       "result": str(Path(tmp) / "r.json")}
                (Path(tmp) / "job.json").write_text(json.dumps(job))
                peer = Path(__file__).parent / "peers" / "mbi_peer.py"
                done = subprocess.run([args.mbi_python, str(peer),
                                       str(Path(tmp) / "job.json")])
                if not (Path(tmp) / "r.json").exists():
                    raise SystemExit(f"mbi peer failed (exit {done.returncode}), no result")
                res = json.loads((Path(tmp) / "r.json").read_text())
                res.pop("true_tvd", None)
                res["exit_code"] = done.returncode
                row["mbi"] = res
            print(f"  mbi: {[round(r['seconds'], 1) for r in res['runs']]} s, "
                  f"{[round(r['cpu_s'], 1) for r in res['runs']]} CPU-s, loss "
                  f"{res['runs'][-1]['loss']:.1f}, true TVD {res.get('true_tvd_mean')}",
                  file=sys.stderr, flush=True)
        results["runs"].append(row)
        if args.json:  # keep what is done
            atomic_write_text(Path(args.json), json.dumps(results, indent=1))
    if args.json:
        atomic_write_text(Path(args.json), json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
