"""AIM's per-round candidate work (issue 32, fourth pass) computes what the plain definitions
do: `GraphicalModel.candidate_marginals` equals `marginal(c)` per candidate (up to the order
of float sums), and the incremental `ModelSizer` gives the sizes of a plain triangulation of
the base plus each candidate, on random models and graphs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from test_aim_scale import random_cliques, triangulate_by_full_scan

from privlab.synth import triangulation
from privlab.synth.pgm import GraphicalModel, ModelSizer


def random_model(gen: np.random.Generator) -> GraphicalModel:
    """A calibrated model with random potentials on random regions over 5-9 attributes."""
    d = int(gen.integers(5, 10))
    sizes = gen.integers(2, 5, size=d).tolist()
    regions = random_cliques(gen, d, int(gen.integers(d, 2 * d)), kmax=3)
    model = GraphicalModel(sizes, regions, total=float(gen.integers(100, 5000)))
    for r in model.regions:
        model.theta[r] = gen.normal(scale=1.0, size=model.theta[r].shape)
    model.calibrate()
    return model


@pytest.mark.parametrize("seed", range(8))
def test_candidate_marginals_equal_marginal_per_candidate(seed, monkeypatch) -> None:
    gen = np.random.default_rng(200 + seed)
    model = random_model(gen)
    d = len(model.sizes)
    everything = [c for k in (1, 2, 3) for c in itertools.combinations(range(d), k)]
    # a random part of them, as AIM's size cap leaves: some subsets lack their supersets
    keep = gen.random(len(everything)) < 0.7
    asked = [c for c, k in zip(everything, keep, strict=True) if k]
    want = {c: model.marginal(c) for c in asked}
    outside = [c for c in asked if model.tree.containing(c) is None]
    assert outside  # the subtree contractions are exercised
    calls = []
    plain = GraphicalModel.marginal
    monkeypatch.setattr(GraphicalModel, "marginal",
                        lambda self, c: calls.append(tuple(c)) or plain(self, c))
    pairs = list(model.candidate_marginals(asked))
    got = dict(pairs)
    assert len(pairs) == len(got) == len(asked) and set(got) == set(asked)  # each once
    for c in asked:
        assert got[c].shape == want[c].shape
        np.testing.assert_allclose(got[c], want[c], rtol=1e-12, atol=1e-12 * model.total)
    # a subtree is contracted only for an outside clique with no asked superset one larger
    asked_set = set(asked)
    contracted = [c for c in outside if not any(
        tuple(sorted((*c, x))) in asked_set for x in range(d) if x not in c)]
    assert sorted(calls) == sorted(contracted)


def test_candidate_marginals_sum_from_the_smallest_superset() -> None:
    gen = np.random.default_rng(7)
    model = random_model(gen)
    d = len(model.sizes)
    pair = (0, 1)
    supers = [tuple(sorted((*pair, x))) for x in range(2, d)]
    smallest = min(supers, key=lambda s: (math.prod(model.sizes[a] for a in s), s))
    got = dict(model.candidate_marginals([pair, *supers]))
    np.testing.assert_array_equal(got[pair], got[smallest].sum(axis=2))


def aim_like_graphs(gen: np.random.Generator, d: int, rounds: int):
    """Base graphs as AIM grows them: the 1-way cliques, then one 2- or 3-way clique a round."""
    base = [(j,) for j in range(d)]
    for _ in range(rounds):
        base.append(random_cliques(gen, d, 1, kmax=3)[0])
        yield list(base)


@pytest.mark.parametrize("seed", range(4))
def test_incremental_sizes_equal_the_plain_triangulation(seed, monkeypatch) -> None:
    """Connected and disconnected base graphs, candidates inside one component (the
    resumed elimination) and across components (the merged one), ties in cost."""
    gen = np.random.default_rng(300 + seed)
    d = int(gen.integers(8, 18))
    sizes = gen.integers(2, 9, size=d).tolist()
    sizes[1] = sizes[0]  # ties in cost are broken by index
    resumed: list[int] = []
    original = ModelSizer._resume

    def spy(self, comp, extra):
        resumed.append(min(self._step[a] for edge in extra for a in edge))
        return original(self, comp, extra)

    monkeypatch.setattr(ModelSizer, "_resume", spy)
    for base in aim_like_graphs(gen, d, 2 * d):
        sizer = ModelSizer(sizes, base)
        for c in random_cliques(gen, d, 25, kmax=4):
            want = sum(math.prod(sizes[a] for a in cl)
                       for cl in triangulate_by_full_scan(sizes, [*base, c]))
            assert sizer.size(c) == want
    assert resumed and max(resumed) > 0  # later steps are resumed, not replayed


def test_bitmask_elimination_equals_the_set_elimination() -> None:
    gen = np.random.default_rng(9)
    for _ in range(50):
        d = int(gen.integers(1, 20))
        sizes = gen.integers(1, 7, size=d).tolist()
        cliques = random_cliques(gen, d, int(gen.integers(0, 3 * d)), kmax=4)
        adj = triangulation._graph(d, cliques)
        masks = {v: sum(1 << u for u in nb) for v, nb in enumerate(adj)}
        got = triangulation._Elimination(sizes).run(masks, [], 0)
        want = sum(math.prod(sizes[a] for a in cl) for cl in triangulation.triangulate(
            sizes, cliques))
        assert got == want


def test_candidate_marginals_hold_few_tables_at_once() -> None:
    """A yielded table is dropped once no clique still to come is summed out of it (all of a
    round's 3-way tables at once took 0.8 GiB at 200k x 20)."""
    import gc
    import weakref

    gen = np.random.default_rng(11)
    model = random_model(gen)
    d = len(model.sizes)
    asked = [c for k in (1, 2, 3) for c in itertools.combinations(range(d), k)]
    refs, most = [], 0
    for _, table in model.candidate_marginals(asked):
        refs.append(weakref.ref(table))
        del table
        gc.collect()
        most = max(most, sum(r() is not None for r in refs))
    assert len(refs) == len(asked)
    assert most <= d + 2  # not the C(d, 3) 3-way tables
