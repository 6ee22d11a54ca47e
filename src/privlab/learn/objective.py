"""Objective and output perturbation for L2-regularised logistic regression.

Setting (Chaudhuri, Monteleoni & Sarwate 2011, "Differentially Private Empirical Risk
Minimization", JMLR 12; Kifer, Smith & Thakurta 2012, "Private Convex Empirical Risk
Minimization and High-dimensional Regression", COLT):

    J(w) = (1/n) sum_i l(y_i w.x_i) + (Lambda/2) ||w||^2,   l(z) = log(1 + e^-z), y in {-1, 1}

Conditions, enforced here and stated in the guarantee:
- ||x_i|| <= 1: every row is clipped to L2 norm `data_norm` (a per-record, data-independent
  map) and divided by it; with an intercept a constant 1 is appended and the row scaled by
  1/sqrt(2). Then |l'| <= 1 (zeta = 1) and l'' <= c = 1/4 (the loss Hessian is rank one
  with eigenvalue <= c).
- Lambda > 0 (strong convexity), n public, neighbouring = REPLACE one record.
- the minimiser is computed exactly (Newton's method to a gradient norm of 1e-10; as in the papers
  the residual optimisation error is not accounted).

Objective perturbation (Chaudhuri et al. Algorithm 2): minimise
J(w) + (1/n) b.w + (Delta/2) ||w||^2. Two parts of the budget:
- the Jacobian of the map b -> w changes by a factor <= (1 + c/(n(Lambda + Delta)))^2
  between neighbours: eps_J = 2 log(1 + c / (n (Lambda + Delta)));
- the noise: eps-DP with density ~ exp(-eps_b ||b|| / 2) (||b|| ~ Gamma(d, 2/eps_b)), or
  (eps_b, delta) with Gaussian b ~ N(0, s^2 I) (Kifer et al.'s Gaussian variant). For the
  Gaussian, the gradient difference of two neighbours v lies in span{x, x'} and has norm
  <= 2, so the privacy loss is <= 2 ||P b|| / s^2 + 2 / s^2 with P the projection on that
  plane; ||P b||^2 / s^2 is chi^2 with <= 2 degrees of freedom, so with probability
  >= 1 - delta it is <= 2 log(1/delta), which gives s (solved exactly below).
If eps - 2 log(1 + c/(n Lambda)) >= eps/2 we take Delta = 0 and the rest as eps_b;
otherwise Delta = c / (n (e^{eps/4} - 1)) - Lambda so eps_J = eps_b = eps/2 (Chaudhuri et
al. switch at 0 instead of eps/2; both are covered by their Theorem 9).

Output perturbation (Chaudhuri et al. Algorithm 1), the baseline: w* = argmin J has L2
sensitivity 2 / (n Lambda) under replacement; released by privlab's grid-valued Gaussian
mechanism (eps, delta) or discrete Laplace with L1 sensitivity sqrt(d) * 2 / (n Lambda).

More than two classes: one-vs-rest, each of the k models at (eps/k, delta/k) (sequential
composition).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privlab.core.guarantee import PrivacyGuarantee, check_delta, check_epsilon
from privlab.core.rng import SEEDED_NOTE, RngLike, is_seeded, make_rng
from privlab.errors import InvalidInputError

C_LOGISTIC = 0.25   # bound on l''(z) for the logistic loss
ZETA = 1.0          # bound on |l'(z)| (so ||grad l|| <= ||x|| <= 1)


@dataclass
class LinearModel:
    """Released coefficients on the ORIGINAL feature scale, with their guarantee.

    decision(x) = clip_rows(x, data_norm) @ coef.T + intercept. One row per class in
    one-vs-rest; one row for binary (positive class = classes[1]).
    """

    coef: np.ndarray
    intercept: np.ndarray
    classes: np.ndarray
    data_norm: float
    guarantee: PrivacyGuarantee
    details: dict[str, Any] = field(default_factory=dict)

    def decision_function(self, x: np.ndarray) -> np.ndarray:
        xc = clip_rows(np.asarray(x, dtype=np.float64), self.data_norm)
        scores = xc @ self.coef.T + self.intercept
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        s = self.decision_function(x)
        if s.ndim == 1:
            p1 = 1.0 / (1.0 + np.exp(-s))
            return np.column_stack([1 - p1, p1])
        e = np.exp(s - s.max(axis=1, keepdims=True))   # one-vs-rest scores, softmax-normalised
        return e / e.sum(axis=1, keepdims=True)


def clip_rows(x: np.ndarray, norm: float) -> np.ndarray:
    """Scale each row down to L2 norm <= `norm` (rows already inside are unchanged)."""
    lengths = np.linalg.norm(x, axis=1)
    factor = np.minimum(1.0, norm / np.maximum(lengths, 1e-300))
    return x * factor[:, None]


def _unit_rows(x: np.ndarray, data_norm: float, fit_intercept: bool) -> np.ndarray:
    z = clip_rows(x, data_norm) / data_norm
    if fit_intercept:
        z = np.hstack([z, np.ones((z.shape[0], 1))]) / math.sqrt(2.0)
    # guard against rounding: the analysis needs ||z_i|| <= 1 exactly
    return clip_rows(z, 1.0) * (1 - 1e-12)


def _fit(z: np.ndarray, s: np.ndarray, lam: float, b: np.ndarray | None = None) -> np.ndarray:
    """argmin (1/n) sum log(1+exp(-s_i w.z_i)) + (lam/2)||w||^2 + (1/n) b.w, to high precision.

    Damped Newton: the objective is lam-strongly convex and smooth, d is small, so a handful
    of O(n d^2) steps reach the minimiser to machine precision (L-BFGS needs thousands).
    """
    n, d = z.shape
    lin = np.zeros(d) if b is None else b / n

    def value(w: np.ndarray) -> float:
        return float(np.logaddexp(0.0, -s * (z @ w)).mean() + 0.5 * lam * w @ w + lin @ w)

    w = np.zeros(d)
    f = value(w)
    for _ in range(200):
        m = s * (z @ w)
        p = np.exp(-np.logaddexp(0.0, m))        # sigmoid(-m), stable
        grad = -(z.T @ (s * p)) / n + lam * w + lin
        gnorm = float(np.linalg.norm(grad))
        if gnorm <= 1e-10:
            break
        hess = (z.T * (p * (1 - p))) @ z / n + lam * np.eye(d)
        step = np.linalg.solve(hess, grad)
        decrement = float(grad @ step)
        t = 1.0
        while True:  # backtracking (Armijo)
            w_new = w - t * step
            f_new = value(w_new)
            if f_new <= f - 0.25 * t * decrement or t < 1e-12:
                break
            t *= 0.5
        if t < 1e-12 or decrement < 1e-24:
            break
        w, f = w_new, f_new
    return w


def _gaussian_objective_sigma(eps_b: float, delta: float) -> float:
    """Smallest s with 2 t sqrt(2 log(1/delta)) + 2 t^2 <= eps_b, t = 1/s (module docstring)."""
    r = math.sqrt(2 * math.log(1 / delta))
    t = (-2 * r + math.sqrt(4 * r * r + 8 * eps_b)) / 4
    return ZETA / t


def _check_inputs(x: Any, y: Any, data_norm: float, l2: float, classes: Any = None,
                  private: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from privlab.learn.data import as_feature_matrix, encode_labels

    if private and classes is None:
        raise InvalidInputError("classes: pass the public class list (e.g. classes=[0, 1], or a "
                                "schema's categories); a private fit does not read it from y")
    xa = as_feature_matrix(x).astype(np.float64)
    if xa.ndim != 2:
        raise InvalidInputError(f"X must be 2-D (rows x features), got shape {xa.shape}")
    codes, classes = encode_labels(y, classes)
    if len(codes) != xa.shape[0]:
        raise InvalidInputError(f"X has {xa.shape[0]} rows but y has {len(codes)}")
    if not (isinstance(data_norm, (int, float)) and math.isfinite(data_norm) and data_norm > 0):
        raise InvalidInputError(f"data_norm must be a finite number > 0 (public bound on the row "
                                f"norm), got {data_norm!r}")
    if not (isinstance(l2, (int, float)) and math.isfinite(l2) and l2 > 0):
        raise InvalidInputError(f"the L2 regularisation must be > 0 (strong convexity is part of "
                                f"the privacy proof), got {l2!r}")
    return xa, codes, classes


def _conditions(data_norm: float, lam: float, n: int, fit_intercept: bool) -> str:
    return (f"conditions: rows clipped to L2 norm {data_norm:g} and rescaled to norm <= 1"
            f"{' (intercept as a constant feature)' if fit_intercept else ''}; logistic loss "
            f"(|l'| <= 1, l'' <= 1/4); L2 regularisation Lambda = {lam:.4g} > 0; n = {n} "
            "public; exact minimiser assumed (Newton's method to a gradient norm <= 1e-10)")


def _to_original(w: np.ndarray, data_norm: float, fit_intercept: bool) -> tuple[np.ndarray, float]:
    if fit_intercept:
        return w[:-1] / (math.sqrt(2.0) * data_norm), float(w[-1] / math.sqrt(2.0))
    return w / data_norm, 0.0


def logistic_objective_perturbation(x: Any, y: Any, epsilon: float, delta: float = 0.0, *,
                                    l2: float = 1e-3, data_norm: float = 1.0,
                                    fit_intercept: bool = True,
                                    rng: RngLike = None, classes: Any = None) -> LinearModel:
    """(epsilon[, delta])-DP logistic regression by objective perturbation (replace-one).
    `classes`: the declared (public) class list, required (read from y, one replaced label
    could add a class). n = len(x) enters the privacy split: legitimate because replace-one
    neighbouring holds n fixed (n is public by that relation; the guarantee notes it)."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    xa, codes, classes = _check_inputs(x, y, data_norm, l2, classes)
    n = xa.shape[0]
    z = _unit_rows(xa, data_norm, fit_intercept)
    d = z.shape[1]
    k = len(classes)
    tasks = [1] if k == 2 else list(range(k))
    eps_t, delta_t = epsilon / len(tasks), delta / len(tasks)
    gen = make_rng(rng)

    eps_jac0 = 2 * math.log1p(C_LOGISTIC / (n * l2))
    if eps_t - eps_jac0 >= eps_t / 2:
        extra, eps_b = 0.0, eps_t - eps_jac0
    else:
        extra, eps_b = C_LOGISTIC / (n * math.expm1(eps_t / 4)) - l2, eps_t / 2
    eps_jac = 2 * math.log1p(C_LOGISTIC / (n * (l2 + extra)))
    if delta_t > 0:
        s = _gaussian_objective_sigma(eps_b, delta_t)
        noise_desc = f"Gaussian b ~ N(0, {s:.4g}^2 I)"
    else:
        s = 0.0
        noise_desc = f"b with density ~ exp(-{eps_b:.4g} ||b|| / 2) (||b|| ~ Gamma(d, 2/eps_b))"

    rows_w, noise_norms = [], []
    for cls in tasks:
        sgn = np.where(codes == cls, 1.0, -1.0)
        if delta_t > 0:
            b = gen.standard_normal(d) * s
        else:
            direction = gen.standard_normal(d)
            direction /= np.linalg.norm(direction)
            b = direction * gen.gamma(shape=d, scale=2.0 / eps_b)
        noise_norms.append(float(np.linalg.norm(b)))
        rows_w.append(_fit(z, sgn, l2 + extra, b))
    coef, intercept = zip(*(_to_original(w, data_norm, fit_intercept) for w in rows_w),
                          strict=True)
    notes = [_conditions(data_norm, l2, n, fit_intercept),
             f"privacy split: Jacobian eps_J = {eps_jac:.4g}, noise eps_b = {eps_b:.4g}"
             f"{f', delta = {delta_t:.3g}' if delta_t else ''}; extra regularisation "
             f"Delta = {extra:.4g}; noise {noise_desc}",
             "noise is continuous (float64) and enters an optimisation; the floating-point "
             "caveat of Mironov 2012 is not addressed for model weights"]
    if len(tasks) > 1:
        notes.append(f"{k} classes: one-vs-rest, each model at ({eps_t:.4g}, {delta_t:.3g}), "
                     "sequential composition")
    if is_seeded(rng):
        notes.append(SEEDED_NOTE)
    source = ("Kifer-Smith-Thakurta 2012, Gaussian" if delta
              else "Chaudhuri-Monteleoni-Sarwate 2011, Alg. 2")
    guarantee = PrivacyGuarantee(
        epsilon=epsilon, delta=delta, neighbouring="replace_record", model="central",
        mechanism=f"objective perturbation, L2-regularised logistic regression ({source})",
        accountant="exact (analytic bound of the mechanism)" + (
            "; sequential composition over one-vs-rest models" if len(tasks) > 1 else ""),
        notes=tuple(notes))
    return LinearModel(np.vstack(coef), np.asarray(intercept), classes, float(data_norm),
                       guarantee, {"method": "objective", "Lambda": l2, "Delta": extra,
                                   "eps_jacobian": eps_jac, "eps_noise": eps_b,
                                   "noise_sigma": s or None, "noise_norms": noise_norms,
                                   "n": n, "dimension": d})


def logistic_output_perturbation(x: Any, y: Any, epsilon: float, delta: float = 0.0, *,
                                 l2: float = 1e-3, data_norm: float = 1.0,
                                 fit_intercept: bool = True, rng: RngLike = None,
                                 classes: Any = None) -> LinearModel:
    """Baseline: exact non-private minimiser + noise at its L2 sensitivity 2/(n Lambda).
    `classes` is required and n = len(x) is public under replace-one (as above)."""
    from privlab.core.mechanisms import gaussian_mechanism, laplace_mechanism

    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    xa, codes, classes = _check_inputs(x, y, data_norm, l2, classes)
    n = xa.shape[0]
    z = _unit_rows(xa, data_norm, fit_intercept)
    d = z.shape[1]
    k = len(classes)
    tasks = [1] if k == 2 else list(range(k))
    eps_t, delta_t = epsilon / len(tasks), delta / len(tasks)
    gen = make_rng(rng)
    sens2 = 2 * ZETA / (n * l2)
    rows_w, mech_notes = [], []
    for cls in tasks:
        sgn = np.where(codes == cls, 1.0, -1.0)
        w = _fit(z, sgn, l2)
        if delta_t > 0:
            rel = gaussian_mechanism(w, sens2, eps_t, delta_t, rng=gen,
                                     neighbouring="replace_record")
        else:
            rel = laplace_mechanism(w, sens2 * math.sqrt(d), eps_t, rng=gen,
                                    neighbouring="replace_record")
        mech_notes.append(rel.guarantee.mechanism)
        rows_w.append(np.asarray(rel.value, dtype=np.float64))
    coef, intercept = zip(*(_to_original(w, data_norm, fit_intercept) for w in rows_w),
                          strict=True)
    notes = [_conditions(data_norm, l2, n, fit_intercept),
             f"L2 sensitivity of the minimiser 2/(n Lambda) = {sens2:.4g} (Chaudhuri et al. "
             f"2011, Cor. 8); noise: {mech_notes[0]}"
             + ("" if delta_t else f"; L1 sensitivity bounded by sqrt(d) x L2 = "
                f"{sens2 * math.sqrt(d):.4g}")]
    if len(tasks) > 1:
        notes.append(f"{k} classes: one-vs-rest, each model at ({eps_t:.4g}, {delta_t:.3g}), "
                     "sequential composition")
    if is_seeded(rng):
        notes.append(SEEDED_NOTE)
    guarantee = PrivacyGuarantee(
        epsilon=epsilon, delta=delta, neighbouring="replace_record", model="central",
        mechanism="output perturbation, L2-regularised logistic regression (Chaudhuri et al. "
                  "2011 Alg. 1)",
        accountant="exact (mechanism calibration)" + (
            "; sequential composition over one-vs-rest models" if len(tasks) > 1 else ""),
        notes=tuple(notes))
    return LinearModel(np.vstack(coef), np.asarray(intercept), classes, float(data_norm),
                       guarantee, {"method": "output", "Lambda": l2, "sensitivity_l2": sens2,
                                   "n": n, "dimension": d})


def logistic_plain(x: Any, y: Any, *, l2: float = 1e-3, data_norm: float = 1.0,
                   fit_intercept: bool = True, classes: Any = None) -> LinearModel:
    """The same regularised model without noise (baseline; NOT private)."""
    xa, codes, classes = _check_inputs(x, y, data_norm, l2, classes, private=False)
    z = _unit_rows(xa, data_norm, fit_intercept)
    tasks = [1] if len(classes) == 2 else list(range(len(classes)))
    rows = [_fit(z, np.where(codes == c, 1.0, -1.0), l2) for c in tasks]
    coef, intercept = zip(*(_to_original(w, data_norm, fit_intercept) for w in rows),
                          strict=True)
    guarantee = PrivacyGuarantee.not_private(
        "plain L2-regularised logistic regression", "no noise: the exact minimiser depends "
        "on every record")
    return LinearModel(np.vstack(coef), np.asarray(intercept), classes, float(data_norm),
                       guarantee, {"method": "none", "Lambda": l2})
