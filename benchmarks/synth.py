"""Synthesizers on Adult: privlab AIM and MST side by side with smartnoise-synth's AIM and MST and
with private-pgm's AIM (mbi 2.0), on the same public bins; plus the fit/sample timing suite.

`--suite compare` (default). Protocol: Adult without missing values (30,162 rows) split once
at random (seed 0) into 80% training rows and 20% holdout rows. Every tool sees the training
rows coded on privlab's public Adult domain (the bundled schema with every column allowed
missing, `bundled_schema("adult").allowing_missing()`, the declaration the retired
`--domain adult` made: the same bins and categories for every tool) and returns codes, which
are decoded with that same domain (uniform draws inside numeric bins), so all outputs are
scored identically:

- fidelity against the HOLDOUT rows: mean total-variation distance of all 1-, 2- and 3-way
  marginals (`privlab.synth.evaluate.fidelity`: categories as they are, numbers in 20
  quantile bins of the real rows);
- downstream: a gradient-boosted classifier for `salary` trained on the synthetic rows, tested
  on the holdout rows (accuracy, ROC AUC);
- floor: the training rows scored the same way (real data vs real holdout: the TVD even a
  perfect synthesizer has); ceiling: the classifier trained on the real training rows;
- wall-clock seconds for fit + sample and CPU seconds (process CPU for privlab; the child's
  CPU, all threads, for peers, which run in their own venvs through `benchmarks/peers/`).
  CPU seconds are the comparable figure on a shared machine. A peer that does not finish
  within --peer-cpu-limit CPU-seconds (or --peer-timeout wall seconds) is stopped; its time
  is reported as a lower bound. The peers' AIMs run only for the first --peer-aim-runs
  (epsilon, seed) pairs (they are not expected to finish).

privlab AIM and MST run at delta = 1e-6 with zCDP (discrete Gaussian); the peers get the
same epsilon and delta (smartnoise: its own cdp_rho; mbi's AIM: privlab's rho for the same
(epsilon, delta)). Workload: privlab AIM and mbi AIM all 2- and 3-way marginals;
smartnoise AIM `degree=3` (its 3-way workload, marginals above 10,000 cells dropped).

    python benchmarks/synth.py --json benchmarks/results/synth_compare.json \\
        --smartnoise-python /tmp/snenv/bin/python --mbi-python /tmp/mbienv/bin/python

`--suite timing`: fit and sample seconds of each privlab method on all 30,162 rows at
epsilon 1 (`--repeats` fresh seeds; median and range).

    python benchmarks/synth.py --suite timing --methods aim,mst,mst-estimated,dpvae

`--scale`: AIM on generated mixed tables (200k x 20, 1M x 40; `benchmarks/synth_scale.py`),
wall, CPU and peak RSS of a child per run, source trees alternated:

    nice python benchmarks/synth.py --scale --shapes 200000x20 \\
        --sources old=../privlab-old/src,new=src --json benchmarks/results/synth_scale.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privlab.core.calibration import rho_for_target
from privlab.data.datasets import load_dataset
from privlab.schema import bundled_schema
from privlab.synth import make_synthesizer
from privlab.synth.domain import Domain
from privlab.synth.evaluate import fidelity, ml_utility
from privlab.utils.atomic import atomic_write_text

TARGET = "salary"
DELTA = 1e-6
#: Adult's public schema, every column allowed missing: the declaration the figures in
#: docs/synth.md were measured with (the retired `--domain adult`; same domain and rows).
ADULT = bundled_schema("adult").allowing_missing()
PEERS = Path(__file__).parent / "peers"


def split(seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    df = load_dataset("adult", drop_missing=True)
    order = np.random.default_rng(seed).permutation(len(df))
    cut = int(round(0.8 * len(df)))
    return (df.iloc[order[:cut]].reset_index(drop=True),
            df.iloc[order[cut:]].reset_index(drop=True))


def score(train: pd.DataFrame, hold: pd.DataFrame, synth: pd.DataFrame, seed: int
          ) -> dict[str, Any]:
    f = fidelity(hold, synth)
    m = ml_utility(train, hold, synth, TARGET, seed)
    return {"tvd_1way": f["tvd_1way_mean"], "tvd_2way": f["tvd_2way_mean"],
            "tvd_3way": f["tvd_3way_mean"], "accuracy": m["train_synthetic_accuracy"],
            "auc": m.get("train_synthetic_auc"), "real_accuracy": m["train_real_accuracy"],
            "real_auc": m.get("train_real_auc")}


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_peer(python: str, script: str, job: dict[str, Any], timeout: float, cpu_limit: float
             ) -> tuple[dict[str, Any] | None, float, float]:
    """(result or None if stopped, wall seconds, CPU seconds) of a peer job. The child gets
    at most `cpu_limit` CPU-seconds (RLIMIT_CPU: on a shared machine CPU time, not wall time,
    is what a run costs) and `timeout` wall seconds."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (int(cpu_limit), int(cpu_limit) + 5))

    with tempfile.TemporaryDirectory() as tmp:
        job = dict(job, result=str(Path(tmp) / "r.json"))
        (Path(tmp) / "job.json").write_text(json.dumps(job))
        cpu0, t0 = _child_cpu(), time.perf_counter()
        proc = subprocess.Popen([python, str(PEERS / script), str(Path(tmp) / "job.json")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                preexec_fn=limit)
        try:
            _, err = proc.communicate(timeout=timeout)
            ok = proc.returncode == 0
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            ok = False
        wall, cpu = time.perf_counter() - t0, _child_cpu() - cpu0
        if not ok:
            tail = (err or "").strip().splitlines()[-3:]
            print(f"  peer {script} stopped after {wall:.0f} s: {tail}", file=sys.stderr)
            return None, wall, cpu
        return json.loads(Path(job["result"]).read_text()), wall, cpu


def compare(args: argparse.Namespace) -> dict[str, Any]:
    train, hold = split(0)
    domain: Domain = make_synthesizer("mst", schema=ADULT, rng=0).fit(
        train, 1.0, DELTA).domain  # the declared domain: nothing here depends on the data
    codes = domain.encode(train)
    out: dict[str, Any] = {"rows_train": len(train), "rows_holdout": len(hold),
                           "cpus": os.cpu_count(), "load_1min_start": os.getloadavg()[0],
                           "delta": DELTA, "peer_timeout_s": args.peer_timeout,
                           "peer_cpu_limit_s": args.peer_cpu_limit, "results": []}
    floor = fidelity(hold, train)
    ceiling = ml_utility(train, hold, train, TARGET, 0)
    out["floor"] = {"tvd_1way": floor["tvd_1way_mean"], "tvd_2way": floor["tvd_2way_mean"],
                    "tvd_3way": floor["tvd_3way_mean"],
                    "note": "real training rows vs real holdout rows"}
    out["ceiling"] = {"accuracy": ceiling["train_real_accuracy"],
                      "auc": ceiling.get("train_real_auc"),
                      "majority": ceiling["majority_class_accuracy"],
                      "note": "classifier trained on the real training rows"}
    print(f"floor {out['floor']}\nceiling {out['ceiling']}", file=sys.stderr, flush=True)
    tools = args.tools.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "codes.npy", codes)
        pairs = [(float(e), seed) for e in args.epsilons.split(",")
                 for seed in range(1, args.seeds + 1)]
        for tool in tools:  # privlab first, peers after (the peers' AIMs take longest)
            for run, (eps, seed) in enumerate(pairs):
                row: dict[str, Any] = {"tool": tool, "epsilon": eps, "seed": seed}
                if tool.startswith("privlab-"):
                    method = tool.split("-", 1)[1]
                    c0, t0 = time.process_time(), time.perf_counter()
                    s = make_synthesizer(method, schema=ADULT, rng=seed)
                    s.fit(train, eps, DELTA)
                    table = s.sample(len(train))
                    row.update(wall_s=time.perf_counter() - t0,
                               cpu_s=time.process_time() - c0, finished=True,
                               guarantee_epsilon=s.guarantee.epsilon)
                    if method == "aim":
                        row["rounds"] = len(s.round_log)
                        row["model_cells"] = s.model.tree.size
                else:
                    peer, method = tool.split("-", 1)
                    python = args.smartnoise_python if peer == "smartnoise" \
                        else args.mbi_python
                    if not python or (method == "aim" and run >= args.peer_aim_runs):
                        continue
                    job: dict[str, Any] = {"codes": str(Path(tmp) / "codes.npy"),
                                           "out": str(Path(tmp) / "out.npy"),
                                           "seed": seed, "rows": len(train),
                                           "epsilon": eps, "delta": DELTA,
                                           "method": method}
                    if peer == "mbi":
                        d = len(domain.sizes)
                        job.update(job="aim", sizes=domain.sizes,
                                   rho=rho_for_target(eps, DELTA),
                                   workload=[list(c) for k in (2, 3) for c in
                                             itertools.combinations(range(d), k)])
                        script = "mbi_peer.py"
                    else:
                        script = "smartnoise_peer.py"
                    res, wall, cpu = run_peer(python, script, job, args.peer_timeout,
                                              args.peer_cpu_limit)
                    row.update(wall_s=wall, cpu_s=cpu, finished=res is not None)
                    if res is None:
                        row["note"] = (f"stopped after {cpu:.0f} CPU-s / {wall:.0f} wall-s "
                                       "without finishing: time is a lower bound")
                        out["results"].append(row)
                        print(json.dumps(row), file=sys.stderr, flush=True)
                        if args.json:
                            atomic_write_text(Path(args.json), json.dumps(out, indent=1))
                        continue
                    row["peer"] = {k: v for k, v in res.items() if k != "log"}
                    table = domain.decode(np.load(Path(tmp) / "out.npy"),
                                          np.random.default_rng(seed))
                row.update(score(train, hold, table, seed))
                out["results"].append(row)
                print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v)
                                  for k, v in row.items() if k != "peer"}),
                      file=sys.stderr, flush=True)
                if args.json:
                    atomic_write_text(Path(args.json), json.dumps(out, indent=1))
    out["load_1min_end"] = os.getloadavg()[0]
    return out


def summary(out: dict[str, Any]) -> str:
    frame = pd.DataFrame(out["results"])
    lines = ["| tool | epsilon | runs | 1-way TVD | 2-way TVD | 3-way TVD | accuracy | AUC "
             "| wall s | CPU s |", "|---" * 10 + "|"]
    for (tool, eps), g in frame.groupby(["tool", "epsilon"], sort=False):
        cells = []
        for k in ("tvd_1way", "tvd_2way", "tvd_3way", "accuracy", "auc"):
            v = g[k].dropna() if k in g else pd.Series(dtype=float)
            cells.append("-" if v.empty else f"{v.mean():.3f}" + (
                f" ({v.min():.3f}-{v.max():.3f})" if len(v) > 1 else ""))
        for k in ("wall_s", "cpu_s"):
            v = g[k]
            bound = ">" if not g["finished"].all() else ""
            cells.append(f"{bound}{v.mean():.1f}")
        lines.append(f"| {tool} | {eps:g} | {len(g)} | " + " | ".join(cells) + " |")
    f, c = out["floor"], out["ceiling"]
    lines.append(f"| real training rows (floor) | - | - | {f['tvd_1way']:.3f} | "
                 f"{f['tvd_2way']:.3f} | {f['tvd_3way']:.3f} | {c['accuracy']:.3f} | "
                 f"{c['auc']:.3f} | - | - |")
    return "\n".join(lines)


def timing(args: argparse.Namespace) -> dict[str, Any]:
    df = load_dataset("adult", drop_missing=True)
    out: dict[str, Any] = {"rows": len(df), "cpus": os.cpu_count(),
                           "load_1min": os.getloadavg()[0], "results": []}
    print("| method | repeats | fit s (median, min-max) | sample s for "
          f"{args.rows:,} rows (median, min-max) |")
    print("|---|---|---|---|")
    for method in args.methods.split(","):
        base, _, variant = method.partition("-")
        repeats = args.repeats or {"dpvae": 2, "aim": 2}.get(base, 5)
        fits, samples = [], []
        for seed in range(repeats):
            # variant: only the types declared, categories and bounds estimated under DP
            synth = make_synthesizer(base, schema=ADULT, rng=seed,
                                     estimate_domain="all" if variant else None)
            t0 = time.perf_counter()
            synth.fit(df, 1.0, DELTA)
            t1 = time.perf_counter()
            synth.sample(args.rows)
            t2 = time.perf_counter()
            fits.append(t1 - t0)
            samples.append(t2 - t1)
        out["results"].append({"method": method, "fit_s": fits, "sample_s": samples})
        print(f"| {method} | {repeats} | {statistics.median(fits):.2f} ({min(fits):.2f}-"
              f"{max(fits):.2f}) | {statistics.median(samples):.2f} ({min(samples):.2f}-"
              f"{max(samples):.2f}) |", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", choices=("compare", "timing"), default="compare")
    ap.add_argument("--tools", default="privlab-aim,privlab-mst,smartnoise-mst,smartnoise-aim,"
                                       "mbi-aim")
    ap.add_argument("--epsilons", default="1,4")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--smartnoise-python", default=None,
                    help="python of a venv with smartnoise-synth==1.0.8 (skipped if unset)")
    ap.add_argument("--mbi-python", default=None,
                    help="python of a venv with mbi==2.0.0 (skipped if unset)")
    ap.add_argument("--peer-timeout", type=float, default=2400.0, help="wall seconds")
    ap.add_argument("--peer-cpu-limit", type=float, default=300.0, help="CPU seconds")
    ap.add_argument("--peer-aim-runs", type=int, default=1)
    ap.add_argument("--methods", default="aim,mst,mst-estimated,dpvae", help="timing suite")
    ap.add_argument("--repeats", type=int, default=None, help="timing suite")
    ap.add_argument("--rows", type=int, default=30162, help="timing suite: rows sampled")
    ap.add_argument("--json", default=None)
    ap.add_argument("--scale", action="store_true", help="AIM on generated mixed tables")
    ap.add_argument("--shapes", default="200000x20,1000000x40", help="scale: ROWSxCOLS,...")
    ap.add_argument("--sources", default=f"this={Path(__file__).parents[1] / 'src'}",
                    help="scale: LABEL=SRC_DIR,... alternated (PYTHONPATH of each run)")
    ap.add_argument("--data-dir", default=str(Path(tempfile.gettempdir()) / "privlab_scale"),
                    help="scale: where the generated tables are kept")
    ap.add_argument("--timeout", type=float, default=1800.0, help="scale: wall s per run")
    args = ap.parse_args(argv)
    if args.scale:
        from synth_scale import scale

        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
        sources = dict(item.split("=", 1) for item in args.sources.split(","))
        out = scale(shapes, sources, Path(args.data_dir), float(args.epsilons.split(",")[0]),
                    args.repeats or 1, 0, args.timeout)
    elif args.suite == "timing":
        out = timing(args)
    else:
        out = compare(args)
        print(summary(out))
    if args.json:
        atomic_write_text(Path(args.json), json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
