"""AIM's model sizes (`ModelSizer`) of two source trees side by side: the same AIM-like graphs
(the 1-way cliques, then one random 2- or 3-way clique a round) and every 2- and 3-way
candidate over 20 columns, phases alternated, CPU seconds and their ratio; the sizes must
agree (exact integers).

    python benchmarks/synth_sizer.py --old /work/main/src --new src
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import time
from pathlib import Path
from types import ModuleType

import numpy as np


def load(src: str, name: str) -> ModuleType:
    """privlab/synth/triangulation.py of a source tree (it imports nothing from privlab)."""
    spec = importlib.util.spec_from_file_location(
        name, Path(src) / "privlab" / "synth" / "triangulation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--columns", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=45)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    gen = np.random.default_rng(0)
    d = args.columns
    sizes = gen.integers(2, 120, d).tolist()
    cands = [c for k in (2, 3) for c in itertools.combinations(range(d), k)]
    base: list[tuple[int, ...]] = [(j,) for j in range(d)]
    graphs = []
    for _ in range(args.rounds):
        base.append(cands[int(gen.integers(len(cands)))])
        graphs.append(list(base))
    mods = {"old": load(args.old, "tri_old"), "new": load(args.new, "tri_new")}
    cpu: dict[str, list[float]] = {"old": [], "new": []}
    answers = {}
    for _ in range(args.repeats):
        for label, mod in mods.items():
            t = time.process_time()
            answers[label] = [_sizes(mod, sizes, g, cands) for g in graphs]
            cpu[label].append(time.process_time() - t)
            print(f"{label}: {cpu[label][-1]:.2f} CPU-s", flush=True)
    assert answers["old"] == answers["new"], "the sizes differ"
    print(f"{len(graphs)} graphs x {len(cands)} candidates, same sizes; new/old CPU "
          f"{min(cpu['new']) / min(cpu['old']):.2f}x (min of {args.repeats})")


def _sizes(mod: ModuleType, sizes: list[int], graph: list[tuple[int, ...]],
           cands: list[tuple[int, ...]]) -> list[int]:
    sizer = mod.ModelSizer(sizes, graph)
    return [sizer.size(c) for c in cands]


if __name__ == "__main__":
    main()
