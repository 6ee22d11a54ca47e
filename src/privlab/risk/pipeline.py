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
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from privlab.errors import InvalidInputError, option_name
from privlab.risk.adaptive import adaptive_search
from privlab.risk.model import (
    Decision,
    Evaluation,
    Policy,
    UtilityConfig,
    check_grid,
    decide,
    fit_curves,
    normalise_weights,
    prior_sensitivity,
)
from privlab.risk.posterior import parse_prior
from privlab.risk.uncertainty import ChoiceUncertainty, choice_uncertainty

ATTACKS = ("loss", "shadow", "lira", "canary")
#: planted mislabelled records of the "canary" evidence (one-run audit), at most
CANARIES = 500
Progress = Callable[[str, int, int], None]
MIN_PART = 20  # rows per split part; below this the attack counts carry almost no evidence


@dataclass
class PipelineConfig:
    """Training and attack settings (all models of a run share them except epsilon)."""

    epsilons: Sequence[float] = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
    adaptive: bool = False
    budget_runs: int | None = None
    attacks: Sequence[str] = ("loss", "shadow")
    attack_weights: dict[str, float] | None = None
    seeds: int = 1
    model: str = "mlp"
    hidden: tuple[int, ...] = (64, 32)
    dropout: float = 0.0
    epochs: int = 10
    batch_size: int = 64
    lr: float = 1e-3
    clip: float = 1.0
    delta: float | None = None  # default: min(1e-5, 1 / (10 n)), n: public_train_size
    shadow_models: int = 4
    lira_models: int = 8
    max_rows: int | None = None
    prior: str | tuple[float, float] = "uniform"
    #: "adult": bundled Adult's public preprocessing (no ranges/categories read from the data)
    public: str | None = None
    #: a declared `privlab.schema.Schema`: features encoded from its bounds and categories, the
    #: classes are the target's declared categories (`SchemaEncoder`), nothing read from rows
    schema: Any = None
    #: with `schema`: "refuse" (one-line error) or "coerce" values outside it
    on_invalid: str = "refuse"
    #: None: CSPRNG noise and fresh initialisations (the default); an int makes the whole run
    #: reproducible (seeded DP-SGD noise: for testing only, noted in every guarantee)
    seed: int | None = None

    def model_seeds(self, base: int, count: int) -> list[int | None]:
        if self.seed is None:
            return [None] * count
        return [self.seed * 1000 + base + i for i in range(count)]

    @property
    def split_seed(self) -> int:
        return 0 if self.seed is None else self.seed

    def check(self) -> None:
        check_grid(self.epsilons)
        bad = [a for a in self.attacks if a not in ATTACKS]
        if bad or not self.attacks:
            raise InvalidInputError(f"--attacks: use a comma list of {', '.join(ATTACKS)}, got "
                                    f"{list(self.attacks)}")
        if self.model not in ("mlp", "logreg"):
            raise InvalidInputError(f"--model: use 'mlp' or 'logreg', got {self.model!r}")
        for name in ("seeds", "epochs", "batch_size", "shadow_models"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                flag = "--" + name.replace("_", "-")
                raise InvalidInputError(f"{flag} must be a whole number >= 1, got {v!r}")
        if self.lira_models < 2 or self.lira_models % 2:
            name = option_name("lira_models", "--lira-models")
            raise InvalidInputError(f"{name}: must be even and >= 2, got {self.lira_models}")
        if self.adaptive and (self.budget_runs is None or self.budget_runs < 2):
            raise InvalidInputError(f"{option_name('budget_runs', '--budget-runs')}: adaptive mode "
                                    "needs --budget-runs N >= 2")
        parse_prior(self.prior)
        if self.attack_weights is not None:
            extra = sorted(set(self.attack_weights) - set(self.attacks))
            if extra:
                raise InvalidInputError(f"attack_weights: {extra} are not among the attacks "
                                        f"{list(self.attacks)}; weight only attacks that run")
            normalise_weights(self.attack_weights, "attack_weights")


@dataclass
class Prepared:
    """Encoded arrays of the three parts and what the report says about the data."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    x_pool: np.ndarray
    y_pool: np.ndarray
    classes: list[str]
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n_classes(self) -> int:
        return len(self.classes)


def prepare(frame: pd.DataFrame, target: str, *, seed: int = 0, max_rows: int | None = None,
            fractions: tuple[float, float, float] = (0.3, 0.3, 0.4),
            public: str | None = None, schema: Any = None,
            on_invalid: str = "refuse") -> Prepared:
    """Seeded stratified split into target-train / test / attacker pool, then encoding.

    `public="adult"`: bundled Adult with the data-independent pipeline (public ranges and
    category lists, nothing read from the data). `schema`: a declared schema; the features
    are encoded from its bounds and categories and the classes are the target's declared
    categories. With neither, ranges and categories are read from the data (listed in
    `info["preprocessing_leaks"]`; the CLI refuses that for user tables)."""
    if schema is not None:
        return _prepare_with_schema(frame, target, schema, on_invalid, seed=seed,
                                    max_rows=max_rows, fractions=fractions)
    from privlab.learn.data import (
        TablePreprocessor,
        adult_features,
        adult_preprocessor,
        encode_labels,
        split_target,
    )

    if public not in (None, "adult"):
        raise InvalidInputError(f"public: only 'adult' has public metadata, got {public!r}")
    features, y_raw = split_target(frame, target)
    leaks: list[str] = []
    if public == "adult":
        from privlab.schema import bundled_schema
        from privlab.schema.facts import PublicFacts

        features = adult_features(features)
        # the class list is the bundled schema's declared target categories, never the
        # labels: a replaced label must not add or remove a class (issue 21)
        declared = PublicFacts.from_schema(bundled_schema("adult"), target=target).classes(
            f"--target {target!r}: the bundled adult schema declares no classes for it")
        y, classes = encode_labels(y_raw, declared)
    else:
        y, classes = encode_labels(y_raw)
        leaks.append(f"classes of {target!r} read from the labels")
    gen = np.random.default_rng(seed)
    order = gen.permutation(len(y))
    if max_rows is not None:
        order = order[: int(max_rows)]
    # Encode first: identical encoded rows with the same label would be a member and a
    # non-member at once (membership undefined), so keep one copy of each.
    pre = adult_preprocessor() if public == "adult" else TablePreprocessor(one_hot=True)
    x_enc = pre.fit_transform(features.iloc[order]).astype(np.float32)
    return _split_encoded(frame, target, x_enc, y, order, [str(c) for c in classes], fractions,
                          features_in=int(features.shape[1]), leaks=leaks + list(pre.leaks),
                          how="public Adult metadata" if public else "read from the data")


def _prepare_with_schema(frame: pd.DataFrame, target: str, schema: Any, on_invalid: str, *,
                         seed: int, max_rows: int | None,
                         fractions: tuple[float, float, float]) -> Prepared:
    """`prepare` with a declared schema: conform, `SchemaEncoder`, declared classes."""
    from privlab.learn.table import encode_with_schema

    if not isinstance(frame, pd.DataFrame):
        raise InvalidInputError("expected a table (pandas DataFrame) of features and target")
    enc = encode_with_schema(frame, schema, target, on_invalid)
    classes = [str(c) for c in enc.classes]
    lookup = {c: i for i, c in enumerate(classes)}
    y = np.fromiter((lookup[str(v)] for v in enc.y), dtype=np.int64, count=len(enc.y))
    order = np.random.default_rng(seed).permutation(len(y))
    if max_rows is not None:
        order = order[: int(max_rows)]
    return _split_encoded(frame, target, enc.x[order].astype(np.float32), y, order, classes,
                          fractions, features_in=len(enc.encoder.columns), leaks=[],
                          how=f"declared schema {schema.name!r}")


def _split_encoded(frame: pd.DataFrame, target: str, x_enc: np.ndarray, y: np.ndarray,
                   order: np.ndarray, classes: list[str],
                   fractions: tuple[float, float, float], *, features_in: int,
                   leaks: list[str], how: str) -> Prepared:
    """De-duplicate the encoded rows (in `order`) and split them stratified into three parts."""
    keyed = np.ascontiguousarray(np.c_[x_enc.astype(np.float64), y[order]])
    _, first = np.unique(keyed.view(np.dtype((np.void, keyed.dtype.itemsize * keyed.shape[1]))),
                         return_index=True)
    keep = np.sort(first)
    duplicates = int(len(order) - keep.size)
    order, x_all = order[keep], x_enc[keep]
    need = math.ceil(MIN_PART / min(fractions))
    if len(order) < need:
        raise InvalidInputError(
            f"data: {len(order)} rows are too few to split into target/test/attacker-pool "
            f"parts of >= {MIN_PART} rows each; give at least {need} rows")
    parts: list[list[int]] = [[], [], []]
    for c in np.unique(y[order]):  # stratified: every part gets every class
        idx = order[y[order] == c]
        cuts = np.round(np.cumsum(fractions)[:2] * idx.size).astype(int)
        for p, chunk in enumerate(np.split(idx, cuts)):
            parts[p].extend(chunk.tolist())
    idx_tr, idx_te, idx_pool = (np.sort(np.asarray(p, dtype=np.int64)) for p in parts)
    present = np.unique(y[order]).size  # a declared class may have no row at all
    for name, idx in (("target-train", idx_tr), ("test", idx_te), ("attacker pool", idx_pool)):
        if idx.size < MIN_PART or np.unique(y[idx]).size < present:
            raise InvalidInputError(
                f"data: the {name} part has {idx.size} rows or misses a class; the data set "
                f"is too small to split into target/test/attacker-pool (need >= {MIN_PART} "
                "rows of every class in each)")
    pos = {int(r): i for i, r in enumerate(order)}

    def take(idx: np.ndarray) -> np.ndarray:
        return x_all[[pos[int(r)] for r in idx]]

    info = {"rows": int(len(order)), "rows_in_file": int(len(frame)),
            "duplicates_dropped": duplicates,
            "features_in": features_in, "features_encoded": int(x_all.shape[1]),
            "target": target, "classes": list(classes),
            "class_counts": {str(classes[c]): int((y[order] == c).sum())
                             for c in range(len(classes))},
            "split": {"target_train": int(idx_tr.size), "test": int(idx_te.size),
                      "attacker_pool": int(idx_pool.size)},
            "preprocessing_leaks": leaks,
            "preprocessing": how}
    return Prepared(take(idx_tr), y[idx_tr], take(idx_te), y[idx_te], take(idx_pool),
                    y[idx_pool], list(classes), info)


# --------------------------------------------------------------------------- training & attacks
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


# --------------------------------------------------------------------------- the whole job
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
