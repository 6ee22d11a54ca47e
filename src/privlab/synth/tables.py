"""Array operations on a graphical model's clique tables (`privlab.synth.pgm`): broadcasting
a table over a larger clique, reductions and sums written for the short inner axes AIM's
tables have, einsum contraction plans cached per shape, and row-wise categorical draws.

Split out of pgm.py (issue 31's 600-line rule): these depend only on shapes and arrays, not
on the junction tree or the fit. Notation as there: a clique is a sorted tuple of attribute
indices, `sizes[a]` the values of attribute a.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from privlab.synth.triangulation import Clique, cells


def _expand(arr: np.ndarray, sub: Clique, full: Clique, sizes: Sequence[int]) -> np.ndarray:
    """View an array over `sub` (subset of `full`, both sorted) broadcastable over `full`."""
    return arr.reshape([sizes[a] if a in sub else 1 for a in full])


#: below this many cells `_reduce` leaves the reduction to numpy (halving saves nothing
#: there and costs Python calls: most of AIM's early models are a few thousand cells)
_HALVE_FROM = 1 << 14


def _reduce(ufunc: np.ufunc, a: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """`ufunc.reduce(a, axis=axes, keepdims=True)` for a C-contiguous `a` (a new array).

    Why not numpy's own: reducing an inner axis, numpy's inner loop is as short as the axes
    after it (3 cells when a 3-valued attribute comes last), and a 254k-cell max took 1.5 ms
    (issue 32). Here leading reduced axes go first, as rows of one long contiguous run
    each, and the largest inner run of reduced axes is halved, ufunc(first half, second
    half), every step over long contiguous runs (0.3 ms); what is left is small. The same
    maximum; sums in another order (other rounding than numpy's, as accurate)."""
    plan = _reduce_plan(a.shape, axes)
    if plan is None:
        return ufunc.reduce(a, axis=axes, keepdims=True)
    lead, halve, merged, rest, keep = plan
    y = ufunc.reduce(a.reshape(lead, -1), axis=0) if lead else a
    if halve:
        pre, n, post = halve
        y = y.reshape(pre, n, post)
        while n > 1:
            h = n // 2
            z = ufunc(y[:, :h], y[:, h:2 * h])
            if n % 2:
                ufunc(z[:, :1], y[:, 2 * h:], out=z[:, :1])
            y, n = z, h
    if rest:
        return ufunc.reduce(y.reshape(merged), axis=rest, keepdims=True).reshape(keep)
    return y.reshape(keep)


@functools.lru_cache(maxsize=1 << 14)
def _reduce_plan(shape: tuple[int, ...], axes: tuple[int, ...]
                 ) -> tuple[int, tuple[int, int, int] | None, tuple[int, ...],
                            tuple[int, ...], tuple[int, ...]] | None:
    """How `_reduce` goes: the cells of a leading run of reduced axes (0: none), the halved
    inner run as (cells before, its cells, cells after) or None, the shape left (runs of
    adjacent axes merged, the leading run dropped, the halved run 1), the runs numpy
    reduces last, the result's shape; None where numpy alone is as fast (small tables,
    one trailing run, nothing to reduce)."""
    if not axes or math.prod(shape) < _HALVE_FROM:
        return None
    merged: list[int] = []
    kinds: list[bool] = []  # runs of adjacent axes, reduced or kept
    for i, n in enumerate(shape):
        if kinds and kinds[-1] == (i in axes):
            merged[-1] *= n
        else:
            merged.append(n)
            kinds.append(i in axes)
    lead = 0
    if kinds[0] and len(merged) > 1:
        lead = merged.pop(0)
        kinds.pop(0)
    inner = [j for j, r in enumerate(kinds[:-1]) if r and merged[j] > 1]
    halve = None
    if inner:
        g = max(inner, key=lambda j: merged[j])
        halve = (math.prod(merged[:g]), merged[g], math.prod(merged[g + 1:]))
        merged[g] = 1
    if not lead and halve is None:
        return None
    rest = tuple(j for j, r in enumerate(kinds) if r and merged[j] > 1)
    keep = tuple(1 if i in axes else n for i, n in enumerate(shape))
    return lead, halve, tuple(merged), rest, keep


def _sum_onto(terms: Sequence[tuple[np.ndarray, Clique]], clique: Clique,
              sizes: Sequence[int], out: np.ndarray | None = None) -> np.ndarray:
    """The sum of the terms (array, its attributes, a subset of `clique`) broadcast over
    `clique`, into `out` when given. The terms are summed in groups over their unions, each
    smaller than the clique (`_sum_groups`), so the clique-sized table is written once per
    group after the first (adding every term into a zeroed clique table wrote it 3-9 times
    per calibration: a third of calibrate's time, issue 32)."""
    if out is None:
        out = np.empty([sizes[a] for a in clique])
    groups, fill = _sum_groups(tuple(sizes), tuple(ta for _, ta in terms), clique)
    parts = []
    for group in groups:
        cur, attrs = terms[group[0]]
        for j in group[1:]:
            arr, ta = terms[j]
            union = tuple(sorted(set(attrs) | set(ta)))
            cur = _expand(cur, attrs, union, sizes) + _expand(arr, ta, union, sizes)
            attrs = union
        if len(groups) > 1 and not set(fill) <= set(attrs):
            # spell the part out over the clique's last attributes: every operand of the
            # clique-sized additions then runs contiguously over them (numpy's inner loop
            # was the last attribute alone, often 3 cells)
            union = tuple(sorted(set(attrs) | set(fill)))
            cur = np.ascontiguousarray(np.broadcast_to(_expand(cur, attrs, union, sizes),
                                                       [sizes[a] for a in union]))
            attrs = union
        parts.append(_expand(cur, attrs, clique, sizes))
    if not parts:
        out.fill(0.0)
    elif len(parts) == 1:
        np.copyto(out, parts[0])
    else:
        np.add(parts[0], parts[1], out=out)
        for part in parts[2:]:
            out += part
    return out


@functools.lru_cache(maxsize=1 << 12)
def _sum_groups(sizes: tuple[int, ...], attrs: tuple[Clique, ...], clique: Clique
                ) -> tuple[list[list[int]], Clique]:
    """`_sum_onto`'s plan: term indices in groups, each grown greedily (the term giving the
    smallest union next) while its union stays smaller than the clique (one group may span
    it when a single term does); and the clique's last attributes to spell every group out
    over, as many as keep each group below 1/8 of the clique. Depends only on the shapes
    (cached)."""
    left = list(range(len(attrs)))
    groups: list[list[int]] = []
    while left:
        first = min(left, key=lambda j: (cells(sizes, attrs[j]), j))
        left.remove(first)
        group, union = [first], set(attrs[first])
        while left:
            j = min(left, key=lambda j: (cells(sizes, union | set(attrs[j])), j))
            if len(union | set(attrs[j])) == len(clique):
                break
            left.remove(j)
            group.append(j)
            union |= set(attrs[j])
        groups.append(group)
    unions = [set().union(*(attrs[j] for j in group)) for group in groups]
    fill: Clique = ()
    for t in range(1, len(clique)):
        tail = set(clique[-t:])
        if any(cells(sizes, u | tail) * 8 > cells(sizes, clique) for u in unions):
            break
        fill = clique[-t:]
    return groups, fill


#: einsum's letters for integer labels 0, 1, ... (numpy's `einsum_symbols`)
_SYMBOLS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _flops(eq: str, dims: dict[str, int]) -> int:
    """numpy's `_flop_count` for one contraction step "ab,bc->ac": the cells of every index
    it touches, times (terms - 1, at least 1) + 1 if it sums an index out."""
    lhs, result = eq.split("->")
    terms = lhs.split(",")
    touched = set("".join(terms))
    factor = max(1, len(terms) - 1) + (1 if touched - set(result) else 0)
    return math.prod(dims[c] for c in touched) * factor


@functools.lru_cache(maxsize=1 << 16)
def _einsum_plan(sizes: tuple[int, ...], operands: tuple[Clique, ...], clique: Clique,
                 blowup: float) -> tuple[list, list] | None:
    """einsum's greedy contraction path for factors over `operands` (attribute tuples) summed
    onto `clique`, and the contraction list numpy derives from it; None when the path costs
    more than `blowup` operations per factor cell.

    Both depend only on the factors' attributes and sizes, not on their values, and AIM asks
    for the same subtree's marginal in round after round (the junction tree changes in one
    place per round): the search and the parsing (two thirds of scoring's time) run once per
    shape. One `einsum_path` call gives the contraction list; its cost is numpy's "Optimized
    FLOP count" (the sum of `_flops` + 1, compared as numpy prints it, to 4 digits), which
    spares a second call that only formats that report (issue 32: planning was 13 of 100
    CPU-s at 200k x 20).
    """
    labels = {a: j for j, a in enumerate(sorted({a for attrs in operands for a in attrs}))}
    args: list[object] = []
    for attrs in operands:
        args += [np.empty([sizes[a] for a in attrs]), [labels[a] for a in attrs]]
    out_labels = [labels[a] for a in clique]
    contractions = np.einsum_path(*args, out_labels, optimize="greedy", einsum_call=True)[1]
    dims = {_SYMBOLS[j]: sizes[a] for a, j in labels.items()}
    cost = 1 + sum(_flops(eq, dims) for _, eq, _ in contractions)
    cells_in = sum(math.prod(sizes[a] for a in attrs) for attrs in operands)
    if float(f"{cost:.3e}") > blowup * max(cells_in, 1):
        return None
    return ["einsum_path", *(inds for inds, _, _ in contractions)], contractions


try:  # numpy's own steps of `einsum(..., optimize=path)`, replayed without re-parsing
    from numpy._core.einsumfunc import bmm_einsum as _bmm_einsum
    from numpy._core.multiarray import c_einsum as _c_einsum
except ImportError:  # pragma: no cover - another numpy: let einsum redo the parsing
    _bmm_einsum = _c_einsum = None


def _run_plan(plan: tuple[list, list], args: list[object], out_labels: list[int]
              ) -> np.ndarray:
    """np.einsum(*args, out_labels, optimize=path), the same calls in the same order (hence
    the same floats) as numpy's own loop, from the cached contraction list."""
    path, contractions = plan
    if _bmm_einsum is None or _c_einsum is None:  # pragma: no cover
        return np.einsum(*args, out_labels, optimize=path)
    operands = list(args[0::2])
    for inds, eq, _ in contractions:
        tmp = [operands.pop(x) for x in inds]
        operands.append(_bmm_einsum(eq, *tmp) if len(tmp) == 2 else _c_einsum(eq, *tmp))
    return operands[0]


def _contract(ops: list[tuple[np.ndarray, tuple[int, ...]]], keep: tuple[int, ...],
              sizes: Sequence[int]) -> np.ndarray:
    """The product of the factors (array, attribute labels), summed onto `keep` (in that
    order). Two factors: one plain einsum; more: numpy's greedy path, cached per shape."""
    label = {a: j for j, a in enumerate(sorted({a for _, attrs in ops for a in attrs}))}
    args: list[object] = []
    for arr, attrs in ops:
        args += [arr, [label[a] for a in attrs]]
    out = [label[a] for a in keep]
    if len(ops) <= 2:
        return np.einsum(*args, out)
    plan = _einsum_plan(tuple(sizes), tuple(attrs for _, attrs in ops), tuple(keep), math.inf)
    assert plan is not None  # no cost limit
    return _run_plan(plan, args, out)


def _draw_rows(table: np.ndarray, row: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """For each entry of `row`, a column index drawn from that row of `table` (weights);
    rows without mass draw uniformly. One searchsorted over row-offset CDFs."""
    w = np.maximum(table, 0.0)
    s = w.sum(axis=1, keepdims=True)
    p = np.where(s > 0, w / np.where(s > 0, s, 1.0), 1.0 / w.shape[1])
    cdf = np.cumsum(p, axis=1)
    cdf[:, -1] = 1.0
    cdf += np.arange(w.shape[0])[:, None]
    u = gen.random(row.size)
    idx = np.searchsorted(cdf.ravel(), row + u, side="right")
    return np.clip(idx - row * w.shape[1], 0, w.shape[1] - 1)
