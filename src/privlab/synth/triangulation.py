"""Triangulation of a graphical model's cliques and the size of the junction tree it gives.

Why a module of its own: AIM asks "how large would the model be with this candidate?" for
every candidate of every round (`ModelSizer`, incremental), while the model itself
(privlab.synth.pgm) only needs the triangulation once per estimate. Greedy min-fill-weight
elimination, cost = cells of a vertex and its neighbours.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence

Clique = tuple[int, ...]


def cells(sizes: Sequence[int], clique: Sequence[int]) -> int:
    """Number of cells of the marginal over `clique`."""
    return int(math.prod(sizes[a] for a in clique))


def _graph(d: int, cliques: Sequence[Sequence[int]]) -> list[set[int]]:
    adj: list[set[int]] = [set() for _ in range(d)]
    for cl in cliques:
        for a, b in itertools.combinations(cl, 2):
            adj[a].add(b)
            adj[b].add(a)
    return adj


def _eliminate(sizes: Sequence[int], adj: dict[int, set[int]]) -> list[frozenset[int]]:
    """Maximal cliques of the greedy triangulation of the graph `adj` (consumed).

    Each step eliminates the vertex v minimising (cells of v and its neighbours, v); only the
    eliminated vertex's neighbours change cost, so costs are kept in a heap (stale entries
    skipped) instead of recomputed for every vertex at every step. Greedy elimination never
    crosses components, so running it per component gives the same cliques.
    """
    size_of = sizes.__getitem__  # map(size_of, ...): AIM runs this thousands of times a round
    cost = {v: size_of(v) * math.prod(map(size_of, adj[v])) for v in adj}
    heap = [(c, v) for v, c in cost.items()]
    heapq.heapify(heap)
    found: list[frozenset[int]] = []
    while heap:
        c, best = heapq.heappop(heap)
        if cost.get(best) != c:
            continue  # stale entry, or already eliminated
        del cost[best]
        nbrs = adj.pop(best)
        clique = frozenset([best, *nbrs])
        if not any(clique <= f for f in found):
            found.append(clique)
        for a in nbrs:  # a's neighbours become nbrs and its old ones, less a and best
            adj_a = adj[a]
            adj_a |= nbrs
            adj_a.discard(a)
            adj_a.discard(best)
            cost[a] = ca = size_of(a) * math.prod(map(size_of, adj_a))
            heapq.heappush(heap, (ca, a))
    return [c for c in found if not any(c < o for o in found)]


def triangulate(sizes: Sequence[int], cliques: Sequence[Sequence[int]]) -> list[Clique]:
    """Sorted maximal cliques of the greedy triangulation of the cliques' graph."""
    adj = _graph(len(sizes), cliques)
    return sorted(tuple(sorted(c)) for c in _eliminate(sizes, dict(enumerate(adj))))


def model_size(sizes: Sequence[int], cliques: Sequence[Sequence[int]]) -> int:
    """Cells of the junction tree a model over `cliques` would have."""
    return sum(cells(sizes, c) for c in triangulate(sizes, cliques))


class ModelSizer:
    """`model_size(sizes, base + [c])` for many candidates c against one fixed `base`.

    AIM asks this for every candidate in every round. The answer depends only on the graph,
    and greedy triangulation works per connected component, so the base's components are
    triangulated once; a candidate re-triangulates only the components its new edges join,
    and candidates adding the same new edges (or none) share one answer. Exact: the same
    integer `model_size` returns (tested on random graphs).
    """

    def __init__(self, sizes: Sequence[int], base: Sequence[Sequence[int]]) -> None:
        self.sizes = list(sizes)
        self.adj = _graph(len(self.sizes), base)
        self.comp_of = [-1] * len(self.sizes)
        comps: list[list[int]] = []
        for v in range(len(self.sizes)):
            if self.comp_of[v] < 0:
                self.comp_of[v] = len(comps)
                comp, todo = [v], [v]
                while todo:
                    for u in self.adj[todo.pop()]:
                        if self.comp_of[u] < 0:
                            self.comp_of[u] = len(comps)
                            comp.append(u)
                            todo.append(u)
                comps.append(comp)
        self.comps = comps
        self.comp_size = [self._size(comp, ()) for comp in comps]
        self.total = sum(self.comp_size)
        self._memo: dict[frozenset[tuple[int, int]], int] = {}

    def _size(self, verts: Sequence[int], extra: Sequence[tuple[int, int]]) -> int:
        adj = {v: set(self.adj[v]) for v in verts}
        for a, b in extra:
            adj[a].add(b)
            adj[b].add(a)
        return sum(cells(self.sizes, c) for c in _eliminate(self.sizes, adj))

    def size(self, clique: Sequence[int]) -> int:
        """Cells of the junction tree over base + [clique]."""
        new = frozenset((a, b) for a, b in itertools.combinations(sorted(clique), 2)
                        if b not in self.adj[a])
        if not new:
            return self.total
        hit = self._memo.get(new)
        if hit is None:
            touched = sorted({self.comp_of[a] for edge in new for a in edge})
            verts = [v for i in touched for v in self.comps[i]]
            hit = (self.total - sum(self.comp_size[i] for i in touched)
                   + self._size(verts, sorted(new)))
            self._memo[new] = hit
        return hit


# --------------------------------------------------------------------------------------------
# Measurements and the model
# --------------------------------------------------------------------------------------------
