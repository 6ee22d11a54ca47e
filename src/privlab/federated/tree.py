"""Online tree aggregation (binary mechanism) for DP-FTRL's noisy prefix sums.

Leaf t holds round t's clipped sum. A node covering a completed dyadic block of leaves gets
its own Gaussian noise once, when it completes; the prefix sum after t rounds is the sum of
the (at most popcount(t)) nodes of t's binary decomposition, so its noise std is
sigma * sqrt(popcount(t)) instead of sigma * sqrt(t). One leaf lies in at most
floor(log2 T) + 1 completed nodes (accounting.tree_depth), which is what the privacy analysis
charges. `nodes_used` records which nodes fed a released prefix sum so tests can check that
count independently.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class _Node:
    level: int
    index: int  # block [index * 2^level, (index + 1) * 2^level) of 0-based leaves
    true_sum: dict[str, np.ndarray]
    noisy: dict[str, np.ndarray]


@dataclass
class TreeAggregator:
    """Noisy prefix sums over one epoch; `noise_std[name]` is the per-node std of each part."""

    noise_std: dict[str, float]
    rng: np.random.Generator
    steps: int = 0
    _stack: list[_Node] = field(default_factory=list)
    nodes_used: set[tuple[int, int]] = field(default_factory=set)

    def _noisy(self, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = {}
        for name in sorted(values):
            std = self.noise_std[name]
            v = values[name]
            out[name] = v + self.rng.normal(0.0, std, size=v.shape) if std > 0 else v.copy()
        return out

    def add(self, leaf: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Add round `steps`'s sum; return the noisy prefix sum of all rounds so far."""
        node = _Node(0, self.steps, {k: np.array(v, dtype=float) for k, v in leaf.items()}, {})
        self.steps += 1
        # binary-counter carry: two completed siblings make their parent
        while self._stack and self._stack[-1].level == node.level:
            left = self._stack.pop()
            merged = {k: left.true_sum[k] + node.true_sum[k] for k in node.true_sum}
            node = _Node(node.level + 1, left.index // 2, merged, {})
        node.noisy = self._noisy(node.true_sum)
        self._stack.append(node)
        for n in self._stack:
            self.nodes_used.add((n.level, n.index))
        total = {k: np.zeros_like(v) for k, v in node.noisy.items()}
        for n in self._stack:
            for k in total:
                total[k] += n.noisy[k]
        return total
