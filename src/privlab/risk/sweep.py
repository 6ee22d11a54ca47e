"""The sweep of the choose-epsilon job: DP-SGD models over the epsilon grid (`privlab.learn`,
all models of a sweep trained at once), the attacks of `privlab.audit` on them, and the
non-private and majority-class baselines; each attack gives (successes, trials) for the risk
model. What the attacks are is described in `privlab.risk.pipeline`'s docstring.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privlab.errors import InvalidInputError
from privlab.risk.model import (
    Evaluation,
)
from privlab.risk.prepare import (
    CANARIES,
    PipelineConfig,
    Prepared,
    Progress,
)


def _model_fn(prep: Prepared, cfg: PipelineConfig) -> Callable[[], Any]:
    from privlab.learn.models import LogisticModel, SeedMLP

    d, k = prep.x_train.shape[1], prep.n_classes
    if cfg.model == "logreg":
        return lambda: LogisticModel(d, k)
    return lambda: SeedMLP(d, cfg.hidden, k, dropout=cfg.dropout)


#: What choose-epsilon's per-epsilon guarantees leave out when no public size is known.
RATE_NOT_COVERED = ("sample_rate, batch size and default delta (from the exact size of the "
                    "target-train part: pass --max-rows or a schema with public_size)")
#: The target-train share of the split (`prepare`'s default fractions).
TRAIN_SHARE = 0.3


def public_train_size(cfg: PipelineConfig) -> int | None:
    """A public size for the simulated target's training part: the target-train share of
    `max_rows` (an option) or of the schema's `public_size`; None when neither is known. Any
    data-independent size keeps DP-SGD's accounting valid (the rate need not be batch/n)."""
    total = cfg.max_rows
    if total is None and cfg.schema is not None:
        from privlab.schema.facts import PublicFacts

        total = PublicFacts.from_schema(cfg.schema).optional("size")
    return None if total is None else max(2, round(TRAIN_SHARE * int(total)))


def _train_config(prep: Prepared, cfg: PipelineConfig, epsilon: float | None) -> Any:
    from privlab.learn.dpsgd import TrainConfig

    public = public_train_size(cfg)
    # without a public size the exact split size sets the rate (named in not_covered,
    # RATE_NOT_COVERED); TrainConfig needs the size passed explicitly either way
    n = len(prep.y_train) if public is None else public
    delta = cfg.delta if cfg.delta is not None else min(1e-5, 1.0 / (10 * n))
    bs = min(cfg.batch_size, max(1, n // 2))
    if epsilon is None:
        return TrainConfig(method="none", epochs=cfg.epochs, batch_size=bs, lr=cfg.lr)
    return TrainConfig(method="dpsgd", epsilon=float(epsilon), delta=delta, clip=cfg.clip,
                       epochs=cfg.epochs, batch_size=bs, lr=cfg.lr, public_size=n,
                       public_size_source="rows" if public is None else "public")


def feasible_epsilons(prep: Prepared, cfg: PipelineConfig,
                      grid: Sequence[float]) -> tuple[list[float], list[str]]:
    """Drop grid points DP-SGD cannot train at (noise would swamp every update), with why."""
    from privlab.learn.dpsgd import plan_dpsgd

    ok, notes = [], []
    for e in grid:
        try:
            plan_dpsgd(len(prep.y_train), _train_config(prep, cfg, e))
            ok.append(float(e))
        except InvalidInputError as exc:
            notes.append(f"eps={e:g} dropped from the grid: {exc}")
    if not ok:
        raise InvalidInputError("epsilons: no epsilon on the grid can be trained on this data ("
                                + "; ".join(notes) + ")")
    return ok, notes


def _correct(model: Any, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per test record: 1.0 when the model's prediction is right (for paired bootstraps)."""
    from privlab.audit.target import as_target

    return (as_target(model).log_proba(x).argmax(1) == y).astype(np.float64)


def _accuracy(model: Any, x: np.ndarray, y: np.ndarray) -> float:
    from privlab.audit.target import as_target

    lp = as_target(model).log_proba(x)
    return float((lp.argmax(1) == y).mean())


def _attack(prep: Prepared, cfg: PipelineConfig, model: Any, train_cfg: Any,
            extra_models: Sequence[Any] = ()
            ) -> tuple[dict[str, tuple[int, int]], dict[str, float], dict[str, Any]]:
    """Run the configured attacks on one target; failures are recorded, not raised.

    `extra_models` (the other seeds' models at the same epsilon) are attacked with the loss
    attack only, reusing its attacker-side threshold. The loss attack's success count becomes
    the average over the models (rounded) out of the same number of challenge records: the
    guesses on one record by several models are not independent, so they are averaged, not
    added (adding them would claim more evidence than the challenge set holds). Averaging
    removes the training noise of a single model from the risk estimate at almost no cost."""
    from privlab.audit import attacks as A
    from privlab.audit.trainers import TorchTrainer

    n_in = len(prep.y_train)
    members = (prep.x_train, prep.y_train)
    non = (prep.x_test[:n_in], prep.y_test[:n_in])
    pool = (prep.x_pool, prep.y_pool)
    trainer = TorchTrainer(_model_fn(prep, cfg), train_cfg, prep.n_classes)
    counts: dict[str, tuple[int, int]] = {}
    aucs: dict[str, float] = {}
    details: dict[str, Any] = {}
    results: dict[str, Any] = {}
    order = [a for a in ("shadow", "loss", "lira") if a in cfg.attacks]
    pooled: list[tuple[int, int]] = []
    for name in order:
        try:
            if name == "shadow":
                res = A.shadow_attack(model, members, non, pool, trainer,
                                      n_shadow=cfg.shadow_models, shadow_size=n_in,
                                      rng=cfg.split_seed)
            elif name == "loss":
                calib = results["shadow"].calibration if "shadow" in results else \
                    A.reference_calibration(trainer, pool, n_in, rng=cfg.split_seed)
                res = A.threshold_attack("loss", model, members, non, calibration=calib)
                for extra in extra_models:
                    more = A.threshold_attack("loss", extra, members, non,
                                              calibration=calib).summary().get("counts")
                    if more:
                        pooled.append((int(more["successes"]), int(more["trials"])))
            else:
                res = A.lira(model, members, non, trainer, n_shadow=cfg.lira_models, pool=pool,
                             rng=cfg.split_seed)
            results[name] = res
            s = res.summary()
            aucs[name] = float(s["auc"])
            entry = {"auc": s["auc"], "advantage": s["advantage"],
                     "tpr_at_fpr": s["tpr_at_fpr"], "details": res.details,
                     "notes": list(s.get("notes", [])) + list(res.notes)}
            if "counts" in s:
                c = s["counts"]
                counts[name] = (int(c["successes"]), int(c["trials"]))
                if name == "loss" and pooled:
                    ks = [counts[name][0]] + [k for k, n in pooled if n == counts[name][1]]
                    counts[name] = (int(round(float(np.mean(ks)))), counts[name][1])
                    c = {**c, "successes": counts[name][0], "models_averaged": len(ks)}
                entry.update(counts=c, threshold=s["threshold"],
                             balanced_accuracy=s["balanced_accuracy"])
            else:
                entry["error"] = "no attacker-side decision threshold: no counts"
            details[name] = entry
        except (InvalidInputError, ValueError, RuntimeError) as exc:
            details[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return counts, aucs, details


@dataclass
class Sweep:
    """Everything measured: one Evaluation per epsilon plus per-epsilon details."""

    evaluations: list[Evaluation]
    details: dict[float, dict[str, Any]]
    baseline: dict[str, Any] | None
    training_runs: int = 0


def evaluate_epsilons(prep: Prepared, cfg: PipelineConfig, epsilons: Sequence[float],
                      progress: Progress | None = None, step: tuple[int, int] = (0, 1)
                      ) -> tuple[list[Evaluation], dict[float, dict[str, Any]]]:
    """Train `seeds` DP models at each epsilon (all at once) and attack the first of each."""
    from privlab.learn.multi import train_many

    fn = _model_fn(prep, cfg)
    configs = [_train_config(prep, cfg, e) for e in epsilons for _ in range(cfg.seeds)]
    seeds = cfg.model_seeds(17 * int(round(1000 * min(epsilons))), len(configs))
    if progress:
        which = ",".join(f"{e:g}" for e in epsilons)
        progress(f"training {len(configs)} DP model(s) at eps={which}", step[0], step[1])
    t0 = time.perf_counter()
    each_epoch = None
    if progress:
        def each_epoch(epoch: int, epochs: int, row: Any) -> None:
            # epochs are fixed by the options; the metrics row is private and not shown
            progress(f"training {len(configs)} DP model(s) at eps={which}, epoch "
                     f"{epoch}/{epochs}", step[0], step[1])
    res = train_many(fn, prep.x_train, prep.y_train, config=configs, seeds=seeds,
                     progress=each_epoch)
    per_model = (time.perf_counter() - t0) / len(configs)
    canary = _canary_evidence(prep, cfg, epsilons) if "canary" in cfg.attacks else {}
    evs, details = [], {}
    for j, e in enumerate(epsilons):
        models = res.models[j * cfg.seeds:(j + 1) * cfg.seeds]
        hits = np.stack([_correct(m, prep.x_test, prep.y_test) for m in models])
        accs = [float(h.mean()) for h in hits]
        if progress:
            progress(f"attacking the eps={e:g} model ({', '.join(cfg.attacks)})",
                     step[0] + j, step[1])
        counts, aucs, det = _attack(prep, cfg, models[0], configs[j * cfg.seeds], models[1:])
        if float(e) in canary:
            c = canary[float(e)]
            counts["canary"] = (c["counts"]["successes"], c["counts"]["trials"])
            aucs["canary"] = c["auc"]
            det["canary"] = c
        g = res.guarantees[j * cfg.seeds]
        if g.is_dp and public_train_size(cfg) is None:
            g = g.with_not_covered(RATE_NOT_COVERED)
        evs.append(Evaluation(float(e), counts, accs, per_model * cfg.seeds, aucs))
        details[float(e)] = {"guarantee": g.to_dict(), "guarantee_text": g.describe(),
                             "plan": res.plans[j * cfg.seeds].to_dict(), "attacks": det,
                             "accuracy_seeds": accs, "correct": hits.mean(0),
                             "better_than_baseline": beats_majority(prep, hits)}
    return evs, details


def majority_baseline(prep: Prepared) -> dict[str, Any]:
    """Always predicting the target-train part's majority class, scored on the same test rows
    as every model (exact, like the models' accuracies: an evaluation, not a release)."""
    from privlab.learn.baseline import majority_class

    code = int(majority_class(prep.y_train.tolist()))
    return {"majority_class": prep.classes[code], "accuracy": float(np.mean(prep.y_test == code)),
            "measured": "the target-train part's majority class, scored on the test rows "
                        "(exact, like every accuracy of this run)"}


def beats_majority(prep: Prepared, hits: np.ndarray) -> bool:
    """Do these models (rows of per-record correctness) beat the majority baseline? One-sided
    exact McNemar on the test records (`privlab.learn.baseline.beats_exact`)."""
    from privlab.learn.baseline import beats_exact, majority_class

    code = int(majority_class(prep.y_train.tolist()))
    return beats_exact(np.asarray(hits) > 0.5, prep.y_test == code)


def _canary_evidence(prep: Prepared, cfg: PipelineConfig, epsilons: Sequence[float]
                     ) -> dict[float, dict[str, Any]]:
    """One-run canary audit per epsilon (see the module docstring); all models at once."""
    from privlab.audit.canary import make_canaries, one_run_from_scores
    from privlab.audit.metrics import auc
    from privlab.audit.target import as_target
    from privlab.learn.multi import train_many

    m = min(CANARIES, len(prep.y_pool))
    cx, cy = make_canaries(prep.x_pool, prep.y_pool, m, prep.n_classes, seed=cfg.split_seed)
    inc = np.random.default_rng(cfg.split_seed + 1).random(m) < 0.5
    xa = np.concatenate([prep.x_train, cx[inc]]).astype(np.float32)
    ya = np.r_[prep.y_train, cy[inc]].astype(prep.y_train.dtype)
    configs = [_train_config(prep, cfg, e) for e in epsilons]
    res = train_many(_model_fn(prep, cfg), xa, ya, config=configs,
                     seeds=cfg.model_seeds(77_000, len(configs)))
    out = {}
    for e, model, tc in zip(epsilons, res.models, configs, strict=True):
        scores = -as_target(model).stats(cx, cy).loss
        audit = one_run_from_scores(scores, inc, delta=tc.delta,
                                    guess_fractions=(0.05, 0.1, 0.2, 0.5))
        half = next(r for r in audit["per_fraction"] if r["fraction"] == 0.5)
        out[float(e)] = {"counts": {"successes": int(half["correct"]),
                                    "trials": int(half["guesses"])},
                         "auc": float(auc(scores[inc], scores[~inc])),
                         "epsilon_lower_bound": float(audit["best"]["epsilon"]),
                         "canaries": m, "included": int(inc.sum()), "audit": audit}
    return out


def baseline(prep: Prepared, cfg: PipelineConfig) -> dict[str, Any]:
    """The non-private model (deliberately the same training, no clipping or noise), attacked."""
    import warnings

    from privlab.learn.multi import train_many

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tc = _train_config(prep, cfg, None)
        res = train_many(_model_fn(prep, cfg), prep.x_train, prep.y_train, config=tc,
                         seeds=cfg.model_seeds(999, cfg.seeds))
        accs = [_accuracy(m, prep.x_test, prep.y_test) for m in res.models]
        hits = np.stack([_correct(m, prep.x_test, prep.y_test) for m in res.models])
        train_acc = _accuracy(res.models[0], prep.x_train, prep.y_train)
        counts, aucs, det = _attack(prep, cfg, res.models[0], tc)
    return {"accuracy": float(np.mean(accs)), "accuracy_seeds": accs, "train_accuracy": train_acc,
            "better_than_baseline": beats_majority(prep, hits),
            "attacks": det, "counts": {k: list(v) for k, v in counts.items()}, "auc": aucs,
            "guarantee": res.guarantees[0].to_dict(),
            "guarantee_text": res.guarantees[0].describe()}
