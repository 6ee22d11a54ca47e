"""privlab's k, l and t against pycanon 1.3.6 goldens (benchmarks/goldens/make_pycanon_goldens.py).

The goldens are computed in a separate venv (pycanon pins old numpy/pandas); each file stores the
recipe that rebuilds its input, so this test needs no pycanon.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privlab.assess import evaluate_privacy
from privlab.data.datasets import load_dataset

GOLDENS = sorted((Path(__file__).resolve().parents[2] / "benchmarks" / "goldens")
                 .glob("pycanon_*.json"))


def _adult(recipe: str) -> pd.DataFrame:
    if recipe == "missing_as_value":
        frame = load_dataset("adult")
        for col in frame.columns:
            if frame[col].isna().any():
                frame[col] = frame[col].fillna("<missing>")
        return frame
    frame = load_dataset("adult", drop_missing=True)
    if recipe == "drop_missing":
        return frame
    if recipe == "drop_missing_every_7th":
        return frame.iloc[::7].reset_index(drop=True)
    if recipe == "drop_missing_age_band":
        frame["age_band"] = (frame["age"] // 10) * 10
        return frame
    raise ValueError(recipe)


def _input(golden: dict) -> pd.DataFrame:
    if golden["source"] == "adult":
        return _adult(golden["recipe"])
    return pd.DataFrame(golden["data"])


def test_goldens_present():
    assert len(GOLDENS) >= 6


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: p.stem)
def test_matches_pycanon(path: Path):
    golden = json.loads(path.read_text())
    frame = _input(golden)
    assert len(frame) == golden["rows"]
    ref = golden["pycanon"]
    rep = evaluate_privacy(frame, golden["quasi_identifiers"], golden["sensitive"])
    assert rep.k == ref["k"]
    assert rep.l_distinct == ref["l"]
    assert rep.t == pytest.approx(ref["t"], abs=1e-12, rel=1e-12)
    expected_distance = "ordered" if golden["t_distance"] == "ordered" else "equal"
    assert rep.t_distance.startswith(expected_distance)
    # pycanon truncates exp(min entropy) to an int; ours is the real number.
    assert math.floor(rep.entropy_l + 1e-9) == ref["entropy_l"]
    assert rep.recursive_l == ref["recursive_l"]


def test_recursive_c_uses_descending_counts():
    # One class with counts 5, 3, 2 (l = 3): r1 / (r3) = 5 / 2 = 2.5 (Machanavajjhala et al.).
    frame = pd.DataFrame({"q": ["a"] * 10, "s": list("xxxxxyyyzz")})
    rep = evaluate_privacy(frame, ["q"], "s")
    assert rep.recursive_l == 3
    assert rep.recursive_c == pytest.approx(2.5)
    # with l = 2: r1 / (r2 + r3) = 5 / 5 = 1
    rep2 = evaluate_privacy(frame, ["q"], "s", recursive_l=2)
    assert rep2.recursive_c == pytest.approx(1.0)
    assert np.isinf(evaluate_privacy(frame, ["q"], "s", recursive_l=4).recursive_c)
