"""Choose epsilon on Kobylianska's synthetic setup and on Adult, for the three policies; adaptive vs
full grid.

For each data set: one full-grid sweep (every grid epsilon trained with DP-SGD and attacked
with the loss and shadow attacks, plus the non-private baseline), then eps* under the medical,
finance and recommender policies. The adaptive search is then REPLAYED on the same
measurements (it only decides which grid points to train, so answering its requests from the
sweep gives exactly the result of training them on demand) with a budget of half the grid.

    .venv/bin/python experiments/choose_epsilon_policies.py [--quick] [--out docs/figures]
        [--only classification|adult] [--attacks loss,shadow,lira] [--public-adult] [--tag NAME]

`--attacks` (default loss,shadow) names the attacks behind the risk; `--public-adult` encodes
Adult with its public preprocessing (nothing read from the data, as `privlab choose-epsilon
adult` does); `--tag` names the results file and figures so a sweep does not overwrite another.

Writes docs/figures/choose_epsilon_<data>_{accuracy,risk,loss}.png and
experiments/results/choose_epsilon_policies.json, and prints the table for the docs.
"""

from __future__ import annotations

import argparse
import base64
import json
import time
from pathlib import Path

from privlab.data.datasets import load_dataset
from privlab.risk import POLICIES, adaptive_search, decide, fit_curves, prior_sensitivity
from privlab.risk.pipeline import (
    ChooseResult,
    PipelineConfig,
    Sweep,
    baseline,
    evaluate_epsilons,
    feasible_epsilons,
    prepare,
)
from privlab.risk.report import _accuracy_fig, _loss_fig, _risk_fig

GRID = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0]


def save_png(uri: str, path: Path) -> None:
    path.write_bytes(base64.b64decode(uri.split(",", 1)[1]))


def run(name: str, frame, target: str, cfg: PipelineConfig, out: Path, tag: str = "") -> dict:
    t0 = time.perf_counter()
    prep = prepare(frame, target, seed=cfg.split_seed, max_rows=cfg.max_rows,
                   public=cfg.public)
    grid, dropped = feasible_epsilons(prep, cfg, GRID)
    base = baseline(prep, cfg)
    evs, details = evaluate_epsilons(prep, cfg, grid)
    sweep_s = time.perf_counter() - t0
    by_eps = {e.epsilon: e for e in evs}
    res: dict = {"data": name, "info": prep.info, "grid": grid, "dropped": dropped,
                 "attacks": list(cfg.attacks), "public_preprocessing": cfg.public,
                 "baseline_accuracy": base["accuracy"], "baseline_auc": base["auc"],
                 "sweep_seconds": sweep_s, "policies": {}}
    res["per_epsilon"] = [{"epsilon": e.epsilon, "accuracy": e.accuracy_mean,
                           "auc": e.auc, "counts": e.counts} for e in evs]
    for pname in POLICIES:
        pol = POLICIES[pname]
        curves = fit_curves(evs, level=pol.level, seed=0)
        d = decide(curves, pol)
        requested: list[float] = []

        def replay(e: float, _asked: list[float] = requested) -> object:
            _asked.append(e)
            return by_eps[e]

        ad = adaptive_search(grid, replay, pol, budget=len(grid) // 2, seed=0)
        full, adapt = d.chosen_epsilon, ad.decision.chosen_epsilon
        steps = None if full is None or adapt is None else abs(grid.index(full)
                                                                 - grid.index(adapt))
        res["policies"][pname] = {
            "chosen_epsilon": full, "mean_rule_epsilon": d.mean_rule.epsilon,
            "reason": d.risk_averse.reason,
            "adaptive_epsilon": adapt, "adaptive_runs": len(requested),
            "adaptive_order": ad.order, "grid_steps_apart": steps,
            "sensitivity": prior_sensitivity(evs, pol, seed=0),
        }
        if pname == "finance":
            doc = ChooseResult(d, Sweep(evs, details, base, len(evs) + 1), cfg, prep.info, [],
                               [], grid, grid, sweep_s).to_dict()
            for kind, fn in (("accuracy", _accuracy_fig), ("risk", _risk_fig),
                             ("loss", _loss_fig)):
                save_png(fn(doc), out / f"choose_epsilon_{name}{tag}_{kind}.png")
            res["curves"] = [{k: r[k] for k in ("epsilon", "accuracy", "accuracy_smoothed",
                                                "risk_mean", "risk_lower", "risk_upper")}
                             for r in doc["per_epsilon"]]
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer rows and epochs (smoke run)")
    ap.add_argument("--out", default="docs/figures")
    ap.add_argument("--only", choices=["classification", "adult"])
    ap.add_argument("--attacks", default="loss,shadow")
    ap.add_argument("--public-adult", action="store_true")
    ap.add_argument("--tag", default="", help="suffix of the results file and figures")
    ap.add_argument("--epochs", type=int, default=None, help="override the data set's epochs")
    ap.add_argument("--lr", type=float, default=None, help="override the data set's lr")
    args = ap.parse_args()
    attacks = tuple(a.strip() for a in args.attacks.split(",") if a.strip())
    tag = f"_{args.tag}" if args.tag else ""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    quick = args.quick
    rows = 2000 if quick else 3000
    results = []
    cfgs = {
        # Kobylianska (2025): make_classification (100 features), MLP 100-128-64-2 with LayerNorm;
        # min-max scaled features stall Adam at lr 5e-3 without DP, so lr 1e-3 and more epochs
        "classification": (load_dataset("classification"), "target",
                    PipelineConfig(epochs=3 if quick else 25, lr=1e-3, hidden=(128, 64),
                                   batch_size=64, shadow_models=2, max_rows=rows, seed=0,
                                   attacks=attacks)),
        "adult": (load_dataset("adult", drop_missing=True), "salary",
                  PipelineConfig(epochs=3 if quick else 10, lr=5e-3, hidden=(128, 64),
                                 batch_size=64, shadow_models=2, max_rows=rows, seed=0,
                                 attacks=attacks,
                                 public="adult" if args.public_adult else None)),
    }
    for name, (frame, target, cfg) in cfgs.items():
        if args.only and name != args.only:
            continue
        if args.epochs is not None:
            cfg.epochs = args.epochs
        if args.lr is not None:
            cfg.lr = args.lr
        r = run(name, frame, target, cfg, out, tag)
        results.append(r)
        print(f"== {name}: rows {r['info']['rows']}, baseline acc {r['baseline_accuracy']:.3f}, "
              f"AUC {r['baseline_auc']}, sweep {r['sweep_seconds']:.0f}s")
        for e in r["per_epsilon"]:
            print(f"   eps={e['epsilon']:<7g} acc {e['accuracy']:.3f} auc "
                  + " ".join(f"{a}={v:.3f}" for a, v in e["auc"].items()))
        for p, v in r["policies"].items():
            print(f"   {p:<12} eps*={v['chosen_epsilon']} (mean rule {v['mean_rule_epsilon']}); "
                  f"adaptive {v['adaptive_epsilon']} with {v['adaptive_runs']}/{len(r['grid'])} "
                  f"runs, order {v['adaptive_order']}")
    dest = Path("experiments/results")
    dest.mkdir(parents=True, exist_ok=True)
    suffix = tag + ("_only_" + args.only if args.only else "")
    (dest / f"choose_epsilon_policies{suffix}.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
