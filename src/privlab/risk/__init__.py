"""privlab.risk: choose epsilon from attack evidence (a Bayesian risk model over membership
attacks, with the uncertainty of the choice carried through).

- `posterior`: Beta-binomial posterior on an attack's success rate; normalised risk
  r = max(0, 2 theta - 1) with closed-form mean and quantiles.
- `model`: integral risk over attacks, monotone (isotonic) curves, utility loss, composite loss,
  the posterior-mean and risk-averse rules with constraints, Pareto frontier, policies, prior
  sensitivity.
- `adaptive`: which epsilon to train next so eps* needs fewer training runs than a full grid.
- `pipeline` (imports torch lazily): train, attack, fit, decide, report.
"""

from privlab.risk.adaptive import AdaptiveResult, adaptive_search, star_distribution
from privlab.risk.model import (
    POLICIES,
    Choice,
    Decision,
    Evaluation,
    Policy,
    RiskCurves,
    UtilityConfig,
    check_grid,
    choose,
    decide,
    fit_curves,
    isotonic,
    make_policy,
    normalise_weights,
    pareto_front,
    prior_sensitivity,
    utility_loss,
)
from privlab.risk.posterior import PRIORS, BetaPosterior, parse_prior, risk_from_auc

__all__ = [
    "POLICIES", "PRIORS", "AdaptiveResult", "BetaPosterior", "Choice", "Decision", "Evaluation",
    "Policy", "RiskCurves", "UtilityConfig", "adaptive_search", "check_grid", "choose", "decide",
    "fit_curves", "isotonic", "make_policy", "normalise_weights", "pareto_front", "parse_prior",
    "prior_sensitivity", "risk_from_auc", "star_distribution", "utility_loss",
]
