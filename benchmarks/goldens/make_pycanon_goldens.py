"""Generate pycanon golden values for privlab's privacy-model tests.

pycanon pins exact old versions (1.3.6: numpy==2.0.2, pandas==2.3.3, ...), so it never goes into
privlab's environment. Run this script in a separate venv:

    python3 -m venv /tmp/pycanon-venv && /tmp/pycanon-venv/bin/pip install pycanon==1.3.6
    /tmp/pycanon-venv/bin/python benchmarks/goldens/make_pycanon_goldens.py

It writes `benchmarks/goldens/pycanon_<case>.json`; `tests/assess/test_pycanon_goldens.py`
rebuilds each input from the recipe stored in the file and compares privlab's k, l and t with
pycanon's exactly (t to 1e-12: a different summation order). pycanon hazards handled here:
row labels are used as positions (so the index is reset), NaN breaks it (so missing values are
encoded as the string "<missing>" or the rows dropped first).
"""

from __future__ import annotations

import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pycanon
from pycanon import anonymity

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ADULT = ROOT / "src" / "privlab" / "data" / "bundled" / "adult" / "adult.csv.gz"
ADULT_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
    "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
    "hours-per-week", "native-country", "salary",
]
MISSING = "<missing>"


def adult(recipe: str) -> pd.DataFrame:
    """The recipes the test rebuilds with privlab's own loader (same rows, same order)."""
    frame = pd.read_csv(ADULT, skipinitialspace=True, na_values=["?"], header=0)
    frame.columns = ADULT_COLUMNS
    if recipe == "drop_missing":
        return frame.dropna().reset_index(drop=True)
    if recipe == "missing_as_value":
        return frame.fillna(MISSING).reset_index(drop=True)
    if recipe == "drop_missing_every_7th":
        return frame.dropna().reset_index(drop=True).iloc[::7].reset_index(drop=True)
    if recipe == "drop_missing_age_band":
        out = frame.dropna().reset_index(drop=True)
        out["age_band"] = (out["age"] // 10) * 10
        return out
    raise ValueError(recipe)


def synthetic(seed: int, n: int) -> pd.DataFrame:
    """A small mixed table; its rows are stored in the golden file (no RNG replay needed)."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "zip3": rng.choice([100, 101, 102, 205, 206], n),
        "gender": rng.choice(["F", "M"], n),
        "age": rng.integers(20, 30, n),
        "diagnosis": rng.choice(["flu", "asthma", "diabetes", "cancer", "hiv"], n,
                                p=[0.4, 0.25, 0.2, 0.1, 0.05]),
        "cost": rng.integers(0, 12, n) * 100,
    })


CASES = [
    # name, source, recipe, quasi-identifiers, sensitive attribute
    ("adult_qi6_occupation", "adult", "drop_missing",
     ["age", "education", "marital-status", "race", "sex", "native-country"], "occupation"),
    ("adult_sex_race_occupation", "adult", "drop_missing", ["sex", "race"], "occupation"),
    ("adult_sex_race_hours", "adult", "drop_missing", ["sex", "race"], "hours-per-week"),
    ("adult_missing_as_value", "adult", "missing_as_value", ["workclass", "sex"], "occupation"),
    ("adult_ageband_educnum", "adult", "drop_missing_age_band", ["age_band", "sex"],
     "education-num"),
    ("adult_subset_age_sex_hours", "adult", "drop_missing_every_7th", ["age", "sex"],
     "hours-per-week"),
    ("synthetic_diagnosis", "synthetic", "seed=7,n=400", ["zip3", "gender"], "diagnosis"),
    ("synthetic_cost", "synthetic", "seed=7,n=400", ["zip3", "gender", "age"], "cost"),
]


def main() -> None:
    for name, source, recipe, qis, sa in CASES:
        if source == "adult":
            data = adult(recipe)
        else:
            opts = dict(kv.split("=") for kv in recipe.split(","))
            data = synthetic(int(opts["seed"]), int(opts["n"]))
        start = time.perf_counter()
        k = anonymity.k_anonymity(data, qis)
        l_distinct = anonymity.l_diversity(data, qis, [sa])
        entropy_l = anonymity.entropy_l_diversity(data, qis, [sa])
        c_rec, l_rec = anonymity.recursive_c_l_diversity(data, qis, [sa])
        t = anonymity.t_closeness(data, qis, [sa])
        seconds = time.perf_counter() - start
        out = {
            "case": name,
            "source": source,
            "recipe": recipe,
            "quasi_identifiers": qis,
            "sensitive": sa,
            "rows": len(data),
            "pycanon": {
                "k": int(k),
                "l": int(l_distinct),
                "entropy_l": int(entropy_l),
                "recursive_c": None if isinstance(c_rec, float) and math.isnan(c_rec)
                else int(c_rec),
                "recursive_l": int(l_rec),
                "t": float(t),
            },
            "t_distance": "ordered" if pd.api.types.is_numeric_dtype(data[sa]) else "equal",
            "seconds": round(seconds, 2),
            "versions": {"pycanon": pycanon.__version__, "pandas": pd.__version__,
                         "numpy": np.__version__, "python": platform.python_version()},
            "notes": "index reset before pycanon; pycanon's recursive (c,l) sorts class counts "
                     "ascending (Machanavajjhala et al. 2007 sort them descending), so "
                     "privlab does not match it; entropy_l is pycanon's int(exp(min entropy)).",
        }
        if source == "synthetic":
            out["data"] = {c: data[c].tolist() for c in data.columns}
        path = HERE / f"pycanon_{name}.json"
        path.write_text(json.dumps(out, indent=1) + "\n")
        print(f"{name}: k={k} l={l_distinct} entropy_l={entropy_l} c,l={c_rec},{l_rec} "
              f"t={t:.6f} ({seconds:.1f}s) -> {path.name}", file=sys.stderr)


if __name__ == "__main__":
    main()
