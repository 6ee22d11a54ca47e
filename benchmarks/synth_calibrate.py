"""AIM's mirror descent on one realistic model, two source trees alternated: the CPU of
`GraphicalModel.calibrate` and of `mirror_descent`, and the fit they reach.

The model: the final estimate of one `privlab synth --method aim` run (epsilon 1, seed 0) on
the generated 200k x 20 table of `benchmarks/synth_scale.py` (or any --table/--schema): its
noisy marginals, the last round's potentials (the warm start) and step, captured once in
this process (with this checkout's privlab) and written to a pickle. Then each source tree
runs, in a child process whose PYTHONPATH is that tree, alternated `--repeats` times:
`--calibrations` calibrations of the warm-started model, and `--iters` warm iterations of
`mirror_descent` (1,000: the run's final estimate), each timed in CPU seconds of the child;
the child reports the final loss and step.

    nice python benchmarks/synth_calibrate.py --sources old=../privlab-old/src,new=src \\
        --json benchmarks/results/synth_calibrate.json
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from synth_scale import ensure_table

CHILD = r"""
import json, pickle, sys, time
from privlab.synth import pgm
cap = pickle.load(open(sys.argv[1], "rb"))
meas, sizes = cap["measurements"], cap["sizes"]
n_cal, iters = int(sys.argv[2]), int(sys.argv[3])
warm = pgm.GraphicalModel(sizes, [m.clique for m in meas], pgm.estimate_total(meas),
                          theta=cap["theta"])
t0 = time.process_time()
for _ in range(n_cal):
    warm.calibrate()
t1 = time.process_time()
model, stats = pgm.mirror_descent(sizes, meas, iters=iters, warm=warm, step=cap["step"])
t2 = time.process_time()
print(json.dumps({"calibrate_ms": 1000 * (t1 - t0) / n_cal, "mirror_descent_cpu_s": t2 - t1,
                  "loss": stats.loss, "step": stats.step, "cells": model.tree.size,
                  "tree_cliques": len(model.tree.cliques)}))
"""


def capture(table: Path, schema: Path, out: Path) -> dict[str, Any]:
    """Run AIM once through the CLI, keeping the final estimate's inputs."""
    import privlab.synth.aim as aim
    from privlab.cli.main import main

    calls: list[dict[str, Any]] = []
    original = aim.mirror_descent

    def record(sizes, measurements, **kw):  # type: ignore[no-untyped-def]
        warm = kw.get("warm")
        calls.append({"sizes": list(sizes), "measurements": list(measurements),
                      "step": kw.get("step"),
                      "theta": None if warm is None else {
                          r: t.copy() for r, t in warm.theta.items()}})
        return original(sizes, measurements, **kw)

    aim.mirror_descent = record
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rc = main(["synth", str(table), "--method", "aim", "--epsilon", "1", "--rows", "10",
                       "--out", str(Path(tmp) / "o.csv"), "--schema", str(schema),
                       "--seed", "0"])
    finally:
        aim.mirror_descent = original
    if rc != 0:
        raise SystemExit(f"the AIM run to capture failed (exit {rc})")
    final = calls[-1]
    out.write_bytes(pickle.dumps(final))
    return {"measurements": len(final["measurements"]), "aim_fits": len(calls)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sources", required=True, help="LABEL=SRC_DIR,... alternated")
    ap.add_argument("--table", default=None, help="default: synth_scale's 200000x20 table")
    ap.add_argument("--schema", default=None)
    ap.add_argument("--data-dir", default=str(Path(tempfile.gettempdir()) / "privlab_scale"))
    ap.add_argument("--calibrations", type=int, default=100)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.table:
        table, schema = Path(args.table), Path(args.schema)
    else:
        table, schema = ensure_table(Path(args.data_dir), 200_000, 20)
    sources = dict(item.split("=", 1) for item in args.sources.split(","))
    results: dict[str, Any] = {"table": str(table), "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        cap = Path(tmp) / "final.pkl"
        results["captured"] = capture(table, schema, cap)
        for rep in range(args.repeats):
            for label, src in sources.items():
                env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()))
                done = subprocess.run([sys.executable, "-c", CHILD, str(cap),
                                       str(args.calibrations), str(args.iters)], env=env,
                                      capture_output=True, text=True, check=True)
                row = json.loads(done.stdout.strip().splitlines()[-1])
                row.update(source=label, repeat=rep, load_average=os.getloadavg()[0])
                results["runs"].append(row)
                print(f"{label:6s} calibrate {row['calibrate_ms']:7.2f} ms  mirror descent "
                      f"{row['mirror_descent_cpu_s']:7.2f} CPU-s  loss {row['loss']:.6f}  "
                      f"load {row['load_average']:.2f}", flush=True)
    if args.json:
        from privlab.utils.atomic import atomic_write_text

        atomic_write_text(Path(args.json), json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
