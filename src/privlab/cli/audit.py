"""`privlab audit DATA --target COL`: membership-inference audit of a model trained on DATA;
`privlab audit lm`: secret extraction from a small language model (exposure and extraction of
inserted secrets, as in Carlini et al., "The Secret Sharer", USENIX Security 2019).

Exactly one of --epsilon E (DP-SGD to the accounted (E, delta)) or --no-dp (a deliberately
non-private target) is required. Features and classes come from the declared schema
(`--schema`, bundled for adult and classification; `--on-invalid refuse|coerce`). JSON holds,
per attack, auc, advantage, tpr_at_fpr, counts and empirical_epsilon (lower bound and
intervals) next to the target's accounted `guarantee`. The audit is an evaluation, NOT a
release: `"release": false` and `audit_guarantee` (not DP, every row-derived field named)
say so, and the console's first line says it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from privlab.cli.common import (
    check_column_options,
    check_delta_policy,
    console,
    emit_json,
    parse_floats,
    parse_list,
    print_baseline,
    require_extra,
    warn,
)
from privlab.cli.options import AllowWeak, Json, option
from privlab.errors import InvalidInputError

_BUNDLED = {"adult": "salary", "classification": "target"}


def _load(data: str, delimiter: str | None, infer: bool = False
          ) -> tuple[Any, str, str | None]:
    """A file's cells as text for the schema to type (`infer`: --unsafe-encoding, NOT DP)."""
    from privlab.data.datasets import load_dataset
    from privlab.data.io import read_table

    path = Path(data)
    if not path.exists() and data in _BUNDLED:
        return load_dataset(data), f"bundled dataset {data!r}", data
    return read_table(path, delimiter=delimiter, infer=infer), str(path), None


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "inf" if not math.isfinite(v) else f"{v:.3f}"
    return str(v)


def audit_cmd(
    data: str = typer.Argument(..., help="CSV/TSV/Parquet file, a bundled dataset (adult, "
                                         "classification), or `lm` for the language-model "
                                         "secret-extraction audit."),
    target: Annotated[str, option("label column",
                                  "Label column (tables; default for a bundled dataset: "
                                  "its label).")] = None,
    schema: Annotated[str, option("declared schema",
                                  "Declared public schema (bundled name or YAML/JSON file; "
                                  "default: a bundled dataset's own, none for a file: refused "
                                  "unless --unsafe-encoding).")] = None,
    on_invalid: Annotated[str, option("invalid rows",
                              "refuse | coerce values outside the schema.")] = "refuse",
    exclude: Annotated[str, option("columns to leave out",
                                   "Declared columns not used as features (adult: fnlwgt by "
                                   "default).")] = None,
    max_rows_per_unit: Annotated[int, option(
        "contribution bound", "With a person-level schema: keep each person's "
                              "first M rows (contribution bound; the audit "
                              "needs M = 1; default: the schema's "
                              "max_rows_per_unit).")] = None,
    unsafe_encoding: bool = typer.Option(False, "--unsafe-encoding", help="Without a schema: "
                                         "fit the encoding on the members (the target's "
                                         "guarantee then says NOT DP)."),
    model: str = typer.Option("mlp", "--model", "-m", help="mlp | logreg (tables)."),
    epsilon: Annotated[float, option("epsilon",
                                     "Train the target by DP-SGD to this epsilon (without it: give "
                                     "--no-dp).")] = None,
    no_dp: bool = typer.Option(False, "--no-dp", help="Train the target WITHOUT DP "
                               "(baseline / overfit audit target)."),
    delta: Annotated[float, option("delta",
                                   "Delta of the DP run (and of the empirical bound).")] = 1e-5,
    allow_weak: AllowWeak = False,
    attacks: str = typer.Option("loss,confidence,shadow,lira", "--attacks",
                                help="Comma list: loss, confidence, entropy, mentr, shadow, "
                                     "shadow_label, lira, lira_offline."),
    shadow_models: int = typer.Option(5, "--shadow-models", help="Shadow models (Shokri)."),
    lira_models: int = typer.Option(16, "--lira-models", help="Shadow models for LiRA (even)."),
    members: int = typer.Option(None, "--members", help="Target training rows (default: a "
                                "quarter of the distinct rows)."),
    epochs: int = typer.Option(30, "--epochs", help="Training epochs (target and shadows)."),
    batch_size: int = typer.Option(64, "--batch-size", help="(Expected) batch size."),
    lr: float = typer.Option(1e-3, "--lr", help="Adam learning rate."),
    fprs: str = typer.Option(None, "--fprs", help="FPRs for TPR@FPR (default "
                             "0.001,0.01,0.1; those the data cannot support are skipped)."),
    level: float = typer.Option(0.95, "--level", help="Confidence / credible level."),
    eps_method: str = typer.Option("holdout", "--eps-method",
                                   help="holdout | bonferroni (threshold selection)."),
    seed: Annotated[int, option("seed",
                                "Split, initialisation and (seeded, testing only) DP noise.")] = 0,
    quick: bool = typer.Option(False, "--quick", help="lm: a seconds-long smoke run (tiny "
                               "model, few steps): NOT the experiment."),
    report: Annotated[Path, option("report",
                                   "Write an HTML report here (tables; default: no "
                                   "report).")] = None,
    delimiter: str = typer.Option(None, "--delimiter", help="Field delimiter (sniffed if unset)."),
    as_json: Json = False,
) -> None:
    """Attack a model to measure what it leaks: membership inference or secret extraction."""
    from privlab.core.guarantee import check_epsilon

    if (epsilon is None) == (not no_dp):
        raise InvalidInputError("give exactly one of --epsilon E (DP-SGD) or --no-dp "
                                "(non-private target)")
    if epsilon is not None:
        check_epsilon(epsilon, "--epsilon")
    if not (0 < delta < 1):
        raise InvalidInputError(f"--delta must be in (0, 1), got {delta}")
    if report is not None and not report.parent.exists():
        raise InvalidInputError(f"--report directory does not exist: {report.parent}")
    if data == "lm" and not Path(data).exists():
        check_delta_policy(delta, allow_weak)
        _audit_lm(epsilon, delta, seed, quick, as_json)
        return
    require_extra(("torch",), "ml", "privlab audit")  # the audited models are torch models
    from privlab.audit.runner import TableAuditConfig, audit_table, write_audit_html
    from privlab.cli.train import DEFAULT_EXCLUDE, resolve_schema

    bundled = data if (not Path(data).exists() and data in _BUNDLED) else None
    declared = resolve_schema(schema, bundled)  # public: before any row is read
    check_delta_policy(delta, allow_weak, declared)  # one delta policy in every command
    frame, source, _ = _load(data, delimiter, infer=declared is None)
    if declared is not None and unsafe_encoding:
        raise InvalidInputError("--unsafe-encoding is for data without a schema; the schema "
                                "already declares the encoding")
    if target is None:
        target = _BUNDLED.get(bundled or "")
        if target is None:
            raise InvalidInputError("--target is required: the label column of DATA")
    drop = (parse_list(exclude, "--exclude") if exclude
            else DEFAULT_EXCLUDE.get(bundled or "", []))
    # every column-naming option names a column of DATA (one line, exit 2), before any work
    check_column_options(frame, source, {"--target": target,
                                         "--exclude": drop if exclude else None})
    config = TableAuditConfig(
        target=target, model=model, epsilon=epsilon, delta=delta,
        attacks=parse_list(attacks, "--attacks") or [], shadow_models=shadow_models,
        lira_models=lira_models, members=members, epochs=epochs, batch_size=batch_size, lr=lr,
        fprs=parse_floats(fprs, "--fprs"), level=level, eps_method=eps_method, seed=seed,
        schema=declared, on_invalid=on_invalid, exclude=drop, unsafe_encoding=unsafe_encoding,
        max_rows_per_unit=max_rows_per_unit)
    with _audit_progress(config, as_json) as (stage, epochs_done):
        result = audit_table(frame, config, stage=stage, progress=epochs_done)
    result["data"]["source"] = source
    if epsilon is None:
        warn("the audited model was trained WITHOUT differential privacy (--no-dp)")
    if report is not None:
        write_audit_html(str(report), result)
        result["report"] = str(report)
    if as_json:
        emit_json(result)
        return
    _print_table(result)


@contextmanager
def _audit_progress(config: Any, as_json: bool) -> Iterator[tuple[Callable[[str], None],
                                                                  Callable[[int, int, Any], None]]]:
    """Progress on stderr (`privlab.cli.progress`): one step per audit stage, the target's
    epochs inside the first, so a minute-long audit visibly moves."""
    from privlab.audit.runner import audit_steps
    from privlab.cli.progress import reporter

    total = audit_steps(config)
    with reporter("audit", as_json) as report:
        done = {"steps": 0}

        def stage(msg: str) -> None:
            report(msg, done["steps"], total)
            done["steps"] += 1

        def epochs(e: int, n: int, row: Any) -> None:
            report(f"training the target, epoch {e}/{n}", max(done["steps"] - 1, 0), total)

        yield stage, epochs
        report("done", total, total)


def _print_table(result: dict[str, Any]) -> None:
    g = result["guarantee"]
    s = result["summary"]
    m = result["model"]
    console.print("[bold]audit (an evaluation, not a release):[/bold] "
                  f"{escape(result['audit_guarantee']['headline'])}")
    console.print(f"[bold]target model:[/bold] {escape(g['headline'])}")
    console.print(f"[bold]target[/bold] {m['kind']}: train accuracy {m['train_accuracy']:.3f}, "
                  f"test accuracy {m['test_accuracy']:.3f} ({result['data']['members']} members, "
                  f"{result['data']['nonmembers']} non-members, pool {result['data']['pool']})")
    _print_baseline(m)
    if g["is_dp"]:
        console.print(f"[bold]accounted[/bold] epsilon = {g['epsilon']:.4g}, delta = "
                      f"{g['delta']:g} ({g['accountant']})")
    else:
        console.print("[bold red]NOT differentially private[/bold red] (--no-dp)")
    fkeys = sorted({f for d in result["attacks"].values() for f in d["tpr_at_fpr"]}, key=float)
    table = Table(title="membership inference")
    for col in ["attack", "AUC", "adv."] + [f"TPR@{f}" for f in fkeys] + [
            "bal. acc.", "eps lower", "eps CP interval", "eps Bayes interval"]:
        table.add_column(col)
    for name, d in result["attacks"].items():
        e = d["empirical_epsilon"]
        table.add_row(name, _fmt(d["auc"]), _fmt(d["advantage"]),
                      *[_fmt(d["tpr_at_fpr"][f]) for f in fkeys],
                      _fmt(d.get("balanced_accuracy")), _fmt(e["lower"]),
                      f"[{_fmt(e['clopper_pearson'][0])}, {_fmt(e['clopper_pearson'][1])}]",
                      f"[{_fmt(e['bayesian'][0])}, {_fmt(e['bayesian'][1])}]")
    console.print(table)
    console.print(f"empirical epsilon >= {s['empirical_epsilon_lower']:.3f} "
                  f"({s['strongest_attack_by_epsilon']}, {s['method']}, level {s['level']:g}; "
                  f"these trials cannot show more than {s['max_attainable_lower_bound']:.2f})")
    if "alarm" in s:
        console.print(f"[bold red]ALARM[/bold red]: {s['alarm']}")


def _print_baseline(model: dict[str, Any]) -> None:
    """The majority-class baseline beside the target's accuracies (exact, like them)."""
    print_baseline(model.get("baseline"), subject="the target",
                   advice="it learnt nothing useful, so the audit says little about a model "
                          "worth releasing")


def _audit_lm(epsilon: float | None, delta: float, seed: int, quick: bool,
              as_json: bool) -> None:
    from privlab.cli.progress import per_epoch, reporter

    require_extra(("torch",), "ml", "privlab audit lm")
    from privlab.audit.lm import LMAuditConfig, run_lm_audit

    cfg = LMAuditConfig.quick() if quick else LMAuditConfig()
    cfg.train.delta = delta
    cfg.seed = seed
    epochs = cfg.train.epochs if epsilon is None else cfg.dp_epochs
    with reporter("audit lm", as_json) as report:
        report("fine-tuning" + (" (DP-SGD)" if epsilon else "") + " epoch", 0, epochs)
        result = run_lm_audit(epsilon, cfg, rng=seed, progress=per_epoch(
            report, "fine-tuning" + (" (DP-SGD)" if epsilon else "") + " epoch"))
    result["quick"] = quick
    if not result["guarantee"]["is_dp"]:
        warn("the language model was fine-tuned WITHOUT differential privacy (--no-dp)")
    if as_json:
        emit_json(result)
        return
    g = result["guarantee"]
    ex = result["extraction"]
    console.print(f"[bold]extracted[/bold] {ex['extracted']} of {ex['of']} secrets "
                  f"({ex['samples_per_prompt']} samples per prompt, {ex['prompts']} prompts)")
    console.print("guarantee: " + (f"epsilon = {g['epsilon']:.4g}, delta = {g['delta']:g} per "
                                   "text" if g["is_dp"] else "NOT differentially private"))
    if result["secret_level_guarantee"]:
        sl = result["secret_level_guarantee"]
        console.print(f"per secret (group privacy over {sl['repeats']} texts): epsilon = "
                      f"{sl['epsilon']:.4g}")
    table = Table(title="exposure (bits)")
    for col in ("secret", "kind", "rank", "exposure", "extrapolated", "max"):
        table.add_column(col)
    for e in result["exposure"]:
        table.add_row(e["secret"], e["kind"], f"{e['rank']}/{e['candidates'] + 1}",
                      f"{e['exposure_rank']:.2f}", f"{e['exposure_extrapolated']:.2f}",
                      f"{e['max_exposure']:.1f}")
    console.print(table)
    if quick:
        console.print("[yellow]--quick: smoke run with a tiny model and few steps[/yellow]")


def register(app: typer.Typer) -> None:
    app.command("audit")(audit_cmd)
