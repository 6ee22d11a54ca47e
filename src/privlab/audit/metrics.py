"""Attack metrics: ROC, AUC, advantage, TPR at fixed low FPR, balanced accuracy, counts.

Convention: a higher score means "more likely a member". Members are the positives.

TPR at FPR x is the largest TPR among thresholds whose empirical FPR is <= x. It needs at
least ceil(1/x) non-members: with fewer, the only admissible threshold is "nobody is a member"
and the figure is 0 by construction, so `tpr_at_fpr` refuses instead of reporting it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privlab.errors import InvalidInputError

DEFAULT_FPRS = (0.001, 0.01, 0.1)


def check_scores(scores_in: Any, scores_out: Any) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(scores_in, dtype=np.float64).ravel()
    b = np.asarray(scores_out, dtype=np.float64).ravel()
    if a.size == 0 or b.size == 0:
        raise InvalidInputError("an attack needs at least one member and one non-member score")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise InvalidInputError("attack scores contain NaN or infinity")
    return a, b


@dataclass
class Roc:
    """Empirical ROC: thresholds (decreasing) and the FPR/TPR of `score >= threshold`."""

    thresholds: np.ndarray
    fpr: np.ndarray
    tpr: np.ndarray
    n_in: int
    n_out: int


def roc_curve(scores_in: Any, scores_out: Any) -> Roc:
    """All distinct thresholds, from "nobody" (+inf) down to "everybody"."""
    a, b = check_scores(scores_in, scores_out)
    scores = np.concatenate([a, b])
    is_in = np.concatenate([np.ones(a.size, bool), np.zeros(b.size, bool)])
    order = np.argsort(-scores, kind="mergesort")
    s, lab = scores[order], is_in[order]
    tp = np.cumsum(lab)
    fp = np.cumsum(~lab)
    last = np.r_[np.flatnonzero(np.diff(s) != 0), s.size - 1]  # end of each tie block
    thr = np.r_[np.inf, s[last]]
    tpr = np.r_[0.0, tp[last] / a.size]
    fpr = np.r_[0.0, fp[last] / b.size]
    return Roc(thr, fpr, tpr, a.size, b.size)


def auc(scores_in: Any, scores_out: Any) -> float:
    """P(score_member > score_nonmember) + 0.5 P(tie) (Mann-Whitney), exact."""
    from scipy.stats import rankdata

    a, b = check_scores(scores_in, scores_out)
    ranks = rankdata(np.concatenate([a, b]))
    u = ranks[: a.size].sum() - a.size * (a.size + 1) / 2.0
    return float(u / (a.size * b.size))


def advantage(roc: Roc) -> float:
    """Membership advantage max_t (TPR - FPR) (Yeom et al. 2018)."""
    return float(np.max(roc.tpr - roc.fpr))


def min_nonmembers(fpr: float) -> int:
    return math.ceil(1.0 / fpr - 1e-9)


def tpr_at_fpr(roc: Roc, fpr: float) -> float:
    """Largest TPR with empirical FPR <= fpr; refuses when too few non-members."""
    if not (0 < fpr < 1):
        raise InvalidInputError(f"FPR must be in (0, 1), got {fpr!r}")
    need = min_nonmembers(fpr)
    if roc.n_out < need:
        raise InvalidInputError(
            f"TPR at FPR {fpr:g} needs at least {need} non-members, got {roc.n_out}; use more "
            f"non-members or a larger FPR (e.g. --fprs {max(fpr * 10, 1 / roc.n_out):.2g})")
    ok = roc.fpr <= fpr + 1e-12
    return float(roc.tpr[ok].max())


def balanced_accuracy(scores_in: Any, scores_out: Any, threshold: float) -> float:
    a, b = check_scores(scores_in, scores_out)
    return float(0.5 * ((a >= threshold).mean() + (b < threshold).mean()))


def best_threshold(scores_in: Any, scores_out: Any) -> float:
    """Threshold maximising balanced accuracy (TPR - FPR): used on ATTACKER-side data only."""
    roc = roc_curve(scores_in, scores_out)
    i = int(np.argmax(roc.tpr - roc.fpr))
    thr = roc.thresholds[i]
    if not math.isfinite(thr):
        # "nobody is a member" wins only when no threshold helps; fall back to the median
        return float(np.median(np.concatenate(check_scores(scores_in, scores_out))))
    return float(thr)


def decision_counts(scores_in: Any, scores_out: Any, threshold: float) -> dict[str, int]:
    """Confusion counts of the rule `score >= threshold` and the (successes, trials) pair that
    the Bayesian risk model takes (each guess is one Bernoulli trial)."""
    a, b = check_scores(scores_in, scores_out)
    tp = int((a >= threshold).sum())
    fp = int((b >= threshold).sum())
    fn, tn = a.size - tp, b.size - fp
    return {"tp": tp, "fp": fp, "tn": tn, "fn": fn, "successes": tp + tn,
            "trials": a.size + b.size}


def check_fprs(fprs: Sequence[float] | None, n_out: int, explicit: bool) -> list[float]:
    """The fixed FPRs to report. Requested ones must be attainable; defaults that are not are
    dropped (reported as null with a note by the caller)."""
    values = list(DEFAULT_FPRS if fprs is None else fprs)
    for f in values:
        if not (isinstance(f, (int, float)) and 0 < f < 1):
            raise InvalidInputError(f"--fprs values must be in (0, 1), got {f!r}")
    if explicit:
        for f in values:
            need = min_nonmembers(f)
            if n_out < need:
                raise InvalidInputError(
                    f"FPR {f:g} needs at least {need} non-members but the audit has {n_out}; "
                    "drop it from --fprs or use more non-members")
    return values


def summarise(scores_in: Any, scores_out: Any, fprs: Sequence[float] = DEFAULT_FPRS,
              threshold: float | None = None) -> dict[str, Any]:
    """AUC, advantage, TPR at each FPR (None where the data cannot support it), and, given an
    attacker-side threshold, balanced accuracy and counts."""
    roc = roc_curve(scores_in, scores_out)
    tprs: dict[str, float | None] = {}
    skipped = []
    for f in fprs:
        key = f"{f:g}"
        if roc.n_out < min_nonmembers(f):
            tprs[key] = None
            skipped.append(key)
        else:
            tprs[key] = tpr_at_fpr(roc, f)
    out: dict[str, Any] = {
        "auc": auc(scores_in, scores_out),
        "advantage": advantage(roc),
        "tpr_at_fpr": tprs,
        "n_members": roc.n_in,
        "n_nonmembers": roc.n_out,
    }
    if skipped:
        out["notes"] = [f"TPR at FPR {', '.join(skipped)} not reported: fewer than "
                        f"{min_nonmembers(min(fprs))} non-members"]
    if threshold is not None:
        counts = decision_counts(scores_in, scores_out, threshold)
        out["threshold"] = float(threshold)
        out["balanced_accuracy"] = balanced_accuracy(scores_in, scores_out, threshold)
        out["counts"] = counts
    return out
