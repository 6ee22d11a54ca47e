"""Re-decide saved sweeps (experiments/results/choose_epsilon_policies_only_*.json) without
training: the three policies with and without an accuracy floor, and the adaptive search
replayed on the measurements (it only decides which grid points to train).

    .venv/bin/python experiments/choose_epsilon_replay.py [--floor 0.7]
        [--glob 'choose_epsilon_policies*.json']

Ends with a tally per results file: cases (policy x floor) where the adaptive search (budget
half the grid) lands within one grid step of the full grid's eps*.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from privlab.risk import POLICIES, Evaluation, adaptive_search, decide, fit_curves, make_policy


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--floor", type=float, default=None,
                    help="accuracy floor (default: non-private accuracy minus 0.05)")
    ap.add_argument("--glob", default="choose_epsilon_policies*.json",
                    help="results files in experiments/results")
    args = ap.parse_args()
    tally: dict[str, dict[str, list[bool]]] = {}
    for path in sorted(Path("experiments/results").glob(args.glob)):
        for r in json.loads(path.read_text()):
            evs = {e["epsilon"]: Evaluation(e["epsilon"], {a: tuple(c) for a, c in
                                                           e["counts"].items()},
                                            [e["accuracy"]], auc=e["auc"])
                   for e in r["per_epsilon"]}
            grid = sorted(evs)
            floor = args.floor if args.floor is not None else round(
                r["baseline_accuracy"] - 0.05, 3)
            print(f"== {r['data']} (non-private accuracy {r['baseline_accuracy']:.3f})")
            for fl in (None, floor):
                for name in POLICIES:
                    pol = make_policy(name, min_accuracy=fl)
                    d = decide(fit_curves(list(evs.values()), level=pol.level, seed=0), pol)
                    asked: list[float] = []

                    def replay(e: float, _asked: list[float] = asked,
                               _evs: dict = evs) -> Evaluation:
                        _asked.append(e)
                        return _evs[e]

                    f = d.chosen_epsilon
                    print(f"   {name:<12} floor {fl}: eps* = {f} (mean rule "
                          f"{d.mean_rule.epsilon})")
                    for fill in ("envelope", "linear"):
                        asked.clear()
                        ad = adaptive_search(grid, replay, pol, budget=len(grid) // 2, seed=0,
                                             fill=fill)
                        a = ad.decision.chosen_epsilon
                        apart = regret = None
                        if a is not None and f is not None:
                            apart = abs(grid.index(a) - grid.index(f))
                            loss = d.risk_averse.loss
                            regret = loss[grid.index(a)] - loss[grid.index(f)]
                        tally.setdefault(path.name, {}).setdefault(fill, []).append(
                            a == f or (apart is not None and apart <= 1))
                        print(f"      adaptive ({fill}): {a} with {len(asked)}/{len(grid)} runs "
                              f"{ad.order}; {apart} grid steps apart, loss regret "
                              f"{'n/a' if regret is None else f'{regret:.4f}'}")

    print("== within one grid step of the full grid (adaptive, half the runs)")
    for name, fills in tally.items():
        print("   " + name + ": " + ", ".join(f"{fill} {sum(v)}/{len(v)}"
                                          for fill, v in fills.items()))


if __name__ == "__main__":
    main()
