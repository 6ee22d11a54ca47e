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
    size_of = sizes.__getitem__  # map(size_of, ...): cost products without a generator
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


def _bits(mask: int) -> list[int]:
    """The vertices of a bitmask, lowest first."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


class _Elimination:
    """The greedy elimination of `_eliminate` on bitmask adjacency, resumable.

    Same rule (eliminate the vertex minimising (cells of it and its neighbours, vertex)),
    same cliques; adjacency is a dict vertex -> neighbour bitmask and the cells of a vertex
    set are remembered per mask (candidates revisit the same neighbourhoods thousands of
    times a round). `run` can start from a recorded state, which is what makes
    `ModelSizer` incremental.
    """

    def __init__(self, sizes: Sequence[int]) -> None:
        self.sizes = list(sizes)
        self._cells: dict[int, int] = {}

    def cells(self, mask: int) -> int:
        hit = self._cells.get(mask)
        if hit is None:
            hit = self._cells[mask] = math.prod(self.sizes[a] for a in _bits(mask))
        return hit

    def run(self, adj: dict[int, int], found: list[int], total: int,
            trace: list[tuple[int, dict[int, int], int, int]] | None = None) -> int:
        """Eliminate every vertex of `adj` (consumed), after the cliques `found` (masks, the
        maximal ones of the steps before, summing to `total` cells); the junction tree's
        cells. With `trace`, record (vertex, state before its step, len(found), total)."""
        cells, memo, n = self.cells, self._cells, len(self.sizes)
        # cost keys (cells of v and its neighbours) x n + v: one min() over the values is
        # the greedy choice with its tie-break by vertex
        cost = {v: cells(m | 1 << v) * n + v for v, m in adj.items()}
        while cost:
            best = min(cost.values()) % n
            if trace is not None:
                trace.append((best, dict(adj), len(found), total))
            del cost[best]
            nbrs = adj.pop(best)
            clique = nbrs | 1 << best
            # a later clique never holds an eliminated vertex: only earlier ones can hold this
            for f in found:
                if clique & ~f == 0:
                    break
            else:
                found.append(clique)
                total += cells(clique)
            rest, drop = nbrs, 1 << best
            while rest:
                low = rest & -rest
                rest ^= low
                a = low.bit_length() - 1
                adj[a] = m = (adj[a] | nbrs) & ~(low | drop)
                m |= low
                c = memo.get(m)
                cost[a] = (cells(m) if c is None else c) * n + a
        return total


class ModelSizer:
    """`model_size(sizes, base + [c])` for many candidates c against one fixed `base`.

    AIM asks this for every candidate in every round. The answer depends only on the graph,
    and greedy triangulation works per connected component, so the base's components are
    triangulated once; a candidate re-triangulates only the components its new edges join,
    and candidates adding the same new edges (or none) share one answer.

    Incremental (issue 32): each component's elimination is recorded step by step. A
    candidate whose new edges stay in one component replays nothing before the first step
    that eliminates one of their endpoints: until then every vertex eliminated has the
    same neighbours with or without the new edges, so the same cost, while the endpoints'
    costs can only grow; the greedy choice is the same, and the graph at that step is the
    recorded one plus the new edges. Exact: the same integer `model_size` returns (tested
    on random graphs against the plain triangulation).
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
        self._elim = _Elimination(self.sizes)
        self._mask = [sum(1 << u for u in nb) for nb in self.adj]
        # per component: its elimination steps (vertex, state, cliques so far, cells so far)
        # and the maximal cliques found, in order
        self._trace: list[list[tuple[int, dict[int, int], int, int]]] = []
        self._found: list[list[int]] = []
        self._step = [0] * len(self.sizes)  # a vertex's step in its component's elimination
        self.comp_size: list[int] = []
        for comp in comps:
            trace: list[tuple[int, dict[int, int], int, int]] = []
            found: list[int] = []
            self.comp_size.append(self._elim.run({v: self._mask[v] for v in comp}, found, 0,
                                                 trace))
            self._trace.append(trace)
            for i, (v, *_) in enumerate(trace):
                self._step[v] = i
            self._found.append(found)
        self.total = sum(self.comp_size)
        self._memo: dict[frozenset[tuple[int, int]], int] = {}

    def _size(self, verts: Sequence[int], extra: Sequence[tuple[int, int]]) -> int:
        adj = {v: self._mask[v] for v in verts}
        for a, b in extra:
            adj[a] |= 1 << b
            adj[b] |= 1 << a
        return self._elim.run(adj, [], 0)

    def _resume(self, comp: int, extra: Sequence[tuple[int, int]]) -> int:
        """Cells of component `comp` plus the edges `extra` (inside it), from the recorded
        step that first eliminates an endpoint of `extra` (see the class docstring)."""
        step = min(self._step[a] for edge in extra for a in edge)
        _, state, n_found, total = self._trace[comp][step]
        adj = dict(state)
        for a, b in extra:
            adj[a] |= 1 << b
            adj[b] |= 1 << a
        return self._elim.run(adj, self._found[comp][:n_found], total)

    def size(self, clique: Sequence[int]) -> int:
        """Cells of the junction tree over base + [clique]."""
        new = frozenset((a, b) for a, b in itertools.combinations(sorted(clique), 2)
                        if b not in self.adj[a])
        if not new:
            return self.total
        hit = self._memo.get(new)
        if hit is None:
            touched = sorted({self.comp_of[a] for edge in new for a in edge})
            edges = sorted(new)
            if len(touched) == 1:
                grown = self._resume(touched[0], edges)
            else:
                grown = self._size([v for i in touched for v in self.comps[i]], edges)
            hit = self.total - sum(self.comp_size[i] for i in touched) + grown
            self._memo[new] = hit
        return hit


# --------------------------------------------------------------------------------------------
# Measurements and the model
# --------------------------------------------------------------------------------------------
