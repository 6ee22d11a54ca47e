"""Train a classifier on a private table and release it with ONE honest guarantee
(what `privlab train` runs).

Everything in the output is either public (from the declared schema and the options),
protected by noise charged to the same epsilon, or named in the guarantee's `not_covered`:

- encoding: `privlab.schema.conform` then `SchemaEncoder` (feature count, feature scaling and
  classes come from the schema alone). Without a schema only the explicit data-fitted path
  (`unsafe_encoding`) remains, and the guarantee lists the encoder as not covered.
- split: each row's side (train or test) is a keyed hash of that row's own values
  (`row_test_mask`), so a neighbouring table changes one training row or one test row. For
  objective/output perturbation (replace-one neighbours, n public by that relation) the split
  is a seeded permutation of the n positions instead.
- public facts (n, the sampling rate, the classes, the privacy unit) are read only through
  `privlab.schema.facts.PublicFacts`, built from the schema, the options and DP measurements.
  DP-SGD's Poisson sampling rate q must not depend on the exact n: it comes from an explicit
  public `sample_rate`, from the schema's `public_size`, or from a geometric-noise estimate of
  the training rows charged to the budget (a `dp_measurement` fact).
- `--on-invalid coerce`: under add/remove neighbours (DP-SGD) a row with no place in the
  schema is dropped (a removal); under replace-one neighbours (objective/output) it keeps its
  position with the column's declared default, so n stays fixed. The guarantee says which.
- privacy unit: with a person column (`privacy_unit: pid`) each person's first M rows are
  kept (`--max-rows-per-unit` or the schema's `max_rows_per_unit`, else refused, as
  `privlab release` does), everything runs at (epsilon/M, delta/(M e^((M-1) epsilon/M))) per
  row, and group privacy gives (epsilon, delta) per person (`neighbouring: user`).
  Objective/output perturbation (replace one row, n fixed) is refused for a person unit.
- counts and accuracies: the vector (per-class counts of the train part, per-class counts of
  the test part, correct on train, correct on test) gets two-sided geometric noise (L1
  sensitivity 2 under add/remove: one row is in one part and changes one class count of its
  part and its part's correct count by at most 1 each; 3 under replace-one, where two class
  counts change), charged `metrics_share` of epsilon. Part sizes are sums of the noisy class
  counts, accuracies ratios of noisy counts (post-processing).
- the majority-class baseline: the training part's majority class and its share of each part,
  from the same noisy class counts (post-processing, no extra budget); the payload's
  `baseline.verdict` says "no better than always predicting <majority>" when the noisy test
  accuracy does not exceed the baseline's (`privlab.learn.baseline`).
- the guarantee: basic sequential composition of the model's (eps_model, delta) and the pure
  epsilons of the counts; its epsilon is the requested total, an upper bound.
"""

from __future__ import annotations

import math
import secrets
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from privlab.core.guarantee import PrivacyGuarantee
from privlab.errors import InvalidInputError

DEFAULT_METRICS_SHARE = 0.1
DEFAULT_BATCH = 256


@dataclass
class TableTrainSpec:
    """The options of one `privlab train` run (all public)."""

    target: str
    model: str = "mlp"
    method: str = "dpsgd"
    epsilon: float | None = None
    delta: float = 1e-5
    clip: float = 1.0
    epochs: int = 10
    batch_size: int | None = None
    lr: float | None = None
    alpha: float = 1e-4
    test_size: float = 0.2
    accountant: str = "pld"
    seed: int | None = None
    sample_rate: float | None = None
    metrics_share: float = DEFAULT_METRICS_SHARE
    on_invalid: str = "refuse"
    exclude: Sequence[str] = ()
    max_rows_per_unit: int | None = None
    image_shape: Callable[[int], tuple[int, int, int]] | None = None

    def validate(self) -> None:
        m = self.max_rows_per_unit
        if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
            raise InvalidInputError(f"--max-rows-per-unit must be a whole number >= 1, got {m!r}")
        if not (0 < self.test_size < 1):
            raise InvalidInputError(f"--test-size must be in (0, 1), got {self.test_size}")
        if self.accountant not in ("pld", "rdp"):
            raise InvalidInputError(f"--accountant must be pld or rdp, got {self.accountant!r}")
        if not (0 <= self.metrics_share < 1):
            raise InvalidInputError(f"--metrics-share must be in [0, 1), got "
                                    f"{self.metrics_share}")
        if self.sample_rate is not None:
            if self.method != "dpsgd":
                raise InvalidInputError("--sample-rate applies to --method dpsgd only")
            if not (0 < self.sample_rate <= 1):
                raise InvalidInputError(f"--sample-rate must be in (0, 1], got "
                                        f"{self.sample_rate}")
            if self.batch_size is None:
                raise InvalidInputError("--sample-rate needs --batch-size too: the public "
                                        "expected batch size (about sample rate x training "
                                        "rows) that normalises each noisy update")


@dataclass
class Encoded:
    """A table encoded for training: matrix, labels, and what the encoding read."""

    x: np.ndarray
    y: np.ndarray
    classes: list[Any] | None          # declared (public) classes, or None: read from y
    split_frame: pd.DataFrame          # the rows whose own values decide train/test
    encoder: Any
    row_norm_bound: float
    not_covered: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    schema: Any = None


def encode_with_schema(frame: pd.DataFrame, schema: Any, target: str, policy: str,
                       exclude: Sequence[str] = (), *, keep_rows: bool = False,
                       unit: str | None = None, per_unit: int = 1) -> Encoded:
    """conform -> SchemaEncoder. A missing label is refused, or under coerce its row dropped
    (`keep_rows=False`, add/remove) or given the target's declared default (`keep_rows`,
    replace-one: n stays fixed). With a person `unit`, each person's first `per_unit` rows are
    kept (a row without a person id is dropped, `privlab.schema.units`)."""
    from privlab.learn.data import SchemaEncoder, schema_classes
    from privlab.schema import check_policy, conform
    from privlab.schema.units import bound_per_unit

    check_policy(policy)
    classes = schema_classes(schema, target)
    encoder = SchemaEncoder.for_target(schema, target, exclude)
    wanted = list(encoder.columns) + [target] + ([unit] if unit else [])
    rows = conform(frame, schema, policy, columns=wanted, keep_rows=keep_rows)
    labels = rows[target]
    if labels.isna().any():
        if policy == "refuse":
            raise InvalidInputError(f"column {target!r}: a missing label (the target of "
                                    "training); fix the data or pass --on-invalid coerce "
                                    "(drops such rows)")
        if keep_rows:
            rows[target] = labels.where(labels.notna(), str(schema.column(target).fill_value))
        else:
            rows = rows.loc[labels.notna().to_numpy()].reset_index(drop=True)
    if unit:
        rows = bound_per_unit(rows, unit, per_unit).reset_index(drop=True)
    x = encoder.transform(rows)
    return Encoded(x, rows[target].astype(str).to_numpy(dtype=object), classes, rows, encoder,
                   encoder.row_norm_bound, schema=schema)


def encode_fitted(frame: pd.DataFrame, target: str, one_hot: bool,
                  bounds: dict[str, tuple[float, float]],
                  train_mask: Callable[[pd.DataFrame], np.ndarray]) -> Encoded:
    """The old data-fitted path: scaling and categories read from the training rows. Its
    guarantee names the encoder (and the class list) as not covered."""
    from privlab.learn.data import TablePreprocessor, split_target

    features, labels = split_target(frame, target)
    prep = TablePreprocessor(one_hot=one_hot, bounds=bounds)
    train = train_mask(frame)
    prep.fit(features.loc[train])
    x = prep.transform(features)
    not_covered = [f"feature encoding ({'; '.join(prep.leaks)})"] if prep.leaks else []
    not_covered.append("classes (read from the target column)")
    seen = labels.loc[train]
    try:   # the unsafe path reads the class list from the training labels (not covered)
        classes = np.unique(seen.to_numpy()).tolist()
    except TypeError:
        classes = sorted(pd.unique(seen).tolist(), key=str)
    return Encoded(x, labels.to_numpy(), classes, frame, prep,
                   math.sqrt(len(prep.numeric_) + len(prep.categorical_)),
                   not_covered=not_covered, leaks=list(prep.leaks))


def split_key(seed: int | None) -> int:
    """The key of the train/test hash: derived from --seed (reproducible), else random."""
    if seed is None:
        return secrets.randbits(64)
    return int(np.random.default_rng([int(seed), 0x5EED]).integers(0, 2**63))


def train_mask_for(method: str, test_size: float, seed: int | None
                   ) -> Callable[[pd.DataFrame], np.ndarray]:
    """Row -> is-training mask: a per-row hash (add/remove), or a seeded permutation of the
    positions (objective/output: replace-one neighbours keep n and every position)."""
    from privlab.learn.data import row_test_mask

    key = split_key(seed)
    if method in ("objective", "output"):
        def by_position(frame: pd.DataFrame) -> np.ndarray:
            n = len(frame)
            gen = np.random.default_rng(key)
            cut = int(round(n * (1 - test_size)))
            mask = np.zeros(n, dtype=bool)
            mask[gen.permutation(n)[:cut]] = True
            return mask
        return by_position
    return lambda frame: ~row_test_mask(frame, test_size, key)


def _count_rng(seed: int | None, stream: int) -> Any:
    from privlab.core.rng import make_rng

    return make_rng(None if seed is None else np.random.default_rng([int(seed), stream]))


def noisy_counts(values: Sequence[int], sensitivity: int, epsilon: float, seed: int | None,
                 stream: int) -> tuple[np.ndarray, PrivacyGuarantee, float]:
    """Two-sided geometric noise on integer counts (L1 `sensitivity`), clamped at 0; the
    noise scale (public) comes back for intervals."""
    from privlab.core.mechanisms import geometric_mechanism

    rel = geometric_mechanism(np.asarray(values, dtype=np.int64), sensitivity, epsilon,
                              rng=_count_rng(seed, stream),
                              changed_coordinates=min(sensitivity, len(values)))
    return (np.maximum(np.asarray(rel.value, dtype=np.int64), 0), rel.guarantee,
            float(rel.noise["scale"]))


def _ratio(num: int, den: int) -> float:
    return float(min(1.0, max(0.0, num / den))) if den > 0 else 0.0


#: how the baseline of a DP run is measured (also stated in the guarantee's covers)
BASELINE_NOISY = ("majority class and its share from the same noisy per-class counts of each "
                  "part (post-processing: no extra budget)")


def _baseline(labels: Sequence[Any], by_class_tr: Sequence[int], by_class_te: Sequence[int],
              n_tr: int, n_te: int, metrics: dict[str, Any], source: str, *,
              correct_te: int | None = None, scale: float | None = None) -> dict[str, Any]:
    """The majority-class baseline beside the accuracies: the majority is the training part's
    (what a model that learnt nothing would predict), scored on each part. With noisy counts
    (`scale`: their discrete-Laplace scale, `correct_te`: the model's noisy test hits) the
    verdict carries the difference's 95% noise interval and says "better" only when the
    interval excludes 0 (`privlab.learn.baseline.noisy_verdict`)."""
    from privlab.learn.baseline import (
        difference_halfwidth,
        majority_from_counts,
        no_better_text,
        noisy_verdict,
    )

    counts_tr = {str(c): int(v) for c, v in zip(labels, by_class_tr, strict=True)}
    counts_te = {str(c): int(v) for c, v in zip(labels, by_class_te, strict=True)}
    major = majority_from_counts(counts_tr)
    b_tr, b_te = _ratio(counts_tr[major], n_tr), _ratio(counts_te[major], n_te)
    out: dict[str, Any] = {"majority_class": major, "train_accuracy": b_tr,
                           "test_accuracy": b_te}
    if scale is None or correct_te is None:
        better = bool(metrics["test_accuracy"] > b_te)
        verdict = (("better than" if better else "no better than")
                   + no_better_text(major).removeprefix("no better than"))
    else:
        better, interval, verdict = noisy_verdict(major, correct_te, counts_te[major], n_te,
                                                  difference_halfwidth(scale))
        out["difference_interval_95"] = interval
    return {**out, "better_than_baseline": better, "verdict": verdict, "measured": source}


def train_table(frame: pd.DataFrame, spec: TableTrainSpec, *, schema: Any = None,
                unsafe_encoding: bool = False, one_hot: bool = False,
                bounds: dict[str, tuple[float, float]] | None = None,
                progress: Callable[[int, int, dict], None] | None = None
                ) -> tuple[dict[str, Any], Any, Encoded, PrivacyGuarantee]:
    """Encode, split, train, measure under DP; return (payload, estimator, encoding,
    guarantee). The payload's `noised` lists the keys whose values carry noise (or derive
    from noisy values; for objective/output perturbation also those that are functions of n,
    which their replace-one neighbouring holds fixed): everything else must be identical on
    neighbouring tables with the same seed (tests/soundness)."""
    from privlab.schema.facts import NAMES, PublicFacts

    spec.validate()
    meth = spec.method
    private = meth != "none"
    if private and spec.epsilon is None:
        raise InvalidInputError("--epsilon is required (or --method none for a non-private "
                                "baseline)")
    replace = meth in ("objective", "output")
    facts = (PublicFacts() if schema is None else PublicFacts.from_schema(schema, spec.target)
             ).with_argument("sample_rate", spec.sample_rate, "--sample-rate"
             ).with_argument("max_rows_per_unit", spec.max_rows_per_unit, "--max-rows-per-unit")
    unit, per_unit = None, 1
    if schema is not None:
        unit, per_unit = facts.person_bound("--max-rows-per-unit")
    elif spec.max_rows_per_unit is not None:
        raise InvalidInputError("--max-rows-per-unit needs --schema with a privacy unit column")
    if unit is not None and replace:
        raise InvalidInputError(
            f"--method {meth}: objective/output perturbation protect one row under replace-one "
            f"neighbours (n fixed), which a person with several rows breaks; with privacy unit "
            f"{unit!r} use --method dpsgd (with --max-rows-per-unit)")
    mask_fn = train_mask_for(meth, spec.test_size, spec.seed)
    keep_rows = replace and spec.on_invalid == "coerce"
    if schema is not None:
        enc = encode_with_schema(frame, schema, spec.target, spec.on_invalid, spec.exclude,
                                 keep_rows=keep_rows, unit=unit,
                                 per_unit=per_unit)
        classes = facts.classes(f"schema {schema.name!r} declares no classes")
    elif unsafe_encoding:
        enc = encode_fitted(frame, spec.target, one_hot, dict(bounds or {}), mask_fn)
        classes = enc.classes
    else:
        raise InvalidInputError("no public schema: pass --schema NAME|FILE (draft one with "
                                "`privlab schema draft DATA > schema.yaml` and review it), or "
                                "--unsafe-encoding to fit the encoding on the data (NOT DP)")
    train = mask_fn(enc.split_frame)
    tr, te = np.flatnonzero(train), np.flatnonzero(~train)
    x_tr, x_te, y_tr, y_te = enc.x[tr], enc.x[te], enc.y[tr], enc.y[te]
    if len(tr) < 2:
        raise InvalidInputError(f"the training part has {len(tr)} rows: too few to train; use "
                                "more rows or a smaller --test-size")
    if enc.schema is None and len(pd.unique(y_tr)) < 2:
        raise InvalidInputError(f"the training part has only one class of {spec.target!r}; "
                                "use more rows or a different --test-size")
    # per person: every record-level mechanism runs at (eps/M, delta_row); group privacy over
    # the M rows of one person gives (eps, M e^((M-1) eps/M) delta_row) = (eps, delta)
    per_row = replace_spec(spec, per_unit) if unit is not None and private else spec
    share = spec.metrics_share if private else 0.0
    eps_total = per_row.epsilon if private else None
    eps_metrics = eps_total * share if private else 0.0
    eps_size = 0.0
    n_ref: float | None = None
    sample_source = None
    batch = spec.batch_size
    noised: list[str] = []
    if meth == "dpsgd":
        scale = 1.0
        if facts.get("sample_rate") is None and facts.get("size") is not None:
            scale = 1 - spec.test_size   # public_size counts all rows; q is for training rows
        elif facts.get("sample_rate") is None:
            if share == 0:
                raise InvalidInputError(
                    "DP-SGD needs a public sampling rate: pass --sample-rate Q (with "
                    "--batch-size), declare public_size in the schema, or keep "
                    "--metrics-share > 0 to estimate the training rows under DP")
            eps_size = eps_metrics / 2
            eps_metrics -= eps_size
            (est_n,), _, _ = noisy_counts([len(tr)], 1, eps_size, spec.seed, 1)
            if est_n < 2:
                raise InvalidInputError("the noisy estimate of the training rows is below "
                                        "2: too few rows for DP-SGD at this epsilon")
            facts = facts.with_measurement("size", int(est_n), epsilon=eps_size,
                                           mechanism="geometric-noise estimate of the "
                                                     "training rows")
            noised += ["sample_rate", "noise_multiplier", "steps", "epsilon_pld",
                       "epsilon_rdp", "expected_batch_size", "training_rows_estimate",
                       "model_guarantee"]
        if facts.get("sample_rate") is None:
            n_ref = float(facts.value("size", missing="no public size")) * scale
            batch = batch if batch is not None else int(min(DEFAULT_BATCH,
                                                            max(1, math.floor(n_ref))))
        q, sample_source = facts.sample_rate(
            batch, scale=scale, missing="DP-SGD needs a public sampling rate: pass "
                                        "--sample-rate Q (with --batch-size)")
    else:
        batch = batch if batch is not None else min(DEFAULT_BATCH, len(tr))
        if spec.model != "logreg":
            from privlab.learn.data import check_batch_size

            check_batch_size(batch, len(tr), "--batch-size")
        q = None
    eps_model = eps_total - eps_metrics - eps_size if private else None
    enc.classes = classes

    est = build_estimator(per_row, meth, eps_model, batch, enc, q)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(x_tr, y_tr, progress=progress)
    model_g: PrivacyGuarantee = est.guarantee_
    scrub(est)

    # counts and accuracies, each beside the majority-class baseline from the same counts
    labels = list(est.classes_)
    correct_tr = int(np.sum(est.predict(x_tr) == y_tr))
    correct_te = int(np.sum(est.predict(x_te) == y_te)) if len(te) else 0
    by_class_tr = [int(np.sum(y_tr == c)) for c in labels]
    by_class_te = [int(np.sum(y_te == c)) for c in labels]
    k = len(labels)
    exact = {"train_rows": len(tr), "test_rows": len(te)}
    metrics: dict[str, Any]
    counts_g = None
    base: dict[str, Any] | None = None
    if not private:
        metrics = {"rows": len(tr) + len(te), **exact,
                   "train_accuracy": _ratio(correct_tr, len(tr)),
                   "test_accuracy": _ratio(correct_te, len(te))}
        base = _baseline(labels, by_class_tr, by_class_te, len(tr), len(te), metrics,
                         "exact class counts of the same rows (plain training: not private)")
    elif share == 0:
        metrics = {"rows": None, "train_rows": None, "test_rows": None,
                   "train_accuracy": None, "test_accuracy": None}
    elif replace:  # n and the part sizes are public under replace-one neighbours
        # one replaced row changes its part's correct count by <= 1 and two class counts of
        # its part by 1 each: L1 sensitivity 3
        noisy, counts_g, scale = noisy_counts(
            [correct_tr, correct_te, *by_class_tr, *by_class_te], 3, eps_metrics, spec.seed, 2)
        c_tr, c_te = int(noisy[0]), int(noisy[1])
        metrics = {"rows": len(tr) + len(te), **exact,
                   "train_accuracy": _ratio(c_tr, len(tr)),
                   "test_accuracy": _ratio(c_te, len(te))}
        base = _baseline(labels, noisy[2:2 + k], noisy[2 + k:], len(tr), len(te), metrics,
                         BASELINE_NOISY, correct_te=c_te, scale=scale)
        noised += ["train_accuracy", "test_accuracy", "baseline"]
    else:
        # a row added or removed changes one class count of its part by 1 and its part's
        # correct count by <= 1: L1 sensitivity 2; the part sizes are sums of class counts
        noisy, counts_g, scale = noisy_counts(
            [*by_class_tr, *by_class_te, correct_tr, correct_te], 2, eps_metrics, spec.seed, 2)
        cls_tr, cls_te = noisy[:k], noisy[k:2 * k]
        n_tr, n_te = int(cls_tr.sum()), int(cls_te.sum())
        c_tr, c_te = int(noisy[2 * k]), int(noisy[2 * k + 1])
        metrics = {"rows": n_tr + n_te, "train_rows": n_tr, "test_rows": n_te,
                   "train_accuracy": _ratio(c_tr, n_tr),
                   "test_accuracy": _ratio(c_te, n_te)}
        base = _baseline(labels, cls_tr, cls_te, n_tr, n_te, metrics, BASELINE_NOISY,
                         correct_te=c_te, scale=scale)
        noised += ["rows", "train_rows", "test_rows", "train_accuracy", "test_accuracy",
                   "baseline"]

    guarantee = _guarantee(per_row, meth, model_g, eps_model, eps_metrics, eps_size,
                           sample_source, enc, counts_g is not None, replace)
    if enc.schema is not None and spec.on_invalid == "coerce":
        guarantee = guarantee.with_notes(COERCE_KEEP if keep_rows else COERCE_DROP)
    if unit is not None and private:
        guarantee = per_person(guarantee, spec, unit, per_unit)
    guarantee = guarantee.with_notes("public facts: " + "; ".join(facts.describe(NAMES)))
    payload: dict[str, Any] = {
        "headline": guarantee.headline(),
        "target": spec.target, "model": spec.model, "method": meth,
        "schema": None if enc.schema is None else {
            "name": enc.schema.name, "fingerprint": enc.schema.fingerprint()},
        "on_invalid": spec.on_invalid if enc.schema is not None else None,
        "invalid_rows": None if enc.schema is None or spec.on_invalid != "coerce" else (
            "kept with declared defaults" if keep_rows else "dropped"),
        "privacy_unit": unit or "row", "max_rows_per_unit": per_unit if unit else None,
        "features": int(enc.x.shape[1]),
        "feature_columns": list(getattr(enc.encoder, "columns", ()) or []),
        "classes": [str(c) for c in est.classes_],
        **metrics,
        "baseline": base,
        "epsilon_split": None if not private else {
            "model": eps_model, "training_rows_estimate": eps_size, "metrics": eps_metrics},
        "guarantee": guarantee.to_dict(),
        "model_guarantee": model_g.to_dict(),
        "preprocessing": {"encoding": "schema" if enc.schema is not None else "data-fitted",
                          "data_dependent": list(enc.leaks),
                          "row_norm_bound": enc.row_norm_bound},
        "warnings": sorted({str(w.message) for w in caught}),
    }
    training = getattr(est, "training_", None) or getattr(getattr(est, "torch_", None),
                                                          "training_", None)
    if training is not None and training.plan is not None:
        plan = training.plan
        payload.update({
            "noise_multiplier": plan.noise_multiplier, "sample_rate": plan.sample_rate,
            "sample_rate_source": sample_source,
            "training_rows_estimate": None if n_ref is None else n_ref,
            "steps": plan.steps, "epochs": spec.epochs, "clip": plan.clip, "delta": plan.delta,
            "expected_batch_size": plan.expected_batch_size,
            "epsilon_pld": plan.epsilon_pld, "epsilon_rdp": plan.epsilon_rdp,
            "accountant": spec.accountant, "engine": training.engine})
    elif getattr(est, "linear_", None) is not None:
        payload["mechanism_details"] = {k: v for k, v in est.linear_.details.items()
                                        if k != "noise_norms"}
        if replace:  # functions of n, which replace-one neighbouring holds fixed (public)
            noised += ["mechanism_details", "model_guarantee"]
    payload["noised"] = sorted(set(noised))
    return payload, est, enc, guarantee


COERCE_KEEP = ("--on-invalid coerce under replace-one neighbours: a row with no place in the "
               "schema (a missing value where missing: false, or a missing label) keeps its "
               "position with the column's declared default (else its first category or lower "
               "bound), so n stays fixed")
COERCE_DROP = ("--on-invalid coerce under add/remove neighbours: a row with no place in the "
               "schema is dropped, which is a removal inside the neighbouring relation")


def replace_spec(spec: TableTrainSpec, per_unit: int) -> TableTrainSpec:
    """The per-row spec of a person-level run: (eps/M, delta / (M e^((M-1) eps/M)))."""
    import dataclasses

    eps = float(spec.epsilon) / per_unit  # type: ignore[arg-type]
    delta = spec.delta / (per_unit * math.exp((per_unit - 1) * eps))
    return dataclasses.replace(spec, epsilon=eps, delta=delta)


def per_person(g: PrivacyGuarantee, spec: TableTrainSpec, unit: str,
               per_unit: int) -> PrivacyGuarantee:
    """Lift a per-row guarantee to one person of <= `per_unit` rows (group privacy)."""
    import dataclasses

    from privlab.schema.units import missing_unit_note

    return dataclasses.replace(
        g, epsilon=float(spec.epsilon), delta=float(spec.delta) if g.delta else 0.0,  # type: ignore[arg-type]
        neighbouring="user", accountant=f"group privacy over {per_unit} rows ({g.accountant})",
        notes=g.notes + (
            f"privacy unit {unit!r}: each person's rows are bounded to their first {per_unit}; "
            f"everything runs at epsilon/{per_unit} = {g.epsilon:.4g} and delta {g.delta:.3g} "
            f"per row, so ({spec.epsilon:g}, {spec.delta if g.delta else 0:g}) per person",
            missing_unit_note(unit)))


def scrub(est: Any) -> None:
    """Drop what a fitted estimator holds beyond the DP release, so the --save file is only
    the model: the per-epoch history (exact loss, accuracy, batch sizes and clipped fraction
    on the private rows) and, for objective / output perturbation, the drawn noise norms
    (knowing them would help remove the noise)."""
    for obj in (est, getattr(est, "torch_", None)):
        training = getattr(obj, "training_", None)
        if training is not None:
            training.history = []
    linear = getattr(est, "linear_", None)
    if linear is not None:
        linear.details.pop("noise_norms", None)


def build_estimator(spec: TableTrainSpec, meth: str, eps_model: float | None, batch: int,
                    enc: Encoded, sample_rate: float | None) -> Any:
    from privlab.learn.estimators import DPCNNClassifier, DPLogisticRegression, DPMLPClassifier

    common = dict(epsilon=eps_model, delta=spec.delta, method=meth, clip=spec.clip,
                  epochs=spec.epochs, batch_size=batch, accountant=spec.accountant,
                  random_state=spec.seed, classes=enc.classes,
                  sample_rate=sample_rate if meth == "dpsgd" else None)
    lr = spec.lr
    if spec.model == "logreg":
        return DPLogisticRegression(alpha=spec.alpha, data_norm=enc.row_norm_bound,
                                    lr=lr if lr is not None else 1e-2, **common)
    if spec.model == "mlp":
        return DPMLPClassifier(lr=lr if lr is not None else 1e-3, **common)
    shape = spec.image_shape(enc.x.shape[1]) if spec.image_shape else None
    return DPCNNClassifier(image_shape=shape, lr=lr if lr is not None else 1e-3, **common)


def _guarantee(spec: TableTrainSpec, meth: str, model_g: PrivacyGuarantee,
               eps_model: float | None, eps_metrics: float, eps_size: float,
               sample_source: str | None, enc: Encoded, counted: bool,
               replace: bool) -> PrivacyGuarantee:
    """One guarantee for everything the run outputs; nothing in it reads the rows."""
    from privlab.core.rng import SEEDED_NOTE
    from privlab.learn.dpsgd import FLOAT_NOTE

    covers = ["model weights (and the --save file)"]
    if enc.schema is not None:
        covers.append(f"features and classes (from schema {enc.schema.name!r}, public)")
    if meth == "none":
        g = model_g.with_not_covered("model weights (plain training)", "rows", "train_rows",
                                     "test_rows", "train_accuracy", "test_accuracy",
                                     "baseline (majority class and its accuracy, exact)")
        return g.with_not_covered(*enc.not_covered)
    if counted:
        covers.append("rows, train_rows, test_rows, train_accuracy, test_accuracy (geometric "
                      "noise on counts)" if not replace else
                      "train_accuracy, test_accuracy (geometric noise on correct counts)")
        covers.append("baseline: the " + BASELINE_NOISY)
    if replace:
        covers.append("rows, train_rows, test_rows: exact, public under replace-one "
                      "neighbouring (n is fixed)")
    if meth == "dpsgd":
        covers.append("sample_rate, noise_multiplier, steps, epsilon_pld, epsilon_rdp "
                      f"(sample rate from {sample_source})")
    parts = [f"model {eps_model:.4g}" + (f" (delta {spec.delta:g})" if model_g.delta else "")]
    if eps_size:
        parts.append(f"training-rows estimate {eps_size:.4g}")
    if counted:
        parts.append(f"counts {eps_metrics:.4g}")
    acc = {"dpsgd": f"DP-SGD calibrated to epsilon <= {eps_model:.4g} by the "
                    f"{spec.accountant.upper()} accountant",
           "objective": "objective perturbation (analytic bound)",
           "output": "output perturbation (mechanism calibration)"}[meth]
    notes = [f"epsilon split: {', '.join(parts)}; total {spec.epsilon:g} by sequential "
             "composition (an upper bound)"]
    if meth == "dpsgd":
        notes.append(FLOAT_NOTE)
    if spec.seed is not None:
        notes.append(SEEDED_NOTE + " (split key, sampling, noise)")
    mech = model_g.mechanism.split(" (")[0] if meth == "dpsgd" else model_g.mechanism
    mech = ("DP-SGD (Poisson-subsampled Gaussian, per-example L2 clipping)"
            if meth == "dpsgd" else mech)
    g = PrivacyGuarantee(
        epsilon=float(spec.epsilon), delta=float(model_g.delta),
        neighbouring=model_g.neighbouring, model="central",
        mechanism=mech + (" + geometric noise on counts" if counted or eps_size else ""),
        accountant=f"sequential composition: {acc}"
                   + ("; geometric counts exact" if counted or eps_size else ""),
        notes=tuple(notes), covers=tuple(covers))
    return g.with_not_covered(*enc.not_covered)
