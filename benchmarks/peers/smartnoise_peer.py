"""Runs inside a separate venv with smartnoise-synth 1.0.8: never imported by privlab, never
installed in the project venv (it pins opacus<0.15 and pandas<3; DESIGN.md hazards).

Fits smartnoise-synth's AIM or MST on the integer codes of the public Adult bins (every
column categorical) and writes the sampled codes. smartnoise-synth 1.0.8 samples with
mbi < 2 (`synthetic_data`), which generates rows column by column from rounded counts and
then keeps the rows in that order: the fake dependencies this creates are part of its
results. Called by benchmarks/synth.py with a JSON job file.

Setup: python3 -m venv /tmp/snenv && /tmp/snenv/bin/pip install smartnoise-synth==1.0.8
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import pandas as pd


def main() -> int:
    with open(sys.argv[1]) as fh:
        job = json.loads(fh.read())
    from snsynth import Synthesizer

    codes = np.load(job["codes"])
    cols = [f"c{j}" for j in range(codes.shape[1])]
    frame = pd.DataFrame(codes, columns=cols)
    options = {"epsilon": job["epsilon"], "delta": job["delta"]}
    if job["method"] == "aim":
        options["degree"] = job.get("degree", 3)
    np.random.seed(job["seed"])
    t0 = time.perf_counter()
    synth = Synthesizer.create(job["method"], **options)
    synth.fit(frame, categorical_columns=cols, preprocessor_eps=0.0)
    t1 = time.perf_counter()
    out = synth.sample(job["rows"])
    t2 = time.perf_counter()
    np.save(job["out"], pd.DataFrame(out, columns=cols).to_numpy(dtype=np.int64))
    with open(job["result"], "w") as fh:
        json.dump({"fit_s": t1 - t0, "sample_s": t2 - t1}, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
