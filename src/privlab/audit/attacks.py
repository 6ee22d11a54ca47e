"""Membership inference attacks on any classifier.

All attacks score each audited record (higher = "member") from the target model's output on
it. Figures that do not need a decision (ROC, AUC, advantage, TPR at fixed FPR) are computed
over all thresholds. The DECISION threshold ("member" if score >= t), which gives balanced
accuracy and the (successes, trials) counts, is chosen on attacker-side data only:

- threshold attacks (Yeom loss, max confidence, entropy, modified entropy): on a reference
  model the attacker trains on its own pool (`reference_calibration`; the shadow attack's
  first shadow model can serve);
- shadow attack (Shokri et al. 2017): the attack classifier's own rule (P(member) >= 0.5);
- LiRA (Carlini et al. 2022): leave-one-out, treating shadow model 0 as a pseudo-target
  whose members the attacker knows, scored with the other shadow models.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats as sstats

from privlab.audit.epsilon import EmpiricalEpsilon, empirical_epsilon
from privlab.audit.metrics import DEFAULT_FPRS, best_threshold, summarise
from privlab.audit.target import RecordStats, TargetModel, as_target, check_labels
from privlab.audit.trainers import ShadowTrainer
from privlab.errors import InvalidInputError

# --------------------------------------------------------------------------- inputs


@dataclass
class Records:
    """Feature rows and integer labels of one group (members, non-members or a pool)."""

    x: np.ndarray
    y: np.ndarray

    def __len__(self) -> int:
        return len(self.y)


def as_records(data: Any, field_name: str) -> Records:
    """(X, y) pair or Records -> Records with float32 rows and int64 labels."""
    if isinstance(data, Records):
        x, y = data.x, data.y
    else:
        try:
            x, y = data
        except (TypeError, ValueError):
            raise InvalidInputError(f"{field_name} must be a pair (X, y)") from None
    if hasattr(x, "to_numpy"):
        x = x.to_numpy()
    try:
        xa = np.asarray(x, dtype=np.float32)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{field_name} X has non-numeric values; encode them the way "
                                "the model was trained") from None
    if xa.ndim < 2 or len(xa) == 0:
        raise InvalidInputError(f"{field_name} X must be a non-empty 2-D array, got shape "
                                f"{xa.shape}")
    ya = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y)
    if ya.ndim != 1 or len(ya) != len(xa):
        raise InvalidInputError(f"{field_name} y must have one label per row of X "
                                f"({len(xa)}), got shape {ya.shape}")
    if not np.all(np.isfinite(xa)):
        raise InvalidInputError(f"{field_name} X has missing or infinite values")
    if ya.dtype.kind not in "iub":
        ya = check_labels(ya, int(np.nanmax(ya)) + 1 if len(ya) else 1, len(ya))
    return Records(xa, ya.astype(np.int64))


def _row_keys(r: Records) -> np.ndarray:
    flat = np.ascontiguousarray(np.c_[r.x.reshape(len(r), -1).astype(np.float64), r.y])
    return flat.view(np.dtype((np.void, flat.dtype.itemsize * flat.shape[1]))).ravel()


def check_disjoint(members: Records, nonmembers: Records) -> None:
    """A record both in and out makes its membership undefined: refuse."""
    both = np.intersect1d(_row_keys(members), _row_keys(nonmembers))
    if both.size:
        raise InvalidInputError(
            f"members and non-members overlap ({both.size} identical rows with the same label); "
            "a record cannot be both: remove duplicates before splitting "
            "(e.g. frame.drop_duplicates())")


# --------------------------------------------------------------------------- results


@dataclass
class AttackResult:
    """Scores of one attack on members and non-members, and its attacker-side threshold."""

    name: str
    scores_in: np.ndarray
    scores_out: np.ndarray
    threshold: float | None = None
    details: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: attacker-side reference outputs this attack produced (reused by threshold attacks)
    calibration: Calibration | None = field(default=None, repr=False)

    def summary(self, fprs: Sequence[float] = DEFAULT_FPRS) -> dict[str, Any]:
        return summarise(self.scores_in, self.scores_out, fprs, self.threshold)

    def empirical_epsilon(self, delta: float = 0.0, **kw: Any) -> EmpiricalEpsilon:
        return empirical_epsilon(self.scores_in, self.scores_out, delta, **kw)

    def to_dict(self, fprs: Sequence[float] = DEFAULT_FPRS, delta: float = 0.0,
                level: float = 0.95, method: str = "holdout") -> dict[str, Any]:
        out = {"attack": self.name, **self.summary(fprs)}
        eps = self.empirical_epsilon(delta, level=level, method=method)
        out["empirical_epsilon"] = eps.to_dict()
        out["details"] = self.details
        out["notes"] = list(out.get("notes", [])) + self.notes
        if self.threshold is None:
            out["notes"].append("no attacker-side decision threshold (give a pool and a "
                                "trainer): balanced accuracy and counts not reported")
        return out


@dataclass
class Calibration:
    """A reference model's outputs on records the attacker knows are in / out of its training."""

    stats_in: RecordStats
    stats_out: RecordStats
    source: str


# --------------------------------------------------------------------------- threshold attacks

SCORES: dict[str, Callable[[RecordStats], np.ndarray]] = {
    "loss": lambda s: -s.loss,
    "confidence": lambda s: s.confidence,
    "entropy": lambda s: -s.entropy,
    "mentr": lambda s: -s.modified_entropy,
}
DESCRIPTIONS = {
    "loss": "Yeom et al. 2018: low cross-entropy loss = member",
    "confidence": "maximum class probability: high = member (label-free)",
    "entropy": "prediction entropy: low = member (label-free)",
    "mentr": "modified entropy (Song & Mittal 2021): low = member (label-aware)",
}


def threshold_attack(kind: str, target: Any, members: Any, nonmembers: Any, *,
                     calibration: Calibration | None = None) -> AttackResult:
    """Score = a statistic of the target's output; threshold from `calibration` if given."""
    if kind not in SCORES:
        raise InvalidInputError(f"threshold attack must be one of {sorted(SCORES)}, got {kind!r}")
    tm = as_target(target)
    mem, non = as_records(members, "members"), as_records(nonmembers, "non-members")
    check_disjoint(mem, non)
    fn = SCORES[kind]
    s_in, s_out = fn(tm.stats(mem.x, mem.y)), fn(tm.stats(non.x, non.y))
    thr = None
    if calibration is not None:
        thr = best_threshold(fn(calibration.stats_in), fn(calibration.stats_out))
    details = {"description": DESCRIPTIONS[kind]}
    if calibration is not None:
        details["threshold_source"] = calibration.source
    return AttackResult(kind, s_in, s_out, thr, details)


def stratified_subset(y: np.ndarray, size: int, gen: np.random.Generator
                      ) -> tuple[np.ndarray, np.ndarray]:
    """`size` rows with class proportions kept (largest remainder), and the other rows."""
    classes, counts = np.unique(y, return_counts=True)
    exact = counts * size / len(y)
    take = np.floor(exact).astype(int)
    short = size - take.sum()
    take[np.argsort(-(exact - take))[:short]] += 1
    ins, outs = [], []
    for c, k in zip(classes, take, strict=True):
        idx = gen.permutation(np.flatnonzero(y == c))
        ins.append(idx[:k])
        outs.append(idx[k:])
    return np.sort(np.concatenate(ins)), np.sort(np.concatenate(outs))


def _check_pool_classes(pool: Records, labels: np.ndarray, what: str) -> None:
    have = set(np.unique(pool.y).tolist())
    need = sorted(set(np.unique(labels).tolist()) - have)
    if need:
        raise InvalidInputError(
            f"classes {need} of the audited records are missing from the {what} pool; the "
            "shadow models could not learn them: add pool rows of every class")


def reference_calibration(trainer: ShadowTrainer, pool: Any, size: int, *,
                          rng: int = 0) -> Calibration:
    """Train ONE reference model on `size` pool rows; the rest are its known non-members."""
    p = as_records(pool, "pool")
    if len(p) < 4:
        raise InvalidInputError("the attacker pool needs at least 4 rows")
    size = max(2, min(int(size), len(p) // 2))
    gen = np.random.default_rng(rng)
    ins, outs = stratified_subset(p.y, size, gen)
    outs = gen.permutation(outs)[:size]
    lp = trainer.fit_predict(p.x, p.y, [ins], p.x, seed=rng)[0]
    return Calibration(RecordStats.from_log_proba(lp[ins], p.y[ins]),
                       RecordStats.from_log_proba(lp[outs], p.y[outs]),
                       f"reference model trained on {size} attacker-pool rows")


# --------------------------------------------------------------------------- shadow attack


def shadow_features(stats: RecordStats, kind: str) -> np.ndarray:
    """'softmax': the probability vector (the features of Shokri, Stronati, Song and
    Shmatikov, "Membership Inference Attacks Against Machine Learning Models", IEEE S&P 2017).
    'label': probabilities, one-hot label, log p_y, logit-scaled confidence, modified entropy
    (what an attacker who knows the record's label can use)."""
    p = stats.proba
    if kind == "softmax":
        return p
    if kind == "label":
        k = p.shape[1]
        onehot = np.eye(k)[stats.labels]
        return np.c_[p, onehot, stats.true_log_proba, np.clip(stats.phi, -1e6, 1e6),
                     stats.modified_entropy]
    raise InvalidInputError(f"shadow features must be 'softmax' or 'label', got {kind!r}")


def shadow_attack(target: Any, members: Any, nonmembers: Any, pool: Any,
                  trainer: ShadowTrainer, *, n_shadow: int = 5, shadow_size: int | None = None,
                  per_class: bool = False, features: str = "softmax",
                  n_estimators: int = 200, max_depth: int | None = None,
                  rng: int = 0) -> AttackResult:
    """Shokri et al.: k shadow models on random halves of the attacker pool, a RandomForest on
    their outputs (in = trained on, out = not), applied to the target's outputs."""
    from sklearn.ensemble import RandomForestClassifier

    if not (isinstance(n_shadow, int) and n_shadow >= 1):
        raise InvalidInputError(f"--shadow-models must be an integer >= 1, got {n_shadow!r}")
    tm = as_target(target)
    mem, non = as_records(members, "members"), as_records(nonmembers, "non-members")
    p = as_records(pool, "pool")
    check_disjoint(mem, non)
    labels = np.r_[mem.y, non.y]
    _check_pool_classes(p, labels, "shadow")
    if len(p) < 4:
        raise InvalidInputError("the shadow pool needs at least 4 rows")
    size = len(p) // 2 if shadow_size is None else int(shadow_size)
    size = max(2, min(size, len(p) // 2))
    if per_class:
        small = [int(c) for c, n in zip(*np.unique(p.y, return_counts=True), strict=True)
                 if n * size / len(p) < 2]
        if small:
            raise InvalidInputError(f"per-class shadow attack: classes {small} have too few pool "
                                    "rows for in and out examples; add rows or drop per_class")
    gen = np.random.default_rng(rng)
    splits = []
    for _ in range(n_shadow):
        ins, outs = stratified_subset(p.y, size, gen)
        splits.append((ins, gen.permutation(outs)[:size]))
    lp = trainer.fit_predict(p.x, p.y, [s[0] for s in splits], p.x, seed=rng)
    if lp.shape[2] != tm.log_proba(mem.x[:1]).shape[1]:
        raise InvalidInputError(f"shadow models output {lp.shape[2]} classes but the target "
                                f"outputs {tm.log_proba(mem.x[:1]).shape[1]}")
    feats, lab, cls = [], [], []
    for m, (ins, outs) in enumerate(splits):
        for idx, flag in ((ins, 1), (outs, 0)):
            st = RecordStats.from_log_proba(lp[m][idx], p.y[idx])
            feats.append(shadow_features(st, features))
            lab.append(np.full(idx.size, flag))
            cls.append(p.y[idx])
    fx, fy, fc = np.concatenate(feats), np.concatenate(lab), np.concatenate(cls)

    def forest(seed: int) -> Any:
        return RandomForestClassifier(n_estimators=n_estimators, max_depth=max_depth,
                                      random_state=seed, n_jobs=1, min_samples_leaf=1)

    tin, tout = tm.stats(mem.x, mem.y), tm.stats(non.x, non.y)
    xin, xout = shadow_features(tin, features), shadow_features(tout, features)
    s_in, s_out = np.zeros(len(mem)), np.zeros(len(non))
    if per_class:
        for c in np.unique(labels):
            model = forest(rng + int(c)).fit(fx[fc == c], fy[fc == c])
            col = list(model.classes_).index(1) if 1 in model.classes_ else None
            for xs, ys, out in ((xin, mem.y, s_in), (xout, non.y, s_out)):
                sel = ys == c
                if sel.any():
                    out[sel] = model.predict_proba(xs[sel])[:, col] if col is not None else 0.0
    else:
        model = forest(rng).fit(fx, fy)
        s_in = model.predict_proba(xin)[:, 1]
        s_out = model.predict_proba(xout)[:, 1]
    calib = Calibration(RecordStats.from_log_proba(lp[0][splits[0][0]], p.y[splits[0][0]]),
                        RecordStats.from_log_proba(lp[0][splits[0][1]], p.y[splits[0][1]]),
                        f"shadow model 0 ({size} attacker-pool rows in, {size} out)")
    details = {"shadow_models": n_shadow, "shadow_train_size": size, "features": features,
               "per_class": per_class, "attack_model": f"RandomForest({n_estimators})",
               "attack_train_rows": int(fx.shape[0])}
    return AttackResult("shadow" if features == "softmax" else f"shadow_{features}", s_in,
                        s_out, 0.5, details, calibration=calib)


# --------------------------------------------------------------------------- LiRA


def _gauss_fit(phi: np.ndarray, mask: np.ndarray, fixed: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per-record mean and std of phi over the models where mask is True (axis 0)."""
    cnt = mask.sum(0)
    if np.any(cnt == 0):
        raise InvalidInputError("some audited records have no shadow model on one side; use "
                                "more shadow models")
    mu = np.where(mask, phi, 0.0).sum(0) / cnt
    dev = np.where(mask, phi - mu, 0.0)
    if fixed:
        dof = int(mask.sum() - mask.shape[1])
        # one model per record: no spread to estimate; a common scale leaves the ranking (and
        # so every TPR at a fixed FPR) unchanged, so 1 is as good as any
        sd = np.full(mu.shape, math.sqrt(float((dev ** 2).sum()) / dof) if dof > 0 else 1.0)
    else:
        sd = np.sqrt((dev ** 2).sum(0) / np.maximum(cnt - 1, 1))
    return mu, np.maximum(sd, 1e-6)


def lira_scores(phi_target: np.ndarray, phi_shadow: np.ndarray, in_mask: np.ndarray, *,
                online: bool, fixed_variance: bool) -> np.ndarray:
    """Online: log N(phi; mu_in, s_in) - log N(phi; mu_out, s_out). Offline: the one-sided
    z-score (phi - mu_out) / s_out (Carlini, Chien, Nasr, Song, Terzis and Tramer, "Membership
    Inference Attacks From First Principles", IEEE S&P 2022)."""
    mu_out, sd_out = _gauss_fit(phi_shadow, ~in_mask, fixed_variance)
    if not online:
        return (phi_target - mu_out) / sd_out
    mu_in, sd_in = _gauss_fit(phi_shadow, in_mask, fixed_variance)
    return (sstats.norm.logpdf(phi_target, mu_in, sd_in)
            - sstats.norm.logpdf(phi_target, mu_out, sd_out))


def _loo_threshold(phi: np.ndarray, in_mask: np.ndarray, *, online: bool,
                   fixed: bool) -> float | None:
    """Decision threshold from shadow model 0 treated as the target (attacker-side)."""
    rest_phi, rest_in = phi[1:], in_mask[1:]
    ok = (~rest_in).any(0) & (rest_in.any(0) if online else True)
    truth = in_mask[0][ok]
    if not ok.any() or truth.all() or not truth.any():
        return None
    pseudo = lira_scores(phi[0][ok], rest_phi[:, ok], rest_in[:, ok], online=online,
                         fixed_variance=fixed)
    if not np.all(np.isfinite(pseudo)):
        return None
    return best_threshold(pseudo[truth], pseudo[~truth])


def lira(target: Any, members: Any, nonmembers: Any, trainer: ShadowTrainer, *,
         n_shadow: int = 16, pool: Any = None, online: bool = True,
         shadow_size: int | None = None, fixed_variance: bool | None = None,
         rng: int = 0) -> AttackResult:
    """Likelihood-ratio attack with Gaussians fitted to logit-scaled confidences.

    Online: the attacker trains `n_shadow` models on random halves of the audited candidates
    (members and non-members mixed; the attacker does not know which is which), in
    complementary pairs so every candidate is IN for exactly half of the models, topped up
    with pool rows to the target's training size. Offline: shadow models never see the
    candidates (random subsets of the pool only). With fewer than 64 models one variance is
    shared by all records (`fixed_variance`), as Carlini et al. recommend.
    """
    least = 2 if online else 1
    if not (isinstance(n_shadow, int) and n_shadow >= least):
        raise InvalidInputError(f"{'online' if online else 'offline'} LiRA needs at least "
                                f"{least} shadow model(s), got {n_shadow!r}")
    if online and n_shadow % 2:
        raise InvalidInputError(f"online LiRA needs an even number of shadow models (pairs of "
                                f"complementary halves), got {n_shadow}")
    tm = as_target(target)
    mem, non = as_records(members, "members"), as_records(nonmembers, "non-members")
    check_disjoint(mem, non)
    p = as_records(pool, "pool") if pool is not None else None
    fixed = n_shadow < 64 if fixed_variance is None else bool(fixed_variance)
    cand_x = np.concatenate([mem.x, non.x])
    cand_y = np.r_[mem.y, non.y]
    c, n_in = len(cand_y), len(mem)
    target_size = n_in if shadow_size is None else int(shadow_size)
    gen = np.random.default_rng(rng)
    notes: list[str] = []
    if online:
        half_a = c // 2
        half_b = c - half_a
        if p is not None:
            _check_pool_classes(p, cand_y, "LiRA")
        avail = len(p) if p is not None else 0
        size = max(target_size, half_b)
        if size - half_a > avail:
            size = max(half_b, half_a + avail)
            if size < target_size:
                notes.append(f"pool too small to top shadow training sets up to the target's "
                             f"{target_size} rows; shadows train on {size}")
        if half_b > target_size:
            notes.append(f"shadow models train on about {half_b} rows, more than the "
                         f"target's {target_size} (balance members and non-members to match)")
        all_x = cand_x if p is None else np.concatenate([cand_x, p.x])
        all_y = cand_y if p is None else np.r_[cand_y, p.y]
        subsets, in_mask = [], np.zeros((n_shadow, c), bool)
        for j in range(n_shadow // 2):
            perm = gen.permutation(c)
            for m, part in ((2 * j, perm[:half_a]), (2 * j + 1, perm[half_a:])):
                need = size - part.size
                extra = c + gen.choice(avail, size=need, replace=False) \
                    if 0 < need <= avail else np.zeros(0, np.int64)
                subsets.append(np.sort(np.r_[part, extra]).astype(np.int64))
                in_mask[m, part] = True
        lp = trainer.fit_predict(all_x, all_y, subsets, cand_x, seed=rng)
        query_stats = [RecordStats.from_log_proba(lp[m], cand_y) for m in range(n_shadow)]
        phi_sh = np.stack([s.phi for s in query_stats])
        calib_phi, calib_in = phi_sh, in_mask
    else:
        if p is None:
            raise InvalidInputError("offline LiRA needs an attacker pool (--pool rows the "
                                    "target never saw)")
        _check_pool_classes(p, cand_y, "LiRA")
        size = min(target_size, len(p) // 2)
        if size < target_size:
            notes.append(f"pool holds {len(p)} rows: offline shadows train on {size}, the "
                         f"target on {target_size}")
        subsets = [stratified_subset(p.y, size, gen)[0] for _ in range(n_shadow)]
        query_x = np.concatenate([cand_x, p.x])
        lp = trainer.fit_predict(p.x, p.y, subsets, query_x, seed=rng)
        phi_all = np.stack([RecordStats.from_log_proba(lp[m], np.r_[cand_y, p.y]).phi
                            for m in range(n_shadow)])
        phi_sh = phi_all[:, :c]
        in_mask = np.zeros((n_shadow, c), bool)
        pool_in = np.zeros((n_shadow, len(p)), bool)
        for m, s in enumerate(subsets):
            pool_in[m, s] = True
        calib_phi, calib_in = phi_all[:, c:], pool_in
    phi_t = tm.stats(cand_x, cand_y).phi
    scores = lira_scores(phi_t, phi_sh, in_mask, online=online, fixed_variance=fixed)
    # attacker-side threshold: shadow 0 as a pseudo-target scored with the other models
    thr = _loo_threshold(calib_phi, calib_in, online=online, fixed=fixed)
    name = "lira" if online else "lira_offline"
    details = {"shadow_models": n_shadow, "online": online, "shadow_train_size": int(size),
               "fixed_variance": fixed, "statistic": "logit-scaled confidence of the true label",
               "threshold_source": "leave-one-out: shadow model 0 as pseudo-target"}
    return AttackResult(name, scores[:n_in], scores[n_in:], thr, details, notes)


# --------------------------------------------------------------------------- RMIA


def rmia(target: Any, members: Any, nonmembers: Any, trainer: ShadowTrainer, *,
         n_ref: int = 1, pool: Any, population: int = 2000, a: float = 0.3,
         gamma: float = 1.0, rng: int = 0) -> AttackResult:
    """Robust membership inference (Zarifzadeh, Liu and Shokri, "Low-Cost High-Power
    Membership Inference Attacks", ICML 2024), offline: reference models never see the
    audited records, so they are trained once and reused for every target.

    For a record x, Pr(x | theta) is the target's probability of x's label and Pr(x) its
    average over the reference models, corrected for their never having seen x:
    Pr(x) = ((1 + a) mean_ref Pr(x | theta_ref) + (1 - a)) / 2. The likelihood ratio of x is
    compared with that of `population` records z the target never saw; the score is the share
    of z with (Pr(x|theta) / Pr(x)) / (Pr(z|theta) / Pr(z)) >= gamma. Pairwise comparison
    against the population cancels what is common to all records (e.g. the model's overall
    calibration), which is why few reference models suffice.
    """
    if not (isinstance(n_ref, int) and n_ref >= 1):
        raise InvalidInputError(f"RMIA needs at least 1 reference model, got {n_ref!r}")
    if not (0.0 <= a <= 1.0):
        raise InvalidInputError(f"RMIA offline correction a must be in [0, 1], got {a!r}")
    if not gamma > 0:
        raise InvalidInputError(f"RMIA gamma must be > 0, got {gamma!r}")
    tm = as_target(target)
    mem, non = as_records(members, "members"), as_records(nonmembers, "non-members")
    check_disjoint(mem, non)
    p = as_records(pool, "pool")
    cand_y = np.r_[mem.y, non.y]
    _check_pool_classes(p, cand_y, "RMIA")
    gen = np.random.default_rng(rng)
    n_in = len(mem)
    size = min(n_in, len(p) // 2)
    subsets = [stratified_subset(p.y, size, gen)[0] for _ in range(n_ref)]
    z_idx = gen.choice(len(p), size=min(int(population), len(p)), replace=False)
    query_x = np.concatenate([mem.x, non.x, p.x[z_idx]])
    query_y = np.r_[cand_y, p.y[z_idx]]
    lp = trainer.fit_predict(p.x, p.y, subsets, query_x, seed=rng)
    ref_p = np.exp(lp[:, np.arange(query_y.size), query_y]).mean(0)
    prior_p = 0.5 * ((1.0 + a) * ref_p + (1.0 - a))
    target_p = np.exp(tm.log_proba(query_x)[np.arange(query_y.size), query_y])
    ratio = np.log(np.maximum(target_p, 1e-300)) - np.log(prior_p)
    c = cand_y.size
    rx, rz = ratio[:c], np.sort(ratio[c:])
    # share of z with ratio_x - ratio_z >= log gamma, i.e. ratio_z <= ratio_x - log gamma
    scores = np.searchsorted(rz, rx - math.log(gamma), side="right") / rz.size
    details = {"reference_models": n_ref, "online": False, "a": a, "gamma": gamma,
               "population": int(rz.size), "reference_train_size": int(size),
               "statistic": "share of population records the candidate's likelihood ratio "
                            "beats"}
    return AttackResult("rmia", scores[:n_in], scores[n_in:], None, details, [])


def lira_from_parts(phi_target: np.ndarray, phi_shadow: np.ndarray, in_mask: np.ndarray,
                    n_members: int, *, online: bool = True, fixed_variance: bool = True,
                    name: str = "lira") -> AttackResult:
    """LiRA from precomputed statistics (e.g. shadow outputs cached by an experiment)."""
    scores = lira_scores(phi_target, phi_shadow, in_mask, online=online,
                         fixed_variance=fixed_variance)
    return AttackResult(name, scores[:n_members], scores[n_members:], None,
                        {"shadow_models": int(phi_shadow.shape[0]), "online": online})


def target_model(model: Any) -> TargetModel:
    """Public alias of `as_target` (accepts torch modules, sklearn estimators, callables)."""
    return as_target(model)
