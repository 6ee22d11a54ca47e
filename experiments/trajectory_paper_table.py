"""Akin et al.'s (2021) experiments on the bundled GeoLife sample, for the three noise settings.

Prints (Markdown, for docs/trajectory.md):
  1. Akin et al.'s RMSE table (PB 2, 3, 4 x epsilon 0.5, 1, 1.5, 2): RMSE(T', T'') per coordinate
     in degrees, for planar Laplace (r = --radius), per-axis Laplace with a public box, and the
     authors' data-dependent bounds (NOT DP), with the guarantee each gives per fix;
  2. which of Akin et al.'s trends hold in each setting (RMSE falls with epsilon, grows with PB,
     < 0.001 degrees at PB = 2, epsilon = 2);
  3. planar Laplace: RMSE in metres against the protection radius r and epsilon (measured and
     the closed forms sqrt(6) r / eps and mean 2 r / eps);
  4. what the data-dependent bounds leak (outputs equal to a true coordinate);
  5. re-identification before/after for each setting at PB = 2, epsilon = 2: linkage top-1
     accuracy (space only and space-time) and the share of trips singled out by k points,
     plus Hausdorff / Frechet distances.

Usage: .venv/bin/python experiments/trajectory_paper_table.py [--repeats 3] [--seed 2026]
       [--radius 100] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings

import numpy as np
import pandas as pd

from privlab.data.datasets import load_geolife
from privlab.trajectory import BEIJING_BBOX, NotPrivateWarning, anonymize, prepare
from privlab.trajectory.evaluate import evaluate_release
from privlab.trajectory.experiment import PAPER_EPSILONS, PAPER_WINDOWS, SETTINGS, rmse_table
from privlab.trajectory.metrics import window_errors
from privlab.trajectory.preprocess import Filters
from privlab.trajectory.publish import make_windows
from privlab.utils.atomic import atomic_write_text


def md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def fmt(x: float) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.3g}" if abs(x) < 1e4 else f"{x:,.0f}"


def trends(table: pd.DataFrame) -> list[list[str]]:
    rows = []
    for name in SETTINGS:
        t = table[table["setting"] == name]
        falls, grows = [], []
        for axis in ("rmse_lat_deg", "rmse_lon_deg"):
            for _, g in t.groupby("window"):
                v = g.sort_values("epsilon")[axis].to_numpy()
                falls.append(bool(np.all(np.diff(v) < 0)))
            for _, g in t.groupby("epsilon"):
                v = g.sort_values("window")[axis].to_numpy()
                grows.append(bool(np.all(np.diff(v) > 0)))
        best = t[(t["window"] == 2) & (t["epsilon"] == 2.0)].iloc[0]
        below = best["rmse_lat_deg"] < 1e-3 and best["rmse_lon_deg"] < 1e-3
        # DP on the locations (times and trips are published exactly: not_covered)
        dp = "yes" if best["epsilon_per_fix"] == best["epsilon_per_fix"] and \
            best["epsilon_per_fix"] is not None else "NO"
        rows.append([name, dp, f"{sum(falls)}/{len(falls)}", f"{sum(grows)}/{len(grows)}",
                     f"{'yes' if below else 'no'} ({fmt(best['rmse_lat_deg'])}, "
                     f"{fmt(best['rmse_lon_deg'])})"])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--radius", type=float, default=100.0)
    ap.add_argument("--json", dest="json_out", default=None)
    args = ap.parse_args()
    t_start = time.perf_counter()
    box = BEIJING_BBOX
    p = prepare(load_geolife(), Filters(bbox=box))
    out: dict = {"fixes": len(p), "bbox": box.to_list(), "radius_m": args.radius,
                 "repeats": args.repeats, "seed": args.seed}
    print(f"GeoLife sample: {len(p):,} fixes in the public box {box} (LAT0,LON0,LAT1,LON1), "
          f"{p.counts['outside_bbox_dropped']:,} outside dropped; seed {args.seed}, "
          f"{args.repeats} repeat(s) per cell\n")

    # 1. the RMSE table
    table = rmse_table(p, bbox=box, radius=args.radius, repeats=args.repeats, rng=args.seed)
    out["rmse_table"] = table.to_dict(orient="records")
    print("## 1. RMSE(T', T'') in degrees, X = latitude, Y = longitude "
          f"(planar: r = {args.radius:g} m)\n")
    header = ["PB", "eps"]
    for name in SETTINGS:
        header += [f"{name} X", f"{name} Y"]
    header += ["eps per fix: planar", "laplace-bbox", "paper"]
    rows = []
    for pb in PAPER_WINDOWS:
        for eps in PAPER_EPSILONS:
            row = [str(pb), f"{eps:g}"]
            per_fix = []
            for name in SETTINGS:
                r = table[(table["setting"] == name) & (table["window"] == pb)
                          & (table["epsilon"] == eps)].iloc[0]
                row += [fmt(r["rmse_lat_deg"]), fmt(r["rmse_lon_deg"])]
                e = r["epsilon_per_fix"]
                per_fix.append(fmt(e) if e is not None and e == e else "NOT DP")
            rows.append(row + per_fix)
    print(md_table(header, rows))
    print("\nSame cells in metres (RMSE of the 2-D error):\n")
    rows = []
    for pb in PAPER_WINDOWS:
        for eps in PAPER_EPSILONS:
            row = [str(pb), f"{eps:g}"]
            for name in SETTINGS:
                r = table[(table["setting"] == name) & (table["window"] == pb)
                          & (table["epsilon"] == eps)].iloc[0]
                row.append(fmt(r["rmse_m"]))
            rows.append(row)
    print(md_table(["PB", "eps"] + [f"{n} (m)" for n in SETTINGS], rows))

    # 2. trends
    print("\n## 2. Akin et al.'s (2021) trends\n")
    print(md_table(["setting", "DP", "RMSE falls with eps (per PB, axis)",
                    "RMSE grows with PB (per eps, axis)", "< 0.001 deg at PB=2, eps=2 (X, Y)"],
                   trends(table)))

    # 3. planar: metres against r and epsilon
    print("\n## 3. Planar Laplace: error in metres against the protection radius (PB=2, "
          "stride 1)\n")
    rows, sweep = [], []
    for r_m in (10.0, 25.0, 50.0, 100.0, 200.0, 500.0):
        for eps in (0.5, 1.0, 2.0):
            rel = anonymize(p, window=2, epsilon=eps, radius=r_m, bbox=box,
                            rng=args.seed + int(r_m) + int(10 * eps))
            e = window_errors(rel.averaged, rel.published)
            sweep.append({"radius_m": r_m, "epsilon": eps, **e})
            rows.append([f"{r_m:g}", f"{eps:g}", fmt(e["rmse_m"]),
                         fmt(math.sqrt(6) * r_m / eps), fmt(e["mean_haversine_m"]),
                         fmt(2 * r_m / eps), fmt(e["p95_haversine_m"]),
                         fmt(e["rmse_lat_deg"]), fmt(e["rmse_lon_deg"])])
    out["planar_sweep"] = sweep
    print(md_table(["r (m)", "eps", "RMSE m", "sqrt(6) r/eps", "mean error m", "2 r/eps",
                    "p95 m", "RMSE X deg", "RMSE Y deg"], rows))

    # 4. what Akin et al.'s (2021) bounds leak
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotPrivateWarning)
        rel = anonymize(p, window=2, epsilon=2.0, mechanism="laplace", sensitivity="paper",
                        rng=args.seed)
    w = make_windows(p, 2, 1)
    lat_fix = (rel.published["lat"].to_numpy() == p.lat[w.start]) | (
        rel.published["lat"].to_numpy() == p.lat[w.start + 1])
    lon_fix = (rel.published["lon"].to_numpy() == p.lon[w.start]) | (
        rel.published["lon"].to_numpy() == p.lon[w.start + 1])
    still = (p.lat[w.start] == p.lat[w.start + 1]) & (p.lon[w.start] == p.lon[w.start + 1])
    exact_still = still & (rel.published["lat"].to_numpy() == w.lat) & (
        rel.published["lon"].to_numpy() == w.lon)
    leak = {"share_lat_equals_a_true_fix": float(lat_fix.mean()),
            "share_lon_equals_a_true_fix": float(lon_fix.mean()),
            "share_either_coordinate_true": float((lat_fix | lon_fix).mean()),
            "share_both_coordinates_true": float((lat_fix & lon_fix).mean()),
            "zero_length_steps": int(still.sum()),
            "zero_length_steps_published_exactly": int(exact_still.sum())}
    out["paper_leak"] = leak
    print("\n## 4. The data-dependent bounds (PB=2, eps=2): outputs equal to true values\n")
    print(md_table(["measure", "value"], [[k.replace("_", " "), fmt(v)]
                                          for k, v in leak.items()]))

    # 5. re-identification
    print("\n## 5. Re-identification at PB=2, eps=2 (unit: trip; 'before' = T', averaged, "
          "no noise)\n")
    rows, uniq_rows, shape_rows = [], [], []
    out["reidentification"] = {}
    for name, kw in SETTINGS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NotPrivateWarning)
            rel = anonymize(p, window=2, epsilon=2.0, radius=args.radius, bbox=box,
                            rng=args.seed, **kw)
        res = evaluate_release(p, rel, ks=(1, 2, 4), max_points=500, rng=args.seed)
        res_place = evaluate_release(p, rel, ks=(2, 4), shapes=False, linkage=False,
                                     tolerance_s=None, rng=args.seed)
        out["reidentification"][name] = {"with_time": res, "places_only": res_place}
        lk = res["linkage"]
        b_s = lk["space"]["before (T', averaged only)"]["top1_accuracy"]
        a_s = lk["space"]["after (T'', published)"]["top1_accuracy"]
        b_t = lk["space_time"]["before (T', averaged only)"]["top1_accuracy"]
        a_t = lk["space_time"]["after (T'', published)"]["top1_accuracy"]
        rows.append([name, fmt(b_s), fmt(a_s), fmt(b_t), fmt(a_t),
                     fmt(lk["space"]["after (T'', published)"]["random_guess"])])
        for entry, entry_p in zip(res["uniqueness"], [None] + res_place["uniqueness"],
                                  strict=True):
            before = entry["before (original fixes)"]["unique_share"]
            after = entry["after (T'', published)"]["unique_share"]
            pb_ = entry_p["before (original fixes)"]["unique_share"] if entry_p else None
            pa_ = entry_p["after (T'', published)"]["unique_share"] if entry_p else None
            uniq_rows.append([name, str(entry["k"]), fmt(before), fmt(after), fmt(pb_),
                              fmt(pa_)])
        s = res["shape"]
        shape_rows.append([name, fmt(res["utility"]["mean_haversine_m"]),
                           fmt(s["mean_hausdorff_m"]), fmt(s["median_hausdorff_m"]),
                           fmt(s["mean_frechet_m"]), fmt(s["median_frechet_m"])])
    print(md_table(["setting", "space: before", "space: after", "space-time: before",
                    "space-time: after", "random guess"], rows))
    print(f"\nShare of trips singled out by k known true fixes (tolerance 100 m; 'with time': "
          f"and 15 min; {res['trajectories']} trips, 5 draws each):\n")
    print(md_table(["setting", "k", "with time: before", "with time: after",
                    "places only: before", "places only: after"], uniq_rows))
    print("\nShape distances per trip (metres; Frechet on <= 500 points per curve):\n")
    print(md_table(["setting", "mean error", "mean Hausdorff", "median Hausdorff",
                    "mean Frechet", "median Frechet"], shape_rows))
    print(f"\n(total {time.perf_counter() - t_start:.0f} s)")
    if args.json_out:
        atomic_write_text(args.json_out, json.dumps(out, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
