"""`privlab train DATA --target COL --model logreg|mlp|cnn --epsilon E --delta D ...`.

DATA is a CSV / TSV / Parquet file, or the name of a bundled dataset (adult, digits,
classification). The table is split (seeded, --test-size), preprocessed (numeric columns
scaled to [0, 1] by public --bounds or, with a warning, by the data's own range; text
columns one-hot with --one-hot), trained, and evaluated on the held-out part. The JSON has
the test accuracy, the guarantee (with its accountant) and, for DP-SGD, the noise multiplier,
sample rate and step count so anyone can recompute epsilon.
"""

from __future__ import annotations

import math
import warnings
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np
import typer

from privlab.cli.common import console, emit_json, err_console
from privlab.errors import InvalidInputError


class ModelKind(StrEnum):
    logreg = "logreg"
    mlp = "mlp"
    cnn = "cnn"


class Method(StrEnum):
    dpsgd = "dpsgd"
    objective = "objective"
    output = "output"
    none = "none"


_BUNDLED = {"adult": "salary", "digits": "target", "classification": "target"}


def _parse_bounds(text: str | None) -> dict[str, tuple[float, float]]:
    """'age=17:90,hours=1:99' -> {'age': (17, 90), 'hours': (1, 99)}."""
    if not text:
        return {}
    out = {}
    for part in text.split(","):
        name, sep, rng = part.partition("=")
        lo, sep2, hi = rng.partition(":")
        try:
            if not (sep and sep2):
                raise ValueError
            out[name.strip()] = (float(lo), float(hi))
        except ValueError:
            raise InvalidInputError(f"--bounds must look like COL=LO:HI,COL2=LO:HI, got "
                                    f"{part!r}") from None
    return out


def _load(data: str, delimiter: str | None) -> tuple[Any, str]:
    from privlab.data.datasets import load_dataset
    from privlab.data.io import read_table

    path = Path(data)
    if not path.exists() and data in _BUNDLED:
        opts = {"drop_missing": True} if data == "adult" else {}
        return load_dataset(data, **opts), f"bundled dataset {data!r}"
    return read_table(path, delimiter=delimiter), str(path)


def _image_shape(text: str | None, d: int) -> tuple[int, int, int]:
    if text:
        try:
            shape = tuple(int(v) for v in text.split(","))
        except ValueError:
            shape = ()
        if len(shape) != 3 or math.prod(shape) != d:
            raise InvalidInputError(f"--image-shape must be C,H,W with C*H*W = {d} features, "
                                    f"got {text!r}")
        return shape  # type: ignore[return-value]
    side = math.isqrt(d)
    if side * side != d:
        raise InvalidInputError(f"--model cnn needs square images: {d} features is not a "
                                "square; pass --image-shape C,H,W")
    return (1, side, side)


def train_cmd(
    data: str = typer.Argument(..., help="CSV/TSV/Parquet file, or adult|digits|classification."),
    target: str = typer.Option(..., "--target", "-t", help="Label column."),
    model: ModelKind = typer.Option(ModelKind.mlp, "--model", "-m", help="Model family."),
    epsilon: float = typer.Option(None, "--epsilon", "-e", help="Privacy budget, > 0."),
    delta: float = typer.Option(1e-5, "--delta", help="Delta (0 allowed for objective/output)."),
    clip: float = typer.Option(1.0, "--clip", help="DP-SGD per-example clipping norm."),
    epochs: int = typer.Option(10, "--epochs", help="Training epochs (DP-SGD / plain)."),
    batch_size: int = typer.Option(None, "--batch-size",
                                   help="(Expected) batch size (default: 256, or all rows of "
                                        "a smaller training set)."),
    method: Method = typer.Option(None, "--method",
                                  help="dpsgd | objective | output | none (default: objective "
                                       "for logreg, dpsgd otherwise)."),
    lr: float = typer.Option(None, "--lr", help="Learning rate (default 1e-3; logreg 1e-2)."),
    alpha: float = typer.Option(1e-4, "--alpha", help="logreg: L2 regularisation (> 0)."),
    test_size: float = typer.Option(0.2, "--test-size", help="Held-out fraction."),
    one_hot: bool = typer.Option(False, "--one-hot", help="One-hot encode text columns."),
    bounds: str = typer.Option(None, "--bounds", help="Public ranges COL=LO:HI,... for "
                               "numeric columns (else read from the data, with a warning)."),
    image_shape: str = typer.Option(None, "--image-shape", help="cnn: C,H,W of each row."),
    accountant: str = typer.Option("pld", "--accountant", help="pld (tight) or rdp."),
    seed: int = typer.Option(None, "--seed", help="Reproducible run (seeded noise): testing ONLY."),
    save: Path = typer.Option(None, "--save", help="Write the fitted model (pickle)."),
    delimiter: str = typer.Option(None, "--delimiter", help="Field delimiter (sniffed if unset)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Train a classifier with differential privacy and report its guarantee."""
    from privlab.core.guarantee import check_epsilon
    from privlab.learn.data import (
        TablePreprocessor,
        adult_preprocessor,
        check_batch_size,
        split_target,
    )

    kind = model.value
    meth = (method.value if method else ("objective" if kind == "logreg" else "dpsgd"))
    allowed = {"logreg": ("objective", "output", "dpsgd", "none"), "mlp": ("dpsgd", "none"),
               "cnn": ("dpsgd", "none")}[kind]
    if meth not in allowed:
        raise InvalidInputError(f"--method {meth} does not apply to --model {kind}; use one of "
                                f"{', '.join(allowed)}")
    if meth != "none":
        if epsilon is None:
            raise InvalidInputError("--epsilon is required (or --method none for a non-private "
                                    "baseline)")
        check_epsilon(epsilon, "--epsilon")
    if not (0 < test_size < 1):
        raise InvalidInputError(f"--test-size must be in (0, 1), got {test_size}")
    if accountant not in ("pld", "rdp"):
        raise InvalidInputError(f"--accountant must be pld or rdp, got {accountant!r}")
    frame, source = _load(data, delimiter)
    features, labels = split_target(frame, target)
    n = len(frame)
    order = np.random.default_rng(0 if seed is None else seed).permutation(n)
    cut = int(round(n * (1 - test_size)))
    if cut < 2 or n - cut < 1:
        raise InvalidInputError(f"the table has {n} rows: too few to split into training and "
                                f"test parts at --test-size {test_size}")
    tr, te = order[:cut], order[cut:]
    if batch_size is None:
        batch_size = min(256, cut)
    elif kind != "logreg" or meth == "dpsgd":  # objective/output/plain logreg use no batches
        check_batch_size(batch_size, cut, "--batch-size")
    y_tr, y_te = labels.to_numpy()[tr], labels.to_numpy()[te]
    if len(np.unique(y_tr)) < 2:
        raise InvalidInputError(f"the training part has only one class of {target!r}; use more "
                                "rows or a different --test-size")

    if data == "adult" and not Path(data).exists() and not bounds:
        from privlab.learn.data import adult_features

        prep = adult_preprocessor()
        f_tr, f_te = adult_features(features.iloc[tr]), adult_features(features.iloc[te])
    else:
        public = _parse_bounds(bounds)
        if data == "digits" and not Path(data).exists() and not public:
            public = {f"pixel_{i}": (0.0, 16.0) for i in range(64)}  # public pixel range
        prep = TablePreprocessor(one_hot=one_hot, bounds=public)
        f_tr, f_te = features.iloc[tr], features.iloc[te]
    x_tr = prep.fit_transform(f_tr)
    x_te = prep.transform(f_te)
    # each numeric feature lies in [0, 1] and each one-hot block has one 1: a public norm bound
    data_norm = math.sqrt(len(prep.numeric_) + len(prep.categorical_))

    est = _estimator(kind, meth, epsilon, delta, clip, epochs, batch_size, lr, alpha, data_norm,
                     accountant, seed, _image_shape(image_shape, x_tr.shape[1])
                     if kind == "cnn" else None)
    show = not as_json and err_console.is_terminal
    from rich.progress import Progress

    with warnings.catch_warnings(record=True) as caught, \
            Progress(console=err_console, disable=not show, transient=True) as bar:
        warnings.simplefilter("always")
        task = bar.add_task(f"training {kind} ({meth})", total=epochs)
        est.fit(x_tr, y_tr, progress=lambda e, total, row: bar.update(task, completed=e))
    guarantee = est.guarantee_
    if prep.leaks:
        guarantee = guarantee.with_notes(
            "preprocessing read from the training data (NOT covered by this guarantee): "
            + "; ".join(prep.leaks) + ". Pass --bounds (and public categories) to avoid it")
    payload: dict[str, Any] = {
        "data": source, "target": target, "model": kind, "method": meth,
        "rows": n, "train_rows": int(cut), "test_rows": int(n - cut),
        "features": int(x_tr.shape[1]), "classes": [str(c) for c in est.classes_],
        "test_accuracy": float(est.score(x_te, y_te)),
        "train_accuracy": float(est.score(x_tr, y_tr)),
        "guarantee": guarantee.to_dict(),
        "preprocessing": {"data_dependent": list(prep.leaks), "row_norm_bound": data_norm},
        "warnings": sorted({str(w.message) for w in caught}),
    }
    training = getattr(est, "training_", None) or getattr(getattr(est, "torch_", None),
                                                          "training_", None)
    if training is not None and training.plan is not None:
        plan = training.plan
        payload.update({
            "noise_multiplier": plan.noise_multiplier, "sample_rate": plan.sample_rate,
            "steps": plan.steps, "epochs": epochs, "clip": plan.clip, "delta": plan.delta,
            "expected_batch_size": plan.expected_batch_size,
            "epsilon_pld": plan.epsilon_pld, "epsilon_rdp": plan.epsilon_rdp,
            "accountant": accountant, "engine": training.engine,
            "training_seconds": training.seconds})
    elif getattr(est, "linear_", None) is not None:
        payload["mechanism_details"] = {k: v for k, v in est.linear_.details.items()
                                        if k != "noise_norms"}
    if save is not None:
        from privlab.learn.estimators import save_model

        save_model(est, save, extra={"preprocessor": prep, "target": target,
                                     "source": source})
        payload["saved"] = str(save)
    if as_json:
        emit_json(payload)
        return
    console.print(f"[bold]{kind}[/bold] ({meth}) on {source}: test accuracy "
                  f"{payload['test_accuracy']:.4f} (train {payload['train_accuracy']:.4f}, "
                  f"{cut} training rows)")
    console.print(f"  guarantee: {guarantee.describe()}")
    if "noise_multiplier" in payload:
        console.print(f"  DP-SGD: noise multiplier {payload['noise_multiplier']:.4g}, sample rate "
                      f"{payload['sample_rate']:.4g}, {payload['steps']} steps, clip "
                      f"{payload['clip']:g}; epsilon PLD {payload['epsilon_pld']:.4g} / RDP "
                      f"{payload['epsilon_rdp']:.4g}")
    for note in guarantee.notes:
        console.print(f"  note: {note}")
    for w in payload["warnings"]:
        err_console.print(f"warning: {w}")
    if save is not None:
        console.print(f"  saved to {save}")


def _estimator(kind: str, meth: str, epsilon: float | None, delta: float, clip: float,
               epochs: int, batch_size: int, lr: float | None, alpha: float, data_norm: float,
               accountant: str, seed: int | None, shape: tuple[int, int, int] | None) -> Any:
    from privlab.learn.estimators import DPCNNClassifier, DPLogisticRegression, DPMLPClassifier

    common = dict(epsilon=epsilon, delta=delta, method=meth, clip=clip, epochs=epochs,
                  batch_size=batch_size, accountant=accountant, random_state=seed)
    if kind == "logreg":
        return DPLogisticRegression(alpha=alpha, data_norm=data_norm,
                                    lr=lr if lr is not None else 1e-2, **common)
    if kind == "mlp":
        return DPMLPClassifier(lr=lr if lr is not None else 1e-3, **common)
    return DPCNNClassifier(image_shape=shape, lr=lr if lr is not None else 1e-3, **common)


def register(app: typer.Typer) -> None:
    app.command("train")(train_cmd)
