"""DP synthetic Adult: marginal TVD, train-on-synthetic accuracy and privacy checks per method
and epsilon, next to the non-private baselines (docs/synth.md reports the output).

Protocol: the bundled Adult table without missing values (30,162 rows) is split once at
random (seed 0) into 80% training rows (what the synthesizer sees) and 20% holdout rows.
Each synthesizer is fitted on the training rows at (epsilon, delta=1e-6) and samples as many
rows as the training set has. Fidelity compares the synthetic rows with the training rows;
train-on-synthetic accuracy is measured on the holdout rows; privacy checks compare
synthetic rows with training rows against the holdout baseline.

Baselines: "real holdout" (the holdout rows scored as if they were a synthetic table: the
sampling-error floor of every metric), and each method with epsilon=inf (exact marginals /
no gradient noise: the model's own error, labelled NOT private).

    .venv/bin/python experiments/synth_adult.py --out /tmp/synth_adult.json
    .venv/bin/python experiments/synth_adult.py --methods mst --epsilons 1 --seeds 1  # quick
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from privlab.data.datasets import load_dataset
from privlab.schema import bundled_schema
from privlab.synth import make_synthesizer
from privlab.synth.evaluate import fidelity, ml_utility, privacy
from privlab.utils.atomic import atomic_write_text

TARGET = "salary"


def split(seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    df = load_dataset("adult", drop_missing=True)
    order = np.random.default_rng(seed).permutation(len(df))
    cut = int(round(0.8 * len(df)))
    return (df.iloc[order[:cut]].reset_index(drop=True),
            df.iloc[order[cut:]].reset_index(drop=True))


def floor(train: pd.DataFrame, holdout: pd.DataFrame) -> dict:
    """The holdout rows scored as a "synthetic" table: fidelity only (TSTR and the privacy
    checks would test the holdout on itself)."""
    f = fidelity(train, holdout)
    return {"method": "real holdout (floor)", "epsilon": None, "seed": 0,
            "tvd_1way_mean": f["tvd_1way_mean"], "tvd_1way_max": f["tvd_1way_max"],
            "tvd_2way_mean": f["tvd_2way_mean"], "tvd_2way_max": f["tvd_2way_max"],
            "cramers_v_diff": f["cramers_v_abs_diff_mean"],
            "pearson_diff": f["pearson_abs_diff_mean"]}


def score(train: pd.DataFrame, holdout: pd.DataFrame, synth: pd.DataFrame, seed: int,
          with_privacy: bool = True) -> dict:
    f = fidelity(train, synth)
    m = ml_utility(train, holdout, synth, TARGET, seed)
    out = {"tvd_1way_mean": f["tvd_1way_mean"], "tvd_1way_max": f["tvd_1way_max"],
           "tvd_2way_mean": f["tvd_2way_mean"], "tvd_2way_max": f["tvd_2way_max"],
           "cramers_v_diff": f["cramers_v_abs_diff_mean"],
           "pearson_diff": f["pearson_abs_diff_mean"],
           "acc_synthetic": m["train_synthetic_accuracy"], "acc_real": m["train_real_accuracy"],
           "auc_synthetic": m.get("train_synthetic_auc"), "majority": m["majority_class_accuracy"]}
    if with_privacy:
        p = privacy(train, holdout, synth, seed=seed)
        out.update(mia_auc=p["membership_inference"]["auc"],
                   dcr_median=p["dcr_synthetic_to_train"]["median"],
                   dcr_holdout_median=p["dcr_holdout_to_train"]["median"],
                   copies=p["rare_copies"]["synthetic_copies_of_unique"],
                   copy_rate=p["rare_copies"]["synthetic_copy_rate"],
                   holdout_copy_rate=p["rare_copies"]["holdout_match_rate"],
                   copies_exceed=p["rare_copies"]["copies_exceed_baseline"])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", default="aim,mst,mst-estimated,dpvae")
    ap.add_argument("--epsilons", default="0.5,1,4,inf")
    ap.add_argument("--seeds", type=int, default=3,
                    help="seeds for mst and aim (dpvae: --vae-seeds)")
    ap.add_argument("--vae-seeds", type=int, default=1)
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--out", default=None, help="write all results as JSON here")
    ap.add_argument("--summary", default=None, help="only print the table of a saved JSON")
    args = ap.parse_args(argv)
    train, holdout = split(0)
    print(f"train {len(train)} rows, holdout {len(holdout)} rows", file=sys.stderr)
    if args.summary is not None:  # re-print the table of a saved run (floor recomputed)
        saved = json.loads(Path(args.summary).read_text())
        print(summary([floor(train, holdout)] + [r for r in saved
                                                 if not r["method"].startswith("real")]))
        return 0
    results = [floor(train, holdout)]
    for method in args.methods.split(","):
        base, _, variant = method.partition("-")
        # estimated: column types declared, categories and bounds estimated under DP
        estimate = "all" if variant == "estimated" else None
        for eps_text in args.epsilons.split(","):
            eps = math.inf if eps_text == "inf" else float(eps_text)
            seeds = {"dpvae": args.vae_seeds}.get(base, args.seeds)
            if math.isinf(eps) and (variant == "estimated" or base == "aim"):
                # estimated: the non-private domain is the observed one (same as above);
                # aim: no non-private mode (its rounds are set by the budget)
                continue
            for seed in range(1, seeds + 1):
                # the retired --domain adult's declaration: every column may be missing
                synth = make_synthesizer(base, schema=bundled_schema("adult").allowing_missing(),
                                         estimate_domain=estimate, rng=seed)
                t0 = time.perf_counter()
                synth.fit(train, None if math.isinf(eps) else eps, args.delta)
                t1 = time.perf_counter()
                table = synth.sample(len(train))
                t2 = time.perf_counter()
                g = synth.guarantee
                row = {"method": method, "epsilon": None if math.isinf(eps) else eps,
                       "seed": seed, "guarantee_epsilon": g.epsilon if g.is_dp else None,
                       "guarantee_delta": g.delta if g.is_dp else None, "is_dp": g.is_dp,
                       "fit_s": t1 - t0, "sample_s": t2 - t1, "warnings": synth.warnings,
                       "details": {k: v for k, v in synth.details().items()
                                   if k in ("noise_multiplier", "steps", "sample_rate",
                                            "tree_edges", "noise_sigma")},
                       **score(train, holdout, table, seed)}
                results.append(row)
                if args.out:  # keep what is done if a later run fails
                    atomic_write_text(Path(args.out), json.dumps(results, indent=1, default=str))
                print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v)
                                  for k, v in row.items()
                                  if k not in ("warnings", "details")}), file=sys.stderr,
                      flush=True)
    if args.out:
        atomic_write_text(Path(args.out), json.dumps(results, indent=1, default=str))
    print(summary(results))
    return 0


def summary(results: list[dict]) -> str:
    """Markdown table: mean (and min-max over seeds) per method and epsilon."""
    frame = pd.DataFrame(results)
    keys = ["tvd_1way_mean", "tvd_2way_mean", "acc_synthetic", "mia_auc", "copy_rate",
            "fit_s"]
    lines = ["| method | epsilon | seeds | 1-way TVD | 2-way TVD | accuracy (train on synth) "
             "| MIA AUC | copies of unique rows | fit s |", "|---" * 9 + "|"]
    frame["eps_key"] = frame["epsilon"].fillna(np.inf)
    for (method, eps), g in frame.groupby(["method", "eps_key"], sort=False):
        cells = []
        for k in keys:
            v = g[k].astype(float) if k in g else pd.Series([np.nan])
            if v.isna().all():
                cells.append("-")
            elif len(v) > 1 and k != "fit_s":
                cells.append(f"{v.mean():.3f} ({v.min():.3f}-{v.max():.3f})")
            else:
                cells.append(f"{v.mean():.3f}" if k != "copy_rate" else f"{v.mean():.4f}")
        label = "inf (not private)" if np.isinf(eps) else f"{eps:g}"
        if method.startswith("real"):
            label = "-"
        lines.append(f"| {method} | {label} | {len(g)} | " + " | ".join(cells) + " |")
    acc = frame["acc_real"].dropna()
    lines.append(f"\ntrain on real, test on real holdout: accuracy {acc.mean():.3f} "
                 f"({acc.min():.3f}-{acc.max():.3f} over the classifier seeds); majority class "
                 f"{frame['majority'].dropna().iloc[0]:.3f}")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
