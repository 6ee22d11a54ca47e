"""Richness, tiers, encoding paths and the Apriori combinations against plain pandas."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from privlab.assess import (
    Thresholds,
    assess,
    encode_table,
    parse_thresholds,
    richness_from_counts,
)
from privlab.assess.encode import combine_codes, distinct_tuples, encode_column
from privlab.errors import InvalidInputError


def pandas_stats(frame: pd.DataFrame, cols: list[str]) -> tuple[float, float, int]:
    """Reference: richness, unique share and k from pandas' value_counts (missing = value)."""
    counts = frame[cols].astype(object).fillna("<NA>").value_counts().to_numpy()
    n = len(frame)
    return (1 - float(((counts / n) ** 2).sum()), float(counts[counts == 1].sum() / n),
            int(counts.min()))


def test_richness_known_values():
    assert richness_from_counts(np.array([5, 5, 5, 5])) == pytest.approx(0.75)
    assert richness_from_counts(np.array([10])) == 0.0
    assert richness_from_counts(np.array([1] * 100)) == pytest.approx(0.99)
    assert richness_from_counts(np.array([3, 0, 1])) == pytest.approx(1 - (9 + 1) / 16)


@pytest.mark.parametrize("text,mode,a,b", [
    ("thirds", "thirds", 1 / 3, 2 / 3), ("0.4,0.75", "absolute", 0.4, 0.75),
    ("0.75", "absolute", 0.75, 0.75), ("rel:0.25,0.5", "relative", 0.25, 0.5),
])
def test_parse_thresholds(text, mode, a, b):
    t = parse_thresholds(text)
    assert (t.mode, t.a, t.b) == (mode, pytest.approx(a), pytest.approx(b))


@pytest.mark.parametrize("bad", ["x", "0.8,0.2", "1.5", "0.1,0.2,0.3", "rel:a,b"])
def test_parse_thresholds_rejects(bad):
    with pytest.raises(InvalidInputError):
        parse_thresholds(bad)


def test_absolute_threshold_two_tiers():
    frame = pd.DataFrame({"id": range(100), "flag": [0, 1] * 50, "g": list("abcd") * 25})
    result = assess(frame, thresholds="0.75")
    tiers = result.tiers
    assert tiers == {"id": "hide", "flag": "none", "g": "hide"}  # K(g) = 0.75 exactly


def test_equal_richness_falls_back_with_a_note():
    frame = pd.DataFrame({"a": [0, 1] * 10, "b": ["x", "y"] * 10})
    result = assess(frame)
    assert "fell back" in result.bounds.note
    assert any("fell back" in w for w in result.warnings)


def test_missing_policies_are_stated_and_differ():
    frame = pd.DataFrame({"a": ["x", "y", None, "x", "y", "x"], "b": [1, 2, 3, 4, np.nan, 6]})
    as_value = assess(frame)
    dropped = assess(frame, missing="drop")
    assert as_value.rows_used == 6 and dropped.rows_used == 4
    assert "counted as one more value" in as_value.missing_statement
    assert "dropped (2 of 6" in dropped.missing_statement
    assert as_value.attribute("a").distinct == 3  # x, y, <missing>
    assert dropped.attribute("a").distinct == 2
    assert as_value.attribute("a").missing == 1


def test_binning_numeric():
    frame = pd.DataFrame({"age": np.arange(100), "sex": ["F", "M"] * 50})
    raw = assess(frame)
    binned = assess(frame, bins=4)
    assert raw.attribute("age").distinct == 100
    assert binned.attribute("age").distinct == 4 and binned.attribute("age").binned
    assert binned.attribute("age").richness == pytest.approx(0.75)
    assert binned.attribute("sex").distinct == 2


@pytest.mark.parametrize("make", [
    lambda: pd.Series(["b", "a", None, "b", "c"], dtype="str"),
    lambda: pd.Series(["b", "a", None, "b", "c"], dtype=object),
    lambda: pd.Series(pd.array(["b", "a", None, "b", "c"], dtype="string[python]")),
    lambda: pd.Series([3, -7, 3, 10**12, 0]),
    lambda: pd.Series([3, -7, 3, 10, 0], dtype=np.int8),
    lambda: pd.Series([3, 2, 3, 2**63 + 5, 0], dtype=np.uint64),
    lambda: pd.Series([1.5, np.nan, 1.5, -2.0, 7.25]),
    lambda: pd.Series([1, None, 1, 2, 3], dtype="Int64"),
    lambda: pd.Series([True, False, True, True, False]),
    lambda: pd.Series(pd.Categorical(["x", "y", "x", None, "z"])),
])
def test_encoding_paths_count_like_pandas(make):
    series = make().rename("c")
    col, missing = encode_column(series, "c")
    expected = series.astype(object).fillna("<NA>").value_counts()
    assert sorted(col.counts().tolist()) == sorted(expected.tolist())
    assert int(missing.sum()) == int(series.isna().sum()) == col.n_missing
    assert np.array_equal(np.bincount(col.codes, minlength=col.card), col.counts())
    if col.kind == "numeric":  # numeric codes follow value order
        labels = [v for v in col.labels if v is not None]
        assert labels == sorted(labels)


def test_ordered_categories_sorted_labels():
    series = pd.Series(["pear", "apple", "fig", "apple"], dtype="str")
    col, _ = encode_column(series, "c", ordered=True)
    assert list(col.labels) == ["apple", "fig", "pear"]
    assert [col.labels[c] for c in col.codes] == list(series)


frames = st.integers(min_value=2, max_value=120).flatmap(lambda n: st.fixed_dictionaries({
    "a": st.lists(st.integers(0, 3), min_size=n, max_size=n),
    "b": st.lists(st.sampled_from(["x", "y", "z", None]), min_size=n, max_size=n),
    "c": st.lists(st.integers(-2, 40), min_size=n, max_size=n),
    "d": st.lists(st.sampled_from([0.5, 1.5, float("nan")]), min_size=n, max_size=n),
}))


@settings(max_examples=20, deadline=None)
@given(frames)
def test_combinations_match_pandas(data):
    assume(any(v is not None for v in data["b"]))
    assume(not all(np.isnan(v) for v in data["d"]))
    frame = pd.DataFrame(data)
    frame["b"] = frame["b"].astype("str")
    result = assess(frame, thresholds="1,1", max_combination_size=4)  # everything is a candidate
    assert len(result.combinations.combinations) == 11  # 6 pairs + 4 triples + 1 quadruple
    for a in result.attributes:
        k_ref, u_ref, min_ref = pandas_stats(frame, [a.name])
        assert a.richness == pytest.approx(k_ref, abs=1e-12)
        assert (a.unique_share, a.k) == (pytest.approx(u_ref), min_ref)
    for c in result.combinations.combinations:
        k_ref, u_ref, min_ref = pandas_stats(frame, list(c.attributes))
        assert c.stats.richness == pytest.approx(k_ref, abs=1e-12)
        assert c.stats.unique_share == pytest.approx(u_ref, abs=1e-12)
        assert c.stats.k == min_ref
        # refining a partition never lowers richness
        members = [result.attribute(m).richness for m in c.attributes]
        assert c.stats.richness >= max(members) - 1e-12


def test_apriori_prunes_supersets_of_hidden_sets():
    rng = np.random.default_rng(3)
    n = 400
    frame = pd.DataFrame({"id": np.arange(n), "a": rng.integers(0, 2, n),
                          "b": rng.integers(0, 3, n), "c": rng.integers(0, 2, n),
                          "d": rng.integers(0, 2, n)})
    result = assess(frame, max_combination_size=4)
    hidden = {frozenset(c.attributes) for c in result.combinations.combinations
              if c.tier == "hide"}
    for c in result.combinations.combinations:
        s = frozenset(c.attributes)
        assert "id" not in s  # hide-tier attributes are not candidates
        assert not any(h < s for h in hidden)  # no superset of a hidden set is extended
        for sub in itertools.combinations(c.attributes, len(c.attributes) - 1):
            if len(sub) > 1:
                assert frozenset(sub) not in hidden
        member_rank = max(["none", "low", "hide"].index(t) for t in c.member_tiers)
        assert c.escalated == (["none", "low", "hide"].index(c.tier) > member_rank)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 1000), st.integers(0, 2)),
                min_size=1, max_size=200))
def test_distinct_tuples_and_combine(rows):
    arr = np.array(rows)
    codes = [arr[:, 0], arr[:, 1], arr[:, 2]]
    cards = [6, 1001, 3]
    parts, counts = distinct_tuples(codes, cards)
    got = {tuple(int(p[i]) for p in parts): int(c) for i, c in enumerate(counts)}
    ref = pd.Series(list(map(tuple, arr.tolist()))).value_counts().to_dict()
    assert got == ref
    g, n_groups = combine_codes(codes, cards)
    assert n_groups == len(ref)
    # same tuple <=> same group, and groups follow lexicographic order
    order = sorted(ref)
    for i, row in enumerate(map(tuple, arr.tolist())):
        assert g[i] == order.index(row)


def test_encode_table_errors():
    frame = pd.DataFrame({"a": [1, 2, 3], "b": [None, None, None]})
    with pytest.raises(InvalidInputError, match="entirely missing"):
        encode_table(frame)
    with pytest.raises(InvalidInputError, match="at least 2 rows"):
        encode_table(frame.iloc[:1], ["a"])
    with pytest.raises(InvalidInputError, match="unknown column 'zz'"):
        encode_table(frame, ["zz"])
    dup = pd.DataFrame([[1, 2]], columns=["a", "a"])
    with pytest.raises(InvalidInputError, match="duplicate column"):
        encode_table(dup)
    with pytest.raises(InvalidInputError, match="only 0 row"):
        encode_table(pd.DataFrame({"a": [1, None], "b": [None, 2]}), missing="drop")


def test_thresholds_validation():
    with pytest.raises(InvalidInputError):
        Thresholds("absolute", 0.9, 0.1)


@pytest.mark.parametrize("final_max", [0, 1 << 26])  # sort branch / presence-map branch
def test_distinct_tuples_branches_agree_with_numpy(monkeypatch, final_max):
    """Every counting branch of distinct_tuples gives np.unique's tuples and counts."""
    import privlab.assess.encode as enc

    rng = np.random.default_rng(5)
    cards = [37, 23, 11, 5]
    codes = [rng.integers(0, m, 3000) for m in cards]
    monkeypatch.setattr(enc, "_DENSE_MIN", 16)  # force re-densify steps and the final branch
    monkeypatch.setattr(enc, "_DENSE_FINAL_MAX", final_max)
    parts, counts = enc.distinct_tuples(codes, cards)
    ref, ref_counts = np.unique(np.stack(codes, axis=1), axis=0, return_counts=True)
    got = np.stack(parts, axis=1)
    order = np.lexsort(got.T[::-1])
    np.testing.assert_array_equal(got[order], ref)
    np.testing.assert_array_equal(counts[order], ref_counts)
