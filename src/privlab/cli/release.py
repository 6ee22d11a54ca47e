"""`privlab release {count,sum,mean,histogram,quantile} FILE --column C --epsilon E ...`.

With `--ledger PATH --principal NAME` the budget is charged first, in one transaction, and
the value is computed only after the charge committed (refused past the budget: exit 3).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer

from privlab.cli.common import (
    check_delta_strength,
    console,
    emit_json,
    parse_list,
    parse_pair,
    warn_weak_epsilon,
)
from privlab.core import queries
from privlab.core.guarantee import check_delta, check_epsilon
from privlab.data.io import read_table, require_columns
from privlab.errors import InvalidInputError


class Statistic(StrEnum):
    count = "count"
    sum = "sum"
    mean = "mean"
    histogram = "histogram"
    quantile = "quantile"


class Mechanism(StrEnum):
    laplace = "laplace"
    gaussian = "gaussian"
    geometric = "geometric"


def release_cmd(
    statistic: Statistic = typer.Argument(..., help="What to release."),
    file: Path = typer.Argument(..., help="CSV / TSV / Parquet file."),
    column: str = typer.Option(..., "--column", "-c", help="Column to aggregate."),
    epsilon: float = typer.Option(..., "--epsilon", "-e", help="Privacy parameter, > 0."),
    delta: float = typer.Option(0.0, "--delta", help="Delta in [0, 1); > 0 for gaussian."),
    bounds: str = typer.Option(None, "--bounds", help="Public clamping range LO,HI."),
    mechanism: Mechanism = typer.Option(None, "--mechanism", "-m",
                                        help="Default: geometric for counts, else laplace."),
    categories: str = typer.Option(None, "--categories", help="histogram: public labels A,B,C."),
    bins: int = typer.Option(10, "--bins", help="histogram of numbers: bins over --bounds."),
    q: float = typer.Option(0.5, "--q", help="quantile: which quantile, in [0, 1]."),
    delimiter: str = typer.Option(None, "--delimiter", help="Field delimiter (sniffed if unset)."),
    ledger: str = typer.Option(None, "--ledger", help="Budget ledger (SQLite file or DB URL)."),
    principal: str = typer.Option(None, "--principal", help="Whose budget to charge."),
    seed: int = typer.Option(None, "--seed", help="Reproducible noise: for testing ONLY."),
    allow_weak: bool = typer.Option(False, "--allow-weak", help="Accept a delta above 1e-3 "
                                    "or not below 1/rows (refused otherwise, exit 4)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Release one DP statistic of a column, with its guarantee and grid.

    An epsilon above 8 gets a one-line warning; a delta above 1e-3 or not below 1/rows is
    refused (exit 4) unless --allow-weak."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    warn_weak_epsilon(epsilon)
    pair = parse_pair(bounds, "--bounds")
    mech = mechanism.value if mechanism else None
    if mech == "gaussian" and delta == 0:
        raise InvalidInputError("--mechanism gaussian needs --delta > 0 (e.g. 1e-6)")
    if mech != "gaussian" and delta > 0 and mech is not None:
        raise InvalidInputError(f"--delta is only used by the gaussian mechanism, not {mech}")
    if (ledger is None) != (principal is None):
        raise InvalidInputError("--ledger and --principal go together")
    frame = read_table(file, delimiter=delimiter)
    require_columns(frame, [column], "--column")
    check_delta_strength(delta, len(frame), allow_weak)
    values = frame[column]
    stat = statistic.value
    if stat in ("sum", "mean", "quantile") and pair is None:
        raise InvalidInputError(f"{stat} needs --bounds LO,HI (public clamping range); "
                                "bounds taken from the data are not private")
    if stat in ("sum", "mean", "quantile"):
        values = queries.as_numeric(values.to_numpy(), f"column {column!r}")
    cats = parse_list(categories, "--categories")
    # Everything the query would refuse is refused here, before any budget is charged.
    if pair is not None:
        queries.check_bounds(pair, "--bounds")
    if stat == "histogram":
        if cats is None and pair is None:
            raise InvalidInputError("histogram needs a public domain: --categories A,B,C, or "
                                    "--bounds LO,HI with --bins N for numbers")
        if bins < 1:
            raise InvalidInputError(f"--bins must be a positive integer, got {bins}")
        values = values.dropna()
        if cats is None:
            values = queries.as_numeric(values.to_numpy(), f"column {column!r}")
    if stat == "quantile":
        if mech not in (None, "laplace"):
            raise InvalidInputError("quantile uses the exponential mechanism; omit --mechanism")
        if not 0.0 <= q <= 1.0:
            raise InvalidInputError(f"--q must be in [0, 1], got {q}")
    if stat == "sum" and mech == "geometric" and not all(float(b).is_integer() for b in pair):
        raise InvalidInputError("--mechanism geometric needs integer bounds LO,HI; use laplace")

    def compute():
        if stat == "count":
            return queries.dp_count(values, epsilon, delta=delta, mechanism=mech or "geometric",
                                    rng=seed)
        if stat == "sum":
            return queries.dp_sum(values, pair, epsilon, delta=delta, mechanism=mech or "laplace",
                                  rng=seed)
        if stat == "mean":
            return queries.dp_mean(values, pair, epsilon, delta=delta,
                                   mechanism=mech or "laplace", rng=seed)
        if stat == "histogram":
            return queries.dp_histogram(values, epsilon, categories=cats, bounds=pair,
                                        bins=bins, delta=delta, mechanism=mech or "geometric",
                                        rng=seed)
        return queries.dp_quantile(values, q, pair, epsilon, rng=seed)

    charge = None
    if ledger is not None:
        from privlab.core.ledger import BudgetLedger

        book = BudgetLedger(str(ledger))
        charge = book.charge(principal, epsilon, delta, description=f"release {stat} of {column} "
                             f"from {file.name}")
    result = compute()
    payload = {"statistic": stat, "column": column, **result.to_dict()}
    if charge is not None:
        payload["ledger"] = {"principal": principal, "entry_id": charge.entry_id,
                             "remaining_epsilon": charge.remaining_epsilon,
                             "remaining_delta": charge.remaining_delta}
    if as_json:
        emit_json(payload)
        return
    console.print(f"[bold]{stat}[/bold] of {column}: {payload['value']}")
    console.print(f"  grid: {result.granularity}   95% noise half-width: "
                  f"{half_width_text(payload['confidence_interval_95'], result.noise)}")
    console.print(f"  guarantee: {result.guarantee.describe()}")
    for note in result.guarantee.notes:
        console.print(f"  note: {note}")
    if charge is not None:
        console.print(f"  ledger: charged {principal}; remaining epsilon "
                      f"{charge.remaining_epsilon:g}")


def half_width_text(width: float | None, noise: dict) -> str:
    """The 95% noise half-width, or in words why a mechanism has none."""
    if width is not None:
        return f"{width:.4g}"
    if noise.get("distribution") == "ratio":
        return ("none in closed form (a ratio of a noisy sum and a noisy count; see the noise "
                "scales in --json)")
    return "none (the exponential mechanism picks a value; it adds no additive noise)"


def register(app: typer.Typer) -> None:
    app.command("release")(release_cmd)
