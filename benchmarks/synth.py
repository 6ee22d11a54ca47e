"""Fit and sample times of the synthesizers on the bundled Adult table (30,162 rows).

Each method is fitted `--repeats` times (fresh seed each) at epsilon=1, delta=1e-6 with the
public Adult domain, then samples `--rows` rows; the table reports the median and the range
of wall-clock seconds. Torch runs with one intra-op thread inside the DP-VAE and the DP-GAN
(see `privlab.synth.dpsgd`). The machine's load matters: the printout names the CPU count and
the 1-minute load average at the start.

    .venv/bin/python benchmarks/synth.py                 # mst x5, dpvae x2, dpgan x3
    .venv/bin/python benchmarks/synth.py --methods mst --repeats 10 --json /tmp/b.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from privlab.data.datasets import load_dataset
from privlab.synth import make_synthesizer
from privlab.utils.atomic import atomic_write_text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", default="mst,mst-estimated,dpvae,dpgan")
    ap.add_argument("--repeats", type=int, default=None,
                    help="default: mst 5, dpvae 2, dpgan 3")
    ap.add_argument("--rows", type=int, default=30162)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    df = load_dataset("adult", drop_missing=True)
    load = os.getloadavg()[0]
    print(f"Adult {len(df)} rows x {df.shape[1]} columns; {os.cpu_count()} CPUs, "
          f"load average {load:.2f}", file=sys.stderr)
    out = {"rows": len(df), "cpus": os.cpu_count(), "load_1min": load, "results": []}
    print("| method | repeats | fit s (median, min-max) | sample s for "
          f"{args.rows:,} rows (median, min-max) |")
    print("|---|---|---|---|")
    for method in args.methods.split(","):
        base, _, variant = method.partition("-")
        repeats = args.repeats or {"dpvae": 2, "dpgan": 3}.get(base, 5)
        fits, samples = [], []
        for seed in range(repeats):
            synth = make_synthesizer(base, domain="adult-types" if variant else "adult",
                                     rng=seed)
            t0 = time.perf_counter()
            synth.fit(df, args.epsilon, 1e-6)
            t1 = time.perf_counter()
            synth.sample(args.rows)
            t2 = time.perf_counter()
            fits.append(t1 - t0)
            samples.append(t2 - t1)
        out["results"].append({"method": method, "fit_s": fits, "sample_s": samples})
        print(f"| {method} | {repeats} | {statistics.median(fits):.2f} ({min(fits):.2f}-"
              f"{max(fits):.2f}) | {statistics.median(samples):.2f} ({min(samples):.2f}-"
              f"{max(samples):.2f}) |", flush=True)
    if args.json:
        atomic_write_text(Path(args.json), json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
