"""Utility and privacy evaluation of a synthetic table against the real one.

Fidelity: 1-, 2- and 3-way marginal total-variation distance on a common discretisation
(categories as they are, numbers in up to 20 quantile bins of the real data), Pearson
correlation differences between numeric columns and Cramer's V differences between all
pairs. Utility: train on synthetic, test on real (TSTR) vs train on real, with a gradient-
boosted classifier. Privacy: distance to the closest real training record (DCR) against the
same distance for real HOLDOUT records (what an independent sample from the population looks
like), exact copies of records that are unique in the training set (synthetic vs holdout
rate), and a distance-based membership-inference attack on the synthesizer (AUC; 0.5 means
the attack cannot tell training members from holdout records).

Everything here reads the real records: the evaluation itself is NOT differentially private
and is for the data controller, not for release.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from privlab.core.guarantee import PrivacyGuarantee
from privlab.errors import InvalidInputError

EVAL_BINS = 20
#: 3-way TVDs are averaged over at most this many column triples (fixed-seed sample).
MAX_TRIPLES = 1000
#: Copies of unique training records are flagged when they exceed the holdout rate by more
#: than COPY_Z Poisson standard deviations.
COPY_Z = 3.0
NOT_DP_REASON = ("the evaluation compares the synthetic table with the real records (exact "
                 "marginals, distances, a model trained on real data); keep it with the data "
                 "controller")


def _is_numeric(series: pd.Series) -> bool:
    return (pd.api.types.is_numeric_dtype(series.dtype)
            and not pd.api.types.is_bool_dtype(series.dtype))


def _as_float(series: pd.Series) -> np.ndarray:
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def _as_text(series: pd.Series) -> pd.Series:
    """Strings, missing kept as missing."""
    return series.astype("str").where(series.notna())


def _category_codes(series: pd.Series, categories: Sequence[str]) -> np.ndarray:
    """Index of each value in `categories`; -1 for missing or unknown values."""
    text = _as_text(series).to_numpy(dtype=object)
    return pd.Index(list(categories), dtype=object).get_indexer(text).astype(np.int64)


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """scikit-learn's OpenMP threads crawl on a busy shared machine; one thread is steady."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
        yield
        return
    with threadpool_limits(limits=1):
        yield


@dataclass
class Discretizer:
    """A common coding of real and synthetic columns for marginal comparisons."""

    columns: list[str]
    numeric: dict[str, np.ndarray]  # interior quantile edges
    categories: dict[str, list[str]]

    @classmethod
    def fit(cls, real: pd.DataFrame, synth: pd.DataFrame, columns: Sequence[str],
            bins: int = EVAL_BINS) -> Discretizer:
        numeric, cats = {}, {}
        for c in columns:
            if _is_numeric(real[c]):
                x = _as_float(real[c])
                x = x[np.isfinite(x)]
                if x.size:
                    qs = np.quantile(x, np.linspace(0, 1, bins + 1)[1:-1])
                    numeric[c] = np.unique(qs)
                else:
                    numeric[c] = np.zeros(0)
            else:
                seen = pd.unique(pd.concat([real[c].dropna().astype(str),
                                            synth[c].dropna().astype(str)]))
                cats[c] = sorted(str(v) for v in seen)
        return cls(list(columns), numeric, cats)

    def size(self, c: str) -> int:
        if c in self.numeric:
            return self.numeric[c].size + 2  # bins + missing
        return len(self.categories[c]) + 1

    def codes(self, frame: pd.DataFrame, c: str) -> np.ndarray:
        if c in self.numeric:
            x = _as_float(frame[c])
            out = np.searchsorted(self.numeric[c], x, side="right")
            out[~np.isfinite(x)] = self.numeric[c].size + 1
            return out.astype(np.int64)
        codes = _category_codes(frame[c], self.categories[c])
        codes[codes < 0] = len(self.categories[c])
        return codes


def _tvd(p: np.ndarray, q: np.ndarray) -> float:
    ps, qs = p.sum(), q.sum()
    if ps == 0 or qs == 0:
        return 1.0 if ps != qs else 0.0
    return float(0.5 * np.abs(p / ps - q / qs).sum())


def _cramers_v(table: np.ndarray) -> float:
    t = table[table.sum(axis=1) > 0][:, table.sum(axis=0) > 0]
    r, k = t.shape
    n = t.sum()
    if min(r, k) < 2 or n == 0:
        return 0.0
    expected = np.outer(t.sum(axis=1), t.sum(axis=0)) / n
    chi2 = float(((t - expected) ** 2 / expected).sum())
    return math.sqrt(chi2 / n / (min(r, k) - 1))


def _three_way(cols: list[str], disc: Discretizer, rc: dict[str, np.ndarray],
               sc: dict[str, np.ndarray]) -> list[float]:
    """TVD of every 3-way marginal (a fixed-seed sample of MAX_TRIPLES when there are more:
    the count grows as d^3)."""
    triples = list(itertools.combinations(cols, 3))
    if len(triples) > MAX_TRIPLES:
        keep = np.sort(np.random.default_rng(0).choice(len(triples), MAX_TRIPLES,
                                                       replace=False))
        triples = [triples[i] for i in keep]
    out = []
    for a, b, c in triples:
        kb, kc = disc.size(b), disc.size(c)
        m = disc.size(a) * kb * kc
        tr = np.bincount((rc[a] * kb + rc[b]) * kc + rc[c], minlength=m)
        ts = np.bincount((sc[a] * kb + sc[b]) * kc + sc[c], minlength=m)
        out.append(_tvd(tr, ts))
    return out


def fidelity(real: pd.DataFrame, synth: pd.DataFrame, columns: Sequence[str] | None = None,
             bins: int = EVAL_BINS) -> dict[str, Any]:
    """Marginal TVDs (1-, 2- and 3-way) and correlation differences."""
    cols = list(columns) if columns is not None else [c for c in real.columns
                                                       if c in synth.columns]
    if not cols:
        raise InvalidInputError("the real and synthetic tables share no columns")
    disc = Discretizer.fit(real, synth, cols, bins)
    rc = {c: disc.codes(real, c) for c in cols}
    sc = {c: disc.codes(synth, c) for c in cols}
    one = {c: _tvd(np.bincount(rc[c], minlength=disc.size(c)),
                   np.bincount(sc[c], minlength=disc.size(c))) for c in cols}
    two: dict[str, float] = {}
    vdiff: list[float] = []
    for a, b in itertools.combinations(cols, 2):
        kb = disc.size(b)
        m = disc.size(a) * kb
        tr = np.bincount(rc[a] * kb + rc[b], minlength=m)
        ts = np.bincount(sc[a] * kb + sc[b], minlength=m)
        two[f"{a} x {b}"] = _tvd(tr, ts)
        vdiff.append(abs(_cramers_v(tr.reshape(-1, kb)) - _cramers_v(ts.reshape(-1, kb))))
    numeric = [c for c in cols if c in disc.numeric]
    pearson: dict[str, float] = {}
    if len(numeric) >= 2:
        r_corr = pd.DataFrame({c: _as_float(real[c]) for c in numeric}).corr()
        s_corr = pd.DataFrame({c: _as_float(synth[c]) for c in numeric}).corr()
        for a, b in itertools.combinations(numeric, 2):
            diff = abs(r_corr.loc[a, b] - s_corr.loc[a, b])
            if np.isfinite(diff):
                pearson[f"{a} x {b}"] = float(diff)
    worst2 = sorted(two.items(), key=lambda kv: -kv[1])[:5]
    three = _three_way(cols, disc, rc, sc)
    return {
        "columns": len(cols),
        "tvd_1way_mean": float(np.mean(list(one.values()))),
        "tvd_1way_max": float(max(one.values())),
        "tvd_1way": one,
        "tvd_2way_mean": float(np.mean(list(two.values()))) if two else None,
        "tvd_2way_max": float(max(two.values())) if two else None,
        "tvd_2way_worst": dict(worst2),
        "tvd_3way_mean": float(np.mean(three)) if three else None,
        "tvd_3way_max": float(max(three)) if three else None,
        "tvd_3way_triples": len(three),
        "pearson_abs_diff_mean": float(np.mean(list(pearson.values()))) if pearson else None,
        "pearson_abs_diff_max": float(max(pearson.values())) if pearson else None,
        "cramers_v_abs_diff_mean": float(np.mean(vdiff)) if vdiff else None,
        "cramers_v_abs_diff_max": float(max(vdiff)) if vdiff else None,
        "discretisation": f"categories as is; numbers in up to {bins} quantile bins of the "
                          "real data; missing values as a value",
    }


# --------------------------------------------------------------------------------------------
# Machine-learning utility
# --------------------------------------------------------------------------------------------


def _features(frames: list[pd.DataFrame], reference: pd.DataFrame, features: list[str]
              ) -> tuple[list[np.ndarray], list[bool]]:
    mats = [np.empty((len(f), len(features))) for f in frames]
    mask = []
    for j, c in enumerate(features):
        if _is_numeric(reference[c]):
            for m, f in zip(mats, frames, strict=True):
                m[:, j] = _as_float(f[c])
            mask.append(False)
            continue
        cats = sorted(set(reference[c].dropna().astype(str)))
        categorical = len(cats) <= 250
        for m, f in zip(mats, frames, strict=True):
            codes = _category_codes(f[c], cats).astype(np.float64)
            codes[codes < 0] = np.nan
            m[:, j] = codes
        mask.append(categorical)
    return mats, mask


def _fit_predict(x: np.ndarray, y: np.ndarray, x_test: np.ndarray, mask: list[bool],
                 seed: int) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
    from sklearn.ensemble import HistGradientBoostingClassifier

    classes = sorted(set(y))
    if len(classes) < 2:
        pred = np.full(x_test.shape[0], classes[0] if classes else "", dtype=object)
        return pred, None, classes
    model = HistGradientBoostingClassifier(categorical_features=np.array(mask, dtype=bool),
                                           random_state=seed, max_iter=100,
                                           early_stopping=False)
    with _one_thread():
        model.fit(x, y)
        proba = model.predict_proba(x_test)
        pred = model.predict(x_test)
    return pred, proba, [str(c) for c in model.classes_]


def ml_utility(train: pd.DataFrame, test: pd.DataFrame, synth: pd.DataFrame, target: str,
               seed: int = 0) -> dict[str, Any]:
    """Accuracy on real test rows of a classifier trained on real vs on synthetic rows, each
    beside the majority-class baseline (`privlab.learn.baseline`: "better" is the one-sided
    exact McNemar test at 5% on the test rows)."""
    from sklearn.metrics import roc_auc_score

    from privlab.learn.baseline import beats_exact, majority_class, no_better_text

    for name, f in (("real training", train), ("real test", test), ("synthetic", synth)):
        if target not in f.columns:
            raise InvalidInputError(f"--target {target!r} is not a column of the {name} table")
    features = [c for c in train.columns if c != target and c in synth.columns]
    if not features:
        raise InvalidInputError("no feature columns besides the target")
    # rows whose target is missing cannot be scored or learned from
    train = train[train[target].notna()]
    test = test[test[target].notna()]
    # synthetic rows whose target is not a real class (e.g. "<other>") cannot be right
    synth = synth[synth[target].notna() & synth[target].astype(str).isin(
        set(train[target].astype(str)))]
    if len(test) == 0 or len(train) == 0:
        raise InvalidInputError(f"--target {target!r} is missing in every real row")
    y_train = train[target].astype(str).to_numpy()
    y_test = test[target].astype(str).to_numpy()
    y_synth = synth[target].astype(str).to_numpy()
    if len(set(y_train)) > 50:
        raise InvalidInputError(f"--target {target!r} has more than 50 classes; choose a "
                                "categorical target")
    (x_train, x_test, x_synth), mask = _features([train, test, synth], train, features)
    out: dict[str, Any] = {"target": target, "model": "HistGradientBoostingClassifier "
                           "(100 iterations, no early stopping)", "test_rows": len(test),
                           "synthetic_training_rows": len(synth)}
    # the baseline every accuracy sits beside: the real training rows' majority class,
    # scored on the same real test rows (exact, like the accuracies)
    major = majority_class(y_train.tolist())
    base_hits = y_test == major
    out["majority_class"] = str(major)
    out["majority_class_accuracy"] = float(base_hits.mean())
    binary = len(set(y_train)) == 2
    for label, x, y in (("train_real", x_train, y_train), ("train_synthetic", x_synth, y_synth)):
        pred, proba, classes = _fit_predict(x, y, x_test, mask, seed)
        hits = pred.astype(str) == y_test
        out[f"{label}_accuracy"] = float(np.mean(hits))
        better = beats_exact(hits, base_hits)
        out[f"{label}_better_than_baseline"] = better
        out[f"{label}_verdict"] = ("better than" if better else "no better than") \
            + no_better_text(major).removeprefix("no better than")
        if binary and proba is not None and len(classes) == 2:
            positive = sorted(set(y_train))[1]
            if positive in classes:
                score = proba[:, classes.index(positive)]
                out[f"{label}_auc"] = float(roc_auc_score(y_test == positive, score))
    out["accuracy_gap"] = out["train_real_accuracy"] - out["train_synthetic_accuracy"]
    return out


# --------------------------------------------------------------------------------------------
# Privacy: distances, copies, membership inference
# --------------------------------------------------------------------------------------------


@dataclass
class _Coded:
    num: np.ndarray  # (n, p) scaled numbers, NaN for missing
    cat: np.ndarray  # (n, k) int codes, -1 for missing


def _code_for_distance(frames: list[pd.DataFrame], reference: pd.DataFrame,
                       cols: list[str]) -> list[_Coded]:
    num_cols = [c for c in cols if _is_numeric(reference[c])]
    cat_cols = [c for c in cols if c not in num_cols]
    scale = {}
    for c in num_cols:
        x = _as_float(reference[c])
        x = x[np.isfinite(x)]
        span = float(x.max() - x.min()) if x.size else 0.0
        scale[c] = span if span > 0 else 1.0
    cats = {c: sorted(pd.unique(pd.concat([f[c].dropna().astype(str) for f in frames])))
            for c in cat_cols}
    out = []
    for f in frames:
        num = np.column_stack([_as_float(f[c]) / scale[c] for c in num_cols]).astype(
            np.float32) if num_cols else np.zeros((len(f), 0), dtype=np.float32)
        cat = np.column_stack([_category_codes(f[c], cats[c]) for c in cat_cols]).astype(
            np.int32) if cat_cols else np.zeros((len(f), 0), dtype=np.int32)
        out.append(_Coded(num, cat))
    return out


def closest_distances(query: _Coded, ref: _Coded, chunk: int = 256) -> np.ndarray:
    """Gower-style distance from each query row to its closest reference row: the mean over
    columns of |x - y| / range (capped at 1) for numbers and of mismatch for categories;
    missing vs missing is 0, missing vs value is 1."""
    n = query.num.shape[0]
    d = query.num.shape[1] + query.cat.shape[1]
    out = np.empty(n)
    rnum, rcat = ref.num, ref.cat
    rnan = np.isnan(rnum)
    rfill = np.where(rnan, 0, rnum).astype(np.float32)
    for s in range(0, n, chunk):
        qn, qc = query.num[s:s + chunk], query.cat[s:s + chunk]
        acc = np.zeros((qn.shape[0], rnum.shape[0]), dtype=np.float32)
        for j in range(qn.shape[1]):
            qmiss = np.isnan(qn[:, j])
            diff = np.abs(np.where(qmiss, 0, qn[:, j])[:, None] - rfill[None, :, j])
            np.minimum(diff, 1.0, out=diff)
            if qmiss.any() or rnan[:, j].any():
                one = qmiss[:, None] ^ rnan[None, :, j]
                both = qmiss[:, None] & rnan[None, :, j]
                diff[one] = 1.0
                diff[both] = 0.0
            acc += diff
        for j in range(qc.shape[1]):
            acc += qc[:, j, None] != rcat[None, :, j]
        out[s:s + chunk] = acc.min(axis=1) / max(d, 1)
    return out


def _row_keys(frame: pd.DataFrame, cols: list[str], reference: pd.DataFrame) -> pd.Series:
    """A 64-bit hash of each row's normalised values (numbers as float64, the rest as text),
    so that 39 (int) and 39.0 (float) match and missing matches missing."""
    norm = pd.DataFrame({c: (_as_float(frame[c]) if _is_numeric(reference[c])
                             else _as_text(frame[c]).to_numpy(dtype=object)) for c in cols})
    return pd.Series(pd.util.hash_pandas_object(norm, index=False).to_numpy())


def rare_copies(train: pd.DataFrame, holdout: pd.DataFrame, synth: pd.DataFrame,
                columns: Sequence[str] | None = None) -> dict[str, Any]:
    """How often synthetic rows equal a training record that is unique in the training set,
    against how often real holdout rows do (the rate expected by chance in the population)."""
    cols = list(columns) if columns is not None else [c for c in train.columns
                                                       if c in synth.columns]
    tk = _row_keys(train, cols, train)
    counts = tk.value_counts()
    unique = set(counts.index[counts.to_numpy() == 1])
    sk = _row_keys(synth, cols, train)
    hk = _row_keys(holdout, cols, train)
    s_copies = int(sk.isin(unique).sum())
    h_copies = int(hk.isin(unique).sum())
    all_train = set(counts.index)
    expected = h_copies / max(len(holdout), 1) * len(synth)
    limit = expected + COPY_Z * math.sqrt(expected + 1.0)
    return {
        "copies_exceed_baseline": bool(s_copies > limit),
        "copy_rule": f"flag when synthetic copies > holdout rate x rows + {COPY_Z:g} sqrt(that "
                     "+ 1) (a one-sided Poisson bound)",
        "train_unique_records": len(unique),
        "synthetic_rows": len(synth),
        "synthetic_copies_of_unique": s_copies,
        "synthetic_copy_rate": s_copies / max(len(synth), 1),
        "holdout_rows": len(holdout),
        "holdout_matches_of_unique": h_copies,
        "holdout_match_rate": h_copies / max(len(holdout), 1),
        "synthetic_exact_match_rate": float(sk.isin(all_train).mean()) if len(synth) else 0.0,
        "holdout_exact_match_rate": float(hk.isin(all_train).mean()) if len(holdout) else 0.0,
    }


def privacy(train: pd.DataFrame, holdout: pd.DataFrame, synth: pd.DataFrame,
            columns: Sequence[str] | None = None, max_queries: int = 1000,
            seed: int = 0) -> dict[str, Any]:
    """DCR vs the holdout baseline, rare-record copies, and a DCR membership-inference AUC."""
    from sklearn.metrics import roc_auc_score

    cols = list(columns) if columns is not None else [c for c in train.columns
                                                       if c in synth.columns]
    if len(holdout) < 10:
        raise InvalidInputError("the privacy evaluation needs at least 10 holdout rows")
    gen = np.random.default_rng(seed)

    def pick(frame: pd.DataFrame, k: int) -> pd.DataFrame:
        k = min(k, len(frame))
        return frame.iloc[np.sort(gen.choice(len(frame), size=k, replace=False))]

    s_q = pick(synth, max_queries)
    h_q = pick(holdout, max_queries)
    m = min(max_queries // 2, len(holdout), len(train))
    members = pick(train, m)
    nonmembers = pick(holdout, m)
    tr, sq, hq, mem, non, syn = _code_for_distance(
        [train, s_q, h_q, members, nonmembers, synth], train, cols)
    dcr_s = closest_distances(sq, tr)
    dcr_h = closest_distances(hq, tr)
    d_mem = closest_distances(mem, syn)
    d_non = closest_distances(non, syn)
    labels = np.r_[np.ones(m), np.zeros(m)]
    auc = float(roc_auc_score(labels, -np.r_[d_mem, d_non]))

    def q(x: np.ndarray, p: float) -> float:
        return float(np.quantile(x, p))

    return {
        "dcr_synthetic_to_train": {"median": q(dcr_s, 0.5), "p05": q(dcr_s, 0.05),
                                   "zero_share": float(np.mean(dcr_s == 0))},
        "dcr_holdout_to_train": {"median": q(dcr_h, 0.5), "p05": q(dcr_h, 0.05),
                                 "zero_share": float(np.mean(dcr_h == 0))},
        "dcr_synthetic_closer_share": float(np.mean(dcr_s[:, None] < dcr_h[None, :])),
        "rare_copies": rare_copies(train, holdout, synth, cols),
        "membership_inference": {
            "attack": "distance to the closest synthetic record (closer = member)",
            "members": m, "non_members": m, "auc": auc,
        },
        "distance": "Gower-style: numbers |x-y|/range capped at 1, categories mismatch",
        "queries": {"synthetic": len(s_q), "holdout": len(h_q)},
    }


def assess_synthetic(synth: pd.DataFrame) -> dict[str, Any] | None:
    """`privlab.assess` on the synthetic table (what a reader of the release sees): the
    attributes' tiers and risky combinations. None if the assess package is unavailable."""
    try:
        from privlab.assess import assess
    except ImportError:
        return None
    result = assess(synth, source="synthetic table")
    d = result.to_dict()
    return {
        "attributes": [{k: a[k] for k in ("name", "tier", "richness", "unique_share", "k")}
                       for a in d["attributes"]],
        "risky_combinations": [c["attributes"] for c in d["combinations"]
                               if c.get("escalated")],
        "note": "computed on the synthetic rows: no real person stands behind a row, but a "
                "synthetic row that looks unique may resemble a real one (see the DCR and copy "
                "checks). No generalisation is advised: the table is already differentially "
                "private, its protection is the guarantee, and coarsening it would only lose "
                "utility",
    }


def _floor(f: dict[str, Any]) -> dict[str, Any]:
    return {"tvd_1way_mean": f["tvd_1way_mean"], "tvd_2way_mean": f["tvd_2way_mean"],
            "tvd_3way_mean": f["tvd_3way_mean"],
            "note": "the real training rows scored against the holdout like a synthetic "
                    "table: the TVD a perfect synthesizer would still show"}


def evaluate(train: pd.DataFrame, synth: pd.DataFrame, *, holdout: pd.DataFrame | None = None,
             target: str | None = None, seed: int = 0, max_queries: int = 1000,
             run_assess: bool = True) -> dict[str, Any]:
    """Everything above; the privacy and TSTR parts need a holdout the synthesizer never saw.

    With a holdout: `fidelity_holdout` (1-, 2-, 3-way TVD of the synthetic rows against the
    holdout rows), `floor` (the same for the real training rows) and, with a target,
    `ml_utility` (accuracy and AUC on the holdout of a classifier trained on synthetic rows,
    next to the ceiling: the same classifier trained on the real training rows)."""
    cols = [c for c in train.columns if c in synth.columns]
    out: dict[str, Any] = {
        "guarantee": PrivacyGuarantee.not_private("synthetic-data evaluation",
                                                  NOT_DP_REASON).to_dict(),
        "fidelity": fidelity(train, synth, cols),
    }
    if holdout is not None and len(holdout) >= 10:
        # against rows the synthesizer never saw, next to what real rows achieve: the floor
        # (real training rows vs the holdout: sampling error alone)
        out["fidelity_holdout"] = fidelity(holdout, synth, cols)
        out["floor"] = _floor(fidelity(holdout, train, cols))
        if target is not None:
            out["ml_utility"] = ml_utility(train, holdout, synth, target, seed)
        out["privacy"] = privacy(train, holdout, synth, cols, max_queries, seed)
    else:
        out["skipped"] = ("ML utility and privacy checks need a holdout (rows the "
                          "synthesizer did not see): pass --holdout")
    if run_assess:
        a = assess_synthetic(synth)
        out["assess"] = a if a is not None else {"note": "privlab.assess is not available"}
    return out
