"""`privlab synth DATA --schema NAME|FILE --method aim|mst|dpvae --epsilon E --rows N --out
OUT.csv`: release a DP synthetic table instead of the real one, with its guarantee; optional
evaluation (not private, listed in the guarantee's `not_covered`) and report.

Column kinds and domains come from the declared schema (`--schema`, the one declaration format;
`--estimate-domain` estimates chosen columns' categories / bounds under DP instead), never
from the data (the retired `--domain` is refused, naming its replacement); `--rows` is
required (a default equal to the input's row count would publish that exact count); no exact
count of the input is printed.

`synth_cmd` runs named steps, each checkable on its own: validate the options, build the
synthesizer (schema loaded), read the rows and check the options naming columns, the delta
policy, conform and split off the holdout, fit + sample + write, evaluate / report, print."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from privlab.cli.common import (
    check_column_options,
    check_delta_policy,
    console,
    emit_json,
    exclude_columns,
)
from privlab.cli.options import AllowWeak, DropAlias, Json, Report, TestingSeed, option
from privlab.data.io import read_table
from privlab.errors import InvalidInputError

EVAL_NOTE = ("the evaluation reads the real records and is NOT differentially private: keep it "
             "with the data controller")
EVAL_NOT_COVERED = ("evaluation (fidelity, train-on-synthetic accuracy and privacy checks "
                    "computed exactly on the real rows)")


def synth_cmd(
    file: Path = typer.Argument(..., help="CSV / TSV / Parquet file with the real records."),
    method: str = typer.Option(..., "--method", "-m",
                               help="aim (workload-adaptive marginals) | mst (tree of "
                                    "marginals) | dpvae (DP-SGD autoencoder)."),
    epsilon: Annotated[float, option("epsilon", "Total privacy budget, > 0.")] = ...,
    delta: Annotated[float, option("delta",
                                   "Total delta (choose far below 1 / the number of rows); above "
                                   "1e-3, or not below 1/(public size) when the schema declares "
                                   "public_size, is refused (exit 4) unless --allow-weak, as in "
                                   "every command.")] = 1e-6,
    allow_weak: AllowWeak = False,
    rows: Annotated[int, option("rows", "Synthetic rows to write.")] = ...,
    out: Annotated[Path, option("output file", "Output CSV (or .parquet).")] = ...,
    schema: Annotated[str, option("declared schema",
                                  "Public schema: a bundled name (privlab schema list) or a "
                                  "YAML/JSON file (draft: privlab schema draft DATA). Required: "
                                  "without it the command refuses (exit 2).")] = None,
    on_invalid: Annotated[str, option("invalid rows",
                              "Values outside the schema: refuse (exit 2, nothing written) "
                              "| coerce (clamp, round, <other>/missing).")] = "refuse",
    estimate_domain: str = typer.Option(None, "--estimate-domain",
                                        help="'all' or columns A,B: only their type is read "
                                             "from the schema; their categories / bounds are "
                                             "estimated under DP with part of the budget "
                                             "(default: every column as declared)."),
    domain: str = typer.Option(None, "--domain", hidden=True,
                               help="Retired: refused with the --schema that replaces it."),
    exclude: Annotated[str, option("columns to leave out",
                                   "Columns to leave out A,B (identifiers; default: none beyond "
                                   "the schema's identifiers).")] = None,
    drop: DropAlias = None,
    max_rows_per_unit: Annotated[int, option(
        "contribution bound", "With a schema whose privacy_unit is a person "
                              "column (aim, mst): keep each person's first M "
                              "rows; the guarantee is per person (default: the "
                              "schema's max_rows_per_unit).")] = None,
    bins: int = typer.Option(32, "--bins", help="Bins per numeric column (default 32)."),
    missing: str = typer.Option("value", "--missing",
                                help="value: missing is a value of its own | drop: drop rows "
                                     "with a missing value."),
    workload: str = typer.Option(None, "--workload",
                                 help="aim: marginals to preserve: 3way (default: every 2- and "
                              "3-way marginal), 2way, or a JSON file [[col, ...], ...]."),
    max_model_mb: float = typer.Option(None, "--max-model-mb",
                                       help="aim: the graphical model's size cap in MB of "
                                            "float64 cells (default 8; AIM's paper uses 80: "
                                            "slower, rarely better on small tables)."),
    epochs: int = typer.Option(None, "--epochs",
                               help="dpvae: training epochs (default 20)."),
    holdout: float = typer.Option(0.0, "--holdout",
                                  help="Keep this share of rows out of the fit for the "
                                       "evaluation (0 = fit on all rows)."),
    target: Annotated[str, option("label column",
                                  "Evaluation: class column for train-on-synthetic accuracy "
                                  "(without it: no accuracy is measured).")] = None,
    evaluate: bool = typer.Option(False, "--evaluate",
                                  help="Evaluate utility and privacy (not private: for the "
                                       "data controller)."),
    report: Report = None,
    delimiter: str = typer.Option(None, "--delimiter", help="Field delimiter (sniffed if unset)."),
    seed: TestingSeed = None,
    engine: str = typer.Option("memory", "--engine",
                               help="memory: read DATA here | spark: aim or mst count their "
                                    "exact marginals on Spark (DATA a Parquet file or "
                                    "directory, or table:NAME; every domain declared); the "
                                    "rounds and the sampling run here."),
    master: str = typer.Option(None, "--master",
                               help="With --engine spark: spark://HOST:PORT, yarn, sc://HOST "
                                    "(Spark Connect) or local[N] (default: $SPARK_REMOTE, "
                                    "$PRIVLAB_SPARK_MASTER, else local[*])."),
    as_json: Json = False,
) -> None:
    """Fit a DP synthesizer and write a synthetic table with its privacy guarantee."""
    from privlab.core.guarantee import check_delta, check_epsilon
    from privlab.synth import make_synthesizer

    if domain is not None:
        _refuse_retired_domain(domain)
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    _check_run_options(rows=rows, holdout=holdout, out=out, report=report, target=target,
                       on_invalid=on_invalid)
    options = _synth_options(method, schema=schema, estimate_domain=estimate_domain,
                             on_invalid=on_invalid, drop=exclude_columns(exclude, drop),
                             bins=bins, missing=missing, seed=seed,
                             max_rows_per_unit=max_rows_per_unit, epochs=epochs,
                             workload=workload, max_model_mb=max_model_mb)
    on_spark = _check_engine(engine, master, holdout=holdout, evaluate=evaluate,
                             report=report)
    if on_spark:
        from privlab.synth.spark import make_spark_synthesizer

        synth = make_spark_synthesizer(method, master=master, **options)
    else:
        synth = make_synthesizer(method, **options)  # its schema loaded and checked
    # the one delta policy, against the schema's public size only: before any row is read
    check_delta_policy(delta, allow_weak, synth.schema)
    # the sampler's reserve is sized from the schema: a delta it cannot fit is refused
    # (exit 4) here, before any row is read
    synth.check_budget(epsilon, delta)
    if on_spark:  # the rows stay in Spark: fit reads DATA there (checks its columns)
        train, hold, eval_columns = str(file), None, []
    else:
        frame = read_table(file, delimiter=delimiter)
        _check_column_options(frame, file, options["drop"], target)
        frame = synth.conform(frame)  # schema's columns and dtypes; refused or coerced here
        train, hold, eval_columns = _holdout_split(synth, frame, holdout, seed)
    guarantee, evaluation = _fit_sample_write(
        synth, method, train, hold, eval_columns, epsilon=epsilon, delta=delta, rows=rows,
        out=out, evaluate=evaluate, report=report, target=target, seed=seed,
        as_json=as_json)
    payload = _payload(synth, guarantee, evaluation, rows=rows, out=out, report=report)
    if as_json:
        emit_json(payload)
        return
    _print_human(synth, method, guarantee, evaluation, payload, rows=rows, out=out,
                 report=report)


def _refuse_retired_domain(value: str) -> None:
    """`--domain` is retired (the schema is the one declaration format): refused (exit 2)
    with the replacement, before anything is read."""
    from privlab.synth.legacy import retired_domain_message

    raise InvalidInputError(retired_domain_message(value))


def _check_engine(engine: str, master: str | None, *, holdout: float, evaluate: bool,
                  report: Path | None) -> bool:
    """True for --engine spark. What needs the rows in this process (the evaluation, the
    report, a holdout) is refused with it, naming the option (exit 2, nothing read)."""
    if engine not in ("memory", "spark"):
        raise InvalidInputError(f"--engine must be memory or spark, got {engine!r}")
    if engine == "memory":
        if master is not None:
            raise InvalidInputError("--master applies to --engine spark; add --engine spark")
        return False
    for flag, used in (("--evaluate", evaluate), ("--report", report is not None),
                       ("--holdout", holdout > 0)):
        if used:
            raise InvalidInputError(f"{flag} reads the real rows in this process; with "
                                    "--engine spark they stay in the cluster: drop the option "
                                    "or use --engine memory")
    return True


def _check_run_options(*, rows: int, holdout: float, out: Path, report: Path | None,
                       target: str | None, on_invalid: str) -> None:
    """Options that need neither the synthesizer nor the data (one-line errors, exit 2)."""
    from privlab.schema import check_policy

    if rows < 1:
        raise InvalidInputError(f"--rows must be >= 1, got {rows}")
    if not (0.0 <= holdout < 0.5):
        raise InvalidInputError(f"--holdout must be in [0, 0.5), got {holdout}")
    for label, path in (("--out", out), ("--report", report)):
        if path is not None and not path.parent.exists():
            raise InvalidInputError(f"{label} directory does not exist: {path.parent}")
    if target is not None and holdout == 0:
        raise InvalidInputError("--target needs --holdout FRAC (train-on-synthetic accuracy is "
                                "measured on real rows the synthesizer did not see)")
    check_policy(on_invalid)


def _synth_options(method: str, *, schema: str | None, estimate_domain: str | None,
                   on_invalid: str, drop: list[str], bins: int, missing: str,
                   seed: int | None, max_rows_per_unit: int | None, epochs: int | None,
                   workload: str | None, max_model_mb: float | None) -> dict[str, Any]:
    """The synthesizer's keyword options; a method-specific option given to another method
    is refused naming it."""
    options: dict[str, Any] = {"schema": schema, "estimate_domain": estimate_domain,
                               "on_invalid": on_invalid, "drop": drop, "bins": bins,
                               "missing": missing, "rng": seed,
                               "max_rows_per_unit": max_rows_per_unit}
    if epochs is not None and method == "dpvae":
        options["epochs"] = epochs
    elif epochs is not None and method in ("mst", "aim"):
        raise InvalidInputError(f"--epochs applies to dpvae, not to --method {method}")
    if workload is not None and method != "aim":
        raise InvalidInputError(f"--workload applies to --method aim, not to {method}")
    if workload is not None:
        options["workload"] = workload
    if max_model_mb is not None and method != "aim":
        raise InvalidInputError(f"--max-model-mb applies to --method aim, not to {method}")
    if max_model_mb is not None:
        if not (max_model_mb > 0 and max_model_mb < 1e6):  # also refuses NaN
            raise InvalidInputError(f"--max-model-mb must be a positive number of MB below "
                                    f"1e6, got {max_model_mb!r}")
        options["max_model_cells"] = max(1, int(max_model_mb * 2 ** 20 // 8))
    return options


def _holdout_split(synth: Any, frame: Any, holdout: float, seed: int | None
                   ) -> tuple[Any, Any, list[str]]:
    """(rows fitted, holdout rows or None, columns the evaluation compares). The person
    column only bounds rows in fit; the (non-private) evaluation ignores it."""
    from privlab.core.rng import make_rng

    unit, _ = synth.person_bound()
    if unit is not None and unit not in synth.declaration.columns:
        frame_eval = frame.drop(columns=[unit])
    else:
        frame_eval = frame
    if holdout == 0:
        return frame, None, list(frame_eval.columns)
    order = make_rng(seed).permutation(len(frame))
    cut = int(round(len(frame) * holdout))
    if cut < 10 or len(frame) - cut < 10:
        raise InvalidInputError("--holdout leaves fewer than 10 rows on one side")
    hold = frame_eval.iloc[order[:cut]].reset_index(drop=True)
    train = frame.iloc[order[cut:]].reset_index(drop=True)
    return train, hold, list(frame_eval.columns)


def _fit_sample_write(synth: Any, method: str, train: Any, hold: Any, eval_columns: list[str],
                      *, epsilon: float, delta: float, rows: int, out: Path, evaluate: bool,
                      report: Path | None, target: str | None, seed: int | None,
                      as_json: bool) -> tuple[Any, dict[str, Any] | None]:
    """Fit, sample `rows`, write them (atomically), then the optional (non-private)
    evaluation and report; returns (guarantee, evaluation or None). Progress per stage of the
    synthesizer (privlab.cli.progress): AIM rounds, MST marginals, DP-SGD steps, whose totals
    are fixed by the options or by DP estimates (a noisy row count), never the exact rows."""
    from privlab.cli.progress import reporter
    from privlab.utils.atomic import atomic_write_frame

    with reporter(f"synth {method}", as_json) as progress:
        synth.progress = progress
        synth.fit(train, epsilon, delta)
        table = synth.sample(rows)
        guarantee = synth.guarantee
        if evaluate or report is not None:
            guarantee = guarantee.with_not_covered(EVAL_NOT_COVERED)
        atomic_write_frame(table, out)
        evaluation = None
        if evaluate or report is not None:
            from privlab.synth.evaluate import evaluate as run_evaluation

            progress("evaluating", 0, 1)
            evaluation = run_evaluation(train[eval_columns], table, holdout=hold,
                                        target=target, seed=seed or 0)
        if report is not None:
            from privlab.synth.report import write_synth_report

            write_synth_report(report, synth, rows=rows, out=str(out), evaluation=evaluation,
                               guarantee=guarantee)
    return guarantee, evaluation


def _payload(synth: Any, guarantee: Any, evaluation: dict[str, Any] | None, *, rows: int,
             out: Path, report: Path | None) -> dict[str, Any]:
    """The JSON output (also the source of the warnings the human output prints)."""
    payload = {"out": str(out), "rows": rows, **synth.to_dict(),
               "guarantee": guarantee.to_dict()}
    if evaluation is not None:
        payload["evaluation"] = evaluation
        payload["warnings"] = payload["warnings"] + [EVAL_NOTE]
    if report is not None:
        payload["report"] = str(report)
    return payload


def _print_human(synth: Any, method: str, g: Any, evaluation: dict[str, Any] | None,
                 payload: dict[str, Any], *, rows: int, out: Path, report: Path | None
                 ) -> None:
    """The human output: guarantee, budget lines, warnings, then the evaluation."""
    console.print(f"[bold]{escape(g.headline())}[/bold]")
    console.print(f"{method}: {rows:,} synthetic rows written to {out}")
    console.print(f"  guarantee: {g.describe()}")
    for b in synth.budget_lines():
        cost = f"rho={b['rho']:.4g}" if "rho" in b else f"epsilon={b['epsilon']:.4g}"
        console.print(f"  budget: {b['step']}: {cost}")
    for w in payload["warnings"]:
        console.print(f"  [yellow]warning[/yellow]: {w}")
    if evaluation is not None:
        _print_evaluation(evaluation)
    if report is not None:
        console.print(f"report written to {report}")


def _print_evaluation(evaluation: dict[str, Any]) -> None:
    f = evaluation["fidelity"]
    console.print(f"  evaluation: TVD vs training rows 1/2/3-way {_tvds(f)}")
    if "fidelity_holdout" in evaluation:
        console.print(f"  TVD vs holdout rows 1/2/3-way {_tvds(evaluation['fidelity_holdout'])}"
                      f" (floor, real training rows: {_tvds(evaluation['floor'])})")
    ml = evaluation.get("ml_utility")
    if ml:
        console.print(f"  accuracy on real holdout: trained on synthetic "
                      f"{ml['train_synthetic_accuracy']:.3f}, on real (ceiling) "
                      f"{ml['train_real_accuracy']:.3f}, majority-class baseline "
                      f"{ml['majority_class_accuracy']:.3f} (always "
                      f"{escape(repr(ml['majority_class']))})", highlight=False)
        for who in ("synthetic", "real"):
            if not ml[f"train_{who}_better_than_baseline"]:
                console.print(f"  [yellow]the model trained on {who} rows is "
                              f"{escape(ml[f'train_{who}_verdict'])}[/yellow]",
                              highlight=False)
        if "train_synthetic_auc" in ml:
            console.print(f"  AUC on real holdout: trained on synthetic "
                          f"{ml['train_synthetic_auc']:.3f}, on real (ceiling) "
                          f"{ml['train_real_auc']:.3f}")
    pv = evaluation.get("privacy")
    if pv:
        console.print(f"  membership-inference AUC {pv['membership_inference']['auc']:.3f}; "
                      f"copies of unique records: synthetic "
                      f"{pv['rare_copies']['synthetic_copy_rate']:.4f} vs holdout "
                      f"{pv['rare_copies']['holdout_match_rate']:.4f}")


def _check_column_options(frame: Any, file: Path, drop: list[str], target: str | None) -> None:
    """Every option that names columns names columns of DATA (one-line error, exit 2), and
    the class column is not left out."""
    check_column_options(frame, file.name, {"--exclude": drop, "--target": target})
    if target is not None and target in drop:
        raise InvalidInputError(f"--target {target!r} is also in --exclude; keep the class column")


def _tvds(f: dict[str, Any]) -> str:
    return " / ".join("-" if f.get(k) is None else f"{f[k]:.3f}"
                      for k in ("tvd_1way_mean", "tvd_2way_mean", "tvd_3way_mean"))


def register(app: typer.Typer) -> None:
    app.command("synth")(synth_cmd)
