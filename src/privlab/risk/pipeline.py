"""End to end: data -> DP-SGD models over an epsilon grid -> attacks -> risk model -> eps*.

Split (seeded, stratified): target training rows (the audited members), held-out test rows
(accuracy, and as many audited non-members as there are members), and an attacker pool the
target never sees (shadow models, reference models). Models come from `privlab.learn` (all
models of a sweep trained at once with `train_many`), attacks from `privlab.audit`:

- `loss`: Yeom's loss threshold; the decision threshold is set on attacker-side data (shadow
  model 0 when the shadow attack runs, else one reference model trained on the pool);
- `shadow`: Shokri's shadow models (trained like the target, at the same epsilon) and a
  RandomForest on their softmax outputs;
- `lira`: online LiRA with shadow models on halves of the candidates topped up from the pool;
- `canary`: the one-run audit of Steinke, Nasr and Jagielski ("Privacy Auditing with One (1)
  Training Run", NeurIPS 2023): one extra model per epsilon is trained on the target rows plus
  a random half of up to 500 mislabelled pool records (worst-case-like records); the attacker
  guesses "in" for the quarter of canaries with the lowest loss and "out" for the quarter with
  the highest; (correct, guesses) feed the risk model like any attack, and the audit's
  epsilon lower bound is reported beside it.

Each attack's (successes, trials) counts on the balanced member/non-member challenge feed the
Beta posterior. Attacks run against the first seed's model; further seeds measure accuracy
spread (stability). Torch is imported only here, lazily.

The job is three modules: `risk.prepare` (settings and the split), `risk.sweep` (models,
attacks, baselines) and this one (the whole job and its JSON result); this module re-exports
the names of the other two (their import path before issue 31).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from privlab.errors import InvalidInputError
from privlab.risk.adaptive import adaptive_search
from privlab.risk.model import (
    Decision,
    Evaluation,
    Policy,
    UtilityConfig,
    check_grid,
    decide,
    fit_curves,
    prior_sensitivity,
)
from privlab.risk.posterior import parse_prior
from privlab.risk.prepare import (
    ATTACKS,
    CANARIES,
    MIN_PART,
    PipelineConfig,
    Prepared,
    Progress,
    prepare,
)
from privlab.risk.sweep import (
    RATE_NOT_COVERED,
    TRAIN_SHARE,
    Sweep,
    baseline,
    beats_majority,
    evaluate_epsilons,
    feasible_epsilons,
    majority_baseline,
    public_train_size,
)
from privlab.risk.uncertainty import ChoiceUncertainty, choice_uncertainty


@dataclass
class ChooseResult:
    decision: Decision
    sweep: Sweep
    config: PipelineConfig
    prep_info: dict[str, Any]
    sensitivity: list[dict[str, Any]]
    notes: list[str]
    order: list[float]
    grid: list[float]
    seconds: float
    uncertainty: ChoiceUncertainty | None = None
    majority: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return result_dict(self)


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity, else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity
        return max(1, os.cpu_count() or 1)


def torch_threads_for_machine(cores: int | None = None, load: float | None = None) -> int:
    """Torch intra-op threads for the machine as found: the usable cores that the other
    work (the 1-minute load average) leaves idle, at least 1. The models are small, so
    OpenMP workers that must share a busy core spin instead of working: issue 23 measured
    a choose-epsilon run at 15 s CPU with one thread and 35-38 s with torch's default."""
    cores = usable_cores() if cores is None else max(1, int(cores))
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # pragma: no cover - no load average here
            load = 0.0
    return max(1, min(cores, int(cores - max(0.0, load))))


@contextlib.contextmanager
def machine_threads() -> Iterator[int]:
    """Run a block with `torch_threads_for_machine()` intra-op threads (restored after) and
    one inter-op thread; yields the count, 0 without torch."""
    try:
        import torch
    except ImportError:
        yield 0
        return
    threads = torch_threads_for_machine()
    with contextlib.suppress(RuntimeError):  # allowed only before any inter-op work ran
        torch.set_num_interop_threads(1)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(before)


def choose_epsilon(frame: pd.DataFrame, target: str, policy: Policy,
                   config: PipelineConfig | None = None,
                   utility: UtilityConfig | None = None, relative_utility: bool = False,
                   progress: Progress | None = None) -> ChooseResult:
    """Train, attack, fit the risk model and pick eps* (see the module docstring), with
    torch's thread count set for the machine it finds (`machine_threads`)."""
    with machine_threads():
        return _choose_epsilon(frame, target, policy, config, utility, relative_utility,
                               progress)


def _choose_epsilon(frame: pd.DataFrame, target: str, policy: Policy,
                    config: PipelineConfig | None, utility: UtilityConfig | None,
                    relative_utility: bool, progress: Progress | None) -> ChooseResult:
    cfg = config or PipelineConfig()
    cfg.check()
    started = time.perf_counter()
    grid = [float(e) for e in check_grid(cfg.epsilons)]
    prep = prepare(frame, target, seed=cfg.split_seed, max_rows=cfg.max_rows,
                   public=cfg.public, schema=cfg.schema, on_invalid=cfg.on_invalid)
    notes: list[str] = []
    if prep.info["preprocessing_leaks"]:
        notes.append("feature scaling/categories were read from the data (not covered by the "
                     "guarantee): " + "; ".join(prep.info["preprocessing_leaks"][:5]))
    grid, dropped = feasible_epsilons(prep, cfg, grid)
    notes.extend(dropped)
    total = (cfg.budget_runs if cfg.adaptive else len(grid)) + 1
    if progress:
        progress("training and attacking the non-private baseline", 0, total)
    base = baseline(prep, cfg)
    util_cfg = utility or UtilityConfig()
    if relative_utility and util_cfg.baseline_accuracy is None:
        if base["accuracy"] <= 0:
            raise InvalidInputError("relative utility: the non-private model has accuracy 0")
        util_cfg = replace(util_cfg, baseline_accuracy=base["accuracy"])
    details: dict[float, dict[str, Any]] = {}
    evaluations: list[Evaluation] = []
    if cfg.adaptive:
        def evaluate(e: float) -> Evaluation:
            evs, det = evaluate_epsilons(prep, cfg, [e], progress, (len(evaluations) + 1, total))
            evaluations.extend(evs)
            details.update(det)
            return evs[0]

        res = adaptive_search(grid, evaluate, policy, budget=int(cfg.budget_runs or 2),
                              attack_weights=cfg.attack_weights, prior=cfg.prior,
                              utility_config=util_cfg, seed=cfg.split_seed)
        order = res.order
    else:
        evaluations, details = evaluate_epsilons(prep, cfg, grid, progress, (1, total))
        order = list(grid)
    for e in evaluations:
        failed = [a for a in cfg.attacks if a not in e.counts]
        for a in failed:
            notes.append(f"eps={e.epsilon:g}: attack {a!r} failed: "
                         f"{details[e.epsilon]['attacks'].get(a, {}).get('error', 'no result')}")
    if progress:
        progress("fitting the risk model", total, total)
    curves = fit_curves(evaluations, attack_weights=cfg.attack_weights, prior=cfg.prior,
                        level=policy.level, seed=cfg.split_seed)
    if curves.dropped_attacks:
        notes.append(f"attacks {curves.dropped_attacks} left out of the risk: they did not "
                     "produce counts at every epsilon")
    decision = decide(curves, policy, util_cfg)
    sens = prior_sensitivity(evaluations, policy, attack_weights=cfg.attack_weights,
                             utility_config=util_cfg, seed=cfg.split_seed)
    runs = len(evaluations) * cfg.seeds + cfg.seeds
    sweep = Sweep(evaluations, details, base, runs)
    by_eps = {e.epsilon: e.accuracy for e in evaluations}
    unc = choice_uncertainty(curves, [by_eps[float(e)] for e in curves.epsilons], policy,
                             util_cfg, seed=cfg.split_seed,
                             correct=_correct_rows(details, curves.epsilons))
    if cfg.seeds < 2:
        notes.append("one model per epsilon: the accuracy noise between training runs is not "
                     "measured, so the interval and probabilities reflect the attack evidence "
                     "only; use --seeds 4 or more")
    notes.extend(_chance_notes(evaluations, details, cfg))
    return ChooseResult(decision, sweep, cfg, prep.info, sens, notes, order, grid,
                        time.perf_counter() - started, unc, majority_baseline(prep))


def _correct_rows(details: dict[float, dict[str, Any]], epsilons: Any
                  ) -> list[np.ndarray] | None:
    """Per-record correctness of every epsilon's models, or None when any is missing."""
    rows = [details.get(float(e), {}).get("correct") for e in epsilons]
    return None if any(r is None for r in rows) else rows


def _chance_notes(evaluations: Sequence[Evaluation], details: dict[float, dict[str, Any]],
                  cfg: PipelineConfig) -> list[str]:
    """Say plainly when no attack did better than guessing: such a test bounds nothing."""
    from privlab.audit.epsilon import cp_lower

    beaten = []
    tests = max(1, sum(len(e.counts) for e in evaluations))
    for e in evaluations:  # Bonferroni: 95% confidence over all the tests together
        for a, (k, n) in e.counts.items():
            if n and float(cp_lower(k, n, 0.05 / tests)) > 0.5:
                beaten.append(f"{a} at eps={e.epsilon:g}")
    if beaten:
        return [f"attacks better than guessing (95% confidence): {', '.join(beaten)}"]
    return ["every membership attack was at chance (no success rate is above 50% with 95% "
            "confidence, Bonferroni-corrected over attacks and epsilons) at every epsilon: "
            "the attacks show no measurable leak, but a membership attack is only a lower "
            "bound on what an attacker can learn, and at chance it bounds nothing; the risk "
            "curve is flat within its noise and the choice rests on accuracy"]


def _f(v: Any) -> Any:
    if isinstance(v, float | np.floating):
        return None if not math.isfinite(float(v)) else float(v)
    return v


def result_dict(r: ChooseResult) -> dict[str, Any]:
    """The JSON document (validated by `schema/choose_epsilon.schema.json`)."""
    d, c = r.decision, r.decision.curves
    rows = []
    for i, e in enumerate(c.epsilons):
        det = r.sweep.details.get(float(e), {})
        rows.append({
            "epsilon": float(e),
            "accuracy": float(c.accuracy_raw[i]), "accuracy_smoothed": float(c.accuracy[i]),
            "accuracy_std": float(c.accuracy_std[i]),
            "accuracy_seeds": [float(a) for a in det.get("accuracy_seeds", [])],
            "risk_mean": float(c.risk_mean[i]), "risk_upper": float(c.risk_upper[i]),
            "risk_lower": float(c.risk_lower[i]), "risk_mean_raw": float(c.risk_mean_raw[i]),
            "risk_upper_raw": float(c.risk_upper_raw[i]),
            "utility_loss": float(d.utility[i]),
            "loss_mean_rule": float(d.mean_rule.loss[i]),
            "loss_risk_averse": float(d.risk_averse.loss[i]),
            "feasible_mean_rule": bool(d.mean_rule.feasible[i]),
            "feasible_risk_averse": bool(d.risk_averse.feasible[i]),
            "pareto": bool(i in set(d.pareto.tolist())),
            "attacks": {a: {**c.posteriors[a][i].summary(c.level),
                            "auc": _f(next((ev.auc.get(a) for ev in r.sweep.evaluations
                                            if ev.epsilon == e), None))}
                        for a in c.attacks},
            "guarantee": det.get("guarantee"),
            "train_seconds": float(c.train_seconds[i]),
            "better_than_baseline": det.get("better_than_baseline"),
        })
    cfg = asdict(r.config)
    cfg["epsilons"] = list(r.config.epsilons)
    cfg["attacks"] = list(r.config.attacks)
    cfg["hidden"] = list(r.config.hidden)
    cfg["prior"] = list(parse_prior(r.config.prior)) if not isinstance(r.config.prior, str) \
        else r.config.prior
    unc = r.uncertainty.to_dict() if r.uncertainty is not None else None
    chosen = unc["recommended_epsilon"] if unc else d.chosen_epsilon
    reason = unc["reason"] if unc else d.risk_averse.reason
    learnt_nothing = _learnt_nothing(rows, chosen, r.majority)
    if learnt_nothing is not None:
        chosen, reason = None, learnt_nothing
    return {
        "chosen_epsilon": chosen,
        "rule": "stable_one_se" if unc else "risk_averse",
        "argmin_epsilon": d.chosen_epsilon,
        "argmin_reason": d.risk_averse.reason,
        "uncertainty": unc,
        "mean_rule_epsilon": d.mean_rule.epsilon,
        "reason": reason,
        "majority_baseline": r.majority,
        "learnt_nothing": learnt_nothing is not None,
        "mean_rule_reason": d.mean_rule.reason,
        "policy": d.policy.to_dict(),
        "utility": {"baseline_accuracy": d.utility_config.baseline_accuracy,
                    "w_stability": d.utility_config.w_stability,
                    "w_cost": d.utility_config.w_cost},
        "prior": {"alpha": c.prior[0], "beta": c.prior[1],
                  "name": r.config.prior if isinstance(r.config.prior, str) else "custom"},
        "credible_level": c.level,
        "attack_weights": c.attack_weights,
        "grid": r.grid,
        "evaluated_order": r.order,
        "adaptive": r.config.adaptive,
        "training_runs": r.sweep.training_runs,
        "per_epsilon": rows,
        "pareto_epsilons": [float(c.epsilons[i]) for i in d.pareto],
        "prior_sensitivity": r.sensitivity,
        "baseline": r.sweep.baseline,
        "data": r.prep_info,
        "settings": cfg,
        "attack_details": {f"{e:g}": v.get("attacks", {}) for e, v in r.sweep.details.items()},
        "notes": r.notes,
        "seconds": r.seconds,
    }


def _learnt_nothing(rows: Sequence[dict[str, Any]], chosen: float | None,
                    majority: dict[str, Any] | None) -> str | None:
    """Why no epsilon is recommended when the models at the would-be choice are no better than
    the majority-class baseline (their accuracy then says nothing about the privacy-utility
    trade-off), else None."""
    from privlab.learn.baseline import no_better_text

    if chosen is None or majority is None:
        return None
    row = next((x for x in rows if x["epsilon"] == chosen), None)
    if row is None or row.get("better_than_baseline") is not False:
        return None
    better = [f"{x['epsilon']:g}" for x in rows if x.get("better_than_baseline")]
    return (f"no recommendation: the models at epsilon {chosen:g} (accuracy "
            f"{row['accuracy']:.3f}) are {no_better_text(majority['majority_class'])} "
            f"(majority-class baseline {majority['accuracy']:.3f} on the same test rows): they "
            "learnt nothing, so their accuracy cannot justify an epsilon; "
            + (f"models beat the baseline only at epsilon {', '.join(better)}; " if better
               else "no epsilon's models beat it; ")
            + "train longer (--epochs), on more rows, or try another --model or --lr")


__all__ = [
    "ATTACKS", "CANARIES", "MIN_PART", "RATE_NOT_COVERED", "TRAIN_SHARE", "ChooseResult",
    "PipelineConfig", "Prepared", "Progress", "Sweep", "baseline", "beats_majority",
    "choose_epsilon", "evaluate_epsilons", "feasible_epsilons", "machine_threads",
    "majority_baseline", "prepare", "public_train_size", "result_dict",
    "torch_threads_for_machine", "usable_cores",
]
