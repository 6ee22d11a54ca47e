"""AIM with fewer mirror-descent iterations and a stopping rule: fit quality and CPU, on Adult.

Two settings of privlab's AIM, alternated per (epsilon, seed) in one process (VARIANTS):

- `default`: ROUND_ITERS = 100 iterations every round and FINAL_ITERS = 1,000 at the end,
  no early stop (the defaults);
- `fast`: at most 50 iterations a round, each fit stopping once its loss fell by less than
  1% (rounds) / 0.01% (final) of itself over CONVERGENCE_WINDOW iterations.

Data: benchmarks/synth.py's protocol (Adult without missing values, 80% training rows,
its public domain). Scored:

- workload error: AIM's objective, the mean over the workload (every 2- and 3-way marginal)
  of the L1 distance between the training rows' and the released table's normalised
  marginals (the released table has as many rows as the training rows), and with
  --model-error the same for the fitted model's own marginals (no sampling noise);
- 1-, 2-, 3-way TVD against the holdout rows (`privlab.synth.evaluate.fidelity`);
- the final model's loss on its noisy measurements, rounds, iterations, CPU seconds.

    python benchmarks/synth_convergence.py --epsilons 1,4 --seeds 3 [--model-error] \\
        --json benchmarks/results/synth_convergence.json

`--table T.parquet --schema S.json` runs the same two variants on that table instead (the
generated 200k x 20 table of `benchmarks/synth_scale.py`, say): workload error, loss,
rounds, iterations and CPU; no holdout.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from synth import ADULT, DELTA, split  # noqa: E402 - the comparison suite's protocol

from privlab.synth.aim import AIMSynthesizer  # noqa: E402
from privlab.synth.evaluate import fidelity  # noqa: E402
from privlab.utils.atomic import atomic_write_text  # noqa: E402

#: "default": privlab.synth.aim's defaults (100 iterations every round, 1,000 at the end, no
#: early stop: the released tables of before issue 32's options); "fast": half the round
#: iterations, each fit stopping once its loss falls by under 1% (rounds) / 0.01% (final)
#: over CONVERGENCE_WINDOW iterations.
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "fast": {"round_iters": 50, "final_iters": 1000, "round_tol": 1e-2, "final_tol": 1e-4}}


def workload_error(codes: np.ndarray, other: np.ndarray | None, sizes: list[int],
                   model: Any = None) -> float:
    """Mean L1 distance of normalised 2- and 3-way marginals: the rows `codes` against the
    rows `other`, or against the model's marginals when `other` is None."""
    errs = []
    for k in (2, 3):
        for c in itertools.combinations(range(len(sizes)), k):
            shape = [sizes[a] for a in c]
            x = np.bincount(np.ravel_multi_index(tuple(codes[:, a] for a in c), shape),
                            minlength=int(np.prod(shape))).astype(float)
            if other is None:
                y = model.marginal(c).ravel()
            else:
                y = np.bincount(np.ravel_multi_index(tuple(other[:, a] for a in c), shape),
                                minlength=int(np.prod(shape))).astype(float)
            errs.append(float(np.abs(x / x.sum() - y / y.sum()).sum()))
    return float(np.mean(errs))


def _fit(frame: pd.DataFrame, schema: Any, eps: float, seed: int, variant: str,
         real_frame: pd.DataFrame, model_error: bool) -> tuple[Any, Any, dict[str, Any]]:
    """Fit one variant and sample a table of the input's size: the model, the table, and the
    row of figures every run reports (workload errors against `real_frame`, loss, CPU)."""
    c0 = time.process_time()
    s = AIMSynthesizer(schema=schema, rng=seed, **VARIANTS[variant])
    s.fit(frame, eps, DELTA)
    table = s.sample(len(frame))
    cpu = time.process_time() - c0
    assert s.domain is not None
    real, fake = s.domain.encode(real_frame), s.domain.encode(table)
    row = {"variant": variant, "epsilon": eps, "seed": seed, "cpu_s": round(cpu, 2),
           "rounds": len(s.round_log),
           "round_iterations": sum(r["iterations"] for r in s.round_log),
           "final_iterations": s.fit_stats.iterations, "final_loss": s.fit_stats.loss,
           "workload_error_table": workload_error(real, fake, s.domain.sizes)}
    if model_error:  # minutes at epsilon 4: 455 3-way marginals of a ~1M-cell model
        row["workload_error_model"] = workload_error(real, None, s.domain.sizes, s.model)
    return s, table, row


def run(eps: float, seed: int, variant: str, train: Any, hold: Any, model_error: bool
        ) -> dict[str, Any]:
    _, table, row = _fit(train, ADULT, eps, seed, variant, train, model_error)
    f = fidelity(hold, table)
    row.update({"tvd_1way": f["tvd_1way_mean"], "tvd_2way": f["tvd_2way_mean"],
                "tvd_3way": f["tvd_3way_mean"]})
    return row


def run_table(frame: pd.DataFrame, schema: str, eps: float, seed: int, variant: str,
              model_error: bool) -> dict[str, Any]:
    """One variant on a table of its own (no holdout): workload errors, loss, CPU."""
    conformed = AIMSynthesizer(schema=schema).conform(frame)
    return _fit(frame, schema, eps, seed, variant, conformed, model_error)[2]


def summary(rows: list[dict[str, Any]]) -> str:
    keys = [k for k in ("workload_error_table", "workload_error_model", "tvd_2way",
                        "tvd_3way", "final_loss", "rounds", "round_iterations", "cpu_s")
            if any(k in r for r in rows)]
    lines = ["| epsilon | variant | runs | " + " | ".join(keys) + " |",
             "|---" * (3 + len(keys)) + "|"]
    for eps in sorted({r["epsilon"] for r in rows}):
        for v in VARIANTS:
            g = [r for r in rows if r["epsilon"] == eps and r["variant"] == v]
            if g:
                lines.append(f"| {eps:g} | {v} | {len(g)} | " + " | ".join(
                    f"{np.mean([r[k] for r in g]):.4g}" if all(k in r for r in g) else "-"
                    for k in keys) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilons", default="1,4")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--model-error", action="store_true",
                    help="also the workload error of the model's own marginals (slow)")
    ap.add_argument("--table", default=None, help="a Parquet table instead of Adult")
    ap.add_argument("--schema", default=None, help="--table's declared schema (JSON)")
    args = ap.parse_args(argv)
    if args.table:
        frame = pd.read_parquet(args.table)
        out: dict[str, Any] = {"table": args.table, "rows": len(frame)}
    else:
        train, hold = split(0)
        out = {"table": "adult", "rows_train": len(train)}
    out.update(delta=DELTA, cpus=os.cpu_count(), variants=VARIANTS, runs=[])
    for eps in (float(e) for e in args.epsilons.split(",")):
        for seed in range(1, args.seeds + 1):
            order = list(VARIANTS) if seed % 2 else list(VARIANTS)[::-1]  # alternate first
            for v in order:
                row = (run_table(frame, args.schema, eps, seed, v, args.model_error)
                       if args.table
                       else run(eps, seed, v, train, hold, args.model_error))
                row["load_average"] = os.getloadavg()[0]
                out["runs"].append(row)
                print(json.dumps({k: round(x, 5) if isinstance(x, float) else x
                                  for k, x in row.items()}), file=sys.stderr, flush=True)
                if args.json:
                    atomic_write_text(Path(args.json), json.dumps(out, indent=1))
    out["summary"] = summary(out["runs"])
    print(out["summary"])
    if args.json:
        atomic_write_text(Path(args.json), json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
