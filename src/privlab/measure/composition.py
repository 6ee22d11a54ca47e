"""How an analysis plan's measurements compose: the tightest valid accountant.

Why a module of its own: the plan (privlab.measure.analysis) states what is measured; this
module says what the measurements cost together. A pure plan costs the sum of its epsilons;
with Gaussian noise at a row-level relation zCDP is often tighter; a mixed plan (Laplace or
geometric draws, or a quantile, beside Gaussian ones) is also composed by PLD (dp-accounting,
privlab.core.accounting.pld), and the lowest valid bound is taken and named. A by-group item
costs what its measurement costs (its groups compose in parallel: privlab.measure.groups).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from privlab.measure.measurement import Measurement

if TYPE_CHECKING:  # dp-accounting (and scipy) load only when a plan is composed by PLD
    from privlab.core.accounting.pld import Draw


@dataclass(frozen=True)
class Composed:
    """The plan's total guarantee and the accountant that gave it."""

    epsilon: float
    delta: float
    accountant: str


def compose(ms: list[Measurement], budget: float) -> Composed:
    """The plan's total: the sum for a pure plan (the budget itself when the shares sum to
    it); with Gaussian noise the lower of the basic sums and zCDP converted at the plan's
    delta, and for a mixed plan PLD where it is lower still (a relation of several
    add/remove steps: the basic sums)."""
    eps = math.fsum(m.epsilon for m in ms)
    delta = math.fsum(m.delta for m in ms)
    if abs(eps - budget) <= 1e-12 * budget:
        eps = float(budget)  # the shares sum to the budget (not one ulp above it)
    if delta == 0:
        return Composed(eps, 0.0, "sequential composition (sum of epsilons)")
    if any(m.relation.steps != 1 for m in ms):
        return Composed(eps, delta, "basic composition (sums of epsilon and delta)")
    best = Composed(eps, delta, "basic composition (sums of epsilon and delta)")
    slack = sampler_slack(ms, eps)
    zcdp = zcdp_epsilon(ms, delta - slack) if slack < delta else math.inf
    if zcdp < best.epsilon:
        best = Composed(zcdp, delta, "zCDP composition (rho summed, converted at delta)")
    if any(n.mechanism != "gaussian" for m in ms for n in m.noise) or \
            any(not m.noise for m in ms):  # a mixed plan: PLD where it is tighter
        pld, label = pld_epsilon(ms, delta, best.epsilon)
        if pld < best.epsilon:
            best = Composed(pld, delta, label)
    return best


def plan_rho(ms: list[Measurement]) -> float:
    """The plan's zCDP rho (row-level relation): a (discrete) Gaussian draw of L2
    sensitivity D and scale s is (D/s)^2/2-zCDP (Canonne, Kamath, Steinke 2020, Thm 4); any
    other draw, or a quantile, is pure epsilon-DP, hence epsilon^2/2-zCDP (Bun, Steinke 2016,
    Prop. 1.4). zCDP composes by summing rho."""
    rho = 0.0
    for m in ms:
        if not m.noise:
            rho += m.row_epsilon ** 2 / 2
        for n in m.noise:
            rho += (n.sensitivity / n.scale) ** 2 / 2 if n.mechanism == "gaussian" else \
                n.epsilon ** 2 / 2
    return rho


def plan_draws(ms: list[Measurement]) -> list[Draw]:
    """The plan's noise draws for the PLD accountant (row-level relation), in grid steps as
    the samplers draw them: a discrete Laplace (laplace, geometric) of parameter 1/scale
    and its grid L1 sensitivity, a discrete Gaussian of sigma and its grid sensitivity
    (core.mechanisms' own calibration, recomputed from the public inputs); a statistic
    without additive noise (a quantile: the exponential mechanism) by its epsilon alone.
    One draw per noise: a histogram's add/remove changes one of its counts."""
    from privlab.core.mechanisms import _grid, gaussian_plan, laplace_plan

    out: list[Draw] = []
    for m in ms:
        if not m.noise:
            out.append(("pure", float(m.row_epsilon), 0))
        for n in m.noise:
            if n.mechanism == "gaussian":
                g, _, sigma, _, _, _ = gaussian_plan(n.sensitivity, n.epsilon, n.delta, 1,
                                                     n.coordinates, None, n.integer)
                steps = _grid(n.sensitivity, 1, None, n.integer)[1]
                out.append(("discrete_gaussian", float(sigma), int(steps)))
            else:
                g, steps, _, scale = laplace_plan(n.sensitivity, n.epsilon, 1, None, n.integer)
                out.append(("discrete_laplace", 1.0 / float(scale), int(steps)))
            if not math.isclose(g, n.granularity):
                raise RuntimeError(f"{m.statistic}: planned grid {n.granularity} is not the "
                                   f"calibration's {g}")
    return out


def pld_epsilon(ms: list[Measurement], delta: float, at_most: float) -> tuple[float, str]:
    """The plan's epsilon at `delta` by PLD (dp-accounting, privlab.core.accounting.pld) and
    the accountant's name. The discrete-Gaussian sampler's float64 slack and the PLD's noise
    truncation (mass <= 1e-30 a draw) are charged inside `delta`, at `at_most` (the epsilon
    of the other bounds: the slack grows with epsilon, and PLD is used only below it)."""
    from privlab.core.accounting.pld import additive_pld_epsilon, pld_label

    gauss = sum(1 for m in ms for n in m.noise if n.mechanism == "gaussian")
    slack = sampler_slack(ms, at_most) + gauss * (1 + math.exp(min(at_most, 700.0))) * 1e-30
    if slack >= delta:
        return math.inf, ""
    est = additive_pld_epsilon(plan_draws(ms), delta - slack)
    return est.value, pld_label(est.interval, est.converged) + \
        " composing the discrete Laplace and Gaussian draws"


def sampler_slack(ms: list[Measurement], epsilon: float) -> float:
    """The delta the discrete-Gaussian samplers' float64 acceptance step may add to a claim
    at `epsilon` (core.samplers.sampler_delta, one term a draw): each measurement keeps its
    own inside its delta, but a composed claim converts ideal samplers' rho or PLD, so it is
    charged again inside the plan's delta (growing with epsilon: pass an upper bound)."""
    from privlab.core.samplers import sampler_delta

    return math.fsum(sampler_delta(epsilon, n.coordinates) for m in ms for n in m.noise
                     if n.mechanism == "gaussian")


def zcdp_epsilon(ms: list[Measurement], delta: float) -> float:
    """The plan's epsilon at `delta` by zCDP (core.calibration's tight conversion)."""
    from privlab.core.calibration import zcdp_to_approx_dp

    return zcdp_to_approx_dp(plan_rho(ms), delta)


__all__ = ["Composed", "compose", "plan_draws", "plan_rho", "pld_epsilon", "sampler_slack",
           "zcdp_epsilon"]
