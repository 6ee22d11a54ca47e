"""The issue-32 speed-ups of AIM compute exactly what the straightforward definitions do:
candidate weights (linear instead of candidates x workload), the greedy triangulation (a cost
heap instead of a full scan per step) and `ModelSizer` (per component, memoised), each
compared with a reference copy of the old code on random inputs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from privlab.synth import pgm
from privlab.synth.aim import candidate_weights
from privlab.synth.marginals import CodeMarginals, DuckDBMarginals, narrow
from privlab.synth.pgm import JunctionTree, ModelSizer, model_size, triangulate


def weights_by_definition(workload):
    closure = set()
    for s in workload:
        for k in range(1, len(s) + 1):
            closure.update(itertools.combinations(sorted(s), k))
    return {r: float(sum(len(set(r) & set(s)) for s in workload))
            for r in sorted(closure, key=lambda c: (len(c), c))}


def triangulate_by_full_scan(sizes, cliques):
    """The elimination as written before issue 32: rescan every vertex at every step."""
    d = len(sizes)
    adj = [set() for _ in range(d)]
    for cl in cliques:
        for a, b in itertools.combinations(cl, 2):
            adj[a].add(b)
            adj[b].add(a)
    remaining, found = set(range(d)), []
    while remaining:
        best = min(remaining, key=lambda v: (math.prod(sizes[a] for a in [v, *adj[v]]), v))
        clique = frozenset([best, *adj[best]])
        if not any(clique <= c for c in found):
            found.append(clique)
        nbrs = list(adj[best])
        for a, b in itertools.combinations(nbrs, 2):
            adj[a].add(b)
            adj[b].add(a)
        for a in nbrs:
            adj[a].discard(best)
        remaining.discard(best)
        adj[best] = set()
    found = [c for c in found if not any(c < o for o in found)]
    return sorted(tuple(sorted(c)) for c in found)


def random_cliques(gen, d, count, kmax=3):
    return [tuple(sorted(gen.choice(d, size=int(gen.integers(1, min(kmax, d) + 1)), replace=False)
                         .tolist())) for _ in range(count)]


@pytest.mark.parametrize("seed", range(6))
def test_candidate_weights_equal_the_definition(seed) -> None:
    gen = np.random.default_rng(seed)
    d = int(gen.integers(3, 12))
    workload = random_cliques(gen, d, int(gen.integers(1, 40)), kmax=4)
    got = candidate_weights(workload)
    want = weights_by_definition(workload)
    assert got == want and list(got) == list(want)  # same keys, values and order


@pytest.mark.parametrize("seed", range(12))
def test_triangulation_and_sizes_equal_the_full_scan(seed) -> None:
    gen = np.random.default_rng(100 + seed)
    d = int(gen.integers(2, 16))
    sizes = gen.integers(2, 8, size=d).tolist()
    sizes[int(gen.integers(d))] = sizes[0]  # ties in cost are broken by index, as before
    base = random_cliques(gen, d, int(gen.integers(0, 2 * d)))
    assert triangulate(sizes, base) == triangulate_by_full_scan(sizes, base)
    assert JunctionTree(sizes, base).cliques == triangulate_by_full_scan(sizes, base)
    sizer = ModelSizer(sizes, base)
    for c in random_cliques(gen, d, 40) + [()]:
        want = sum(math.prod(sizes[a] for a in cl)
                   for cl in triangulate_by_full_scan(sizes, [*base, c]))
        assert sizer.size(c) == model_size(sizes, [*base, c]) == want


def test_code_marginals_equal_duckdb_and_count_only_maximal_cliques() -> None:
    gen = np.random.default_rng(4)
    sizes = [3, 4, 5, 2, 6]
    codes = np.column_stack([gen.integers(0, s, 700) for s in sizes])
    cliques = [c for k in (1, 2, 3) for c in itertools.combinations(range(5), k)][::-1]
    oracle = CodeMarginals(codes, sizes)
    got = oracle.counts(cliques)
    duck = DuckDBMarginals(codes, sizes)
    want = duck.counts(cliques)
    duck.close()
    assert set(got) == set(want)
    for c in cliques:
        # exact: uint8/uint16 when the largest count fits, float32 below 2^24 rows
        assert got[c].dtype == (np.uint8 if len(c) == 3 else np.float32)
        assert got[c].shape == want[c].shape
        np.testing.assert_array_equal(got[c], want[c])
    assert oracle.scans == 10  # the ten 3-way cliques; every 1- and 2-way one is summed


def test_code_marginals_keep_columns_in_their_smallest_dtype() -> None:
    """Issue 32 (memory at 1M x 40): codes are held as uint8/uint16 per column, not an int64
    matrix, and counting them (an intp index per query, no overflow of the small dtype)
    gives the same tables as the int64 matrix."""
    gen = np.random.default_rng(5)
    sizes = [2, 256, 300, 70000]
    codes = np.column_stack([gen.integers(0, s, 900) for s in sizes])
    codes[0, :] = [s - 1 for s in sizes]  # the largest code of each column
    small = CodeMarginals([codes[:, j] for j in range(4)], sizes)
    assert [c.dtype for c in small.cols] == [np.uint8, np.uint8, np.uint16, np.uint32]
    cliques = [(0, 1, 2), (1, 2), (0, 3), (3,)]
    got, want = small.counts(cliques), DuckDBMarginals(codes, sizes)
    try:
        for c, table in want.counts(cliques).items():
            np.testing.assert_array_equal(got[c], table)
    finally:
        want.close()
    with pytest.raises(ValueError, match="outside"):
        narrow(np.array([0, 2]), 2)
    # a counted table is held in the smallest dtype its largest count fits, exactly
    for rows, dtype in ((255, np.uint8), (256, np.uint16), (65536, np.float32)):
        table = CodeMarginals([np.zeros(rows, np.int64)] * 2, [2, 3]).counts([(0, 1)])[(0, 1)]
        assert table.dtype == dtype and table[0, 0] == rows and table.sum() == rows


def test_cached_einsum_plans_give_numpys_floats_bit_for_bit() -> None:
    """The replayed contraction list makes numpy's own calls: results equal np.einsum's."""
    gen = np.random.default_rng(8)
    sizes = [3, 4, 2, 5, 3, 2, 4]
    regions = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (0, 6), (1, 3, 5)]
    factors = []
    for r in regions:
        factors += [gen.random([sizes[a] for a in r]), list(r)]
    checked = 0
    for k in (1, 2, 3):
        for c in itertools.combinations(range(7), k):
            plan = pgm._einsum_plan(tuple(sizes), tuple(regions), c, 10**6)
            assert plan is not None
            want = np.einsum(*factors, list(c), optimize=plan[0])
            got = pgm._run_plan(plan, factors, list(c))
            assert np.array_equal(got, want)
            checked += 1
    assert checked == 63 and pgm._einsum_plan(tuple(sizes), tuple(regions), (0,), 0) is None


def plan_by_einsum_report(sizes, operands, clique, blowup):
    """The plan as made before: numpy's greedy path, its printed FLOP count, a second call."""
    labels = {a: j for j, a in enumerate(sorted({a for attrs in operands for a in attrs}))}
    args = []
    for attrs in operands:
        args += [np.empty([sizes[a] for a in attrs]), [labels[a] for a in attrs]]
    out = [labels[a] for a in clique]
    path, info = np.einsum_path(*args, out, optimize="greedy")
    flops = float(info.split("Optimized FLOP count:")[1].split()[0])
    if flops > blowup * max(sum(math.prod(sizes[a] for a in o) for o in operands), 1):
        return None
    return path, np.einsum_path(*args, out, optimize=path, einsum_call=True)[1]


@pytest.mark.parametrize("seed", range(3))
def test_einsum_plans_and_refusals_equal_numpys_report(seed) -> None:
    """One einsum_path call and the FLOP count summed from its steps decide and contract
    exactly as numpy's printed report and a second call did (same refusals, same steps)."""
    gen = np.random.default_rng(seed)
    refused = 0
    for _ in range(300):
        d = int(gen.integers(3, 12))
        sizes = tuple(int(s) for s in gen.integers(1, 30, d))
        ops = tuple(tuple(sorted(gen.choice(d, int(gen.integers(1, min(4, d) + 1)),
                                            replace=False).tolist()))
                    for _ in range(int(gen.integers(1, 8))))
        attrs = sorted({a for o in ops for a in o})
        clique = tuple(sorted(gen.choice(attrs, int(gen.integers(1, min(3, len(attrs)) + 1)),
                                         replace=False).tolist()))
        for blowup in (pgm._BLOWUP, 4, math.inf):
            got = pgm._einsum_plan(sizes, ops, clique, blowup)
            want = plan_by_einsum_report(sizes, ops, clique, blowup)
            assert (got is None) == (want is None)
            if got is None:
                refused += 1
            else:
                assert got[1] == want[1]
                assert [sorted(s) for s in got[0][1:]] == [sorted(s) for s in want[0][1:]]
    assert refused > 50  # the refusal branch is exercised
