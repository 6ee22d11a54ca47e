"""`GraphicalModel.calibrate` (issue 32's fourth pass: one exp per cell, the distribute pass
in counts) against the brute-force joint computed wholly in log space, on random junction
trees, including extreme potentials: very negative cells (counts far below the smallest
double), huge spreads, and cells of probability zero (-inf), alone and as whole slices."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp

from privlab.synth.pgm import GraphicalModel
from privlab.synth.tables import _reduce, _reduce_plan, _sum_groups, _sum_onto

TOTAL = 12_345.0
#: counts above this are represented as normal doubles by any correct calibration
NORMAL = 1e-290
#: log of a count below which every double rounds to 0 (e^-746 < 2^-1075)
ZERO_LOG = -746.0


def _random_case(seed: int, extreme: str) -> tuple[list[int], list[tuple[int, ...]],
                                                   dict[tuple[int, ...], np.ndarray]]:
    """Sizes (1 to 4 values), regions (random 2- and 3-way cliques over 7 attributes) and
    potentials."""
    gen = np.random.default_rng(seed)
    d = 7
    sizes = [int(s) for s in gen.integers(1, 5, size=d)]  # 1: an axis to reduce is 1
    pairs = list(itertools.combinations(range(d), 2)) + list(itertools.combinations(range(d), 3))
    picks = gen.choice(len(pairs), size=int(gen.integers(5, 9)), replace=False)
    regions = sorted({pairs[i] for i in picks})
    theta = {}
    for r in regions:
        t = gen.normal(scale=2.0, size=[sizes[a] for a in r])
        if extreme in ("negative", "mixed"):
            # a fifth of the cells hundreds to thousands of nats down: products of such
            # cells underflow, others sit at the edge of the double range
            mask = gen.random(t.shape) < 0.2
            t[mask] -= gen.uniform(300.0, 3000.0, size=int(mask.sum()))
        if extreme in ("zeros", "mixed"):
            t[gen.random(t.shape) < 0.1] = -np.inf  # structural zeros
        theta[r] = t
    if extreme in ("zeros", "mixed"):
        # one value of attribute 0 impossible: a whole slice of every clique holding it
        theta[(0,)] = np.where(np.arange(sizes[0]) == 0, -np.inf, 0.0)
    return sizes, regions, theta


def _log_counts(sizes: list[int], theta: dict[tuple[int, ...], np.ndarray]) -> np.ndarray:
    """log of the joint in counts summing to TOTAL, never leaving log space."""
    d = len(sizes)
    logp = np.zeros(sizes)
    for r, t in theta.items():
        logp = logp + t.reshape([sizes[a] if a in r else 1 for a in range(d)])
    return logp - logsumexp(logp) + np.log(TOTAL)


@pytest.mark.parametrize("extreme", ["none", "negative", "zeros", "mixed"])
@pytest.mark.parametrize("seed", range(6))
def test_calibrate_equals_the_log_space_joint(seed: int, extreme: str) -> None:
    sizes, regions, theta = _random_case(seed, extreme)
    model = GraphicalModel(sizes, regions, TOTAL, theta=theta)
    logc = _log_counts(sizes, theta)
    d = len(sizes)
    tree = model.tree
    assert len(tree.cliques) >= 2  # a tree with messages, not one table
    for node, cl in enumerate(tree.cliques):
        want_log = logsumexp(logc, axis=tuple(a for a in range(d) if a not in cl))
        got = model.beliefs[node]
        assert np.isfinite(got).all() and (got >= 0).all()
        assert abs(got.sum() - TOTAL) <= 1e-9 * TOTAL
        normal = want_log > np.log(NORMAL)
        np.testing.assert_allclose(got[normal], np.exp(want_log[normal]), rtol=1e-9)
        # underflow pinned: what no double can hold is 0, the rest at most denormal
        assert (got[want_log < ZERO_LOG] == 0).all()
        assert (got[~normal] <= 2 * NORMAL).all()
        if extreme in ("zeros", "mixed"):
            assert (got[np.isneginf(want_log)] == 0).all()
    if extreme in ("zeros", "mixed"):
        assert np.isneginf(logc).any()



def test_reduce_equals_numpys_reduction(monkeypatch) -> None:
    """`_reduce` (halving an inner axis): numpy's maximum exactly, its sum to rounding, on
    every subset of axes of random shapes with 1-valued and odd-sized axes (halving from
    any size here, so small shapes take that path)."""
    from privlab.synth import tables

    monkeypatch.setattr(tables, "_HALVE_FROM", 0)
    _reduce_plan.cache_clear()
    gen = np.random.default_rng(11)
    halved = 0
    for _ in range(40):
        shape = tuple(int(s) for s in gen.integers(1, 8, size=int(gen.integers(1, 6))))
        a = gen.normal(size=shape)
        for k in range(1, len(shape) + 1):
            for axes in itertools.combinations(range(len(shape)), k):
                got = _reduce(np.maximum, a, axes)
                assert not np.shares_memory(got, a)
                assert np.array_equal(got, a.max(axis=axes, keepdims=True))
                np.testing.assert_allclose(_reduce(np.add, a, axes),
                                           a.sum(axis=axes, keepdims=True), rtol=1e-12,
                                           atol=1e-12)
                halved += _reduce_plan(shape, axes) is not None
    _reduce_plan.cache_clear()  # the plans above were made for _HALVE_FROM = 0
    assert halved > 50


def test_sum_onto_equals_the_broadcast_sum() -> None:
    """Terms summed in groups (and spelled out over the clique's last attributes when
    that keeps them small) add up to the plain broadcast sum."""
    gen = np.random.default_rng(12)
    sizes = [12, 5, 6, 8, 3]
    clique = (0, 1, 2, 3, 4)
    filled = 0
    shapes = [[(1, 3), (2, 3), (0, 3, 4)]]  # a clique of the 200k x 20 run's final model
    for _ in range(60):
        shapes.append([tuple(sorted(gen.choice(5, size=int(gen.integers(0, 4)), replace=False)))
                       for _ in range(int(gen.integers(0, 6)))])
    for shape in shapes:
        terms = [(gen.normal(size=[sizes[a] for a in attrs]), attrs) for attrs in shape]
        want = np.zeros(sizes)
        for arr, attrs in terms:
            want = want + arr.reshape([sizes[a] if a in attrs else 1 for a in clique])
        out = np.full(sizes, np.nan)
        got = _sum_onto(terms, clique, sizes, out)
        assert got is out
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        groups, fill = _sum_groups(tuple(sizes), tuple(a for _, a in terms), clique)
        filled += len(groups) > 1 and bool(fill)
    assert filled >= 1


def test_mirror_descent_reusing_dropped_tables_is_the_same_fit(monkeypatch) -> None:
    """mirror_descent hands calibrate the tables of the calibration it dropped (rejected or
    superseded); with fresh tables every time the fit is the same, float for float (no
    table still in use is overwritten). Noisy measurements and a large start step, so both
    accepted and rejected steps occur."""
    from privlab.synth import pgm

    sizes, regions, theta = _random_case(3, "none")
    truth = GraphicalModel(sizes, regions, TOTAL, theta=theta)
    gen = np.random.default_rng(4)
    meas = [pgm.Measurement(r, truth.marginal(r) + gen.normal(0, 5.0, truth.marginal(r).shape),
                            5.0) for r in regions]

    def fit() -> tuple[GraphicalModel, pgm.FitStats]:
        return pgm.mirror_descent(sizes, meas, iters=40, step=1.0, total=TOTAL)

    reused, stats = fit()
    calls: list[bool] = []
    original = GraphicalModel.calibrate

    def fresh(self: GraphicalModel, out: list[np.ndarray] | None = None) -> None:
        calls.append(out is not None)
        original(self)

    monkeypatch.setattr(GraphicalModel, "calibrate", fresh)
    again, stats2 = fit()
    assert sum(calls) >= 35  # tables were on offer nearly every iteration
    assert stats.loss == stats2.loss and stats.step == stats2.step
    assert stats.step < 1.0 / 1.01 ** 40  # some steps were rejected (the step halved)
    for r in reused.theta:
        assert np.array_equal(reused.theta[r], again.theta[r])
    for b1, b2 in zip(reused.beliefs, again.beliefs, strict=True):
        assert np.array_equal(b1, b2)
    monkeypatch.undo()
    # whatever the last step was (accepted or rejected), the returned beliefs are its
    # theta's: the tables kept for a rollback were never the ones overwritten
    for k in range(1, 25):
        model, _ = pgm.mirror_descent(sizes, meas, iters=k, step=1.0, total=TOTAL)
        kept = [b.copy() for b in model.beliefs]
        model.calibrate()
        assert all(np.array_equal(a, b) for a, b in zip(kept, model.beliefs, strict=True))
