"""Benchmark: anonymizing 3.8 million trajectory points (the size of Akin et al.'s one-hour fleet
data) with privlab.trajectory, against the authors' per-point loop.

One run prints:
  * the wall time of `privlab.trajectory.anonymize` on 3.8 M points (the bundled GeoLife sample
    replicated with jitter and new ids), PB = 2, stride 1, epsilon = 2, for planar Laplace
    (default), per-axis Laplace with bbox sensitivity, and Akin et al.'s data-dependent bounds;
    the input is an in-memory table; the time covers validation, the (id, time) order check,
    de-duplication, the box filter, windows, noise, the guarantee and the output table;
  * the authors' approach timed on a few thousand points: a per-point Python loop over a
    pandas frame calling `diffprivlib.tools.mean` twice per point, as in their notebook
    (github.com/ycanbay/anonym_traj; `DataFrame.append`, removed in pandas 2, becomes one
    `pd.concat`, and chained assignment, a no-op under copy-on-write, becomes `.at`), run in
    its own virtualenv because diffprivlib 0.6.6 fails to import beside scikit-learn 1.9;
  * our time on the same few thousand points, and the per-point ratio at both sizes, by wall
    clock and by process CPU time (both sides measure both; on a shared machine the CPU ratio
    is the one that does not depend on how busy the other processes were).

The diffprivlib environment (created once; the comparison is skipped, and says so, without it):
    python3 -m venv /tmp/dpl-venv
    /tmp/dpl-venv/bin/pip install "diffprivlib==0.6.6" "scikit-learn<1.6" pandas
(override the location with --dpl-python PATH).

Timings depend on machine load; the load average and core count are printed with them.

Usage:  .venv/bin/python benchmarks/trajectory.py [--points 3800000] [--repeats 3]
        [--loop-points 3000] [--dpl-python /tmp/dpl-venv/bin/python] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from privlab.data.datasets import load_geolife
from privlab.trajectory import BEIJING_BBOX, NotPrivateWarning, anonymize
from privlab.utils.atomic import atomic_write_text

TARGET_S = 5.0
TARGET_RATIO = 1000.0

AUTHORS_LOOP = r'''
import json, sys, time, warnings
import pandas as pd
from diffprivlib.tools import mean
warnings.filterwarnings("ignore")
data = pd.read_csv(sys.argv[1])
data["TIME"] = pd.to_datetime(data["TIME"])
start, cpu_start = time.perf_counter(), time.process_time()
data_sorted = data.sort_values(by=["ID", "TIME"])
parts = []
for j in data.ID.unique():
    data_id = data_sorted.loc[data_sorted.ID == j]
    data_id = data_id.reset_index(drop=True)
    data_id["new_X"] = None
    data_id["new_Y"] = None
    data_id["new_X_DP"] = None
    data_id["new_Y_DP"] = None
    for i in range(len(data_id) - 1):
        if i < len(data_id):
            data_id.at[i, "new_X"] = (data_id["X"][i] + data_id["X"][i + 1]) / 2.0
            data_id.at[i, "new_Y"] = (data_id["Y"][i] + data_id["Y"][i + 1]) / 2.0
            if data_id["X"][i] < data_id["X"][i + 1]:
                b1x, b2x = data_id["X"][i], data_id["X"][i + 1]
            else:
                b1x, b2x = data_id["X"][i + 1], data_id["X"][i]
            if data_id["Y"][i] < data_id["Y"][i + 1]:
                b1y, b2y = data_id["Y"][i], data_id["Y"][i + 1]
            else:
                b1y, b2y = data_id["Y"][i + 1], data_id["Y"][i]
            data_id.at[i, "new_X_DP"] = mean(data_id["new_X"][i], epsilon=2.0, bounds=(b1x, b2x))
            data_id.at[i, "new_Y_DP"] = mean(data_id["new_Y"][i], epsilon=2.0, bounds=(b1y, b2y))
    parts.append(data_id)
df_new = pd.concat(parts, ignore_index=False).dropna()
elapsed = time.perf_counter() - start
cpu = time.process_time() - cpu_start
print(json.dumps({"points": int(len(data)), "published": int(len(df_new)),
                  "seconds": elapsed, "cpu_seconds": cpu}))
'''


def fleet(points: int, seed: int = 7) -> pd.DataFrame:
    """GeoLife replicated with jitter and new ids until `points` rows (sorted by id, time)."""
    base = load_geolife()
    box = BEIJING_BBOX
    base = base[base["lat"].between(box.lat0 + 0.01, box.lat1 - 0.01)
                & base["lng"].between(box.lon0 + 0.01, box.lon1 - 0.01)].reset_index(drop=True)
    rng = np.random.default_rng(seed)
    copies = -(-points // len(base))
    n = len(base)
    reps = np.arange(copies).repeat(n)[:points]
    idx = np.tile(np.arange(n), copies)[:points]
    # a new vehicle per (copy, user, day): ~2,500 ids, closer to a fleet than 2 users x 18
    day = base["datetime"].to_numpy().astype("datetime64[D]").astype(np.int64)[idx]
    key = (reps * 2 + (base["uid"].to_numpy()[idx] == "005")) * 100_000 + day
    uniq, inv = np.unique(key, return_inverse=True)
    ids = pd.Series(np.array([f"v{k:06d}" for k in range(len(uniq))], dtype=object)[inv],
                    dtype="str")
    shift = rng.uniform(-0.005, 0.005, size=(copies, 2))[reps]
    jitter = rng.normal(0.0, 2e-5, size=(points, 2))
    frame = pd.DataFrame({
        "id": ids,
        "time": base["datetime"].to_numpy().astype("datetime64[ns]")[idx],
        "lat": base["lat"].to_numpy()[idx] + shift[:, 0] + jitter[:, 0],
        "lon": base["lng"].to_numpy()[idx] + shift[:, 1] + jitter[:, 1],
    })
    return frame.sort_values(["id", "time"], kind="stable").reset_index(drop=True)


def time_ours(frame: pd.DataFrame, repeats: int, **kw) -> dict:
    times, cpu = [], []
    release = None
    for _ in range(repeats):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NotPrivateWarning)
            t0, c0 = time.perf_counter(), time.process_time()
            release = anonymize(frame, window=2, stride=1, epsilon=2.0, bbox=BEIJING_BBOX,
                                keep_averaged=False, **kw)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    assert release is not None
    return {"points": len(frame), "windows": int(release.counts["windows"]),
            "median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
            "median_cpu_s": statistics.median(cpu), "is_dp": release.guarantee.is_dp}


def authors_loop(dpl_python: str, frame: pd.DataFrame) -> dict | None:
    if not Path(dpl_python).exists():
        print(f"\n[skipped] authors' loop: {dpl_python} not found; create the diffprivlib venv "
              "as described at the top of this script to time it")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "sample.csv"
        script = Path(tmp) / "authors_loop.py"
        frame.rename(columns={"id": "ID", "time": "TIME", "lat": "X", "lon": "Y"}).to_csv(
            csv, index=False)
        script.write_text(AUTHORS_LOOP)
        proc = subprocess.run([dpl_python, str(script), str(csv)], capture_output=True,
                              text=True, timeout=3600)
    if proc.returncode != 0:
        print(f"\n[skipped] authors' loop failed: {proc.stderr.strip().splitlines()[-1:]}")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compare_per_point(loop: dict, small: dict, big: dict) -> tuple[dict, list[str]]:
    """Per-point cost of the authors' loop against ours (same sample and at scale), by wall
    clock and by process CPU time, as result fields and printable lines."""
    per_point = {  # seconds per point: (authors' loop, privlab same sample, privlab at scale)
        "wall": (loop["seconds"] / loop["points"], small["median_s"] / small["points"],
                 big["median_s"] / big["points"]),
        "cpu": (loop["cpu_seconds"] / loop["points"], small["median_cpu_s"] / small["points"],
                big["median_cpu_s"] / big["points"]),
    }
    n = big["points"]
    out: dict = {}
    lines = [
        f"authors' per-point loop (diffprivlib.tools.mean, own venv) on {loop['points']:,} "
        f"points: {loop['seconds']:.2f} s wall, {loop['cpu_seconds']:.2f} s CPU",
        f"privlab, same {small['points']:,} points: {small['median_s'] * 1e3:.1f} ms wall, "
        f"{small['median_cpu_s'] * 1e3:.1f} ms CPU",
        f"privlab at {n:,} points (same setting): {big['median_s']:.2f} s wall, "
        f"{big['median_cpu_s']:.2f} s CPU",
        "",
        f"  per point  authors' loop (extrapolated to {n:,})  privlab same sample (ratio)  "
        "privlab at scale (ratio)",
    ]
    for clock, (authors, same, scale) in per_point.items():
        out[f"authors_ms_per_point_{clock}"] = authors * 1e3
        out[f"authors_extrapolated_minutes_for_points_{clock}"] = authors * n / 60
        out[f"ratio_per_point_same_sample_{clock}"] = authors / same
        out[f"ratio_per_point_at_scale_{clock}"] = authors / scale
        flag = "PASS" if authors / scale >= TARGET_RATIO else "FAIL"
        lines.append(f"  {clock:4s}  {authors * 1e3:9.3f} ms ({authors * n / 60:8.1f} min)  "
                     f"{same * 1e6:9.2f} us ({authors / same:7,.0f}x)  {scale * 1e9:8.0f} ns "
                     f"({authors / scale:7,.0f}x)  [{flag}: target >= {TARGET_RATIO:,.0f}x]")
    return out, lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=3_800_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--loop-points", type=int, default=3000)
    ap.add_argument("--dpl-python", default="/tmp/dpl-venv/bin/python")
    ap.add_argument("--json", dest="json_out", default=None)
    args = ap.parse_args()

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}; python {platform.python_version()}, "
          f"numpy {np.__version__}, pandas {pd.__version__}")
    t0 = time.perf_counter()
    data = fleet(args.points)
    print(f"built {len(data):,} points, {data['id'].nunique():,} ids in "
          f"{time.perf_counter() - t0:.1f} s (not timed below)")

    settings = {"planar (default, r=100 m)": {"mechanism": "planar"},
                "laplace + bbox": {"mechanism": "laplace", "sensitivity": "bbox"},
                "laplace + paper bounds (NOT DP)": {"mechanism": "laplace",
                                                    "sensitivity": "paper"}}
    results: dict = {"points": len(data), "cores": os.cpu_count(),
                     "load_average": os.getloadavg()[0], "ours": {}}
    print(f"\nprivlab.trajectory.anonymize on {len(data):,} points, PB=2, stride 1, eps=2 "
          f"(median of {args.repeats}; CSPRNG noise)")
    for name, kw in settings.items():
        r = time_ours(data, args.repeats, **kw)
        results["ours"][name] = r
        flag = "PASS" if r["median_s"] < TARGET_S else "FAIL"
        print(f"  {name:34s} {r['median_s']:6.2f} s wall (min {r['min_s']:.2f}, max "
              f"{r['max_s']:.2f}; CPU {r['median_cpu_s']:.2f} s); "
              f"{r['median_s'] / len(data) * 1e9:4.0f} ns/point  [{flag}: target < "
              f"{TARGET_S:g} s]")

    # the authors' loop on a few thousand points: the first fixes of a few ids
    ids = data["id"].unique()[:3]
    sample = pd.concat([data[data["id"] == i].head(args.loop_points // 3) for i in ids],
                       ignore_index=True)
    small = time_ours(sample, max(args.repeats, 5), mechanism="laplace", sensitivity="paper")
    results["ours_small"] = small
    loop = authors_loop(args.dpl_python, sample)
    results["authors_loop"] = loop
    if loop is not None:
        ratios, lines = compare_per_point(loop, small,
                                          results["ours"]["laplace + paper bounds (NOT DP)"])
        results.update(ratios)
        print("\n" + "\n".join(lines))
    if args.json_out:
        atomic_write_text(args.json_out, json.dumps(results, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
