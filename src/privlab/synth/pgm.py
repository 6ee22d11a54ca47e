"""Graphical-model estimation from noisy marginals (Private-PGM, McKenna et al. 2019), in NumPy.

Why here and not `mbi`: AIM re-estimates the model after every measurement (tens of rounds on
Adult), and each estimate is hundreds of belief-propagation passes. mbi 2.0 runs them through
JAX, which pulls ~600 MB of dependencies and recompiles whenever the set of cliques changes
(every round); its AIM did not finish one Adult run in 300 CPU-seconds where privlab's took
12-15 (benchmarks/synth.py). This module does the same mathematics with plain NumPy: a
junction tree of the measured cliques, sum-product calibration (collect in log space), and
Private-PGM's mirror descent with an Armijo line search, warm-started from the previous round's
potentials. On the same 40 noisy Adult marginals (`benchmarks/synth_pgm.py`), 1,000
iterations: mbi loss 1553.9 in 13.8 CPU-s, this module 1605.6 in 1.4 CPU-s and 1161.1 in 4.1
CPU-s with 3,000 iterations: better fit per CPU-second (docs/synth.md).

Everything here is post-processing: the model only ever sees noisy measurements.

Notation: attributes are integers 0..d-1 with `sizes[i]` values; a clique is a sorted tuple
of attributes; an array over a clique has one axis per attribute, in clique order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from privlab.synth.tables import (
    _contract,
    _draw_rows,
    _einsum_plan,
    _expand,
    _reduce,
    _run_plan,
    _sum_onto,
)

# Re-exported: AIM and the tests import the triangulation from here.
from privlab.synth.triangulation import (
    Clique,
    ModelSizer,
    cells,
    model_size,
    triangulate,
)

__all__ = ["Clique", "FitStats", "GraphicalModel", "JunctionTree", "Measurement", "ModelSizer",
           "cells", "estimate_total", "mirror_descent", "model_loss", "model_size",
           "triangulate"]


# --------------------------------------------------------------------------------------------
# Junction tree
# --------------------------------------------------------------------------------------------


class JunctionTree:
    """Maximal cliques of a triangulation of the cliques' graph, joined into a tree.

    Triangulation: greedy elimination, each step removing the attribute whose elimination
    creates the smallest table (mbi's `greedy_order` rule). The tree: a maximum spanning tree
    over clique pairs weighted by the number of shared attributes (valid for the cliques of a
    perfect elimination order); disconnected parts are joined by empty separators.
    """

    def __init__(self, sizes: Sequence[int], cliques: Sequence[Sequence[int]]) -> None:
        self.sizes = list(sizes)
        self.cliques: list[Clique] = triangulate(self.sizes, cliques)
        k = len(self.cliques)
        # Kruskal on -|intersection| (max spanning tree), ties by index for determinism
        pairs = sorted(((len(set(self.cliques[i]) & set(self.cliques[j])), i, j)
                        for i in range(k) for j in range(i + 1, k)),
                       key=lambda t: (-t[0], t[1], t[2]))
        parent = list(range(k))

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        nbr: list[list[int]] = [[] for _ in range(k)]
        for _, i, j in pairs:
            ri, rj = find(i), find(j)
            if ri != rj:
                parent[ri] = rj
                nbr[i].append(j)
                nbr[j].append(i)
        # root at the largest clique; BFS order, parents
        root = max(range(k), key=lambda i: (cells(self.sizes, self.cliques[i]), -i))
        self.parent: list[int] = [-1] * k
        self.order: list[int] = [root]
        seen = {root}
        for node in self.order:
            for c in sorted(nbr[node]):
                if c not in seen:
                    seen.add(c)
                    self.parent[c] = node
                    self.order.append(c)
        self.depth = [0] * k
        for node in self.order[1:]:
            self.depth[node] = self.depth[self.parent[node]] + 1
        self.separator: list[Clique] = [
            () if self.parent[i] < 0 else tuple(sorted(set(self.cliques[i])
                                                       & set(self.cliques[self.parent[i]])))
            for i in range(k)]
        self.home = {}  # attribute -> smallest clique holding it
        for i, cl in enumerate(self.cliques):
            for a in cl:
                if a not in self.home or cells(self.sizes, cl) < cells(
                        self.sizes, self.cliques[self.home[a]]):
                    self.home[a] = i

    @property
    def size(self) -> int:
        """Cells of all clique tables: the model's size (AIM caps it)."""
        return sum(cells(self.sizes, c) for c in self.cliques)

    def containing(self, clique: Sequence[int]) -> int | None:
        """Index of the smallest tree clique holding every attribute of `clique`, or None
        (remembered per clique: mirror descent asks for every measurement each iteration)."""
        key = tuple(clique)
        memo = self.__dict__.setdefault("_containing", {})
        if key in memo:
            return memo[key]
        s = set(clique)
        best = None
        for i, cl in enumerate(self.cliques):
            if s <= set(cl) and (best is None or cells(self.sizes, cl) < cells(
                    self.sizes, self.cliques[best])):
                best = i
        memo[key] = best
        return best

    def path(self, a: int, b: int) -> list[int]:
        """Tree nodes on the path between nodes a and b."""
        left, right = [a], [b]
        while a != b:
            if self.depth[a] >= self.depth[b]:
                a = self.parent[a]
                left.append(a)
            else:
                b = self.parent[b]
                right.append(b)
        return left + right[-2::-1] if len(right) > 1 else left


@dataclass(frozen=True)
class Measurement:
    """A noisy marginal: counts over `clique` (array in clique axis order) plus noise of std
    `sigma` per cell."""

    clique: Clique
    y: np.ndarray
    sigma: float


def estimate_total(measurements: Sequence[Measurement]) -> float:
    """Inverse-variance weighted row count from the measurements' sums (each sum has variance
    cells x sigma^2); at least 1."""
    w = np.array([1.0 / (m.y.size * m.sigma ** 2) for m in measurements])
    t = np.array([float(m.y.sum()) for m in measurements])
    return max(float((w * t).sum() / w.sum()), 1.0)


class GraphicalModel:
    """A discrete graphical model whose log-potentials live on measured cliques ("regions").

    `calibrate()` runs sum-product on the junction tree and stores each tree clique's
    marginal (`beliefs`, in counts summing to `total`). `marginal(clique)` answers any
    marginal; `sample(n)` draws rows ancestrally down the tree.
    """

    def __init__(self, sizes: Sequence[int], regions: Sequence[Sequence[int]], total: float,
                 theta: dict[Clique, np.ndarray] | None = None) -> None:
        self.sizes = list(sizes)
        d = len(self.sizes)
        regs = sorted({tuple(sorted(r)) for r in regions} | {(a,) for a in range(d)})
        # keep only maximal regions: a sub-region's potential folds into a super-region's
        self.regions: list[Clique] = [r for r in regs
                                      if not any(set(r) < set(o) for o in regs)]
        self.tree = JunctionTree(self.sizes, self.regions)
        self.total = float(total)
        self.theta: dict[Clique, np.ndarray] = {
            r: np.zeros([self.sizes[a] for a in r]) for r in self.regions}
        for r, t in (theta or {}).items():
            host = next(h for h in self.regions if set(r) <= set(h))
            self.theta[host] = self.theta[host] + _expand(t, r, host, self.sizes)
        self.assign = [[r for r in self.regions if self.tree.containing(r) == i]
                       for i in range(len(self.tree.cliques))]
        self._region_home = {r: self.tree.containing(r) for r in self.regions}
        self.beliefs: list[np.ndarray] = []
        self.calibrate()

    # ---------------------------------------------------------------- inference
    def calibrate(self, out: list[np.ndarray] | None = None) -> None:
        """Sum-product on the junction tree; each tree clique's belief in counts summing to
        `total` (`beliefs`). `out`: tables of a previous calibration of this model to
        overwrite instead of allocating (mirror descent passes the ones it dropped).

        Collect (children before parents) in log space, as mirror descent's potentials need:
        a clique's table is its potentials plus its children's upward messages (the
        clique-sized table written once or twice, `_sum_onto`); it is then shifted by its
        maximum within each separator slice and exponentiated in place, once, and its upward message
        is log(sum of that slice) + the shift (a log-sum-exp). The tables stay in that form:
        E_c = exp(acc_c - max over the slice), with s_c = its sums on the separator.
        Distribute (parents before children) needs no other exp: a child's belief is E_c x
        (the parent's belief summed onto the separator) / s_c, the same quantity as
        exp(acc_c + downward message) normalised (issue 32: one exp per cell per calibration
        instead of 2-5). Underflow is relative to each slice's largest cell (a cell below
        e^-745 of it is 0), as the log-sum-exp's was; a slice of zeros stays zeros.
        """
        tree, sizes = self.tree, self.sizes
        collect, distribute = self._calibration_plan()
        tables: list[np.ndarray] = [np.empty(0)] * len(tree.cliques)
        up: list[np.ndarray] = list(tables)  # log upward message, over the separator
        sums: list[np.ndarray] = list(tables)  # s_c, keepdims over the child's axes
        for node, cl, regions, kids, axes, sep_shape in collect:  # children first
            terms = [(self.theta[r], r) for r in regions]
            terms += [(up[c], sep) for c, sep in kids]
            acc = _sum_onto(terms, cl, sizes, None if out is None else out[node])
            tables[node] = acc  # becomes E_node, in place
            m = _reduce(np.maximum, acc, axes)
            m[~np.isfinite(m)] = 0.0
            acc -= m
            np.exp(acc, out=acc)
            s = sums[node] = _reduce(np.add, acc, axes)
            if sep_shape is not None:  # not the root
                with np.errstate(divide="ignore"):
                    up[node] = (np.log(s) + m).reshape(sep_shape)
        root = tree.order[0]
        tables[root] *= self.total / float(sums[root].reshape(()))
        for node, shares in distribute:  # parents first
            for axes, kids in shares:  # children sharing a separator share its sum
                shared = _reduce(np.add, tables[node], axes)
                for c in kids:
                    s = sums[c]
                    tables[c] *= np.divide(shared.reshape(s.shape), s, out=np.zeros(s.shape),
                                           where=s > 0)
        self.beliefs = tables

    def _calibration_plan(self) -> tuple[list[tuple[int, Clique, list[Clique],
                                                    list[tuple[int, Clique]],
                                                    tuple[int, ...], list[int] | None]],
                                         list[tuple[int, list[tuple[tuple[int, ...],
                                                                    list[int]]]]]]:
        """What calibrate would otherwise recompute per call (AIM's small models are mostly
        Python overhead): per node in collect order (node, clique, its regions, its children
        with their separators, the axes off its separator, the separator's shape or None at
        the root); per node in distribute order, its children grouped by separator with the
        node's axes off that separator."""
        plan = self.__dict__.get("_cal_plan")
        if plan is None:
            tree, sizes = self.tree, self.sizes
            collect = []
            for node in reversed(tree.order):
                cl, sep = tree.cliques[node], tree.separator[node]
                collect.append((node, cl, self.assign[node],
                                [(c, tree.separator[c]) for c in self._children(node)],
                                tuple(i for i, a in enumerate(cl) if a not in sep),
                                None if node == tree.order[0] else [sizes[a] for a in sep]))
            distribute = []
            for node in tree.order:
                cl = tree.cliques[node]
                by_sep: dict[Clique, list[int]] = {}
                for c in self._children(node):
                    by_sep.setdefault(tree.separator[c], []).append(c)
                if by_sep:
                    distribute.append((node, [
                        (tuple(i for i, a in enumerate(cl) if a not in sep), kids)
                        for sep, kids in by_sep.items()]))
            plan = self._cal_plan = (collect, distribute)
        return plan

    def _children(self, node: int) -> list[int]:
        if not hasattr(self, "_kids"):
            kids: list[list[int]] = [[] for _ in self.tree.cliques]
            for c in self.tree.order[1:]:
                kids[self.tree.parent[c]].append(c)
            self._kids = kids
        return self._kids[node]

    def measured_marginals(self, cliques: Sequence[Clique]) -> dict[Clique, np.ndarray]:
        """`marginal(c)` for many cliques (what mirror descent asks every iteration), the
        larger first: a clique inside a smaller one already answered from the same tree
        clique is summed out of that table instead of the whole tree clique (a 1-way
        marginal from a measured 2-way one, not from a 100k-cell clique). The plan depends
        only on the cliques, so it is made once per model."""
        key = tuple(cliques)
        plans = self.__dict__.setdefault("_measured_plans", {})
        plan = plans.get(key)
        if plan is None:
            plan = plans[key] = self._measured_plan(cliques)
        out: dict[Clique, np.ndarray] = {}
        for c, node, src in plan:
            if node is None:
                out[c] = self.marginal(c)
            elif src is None:  # _project, with the inner-axis reduction of calibrate
                cl = self.tree.cliques[node]
                out[c] = _reduce(np.add, self.beliefs[node],
                                 tuple(i for i, a in enumerate(cl) if a not in c)
                                 ).reshape([self.sizes[a] for a in c])
            else:
                out[c] = out[src].sum(axis=tuple(i for i, a in enumerate(src) if a not in c))
        return out

    def candidate_marginals(self, cliques: Sequence[Clique]
                            ) -> Iterator[tuple[Clique, np.ndarray]]:
        """(c, `marginal(c)`) for every clique of `cliques` (AIM's candidates of a round),
        each summed out of the smallest asked clique one attribute larger that holds it
        (a 2-way candidate out of a 3-way one, a 1-way out of a 2-way) when there is one,
        else from its tree clique or its subtree (`marginal`).

        Yielded as soon as computed, and a table is kept only while a clique still to come
        is summed out of it: the smaller cliques go first, each pulling its sources, so
        the round's 3-way tables are never all held at once (all of them: 0.8 GiB at 200k
        x 20). The model is calibrated, so every route gives the same marginal; only the
        order of the float sums differs (allclose at rtol 1e-12 to `marginal(c)`, tested).
        AIM's scores feed the exponential mechanism's Gumbel argmax, where such
        differences do not decide anything (the goldens hold the table byte for byte).
        """
        asked = set(cliques)
        d = len(self.sizes)
        source: dict[Clique, Clique | None] = {}
        for c in asked:
            best: Clique | None = None
            for x in range(d):
                key = tuple(sorted((*c, x)))
                if x not in c and key in asked and (best is None or cells(
                        self.sizes, key) < cells(self.sizes, best)):
                    best = key
            source[c] = best
        pending = Counter(s for s in source.values() if s is not None)
        live: dict[Clique, np.ndarray] = {}
        done: set[Clique] = set()
        for c in sorted(asked, key=lambda c: (len(c), c)):
            if c in done:
                continue
            chain = [c]  # c, its source, that one's source, ...: computed from the far end
            while (up := source[chain[-1]]) is not None and up not in live:
                chain.append(up)
            for q in reversed(chain):
                src = source[q]
                if src is None:
                    node = self.tree.containing(q)
                    table = self._project(node, q) if node is not None else self.marginal(q)
                else:
                    table = live[src].sum(axis=tuple(i for i, a in enumerate(src)
                                                     if a not in q))
                    pending[src] -= 1
                    if pending[src] == 0:
                        del live[src]
                if pending[q]:
                    live[q] = table
                done.add(q)
                yield q, table

    def _measured_plan(self, cliques: Sequence[Clique]
                       ) -> list[tuple[Clique, int | None, Clique | None]]:
        """(clique, its tree clique or None, the smallest answered superset or None)."""
        plan: list[tuple[Clique, int | None, Clique | None]] = []
        done: dict[int, list[Clique]] = {}
        for c in sorted(set(cliques), key=lambda c: (-len(c), c)):
            node = self.tree.containing(c)
            src = None
            if node is not None:
                for other in done.setdefault(node, []):
                    if len(other) > len(c) and set(c) <= set(other) and (
                            src is None or cells(self.sizes, other) < cells(self.sizes, src)):
                        src = other
                done[node].append(c)
            plan.append((c, node, src))
        return plan

    def _project(self, node: int, clique: Clique) -> np.ndarray:
        cl = self.tree.cliques[node]
        return self.beliefs[node].sum(axis=tuple(i for i, a in enumerate(cl)
                                                 if a not in clique))

    def marginal(self, clique: Sequence[int]) -> np.ndarray:
        """Counts over `clique` (sorted attributes) implied by the model.

        Outside one tree clique the subtree is contracted as P(C_top) prod P(C_i | S_i)
        with the conditionals cached per calibration (issue 32): the same marginal as
        dividing by each separator per call, up to the order of float operations, which
        AIM's scores and annealing threshold do not resolve (goldens unchanged)."""
        clique = tuple(sorted(clique))
        node = self.tree.containing(clique)
        if node is not None:
            return self._project(node, clique)
        # Not inside one tree clique: on the subtree joining the attributes' homes,
        # P(X) = P(C_top) prod P(C_i | S_i), summed over everything but `clique`.
        tree = self.tree
        homes = sorted({tree.home[a] for a in clique})
        nodes = {homes[0]}
        for h in homes[1:]:
            nodes.update(tree.path(homes[0], h))
        top = min(nodes, key=lambda i: tree.depth[i])
        # in the order of their cliques, not of the tree's node numbers or of which is the
        # top: a subtree makes the same plan key however its nodes are numbered, so the plan
        # made in one round serves the next rounds that keep the subtree (issue 32)
        factors = sorted(((self.beliefs[i] if i == top else self._conditional(i),
                           tree.cliques[i]) for i in nodes), key=lambda f: f[1])
        # One einsum over all the factors is fastest on most subtrees, but numpy's greedy
        # order sometimes multiplies many axes at once (5e10 operations on 50k cells: one
        # candidate took 88 s): then pass messages up the subtree instead, which bounds every
        # table by a clique times the query attributes it carries.
        labels = {a: j for j, a in enumerate(sorted({a for _, c in factors for a in c}))}
        args: list[object] = []
        for arr, attrs in factors:
            args += [arr, [labels[a] for a in attrs]]
        out_labels = [labels[a] for a in clique]
        plan = _einsum_plan(tuple(self.sizes), tuple(attrs for _, attrs in factors), clique,
                            _BLOWUP)
        if plan is not None:
            return _run_plan(plan, args, out_labels)
        return self._marginal_by_messages(clique, nodes, top)

    def _conditional(self, node: int) -> np.ndarray:
        """P(C_i | S_i) of a non-root tree clique (its belief over its separator's marginal,
        0 where that is 0), remembered while the beliefs stay the same: every candidate
        whose subtree holds the node below its top uses the same table (issue 32: the
        subtree contractions divided each belief by its separator once per candidate)."""
        memo = self.__dict__.get("_conditionals")
        if memo is None or memo[0] is not self.beliefs:  # recalibrated (or restored)
            memo = self._conditionals = (self.beliefs, {})
        hit = memo[1].get(node)
        if hit is None:
            cl, sep = self.tree.cliques[node], self.tree.separator[node]
            ps = self._project(node, sep)
            inverse = np.divide(1.0, ps, out=np.zeros_like(ps), where=ps > 0)
            hit = memo[1][node] = self.beliefs[node] * _expand(inverse, sep, cl, self.sizes)
        return hit

    def _marginal_by_messages(self, clique: Clique, nodes: set[int], top: int) -> np.ndarray:
        """The counts over `clique` on the subtree `nodes` (rooted at `top`) by messages:
        each node sums out what occurs only below it, so a message holds its separator plus
        the query attributes met so far."""
        tree, wanted = self.tree, set(clique)
        below: dict[int, list[tuple[np.ndarray, tuple[int, ...]]]] = {i: [] for i in nodes}
        for i in sorted(nodes, key=lambda i: -tree.depth[i]):  # children before parents
            if i == top:
                return _contract([(self.beliefs[i], tree.cliques[i]), *below[i]], clique,
                                 self.sizes)
            ops = [(self._conditional(i), tree.cliques[i]), *below[i]]
            scope = {a for _, attrs in ops for a in attrs}
            keep = tuple(sorted(set(tree.separator[i]) | (scope & wanted)))
            below[tree.parent[i]].append((_contract(ops, keep, self.sizes), keep))
        raise AssertionError("unreachable: the subtree has a top")  # pragma: no cover

    # ---------------------------------------------------------------- sampling
    def sample(self, n: int, gen: np.random.Generator) -> np.ndarray:
        """n rows of codes, ancestrally: the root clique from its marginal, then each clique's
        new attributes from P(new | separator), each row drawn independently."""
        tree, sizes = self.tree, self.sizes
        out = np.zeros((n, len(sizes)), dtype=np.int64)
        for node in tree.order:
            cl, sep = tree.cliques[node], tree.separator[node]
            new = tuple(a for a in cl if a not in sep)
            if not new:
                continue
            # table with separator axes first, then the new attributes
            perm = [cl.index(a) for a in sep] + [cl.index(a) for a in new]
            table = np.transpose(self.beliefs[node], perm).reshape(
                cells(sizes, sep), cells(sizes, new))
            if sep:
                row = np.ravel_multi_index(tuple(out[:, a] for a in sep),
                                           [sizes[a] for a in sep])
            else:
                row = np.zeros(n, dtype=np.int64)
            flat = _draw_rows(table, row, gen)
            vals = np.unravel_index(flat, [sizes[a] for a in new])
            for a, v in zip(new, vals, strict=True):
                out[:, a] = v
        return out


#: einsum's greedy order is used unless it costs more than this many operations per cell
#: of the factors (`GraphicalModel.marginal`; a good order costs a few).
_BLOWUP = 256
# --------------------------------------------------------------------------------------------
# Estimation: Private-PGM mirror descent
# --------------------------------------------------------------------------------------------


class _Objective:
    """L(mu) = sum_i 0.5 ||(mu_{C_i} - y_i) / sigma_i||^2 with its fixed parts flattened once
    per fit: every measurement's cells in one vector (y, sigma per cell), so a loss, its
    gradient and the line search's inner product are whole-vector operations, not three
    per measurement (AIM's fits have 20-70 measurements; issue 32)."""

    def __init__(self, measurements: Sequence[Measurement]) -> None:
        self.cliques = [m.clique for m in measurements]
        self.y = np.concatenate([np.ravel(m.y) for m in measurements]).astype(float)
        self.sigma = np.concatenate([np.full(np.size(m.y), float(m.sigma))
                                     for m in measurements])
        ends = np.cumsum([np.size(m.y) for m in measurements]).tolist()
        self.segments = [(m.clique, lo, hi, np.shape(m.y)) for m, lo, hi in
                         zip(measurements, [0, *ends[:-1]], ends, strict=True)]

    def evaluate(self, model: GraphicalModel
                 ) -> tuple[float, np.ndarray, np.ndarray, dict[Clique, np.ndarray]]:
        """The loss, the model's marginals and dL/dmu (flat, measurement by measurement),
        and dL/dmu per measured clique (a clique measured twice: the sum)."""
        mus = model.measured_marginals(self.cliques)
        mu = np.concatenate([mus[c].ravel() for c in self.cliques])
        diff = (mu - self.y) / self.sigma
        # einsum, not np.dot: BLAS threads a 20k-cell dot product, and on a busy machine
        # its threads cost 1 ms of CPU where one core takes 20 us
        loss = 0.5 * float(np.einsum("i,i->", diff, diff))
        g = diff / self.sigma
        grads: dict[Clique, np.ndarray] = {}
        for c, lo, hi, shape in self.segments:
            part = g[lo:hi].reshape(shape)
            grads[c] = grads[c] + part if c in grads else part
        return loss, mu, g, grads


def model_loss(model: GraphicalModel, measurements: Sequence[Measurement]) -> float:
    """The weighted L2 loss of a model on measurements (what mirror descent minimises)."""
    return _Objective(measurements).evaluate(model)[0]


@dataclass
class FitStats:
    iterations: int
    loss: float
    step: float


def mirror_descent(sizes: Sequence[int], measurements: Sequence[Measurement], *,
                   iters: int = 500, total: float | None = None,
                   warm: GraphicalModel | None = None, step: float | None = None,
                   tol: float = 0.0, window: int = 10
                   ) -> tuple[GraphicalModel, FitStats]:
    """Fit potentials so the model's marginals match the measurements in weighted L2 over
    the marginal polytope (McKenna, Sheldon & Miklau 2019, Algorithm 1).

    Step: theta <- theta - alpha dL/dmu; Armijo line search as in mbi 2.0's MirrorDescent
    (accept when L drops by at least alpha/2 <dL/dmu, mu - mu'>, then alpha *= 1.01, else
    reject and alpha /= 2), starting from the larger of 2 / (Lipschitz x total) and `step`
    (a warm start's). `warm` reuses a previous model's potentials.

    `iters` is a cap: with `tol` > 0 the descent stops early once the loss fell by less
    than `tol` x loss over the last `window` iterations (converged for the purpose at hand;
    tol 0 runs all `iters`). The rule reads only the loss, which is computed from the
    noisy measurements and the model, never from the rows: stopping is post-processing.
    """
    n_hat = estimate_total(measurements) if total is None else float(total)
    model = GraphicalModel(sizes, [m.clique for m in measurements], n_hat,
                           theta=warm.theta if warm else None)
    lipschitz = sum(1.0 / m.sigma ** 2 for m in measurements)
    # a warm start's step can be far too small (it shrinks once the loss stops moving), so
    # never start below the theoretical 2 / (L total); too large a step halves in log time
    alpha = max(step or 0.0, 2.0 / (lipschitz * n_hat))
    host = {m.clique: next(r for r in model.regions if set(m.clique) <= set(r))
            for m in measurements}
    objective = _Objective(measurements)
    loss, mu, dmu, grads = objective.evaluate(model)
    history = [loss]  # the accepted loss after each iteration (index 0: the start)
    it = 0
    # the belief tables of the calibration dropped last iteration (the rejected step's, or
    # the accepted step's predecessor): the next calibration overwrites them (issue 32)
    spare: list[np.ndarray] | None = None
    for it in range(1, iters + 1):  # noqa: B007 - reported below
        old_theta, old_beliefs = model.theta, model.beliefs
        theta = dict(old_theta)  # a region without a gradient keeps its (unchanged) array
        stepped: set[Clique] = set()
        for c, g in grads.items():
            h = host[c]
            if h in stepped:
                theta[h] -= alpha * _expand(g, c, h, sizes)
            else:
                theta[h] = old_theta[h] - alpha * _expand(g, c, h, sizes)
                stepped.add(h)
        model.theta = theta
        model.calibrate(out=spare)
        new_loss, new_mu, new_dmu, new_grads = objective.evaluate(model)
        decrease = float(np.einsum("i,i->", dmu, mu - new_mu))  # <dL/dmu, mu - mu'>
        if loss - new_loss >= 0.5 * alpha * decrease:
            alpha *= 1.01
            loss, mu, dmu, grads = new_loss, new_mu, new_dmu, new_grads
            spare = old_beliefs
        else:
            spare = model.beliefs
            model.theta, model.beliefs = old_theta, old_beliefs
            alpha *= 0.5
        history.append(loss)
        if tol > 0 and it >= window and history[it - window] - loss <= tol * loss:
            break
    return model, FitStats(it, loss, alpha)
