"""The choose-epsilon job's settings (`PipelineConfig`) and the rows it works on (`prepare`):
encoded once, split (seeded, stratified) into target training rows, held-out test rows and an
attacker pool the target never sees.

Why a module of its own: the sweep (`risk.sweep`) and the whole job (`risk.pipeline`) both
read these; the split is where the audited members and non-members are decided.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from privlab.errors import InvalidInputError, option_name
from privlab.risk.model import (
    check_grid,
    normalise_weights,
)
from privlab.risk.posterior import parse_prior

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
