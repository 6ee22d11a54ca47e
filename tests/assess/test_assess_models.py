"""Privacy models against brute-force definitions, delta-presence, risk, input errors."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from privlab.assess import (
    delta_presence,
    entropy_l_diversity,
    evaluate_privacy,
    k_anonymity,
    l_diversity,
    recursive_cl_diversity,
    reidentification_risk,
    t_closeness,
)
from privlab.errors import InvalidInputError


def brute(frame: pd.DataFrame, qis: list[str], sa: str, numeric: bool) -> dict:
    """Textbook definitions, one class at a time (what pycanon does, without its hazards)."""
    values = np.sort(frame[sa].unique())
    m = len(values)
    p = np.array([(frame[sa] == v).mean() for v in values])
    ks, ls, ts, hs, cs = [], [], [], [], []
    ell = frame.groupby(qis, dropna=False)[sa].nunique().min()
    for _, cls in frame.groupby(qis, dropna=False):
        q = np.array([(cls[sa] == v).mean() for v in values])
        r = q - p
        ks.append(len(cls))
        ls.append(cls[sa].nunique())
        ts.append(np.abs(np.cumsum(r)).sum() / (m - 1) if numeric else 0.5 * np.abs(r).sum())
        qq = q[q > 0]
        hs.append(-(qq * np.log(qq)).sum())
        counts = np.sort(cls[sa].value_counts().to_numpy())[::-1]
        tail = counts[ell - 1:].sum()
        cs.append(counts[0] / tail if tail else math.inf)
    return {"k": min(ks), "l": min(ls), "t": max(ts), "entropy_l": math.exp(min(hs)),
            "c": max(cs)}


@pytest.mark.parametrize("seed", range(8))
def test_models_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 250))
    frame = pd.DataFrame({"a": rng.integers(0, 4, n), "b": rng.choice(["x", "y", "z"], n),
                          "s": rng.integers(0, int(rng.integers(2, 12)), n)})
    frame["sc"] = "v" + frame["s"].astype(str)
    for sa, numeric in (("s", True), ("sc", False)):
        if frame[sa].nunique() < 2:
            continue
        ref = brute(frame, ["a", "b"], sa, numeric)
        rep = evaluate_privacy(frame, ["a", "b"], sa)
        assert (rep.k, rep.l_distinct) == (ref["k"], ref["l"])
        assert rep.t == pytest.approx(ref["t"], abs=1e-12)
        assert rep.entropy_l == pytest.approx(ref["entropy_l"], rel=1e-9)
        assert rep.recursive_c == pytest.approx(ref["c"], rel=1e-12)
        assert rep.t_distance.startswith("ordered" if numeric else "equal")
        # the one-number functions agree with the report
        assert k_anonymity(frame, ["a", "b"]) == rep.k
        assert l_diversity(frame, ["a", "b"], sa) == rep.l_distinct
        assert t_closeness(frame, ["a", "b"], sa) == pytest.approx(rep.t)
        assert entropy_l_diversity(frame, ["a", "b"], sa) == pytest.approx(rep.entropy_l)
        assert recursive_cl_diversity(frame, ["a", "b"], sa)[1] == rep.recursive_l


def test_t_closeness_hand_example():
    # Li et al. 2007 style: salaries 3..11k ordered; class {3k, 4k, 5k} vs whole table
    frame = pd.DataFrame({"zip": ["476**"] * 3 + ["4790*"] * 3 + ["476**"] * 3,
                          "salary": [3, 4, 5, 6, 11, 8, 7, 9, 10]})
    frame.loc[6:, "zip"] = "47***"
    emd = evaluate_privacy(frame, ["zip"], "salary").details.set_index("zip")["t"]
    # class {3,4,5}: cumulative differences 2/9, 4/9, 6/9, 5/9, 4/9, 3/9, 2/9, 1/9, 0 -> 27/9/8
    assert emd["476**"] == pytest.approx(0.375)
    # the same values as categories: equal distance = 0.5 * (3 * (1/3 - 1/9) + 6/9) = 2/3
    cat = evaluate_privacy(frame, ["zip"], "salary", sensitive_kind="categorical")
    assert cat.details.set_index("zip")["t"]["476**"] == pytest.approx(2 / 3)


def test_missing_quasi_identifier_is_a_class_not_dropped():
    frame = pd.DataFrame({"q": ["a", "a", None, None, None], "s": ["x", "y", "x", "x", "y"]})
    rep = evaluate_privacy(frame, ["q"], "s")
    assert rep.classes == 2 and rep.k == 2 and rep.n == 5
    dropped = evaluate_privacy(frame, ["q"], "s", missing="drop")
    assert dropped.n == 2 and dropped.classes == 1


def test_delta_presence_and_journalist_risk():
    population = pd.DataFrame({"age": [30] * 4 + [40] * 5 + [50] * 1,
                               "sex": ["F"] * 4 + ["M"] * 5 + ["F"]})
    sample = population.iloc[[0, 1, 4, 5, 6, 9]].reset_index(drop=True)
    d = delta_presence(sample, population, ["age", "sex"])
    assert (d.delta_min, d.delta_max) == (pytest.approx(0.5), pytest.approx(1.0))
    risk = reidentification_risk(sample, ["age", "sex"], population=population)
    assert risk["prosecutor"]["highest"] == 1.0  # (50, F) is unique in the sample
    assert risk["journalist"]["highest"] == 1.0  # ... and in the population
    # journalist average: (2/4 + 3/5 + 1/1) / 6 records
    assert risk["journalist"]["average"] == pytest.approx((2 / 4 + 3 / 5 + 1) / 6)
    assert risk["marketer"]["average"] == pytest.approx((2 / 4 + 3 / 5 + 1) / 6)
    assert risk["population_unique_share"] == pytest.approx(1 / 6)
    rep = evaluate_privacy(sample, ["age", "sex"], population=population)
    assert rep.delta is not None and rep.delta.delta_min == pytest.approx(0.5)
    assert set(rep.details["population_size"]) == {4, 5, 1}
    with pytest.raises(InvalidInputError, match="not a subset"):
        delta_presence(population, sample, ["age", "sex"])


def test_prosecutor_risk_without_population():
    frame = pd.DataFrame({"q": [1, 1, 1, 2, 2, 3]})
    risk = reidentification_risk(frame, ["q"], threshold=0.4)
    assert risk["prosecutor"]["highest"] == 1.0
    assert risk["prosecutor"]["average"] == pytest.approx(3 / 6)
    assert risk["prosecutor"]["records_above_threshold"] == pytest.approx(3 / 6)  # 1/2, 1/1
    assert risk["unique_share"] == pytest.approx(1 / 6)
    assert "no population" in risk["journalist"]["note"]


@pytest.mark.parametrize("call,match", [
    (lambda f: k_anonymity(f, ["nope"]), "unknown quasi-identifier 'nope'"),
    (lambda f: l_diversity(f, ["a"], "a"), "also a quasi-identifier"),
    (lambda f: l_diversity(f, ["a"], "zz"), "unknown sensitive attribute"),
    (lambda f: k_anonymity(f, []), "at least one column"),
    (lambda f: evaluate_privacy(f, ["a", "a"]), "listed twice"),
    (lambda f: t_closeness(f, ["a"], "s", kind="weird"), "sensitive kind"),
])
def test_model_errors(call, match):
    frame = pd.DataFrame({"a": [1, 2, 2], "s": ["x", "y", "z"]})
    with pytest.raises(InvalidInputError, match=match):
        call(frame)


def test_class_details_in_json():
    frame = pd.DataFrame({"a": [1, 1, 2, 2, 2], "s": ["x", "y", "x", "x", "x"]})
    out = evaluate_privacy(frame, ["a"], "s").to_dict()
    assert out["k_anonymity"]["k"] == 2
    assert out["l_diversity"]["distinct_l"] == 1
    rows = out["class_details"]["rows"]
    assert rows[0]["size"] == 2 and rows[0]["a"] == 1  # smallest class first
    assert {"distinct_sensitive", "entropy_l", "t", "prosecutor_risk"} <= set(rows[0])
