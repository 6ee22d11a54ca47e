"""MST (McKenna, Miklau & Sheldon 2021, "Winning the NIST Contest"), implemented here.

1. Measure every 1-way marginal with discrete Gaussian noise (rho/3 in total).
2. Compress: values whose noisy count is below 3 sigma are merged into one bucket.
3. Select a maximum spanning tree of attribute pairs: d-1 rounds of the exponential mechanism
   (Kruskal order), scoring each pair not yet connected by the L1 distance between its true
   2-way marginal and the independent estimate from the noisy 1-way marginals (sensitivity 1;
   each round at epsilon = sqrt(8 (rho/3) / (d-1)), eps^2/8-zCDP: rho/3 in total).
4. Measure the selected 2-way marginals with discrete Gaussian noise (rho/3 in total).
5. Estimate a consistent tree model and sample from it exactly.

Step 5 is where MST uses Private-PGM (a general graphical-model library). On a TREE the
marginal polytope equals the local-consistency polytope, so a consistent model is: a common
total (inverse-variance weighted over all measurements), each 1-way marginal as the
inverse-variance combination of its direct measurement and the margins of the incident noisy
pair tables, projected onto the non-negative simplex; each pair table made non-negative and
fitted to its two 1-way marginals by iterative proportional fitting. Sampling is then exact
(root from its marginal, each child from P(child | parent)). AIM needs inference on general
(non-tree) graphs: `privlab.synth.aim` with the junction-tree model of `privlab.synth.pgm`.

Counts are integer-valued, so the noise is the discrete Gaussian (Canonne, Kamath & Steinke
2020) from `privlab.core.samplers`: a record changes one cell of a marginal by 1 under
add/remove, so each marginal costs exactly rho = 1/(2 sigma^2).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from privlab.core.calibration import zcdp_to_approx_dp
from privlab.core.mechanisms import exponential_mechanism
from privlab.core.samplers import discrete_gaussian
from privlab.errors import InvalidInputError
from privlab.synth.base import Prepared, Synthesizer
from privlab.synth.domain import ColumnPlan

#: The 1-way marginals are refused as "too noisy for this epsilon" when, averaged over the
#: columns, the expected L1 norm of their noise exceeds the (privately estimated) row count.
MAX_MEAN_NOISE_RATIO = 1.0
IPF_ITERATIONS = 500
IPF_TOL = 1e-9


def project_simplex(v: np.ndarray, total: float) -> np.ndarray:
    """Euclidean projection of v onto {x >= 0, sum x = total} (Duchi et al. 2008)."""
    v = np.asarray(v, dtype=np.float64)
    if total <= 0 or v.size == 0:
        return np.zeros_like(v)
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - total
    ind = np.arange(1, v.size + 1)
    cond = u - css / ind > 0
    r = ind[cond][-1]
    theta = css[cond][-1] / r
    return np.maximum(v - theta, 0.0)


def ipf(table: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Scale a non-negative table to the given row and column sums (equal totals)."""
    t = table.copy()
    for _ in range(IPF_ITERATIONS):
        rs = t.sum(axis=1)
        t *= np.divide(rows, rs, out=np.zeros_like(rows), where=rs > 0)[:, None]
        cs = t.sum(axis=0)
        t *= np.divide(cols, cs, out=np.zeros_like(cols), where=cs > 0)[None, :]
        if np.max(np.abs(t.sum(axis=1) - rows)) <= IPF_TOL * max(rows.sum(), 1.0):
            break
    return t


def _measure(counts: np.ndarray, sigma: float, gen: np.random.Generator) -> np.ndarray:
    if sigma == 0:
        return counts.astype(np.float64)
    return (counts + discrete_gaussian(sigma, size=counts.shape, rng=gen)).astype(np.float64)


class MarginalCounts:
    """Exact 1-way and (compressed) 2-way marginal counts of the encoded table."""

    def one(self, j: int) -> np.ndarray:
        raise NotImplementedError

    def two(self, a: int, b: int, mappings: list[np.ndarray], csizes: list[int]) -> np.ndarray:
        """Counts of (mappings[a][code_a], mappings[b][code_b]): a csizes[a] x csizes[b]
        table of the columns after rare values were merged."""
        raise NotImplementedError


class CodeCounts(MarginalCounts):
    """Marginals of an in-memory (rows x columns) code matrix by `np.bincount`."""

    def __init__(self, codes: np.ndarray, sizes: list[int]) -> None:
        self.codes, self.sizes = codes, sizes
        self._comp: dict[int, np.ndarray] = {}

    def one(self, j: int) -> np.ndarray:
        return np.bincount(self.codes[:, j], minlength=self.sizes[j])

    def two(self, a: int, b: int, mappings: list[np.ndarray], csizes: list[int]) -> np.ndarray:
        for j in (a, b):
            if j not in self._comp:
                self._comp[j] = mappings[j][self.codes[:, j]]
        flat = self._comp[a] * csizes[b] + self._comp[b]
        return np.bincount(flat, minlength=csizes[a] * csizes[b]).astype(np.float64).reshape(
            csizes[a], csizes[b])


class _DisjointSet:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, a: int) -> int:
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


class MSTSynthesizer(Synthesizer):
    """Marginal-based DP synthesizer (MST): tree of 2-way marginals, zCDP accounting."""

    method = "mst"
    covers = ("MST model: noisy 1-way and tree 2-way marginals, tree edges, compressed sizes "
              "and the estimated row count (details)",)
    mechanism = ("MST (McKenna, Miklau & Sheldon 2021): noisy 1-way marginals, exponential-"
                 "mechanism spanning tree of 2-way marginals, discrete Gaussian noise")

    def sampler_bound(self, plans: Sequence[ColumnPlan]) -> int:
        """The domain's histograms, then d 1-way marginals and the d - 1 tree edges' 2-way
        marginals: one draw of each is shifted by a row (compression and the tree, chosen
        under DP, change which cells, never how many vectors)."""
        d = len(plans)
        return super().sampler_bound(plans) + d + max(d - 1, 0)

    def _fit(self, prep: Prepared) -> None:
        gen = prep.gen
        if prep.private:
            rho, rho_total, delta_z = self._private_budget(prep)
        else:
            delta_z = rho_total = 0.0
            self._build_domain(prep, 0.0, 0.0, 0.0)
            rho = math.inf
        assert self.domain is not None
        counts = self._marginals(prep)
        sizes = self.domain.sizes
        d = len(sizes)
        names = self.domain.names
        phases = 3 if d > 1 else 1
        rho_phase = rho / phases

        # 1. one-way marginals
        self.progress("1-way marginals", 0, d)
        sigma1 = 0.0 if not prep.private else math.sqrt(d / (2 * rho_phase))
        y1 = [_measure(counts.one(j), sigma1, gen) for j in range(d)]
        if prep.private:
            self.account.spend(f"1-way marginals of {d} column(s)", rho_phase,
                               detail=f"discrete Gaussian sigma={sigma1:.4g} per cell",
                               vectors=d)
        n_hat1 = self._total([(y, sigma1) for y in y1])
        if prep.private:
            self._check_signal(y1, sigma1, n_hat1, names, rho_total, delta_z)
            if prep.delta > 0.1 / max(n_hat1, 1.0):
                self.warnings.append(f"delta={prep.delta:g} is not much smaller than 1/n "
                                     f"(n is about {n_hat1:.0f}): pass a smaller delta")
        self.progress("1-way marginals", d, d)

        # 2. compress rare values
        kept, merged, mappings = [], [], []
        for j in range(d):
            sup = y1[j] >= 3 * sigma1
            if sup.all():
                mapping = np.arange(sizes[j])
                kept.append(np.arange(sizes[j]))
                merged.append(np.zeros(0, dtype=np.int64))
            else:
                k_idx = np.flatnonzero(sup)
                m_idx = np.flatnonzero(~sup)
                mapping = np.empty(sizes[j], dtype=np.int64)
                mapping[k_idx] = np.arange(k_idx.size)
                mapping[m_idx] = k_idx.size
                kept.append(k_idx)
                merged.append(m_idx)
            mappings.append(mapping)
        csizes = [kept[j].size + int(merged[j].size > 0) for j in range(d)]
        self._kept, self._merged, self._y1 = kept, merged, y1
        y1c = [self._compress_vec(j, y1[j]) for j in range(d)]

        # 3. select the tree
        edges: list[tuple[int, int]] = []
        if d > 1:
            total = max(n_hat1, 1.0)
            p1 = [project_simplex(y, total) / total for y in y1c]
            pairs = list(itertools.combinations(range(d), 2))
            scores = {}
            for a, b in pairs:
                x = counts.two(a, b, mappings, csizes).ravel()
                indep = total * np.outer(p1[a], p1[b]).ravel()
                scores[a, b] = float(np.abs(x - indep).sum())
            eps_sel = math.sqrt(8 * rho_phase / (d - 1)) if prep.private else math.inf
            ds = _DisjointSet(d)
            for r in range(d - 1):
                self.progress("tree selection", r, d - 1)
                cand = [e for e in pairs if ds.find(e[0]) != ds.find(e[1])]
                u = np.array([scores[e] for e in cand])
                if prep.private:
                    pick = exponential_mechanism(list(range(len(cand))), u, 1.0, eps_sel,
                                                 method="gumbel", rng=gen).value
                else:
                    pick = int(np.argmax(u))
                e = cand[int(pick)]
                edges.append(e)
                ds.union(*e)
            if prep.private:
                self.account.spend(f"spanning-tree selection ({d - 1} rounds)", rho_phase,
                                   detail=f"exponential mechanism (Gumbel), epsilon="
                                          f"{eps_sel:.4g} per round, eps^2/8-zCDP",
                                   vectors=0)

        # 4. measure the tree's 2-way marginals
        sigma2 = 0.0 if not prep.private or d < 2 else math.sqrt((d - 1) / (2 * rho_phase))
        y2 = {}
        for i, (a, b) in enumerate(edges):
            self.progress("2-way marginals", i, len(edges))
            y2[a, b] = _measure(counts.two(a, b, mappings, csizes), sigma2, gen)
        if edges and prep.private:
            self.account.spend(f"2-way marginals of {len(edges)} tree edge(s)", rho_phase,
                               detail=f"discrete Gaussian sigma={sigma2:.4g} per cell",
                               vectors=len(y2))

        # 5. consistent tree model
        self._estimate(y1c, sigma1, y2, sigma2, edges, csizes)
        self.edges = [(names[a], names[b]) for a, b in edges]
        self.sigmas = {"one_way": sigma1, "two_way": sigma2}
        self.compressed_sizes = dict(zip(names, csizes, strict=True))
        if prep.private:
            self._guarantee = self.account.guarantee(delta_z, self.mechanism)

    # ------------------------------------------------------------------ helpers
    def _compress_vec(self, j: int, y: np.ndarray) -> np.ndarray:
        out = y[self._kept[j]]
        if self._merged[j].size:
            out = np.append(out, y[self._merged[j]].sum())
        return out

    def _marginals(self, prep: Prepared) -> MarginalCounts:
        """Where the exact marginals come from: the encoded rows in memory here;
        `privlab.synth.spark` counts them in Spark instead (only tables come back)."""
        assert self.domain is not None
        return CodeCounts(self.domain.encode(prep.frame), self.domain.sizes)

    @staticmethod
    def _total(measured: list[tuple[np.ndarray, float]]) -> float:
        """Inverse-variance weighted estimate of the row count from measurement totals."""
        if any(s == 0 for _, s in measured):
            return float(next(y.sum() for y, s in measured if s == 0))
        w = np.array([1.0 / (y.size * s * s) for y, s in measured])
        t = np.array([y.sum() for y, _ in measured])
        return float((w * t).sum() / w.sum())

    def _check_signal(self, y1: list[np.ndarray], sigma: float, n_hat: float,
                      names: list[str], rho_total: float, delta_z: float) -> None:
        ratios = np.array([sigma * y.size * math.sqrt(2 / math.pi) / max(n_hat, 1.0)
                           for y in y1])
        for name, r in zip(names, ratios, strict=True):
            if r > MAX_MEAN_NOISE_RATIO:
                self.warnings.append(f"column {name!r}: its 1-way marginal is mostly noise at "
                                     f"this epsilon (noise mass {r:.2f}x the rows); its rare "
                                     "values are merged")
        mean = float(ratios.mean())
        if mean > MAX_MEAN_NOISE_RATIO:
            need = zcdp_to_approx_dp(rho_total * (mean / (0.5 * MAX_MEAN_NOISE_RATIO)) ** 2,
                                     delta_z)
            raise InvalidInputError(
                f"epsilon is too small for the marginals of this table: their noise (std "
                f"{sigma:.3g} per cell) outweighs the ~{max(n_hat, 0):.0f} rows (estimated "
                f"privately); raise --epsilon to about {need:.3g}, or drop or coarsen columns "
                f"(nothing released; the measurements taken cost rho={self.account.rho:.3g})")

    def _estimate(self, y1c: list[np.ndarray], sigma1: float,
                  y2: dict[tuple[int, int], np.ndarray], sigma2: float,
                  edges: list[tuple[int, int]], csizes: list[int]) -> None:
        d = len(y1c)
        measured = [(y, sigma1) for y in y1c] + [(t, sigma2) for t in y2.values()]
        n_hat = max(self._total(measured), 1.0)
        var1 = [np.ones(csizes[j]) * sigma1 ** 2 for j in range(d)]
        for j in range(d):
            if self._merged[j].size:
                var1[j][-1] *= self._merged[j].size
        margins: list[list[tuple[np.ndarray, float]]] = [[] for _ in range(d)]
        for (a, b), t in y2.items():
            margins[a].append((t.sum(axis=1), csizes[b] * sigma2 ** 2))
            margins[b].append((t.sum(axis=0), csizes[a] * sigma2 ** 2))
        one = []
        for j in range(d):
            if sigma1 == 0:
                est = y1c[j]
            else:
                w = 1.0 / var1[j]
                acc = w * y1c[j]
                for m, v in margins[j]:
                    acc = acc + m / v
                    w = w + 1.0 / v
                est = acc / w
            one.append(project_simplex(est, n_hat))
        self._one = one
        self._n_hat = n_hat
        # pair tables fitted to the 1-way marginals
        cond: dict[tuple[int, int], np.ndarray] = {}
        for (a, b), t in y2.items():
            prior = np.outer(one[a], one[b]) / n_hat
            table = ipf(np.maximum(t, 0.0) + (1e-3 if sigma2 > 0 else 1e-9) * prior, one[a],
                        one[b])
            cond[a, b] = table
            cond[b, a] = table.T
        # orient the tree from column 0
        adj: dict[int, list[int]] = {j: [] for j in range(d)}
        for a, b in edges:
            adj[a].append(b)
            adj[b].append(a)
        order, seen, queue = [], {0}, [0]
        while queue:
            p = queue.pop(0)
            for c in sorted(adj[p]):
                if c not in seen:
                    seen.add(c)
                    queue.append(c)
                    t = cond[p, c]
                    rs = t.sum(axis=1, keepdims=True)
                    fallback = one[c] / max(one[c].sum(), 1e-300)
                    probs = np.where(rs > 0, t / np.where(rs > 0, rs, 1.0), fallback[None, :])
                    order.append((p, c, probs))
        roots = [j for j in range(d) if j not in seen]  # only without a tree (never for MST)
        self._order = order
        self._roots = [0, *roots]

    def _sample_codes(self, n: int, gen: np.random.Generator) -> np.ndarray:
        d = len(self._one)
        comp = np.zeros((n, d), dtype=np.int64)
        for r in self._roots:
            comp[:, r] = _draw(self._one[r], n, gen)
        for p, c, probs in self._order:
            parent = comp[:, p]
            for v in np.unique(parent):
                idx = np.flatnonzero(parent == v)
                comp[idx, c] = _draw(probs[v], idx.size, gen)
        codes = np.empty_like(comp)
        for j in range(d):
            k = self._kept[j]
            col = comp[:, j]
            out = np.empty(n, dtype=np.int64)
            is_m = col == k.size
            out[~is_m] = k[col[~is_m]]
            if is_m.any():
                members = self._merged[j]
                w = np.maximum(self._y1[j][members], 0.0)
                out[is_m] = members[_draw(w, int(is_m.sum()), gen)]
            codes[:, j] = out
        return codes

    def details(self) -> dict[str, Any]:
        if not hasattr(self, "edges"):
            return {}
        return {"tree_edges": [list(e) for e in self.edges], "noise_sigma": self.sigmas,
                "compressed_sizes": self.compressed_sizes,
                "estimated_rows": self._n_hat,
                "model": "tree-structured: consistent 1-way and 2-way marginals, exact "
                         "sampling (no general graphical-model library)"}


def _draw(weights: np.ndarray, size: int, gen: np.random.Generator) -> np.ndarray:
    """Indices drawn with probability proportional to weights (uniform if all zero)."""
    w = np.asarray(weights, dtype=np.float64)
    total = w.sum()
    if not total > 0:
        return gen.integers(0, w.size, size=size)
    cdf = np.cumsum(w / total)
    cdf[-1] = 1.0
    return np.searchsorted(cdf, gen.random(size), side="right").clip(0, w.size - 1)
