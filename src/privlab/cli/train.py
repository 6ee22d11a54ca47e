"""`privlab train DATA --schema NAME|FILE --target COL --model logreg|mlp|cnn --epsilon E ...`.

DATA is a CSV / TSV / Parquet file, or the name of a bundled dataset (adult, digits,
classification: their bundled schema is used automatically). The rows are conformed to the
declared public schema (`--on-invalid refuse|coerce`) and encoded from it alone
(`privlab.learn.data.SchemaEncoder`), split by a per-row keyed hash, trained, and measured
under DP (`privlab.learn.table`). The first line printed is the guarantee's headline; the
JSON holds the guarantee with `covers` / `not_covered`, the noisy counts and accuracies and,
for DP-SGD, the noise multiplier, sample rate and step count so anyone can recompute the
model's epsilon. With a person-level schema (`privacy_unit: pid`) each person's first M rows
are kept (`--max-rows-per-unit`) and the guarantee is per person (group privacy), as in
`privlab release`. Without a schema the command refuses (or, with --unsafe-encoding, fits the
encoding on the data and says NOT differentially private).
"""

from __future__ import annotations

import math
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from privlab.cli.common import (
    check_delta_policy,
    console,
    emit_json,
    err_console,
    print_baseline,
)
from privlab.cli.options import AllowWeak, Json, TestingRunSeed, option
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


def _load(data: str, delimiter: str | None, infer: bool = False
          ) -> tuple[Any, str, str | None]:
    """(frame, source, bundled dataset name or None). A file's cells are text for the schema
    to type (`infer`: pandas' types, only for --unsafe-encoding without a schema: NOT DP)."""
    from privlab.data.datasets import load_dataset
    from privlab.data.io import read_table

    path = Path(data)
    if not path.exists() and data in _BUNDLED:
        return load_dataset(data), f"bundled dataset {data!r}", data
    return read_table(path, delimiter=delimiter, infer=infer), str(path), None


#: Columns of a bundled dataset that are not features by default (public choice).
DEFAULT_EXCLUDE = {"adult": ["fnlwgt"]}  # a survey sampling weight, not a trait


def resolve_schema(schema: str | None, bundled: str | None) -> Any:
    """--schema NAME|FILE, else the bundled dataset's schema, else None."""
    from privlab.schema import bundled_schema, load_schema

    if schema is not None:
        return load_schema(schema)
    if bundled is not None:
        return bundled_schema(bundled)
    return None


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
    target: Annotated[str, option("label column",
                                  "Label column (default for a bundled dataset: its "
                                  "label).")] = None,
    schema: Annotated[str, option("declared schema",
                                  "Declared public schema: a bundled name or a YAML/JSON file "
                                  "(`privlab schema draft` starts one; default: a bundled "
                                  "dataset's own, none for a file: refused unless "
                                  "--unsafe-encoding).")] = None,
    on_invalid: Annotated[str, option("invalid rows",
                              "refuse | coerce: values outside the schema are refused "
                              "(one-line error) or clamped / bucketed (a row with no place "
                              "is dropped, or for objective/output kept with the declared "
                              "default).")] = "refuse",
    exclude: Annotated[str, option("columns to leave out",
                                   "Comma list of declared columns not to use as features (adult: "
                                   "fnlwgt by default).")] = None,
    max_rows_per_unit: Annotated[int, option(
        "contribution bound", "With a person-level schema: keep each person's "
                              "first M rows (contribution bound; default: "
                              "the schema's max_rows_per_unit).")] = None,
    model: ModelKind = typer.Option(ModelKind.mlp, "--model", "-m", help="Model family."),
    epsilon: Annotated[float, option("epsilon",
                                     "Total privacy budget, > 0 (model, sampling-rate estimate and "
                                     "metrics together); without it only --method none "
                                     "runs.")] = None,
    delta: Annotated[float, option("delta", "Delta (0 allowed for objective/output).")] = 1e-5,
    allow_weak: AllowWeak = False,
    clip: float = typer.Option(1.0, "--clip", help="DP-SGD per-example clipping norm."),
    epochs: int = typer.Option(10, "--epochs", help="Training epochs (DP-SGD / plain)."),
    batch_size: int = typer.Option(None, "--batch-size",
                                   help="(Expected) batch size (default: 256, or all rows of "
                                        "a smaller training set)."),
    sample_rate: float = typer.Option(None, "--sample-rate", help="DP-SGD: a public Poisson "
                              "sampling rate (default: from the schema's public_size or "
                              "a DP estimate of the training rows)."),
    metrics_share: float = typer.Option(0.1, "--metrics-share", help="Share of epsilon for "
                                        "the noisy counts and accuracies (0: none released)."),
    method: Method = typer.Option(None, "--method",
                                  help="dpsgd | objective | output | none (default: objective "
                                       "for logreg, dpsgd otherwise)."),
    lr: float = typer.Option(None, "--lr", help="Learning rate (default 1e-3; logreg 1e-2)."),
    alpha: float = typer.Option(1e-4, "--alpha", help="logreg: L2 regularisation (> 0)."),
    test_size: float = typer.Option(0.2, "--test-size", help="Held-out fraction."),
    unsafe_encoding: bool = typer.Option(False, "--unsafe-encoding", help="Without a schema: "
                                         "fit the encoding on the data (NOT DP; says so)."),
    one_hot: bool = typer.Option(False, "--one-hot", help="--unsafe-encoding: one-hot encode "
                                 "text columns."),
    bounds: str = typer.Option(None, "--bounds", help="--unsafe-encoding: public ranges "
                               "COL=LO:HI[,COL=LO:HI] of numeric columns (default: "
                               "none; an unbounded column's range comes from the data)."),
    image_shape: str = typer.Option(None, "--image-shape", help="cnn: C,H,W of each row "
                                    "(default: one channel, square)."),
    accountant: str = typer.Option("pld", "--accountant", help="pld (tight) or rdp."),
    seed: TestingRunSeed = None,
    save: Path = typer.Option(None, "--save", help="Write the fitted model (pickle; "
                              "default: not saved)."),
    delimiter: str = typer.Option(None, "--delimiter", help="Field delimiter (sniffed if unset)."),
    as_json: Json = False,
) -> None:
    """Train a classifier with differential privacy and report its guarantee."""
    from privlab.cli.common import check_column_options, parse_column_ranges, parse_list
    from privlab.core.guarantee import check_epsilon
    from privlab.learn.table import TableTrainSpec, train_table
    from privlab.schema import check_policy

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
    check_policy(on_invalid)
    if save is not None and not save.parent.exists():
        raise InvalidInputError(f"--save directory does not exist: {save.parent}")
    bundled = data if (not Path(data).exists() and data in _BUNDLED) else None
    declared = resolve_schema(schema, bundled)  # public: before any row is read
    if meth != "none":  # one delta policy in every command, against the public size only
        check_delta_policy(delta, allow_weak, declared)
    public = parse_column_ranges(bounds, "--bounds")
    frame, source, _ = _load(data, delimiter, infer=declared is None)
    if target is None:
        target = _BUNDLED.get(bundled or "")
        if target is None:
            raise InvalidInputError("--target is required: the label column of DATA")
    if declared is None and not unsafe_encoding and (one_hot or bounds):
        raise InvalidInputError("--one-hot/--bounds fit the encoding on the data: pass --schema "
                                "(draft one with `privlab schema draft DATA > schema.yaml`), or "
                                "add --unsafe-encoding to accept a release that is NOT DP")
    if declared is not None and (one_hot or bounds or unsafe_encoding):
        raise InvalidInputError("--one-hot/--bounds/--unsafe-encoding are for data without a "
                                "schema; the schema already declares the encoding")
    drop = parse_list(exclude, "--exclude") if exclude else DEFAULT_EXCLUDE.get(bundled or "",
                                                                                 [])
    # every column-naming option names a column of DATA (one line, exit 2), before any work
    check_column_options(frame, source, {"--target": target,
                                         "--exclude": drop if exclude else None,
                                         "--bounds": list(public)})
    spec = TableTrainSpec(
        target=target, model=kind, method=meth, epsilon=epsilon, delta=delta, clip=clip,
        epochs=epochs, batch_size=batch_size, lr=lr, alpha=alpha, test_size=test_size,
        accountant=accountant, seed=seed, sample_rate=sample_rate, metrics_share=metrics_share,
        on_invalid=on_invalid, exclude=drop, max_rows_per_unit=max_rows_per_unit,
        image_shape=(lambda d: _image_shape(image_shape, d)) if kind == "cnn" else None)
    from privlab.cli.progress import per_epoch, reporter

    # one step per epoch (fixed by --epochs), never per batch: a Poisson-sampled epoch's
    # batch count follows the private row count
    with reporter("train", as_json) as report:
        payload, est, enc, guarantee = train_table(
            frame, spec, schema=declared, unsafe_encoding=unsafe_encoding, one_hot=one_hot,
            bounds=public, progress=per_epoch(report, f"{kind} ({meth}) epoch"))
    payload = {"headline": payload.pop("headline"), "data": source, **payload}
    if save is not None:
        from privlab.learn.estimators import save_model

        save_model(est, save, extra={"preprocessor": enc.encoder, "target": target,
                                     "source": source, "guarantee": guarantee.to_dict()})
        payload["saved"] = str(save)
    if as_json:
        emit_json(payload)
        return
    console.print(f"[bold]{escape(guarantee.headline())}[/bold]")
    acc = payload["test_accuracy"]
    noisy = "noisy " if "test_accuracy" in payload["noised"] else ""
    console.print(f"{kind} ({meth}) on {source}: "
                  + (f"{noisy}test accuracy {acc:.4f} (train {payload['train_accuracy']:.4f}, "
                     f"about {payload['train_rows']} training rows)" if acc is not None
                     else "metrics not released (--metrics-share 0)"))
    _print_baseline(payload)
    console.print(f"  guarantee: {guarantee.describe()}")
    if "noise_multiplier" in payload:
        console.print(f"  DP-SGD: noise multiplier {payload['noise_multiplier']:.4g}, sample rate "
                      f"{payload['sample_rate']:.4g} ({payload['sample_rate_source']}), "
                      f"{payload['steps']} steps, clip {payload['clip']:g}; model epsilon PLD "
                      f"{payload['epsilon_pld']:.4g} / RDP {payload['epsilon_rdp']:.4g}")
    for note in guarantee.notes:
        console.print(f"  note: {note}")
    for w in payload["warnings"]:
        err_console.print(f"warning: {w}")
    if save is not None:
        console.print(f"  saved to {save}")


def _print_baseline(payload: dict[str, Any]) -> None:
    """The majority-class baseline beside the accuracy, and the verdict when the model did not
    beat it (the baseline comes from the same noisy counts as the accuracy)."""
    print_baseline(payload.get("baseline"), subject="the model", digits=4,
                   noisy="baseline" in payload["noised"],
                   advice="it learnt nothing useful (more epochs, more rows or a larger "
                          "epsilon may help)")


def register(app: typer.Typer) -> None:
    app.command("train")(train_cmd)
