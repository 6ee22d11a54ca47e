"""Adaptive choice of which epsilon to train next, so eps* is found with fewer training runs.

Start with the ends of the grid and, when the budget allows four or more runs, the points at one
and two thirds of it (otherwise the middle): the curves are monotone, so these bracket
everything, and two interior points catch an accuracy jump that interpolation between the ends
and the middle cannot see (replays of the measured sweeps: docs/choose_epsilon.md). Then,
repeatedly: draw posterior risk curves at the evaluated points (Beta draws per attack, weighted,
made monotone), carry them and the smoothed accuracy to the untrained grid points, and compute
eps* for every draw. Two ways to carry them (`fill`): "linear" (default: interpolation in log
eps) or "envelope" (each untrained point drawn uniformly between its trained neighbours' values,
sorted so each draw stays monotone: it keeps a sudden accuracy jump possible); with the thirds
design both matched the full grid equally often on the measured sweeps. The next point to train
is the unevaluated grid point most often named eps* by the draws (evaluating it is the
measurement most likely to change the answer); when every draw already names an evaluated point,
the nearest untrained grid point to the modal eps* (the smaller eps on a tie) is trained. Stops
when the budget is spent or the modal eps* has both grid neighbours evaluated and at least
`stop_probability` of the draws. The final answer is chosen among evaluated points only (we
report only what we measured).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privlab.errors import InvalidInputError
from privlab.risk.model import (
    Decision,
    Evaluation,
    Policy,
    UtilityConfig,
    argmin_feasible,
    check_grid,
    decide,
    fit_curves,
    isotonic_rows,
    utility_loss,
)
from privlab.risk.posterior import BetaPosterior, parse_prior


@dataclass
class AdaptiveResult:
    """The decision on the evaluated points and the order in which points were trained."""

    decision: Decision
    order: list[float]
    grid: np.ndarray
    history: list[dict[str, Any]] = field(default_factory=list)


def _interp_log(x_eval: np.ndarray, y: np.ndarray, x_all: np.ndarray) -> np.ndarray:
    lx, la = np.log(x_eval), np.log(x_all)
    if y.ndim == 1:
        return np.interp(la, lx, y)
    return np.stack([np.interp(la, lx, row) for row in y])


def monotone_fill(x_eval: np.ndarray, vals: np.ndarray, x_all: np.ndarray,
                  rng: np.random.Generator) -> np.ndarray:
    """(draws, k) non-decreasing values at the trained points -> (draws, G) on the grid, each
    untrained point drawn uniformly inside its envelope [left value, right value] (sorted
    within a gap so every row stays non-decreasing; flat beyond the trained range)."""
    pos = np.searchsorted(x_all, x_eval)
    out = np.empty((vals.shape[0], x_all.size))
    out[:, pos] = vals
    out[:, :pos[0]] = vals[:, :1]
    out[:, pos[-1] + 1:] = vals[:, -1:]
    for a in range(pos.size - 1):
        i, j = pos[a], pos[a + 1]
        if j - i > 1:
            u = np.sort(rng.random((vals.shape[0], j - i - 1)), axis=1)
            lo, hi = vals[:, a:a + 1], vals[:, a + 1:a + 2]
            out[:, i + 1:j] = lo + u * (hi - lo)
    return out


def star_distribution(evaluations: Sequence[Evaluation], grid: np.ndarray, policy: Policy, *,
                      rule: str = "mean", attack_weights: Mapping[str, float] | None = None,
                      prior: str | tuple[float, float] = "uniform",
                      utility_config: UtilityConfig = UtilityConfig(), n_draws: int = 400,
                      seed: int = 0, fill: str = "linear") -> np.ndarray:
    """P(eps* = g) for every grid point g, from posterior draws interpolated in log eps."""
    curves = fit_curves(evaluations, attack_weights=attack_weights, prior=prior,
                        level=policy.level, n_draws=n_draws, seed=seed)
    rng = np.random.default_rng(seed + 1)
    ab = parse_prior(prior)
    evs = sorted(evaluations, key=lambda e: e.epsilon)
    draws = np.zeros((n_draws, len(evs)))
    for a, w in curves.attack_weights.items():
        for j, e in enumerate(evs):
            draws[:, j] += w * BetaPosterior.from_counts(*e.counts[a], prior=ab).sample_risk(
                n_draws, rng)
    draws = isotonic_rows(draws)
    if rule == "risk_averse":  # the rule's own risk: shift each draw by the credible premium
        draws = draws + (curves.risk_upper - curves.risk_mean)[None, :]
    acc_draws = np.tile(curves.accuracy, (n_draws, 1))
    if fill == "envelope":
        risk_all = monotone_fill(curves.epsilons, draws, grid, rng)
        acc_all = monotone_fill(curves.epsilons, acc_draws, grid, rng)
    elif fill == "linear":
        risk_all = _interp_log(curves.epsilons, draws, grid)
        acc_all = _interp_log(curves.epsilons, acc_draws, grid)
    else:
        raise InvalidInputError(f"fill: use 'envelope' or 'linear', got {fill!r}")
    std_all = _interp_log(curves.epsilons, curves.accuracy_std, grid)
    sec_all = _interp_log(curves.epsilons, curves.train_seconds, grid)
    counts = np.zeros(grid.size)
    for d in range(n_draws):
        util = utility_loss(acc_all[d], std_all, sec_all, utility_config)
        feas = np.ones(grid.size, bool) if policy.min_accuracy is None else \
            acc_all[d] >= policy.min_accuracy
        if policy.max_risk is not None:
            feas &= risk_all[d] <= policy.max_risk
        idx = argmin_feasible(policy.w_risk * risk_all[d] + policy.w_util * util, feas)
        if idx is not None:
            counts[idx] += 1
    return counts / n_draws


def initial_design(size: int, budget: int) -> list[int]:
    """Grid indices trained first: the ends, then the thirds (budget >= 4) or the middle."""
    interior = [size // 3, (2 * size) // 3] if budget >= 4 else [size // 2]
    return list(dict.fromkeys([0, size - 1, *interior]))


def adaptive_search(grid: Sequence[float], evaluate: Callable[[float], Evaluation],
                    policy: Policy, *, budget: int, rule: str = "risk_averse",
                    attack_weights: Mapping[str, float] | None = None,
                    prior: str | tuple[float, float] = "uniform",
                    utility_config: UtilityConfig = UtilityConfig(), n_draws: int = 400,
                    stop_probability: float = 0.9, seed: int = 0, fill: str = "linear",
                    on_step: Callable[[float, int], None] | None = None) -> AdaptiveResult:
    """Train at most `budget` grid points, chosen to pin down eps*; see the module docstring."""
    g = check_grid(grid)
    if rule not in ("mean", "risk_averse"):
        raise InvalidInputError(f"rule: use 'mean' or 'risk_averse', got {rule!r}")
    if int(budget) != budget or budget < 2:
        raise InvalidInputError(f"budget_runs: need an integer >= 2 (the grid ends), got {budget}")
    budget = min(int(budget), g.size)
    evaluated: dict[int, Evaluation] = {}
    order: list[float] = []
    history: list[dict[str, Any]] = []

    def run(i: int) -> None:
        ev = evaluate(float(g[i]))
        if abs(ev.epsilon - g[i]) > 1e-12 * max(1.0, g[i]):
            raise InvalidInputError(f"evaluate: asked for eps={g[i]:g}, got eps={ev.epsilon:g}")
        evaluated[i] = ev
        order.append(float(g[i]))
        if on_step is not None:
            on_step(float(g[i]), len(evaluated))

    for i in initial_design(g.size, budget):
        if len(evaluated) < budget:
            run(i)
    while len(evaluated) < budget:
        idx = sorted(evaluated)
        p = star_distribution([evaluated[i] for i in idx], g, policy, rule=rule,
                              attack_weights=attack_weights, prior=prior,
                              utility_config=utility_config, n_draws=n_draws,
                              seed=seed + len(evaluated), fill=fill)
        mode = int(np.argmax(p))
        history.append({"evaluated": [float(g[i]) for i in idx],
                        "p_star": [float(v) for v in p]})
        open_pts = [i for i in range(g.size) if i not in evaluated]
        if not open_pts:
            break
        nbrs = [j for j in (mode - 1, mode + 1) if 0 <= j < g.size]
        if p.sum() == 0:  # infeasible under every draw: refine where the constraints bind
            nxt = min(open_pts, key=lambda j: abs(j - g.size // 2))
        elif max(p[j] for j in open_pts) > 0:
            nxt = max(open_pts, key=lambda j: (p[j], -j))
        else:
            gaps = [j for j in nbrs if j not in evaluated]
            if not gaps and p[mode] >= stop_probability:
                break
            cand = gaps or open_pts
            nxt = min(cand, key=lambda j: (abs(j - mode), j))
        run(nxt)
    final = [evaluated[i] for i in sorted(evaluated)]
    curves = fit_curves(final, attack_weights=attack_weights, prior=prior, level=policy.level,
                        seed=seed)
    return AdaptiveResult(decide(curves, policy, utility_config), order, g, history)
