"""Is the demo's epsilon choice reproducible? The demo's choose-epsilon step under 5 seeds.

Runs exactly the step `privlab demo` runs (privlab.cli.demo._choose_epsilon: bundled Adult,
6,000-row sample, DP-SGD MLP, grid 0.5..16, 8 stacked models per epsilon, loss / shadow /
LiRA attacks, finance policy) once per seed; the seed changes the data split, the models'
initialisation and the DP noise. Printed per seed: the recommended epsilon, its interval, the
argmin the old rule would have picked, and P(best) per candidate. The check: the same
recommendation every time, or every run's interval contains all the recommendations.

Usage: .venv/bin/python benchmarks/choose_epsilon_stability.py [--seeds 1,2,3,4,5]
       [--json benchmarks/results/choose_epsilon_stability.json]
       .venv/bin/python benchmarks/choose_epsilon_stability.py --merge A.json B.json ...
           --json OUT.json   (runs split over several processes, merged)
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--merge", type=Path, nargs="*", default=None)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    if args.merge:
        runs = [r for p in args.merge for r in json.loads(p.read_text())["runs"]]
        return report(sorted(runs, key=lambda r: r["seed"]), args.json)
    import torch

    torch.set_num_threads(1)
    from privlab.cli.demo import DEMO_GRID, _choose_epsilon
    from privlab.data.datasets import load_adult

    frame = load_adult(drop_missing=True)
    grid = [float(x) for x in DEMO_GRID.split(",")]
    runs = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            ce = _choose_epsilon(frame, grid, Path(tmp), seed)
        ce.pop("report", None)
        ce["seed"], ce["seconds"] = seed, time.perf_counter() - t0
        runs.append(ce)
        if args.json:  # after every seed, so a long run keeps what it measured
            write(runs, args.json)
        print(f"seed {seed}: recommended {ce['chosen_epsilon']} interval {ce['interval']} "
              f"(argmin rule: {ce['argmin_epsilon']}) P(best) "
              + ", ".join(f"{k}: {v:.2f}" for k, v in ce["prob_best"].items())
              + f"  [{ce['seconds']:.0f} s]", flush=True)
    report(runs, args.json)


def write(runs: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    recs = [r["chosen_epsilon"] for r in runs]
    same = len(set(recs)) == 1
    covered = all(r["interval"] is not None and all(
        x is not None and r["interval"][0] <= x <= r["interval"][1] for x in recs)
        for r in runs)
    path.write_text(json.dumps({"recommended": recs, "same": same,
                                "intervals_cover_all": covered, "runs": runs}, indent=2) + "\n")


def report(runs: list[dict], path: Path | None) -> None:
    recs = [r["chosen_epsilon"] for r in runs]
    same = len(set(recs)) == 1
    covered = all(r["interval"] is not None and all(
        x is not None and r["interval"][0] <= x <= r["interval"][1] for x in recs)
        for r in runs)
    print(f"recommendations {recs}: same every time: {same}; every interval contains all of "
          f"them: {covered}; argmin rule picked {[r['argmin_epsilon'] for r in runs]}")
    if path:
        write(runs, path)


if __name__ == "__main__":
    main()
