"""Secret extraction from a small GPT-2 (Kobylianska 2025, section 2.3), without DP and with DP-SGD.

For each setting (--epsilons; "none" = no DP): public pretraining, fine-tuning on the 250-text
private corpus with 15 planted secrets (each in 10 texts), the sampling attack (each secret's
prompt, 10 samples at temperature 0.7, exact matches) and the exposure of every secret among
1,000 random candidates of its format (`privlab.audit.lm`, defaults of `LMAuditConfig`).
Prints extracted counts, mean exposure, the accounted guarantee, wall and CPU seconds.

Usage: .venv/bin/python experiments/audit_lm.py [--epsilons none,8,1] [--seed 0]
       [--threads 2] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilons", default="none,8")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    from privlab.audit.lm import LMAuditConfig, run_lm_audit

    out = {}
    for tag in args.epsilons.split(","):
        eps = None if tag == "none" else float(tag)
        cfg = LMAuditConfig()
        cfg.seed = args.seed
        wall, cpu = time.perf_counter(), time.process_time()
        res = run_lm_audit(eps, cfg, rng=args.seed + 1)
        res["wall_seconds"] = time.perf_counter() - wall
        res["cpu_seconds"] = time.process_time() - cpu
        out[tag] = res
        g = res["guarantee"]
        print(json.dumps({
            "setting": tag, "extracted": res["extraction"]["extracted"],
            "of": res["extraction"]["of"], "mean_exposure_bits": res["mean_exposure"],
            "mean_exposure_extrapolated": sum(e["exposure_extrapolated"] for e in
                                              res["exposure"]) / len(res["exposure"]),
            "epsilon": g["epsilon"], "delta": g["delta"], "is_dp": g["is_dp"],
            "noise_multiplier": res["training"]["noise_multiplier"],
            "secret_level": res["secret_level_guarantee"],
            "final_loss": res["training"]["history"][-1]["loss"],
            "wall_seconds": res["wall_seconds"], "cpu_seconds": res["cpu_seconds"]}),
            flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
