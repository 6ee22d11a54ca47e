"""`privlab release STATISTIC FILE --column C --epsilon E ...`, one statistic of the registry
(`privlab.measure.stats`: count, sum, mean, histogram, quantile, variance, stddev, ...);
`privlab release plan FILE --plan PLAN.yaml` is an analysis plan (cli/release_plan.py).

With `--ledger PATH --principal NAME` the budget is charged first, in one transaction, and
the value is computed only after the charge committed (refused past the budget: exit 3).

With `--schema NAME|FILE` the rows are conformed to the declared public schema first, and the
column's bounds (sum, mean, quantile, numeric histogram) or categories (histogram) come from
the schema when not given on the command line: never from the data. When the schema's privacy
unit is a person column (e.g. userId), each person's contributions are bounded to their first
M rows (`--max-rows-per-unit`, or the schema's `max_rows_per_unit`) and the record-level
mechanism runs at epsilon / M, which by group privacy is epsilon-DP per person. Without
`--schema`, `--bounds` / `--categories` are the declaration and each row is one person.

Nothing the command prints or refuses depends on the rows beyond the schema check: the delta
check uses the public size (the schema's `public_size` or `--public-size`), an empty table
releases noise on 0 like any other, and without `--schema` a cell that is not a number counts
as missing in every numeric statistic (the guarantee's notes say so).
"""

from __future__ import annotations

import dataclasses
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer

from privlab.cli.common import (
    check_delta_strength,
    console,
    emit_json,
    parse_list,
    parse_range,
    warn_weak_epsilon,
)
from privlab.cli.options import (
    ChargeLedger,
    ChargePrincipal,
    Json,
    OnInvalid,
    TestingSeed,
    check_charge_options,
    option,
)
from privlab.core import queries
from privlab.core.guarantee import check_delta, check_epsilon
from privlab.core.release import half_width_text
from privlab.data.io import read_table, require_columns
from privlab.errors import InvalidInputError
from privlab.measure import stats
from privlab.schema import load_schema
from privlab.schema.release import (
    ReleaseDomain,
    conform_for_release,
    public_size_of,
    release_guarantee,
)
from privlab.schema.values import numbers

#: The statistics `privlab release` offers: the registry's, in its order.
Statistic = StrEnum("Statistic", {name: name for name in stats.names()})  # type: ignore[misc]


class Mechanism(StrEnum):
    laplace = "laplace"
    gaussian = "gaussian"
    geometric = "geometric"


def release_cmd(
    statistic: Statistic = typer.Argument(..., help="What to release."),  # type: ignore[valid-type]
    file: Path = typer.Argument(..., help="CSV / TSV / Parquet file."),
    column: str = typer.Option(..., "--column", "-c", help="Column to aggregate."),
    epsilon: Annotated[float, option("epsilon", "Privacy parameter, > 0.")] = ...,
    delta: Annotated[float, option("delta", "Delta in [0, 1); > 0 for gaussian.")] = 0.0,
    bounds: str = typer.Option(None, "--bounds", help="Public clamping range LO:HI, e.g. 0:100 "
                               "(default: the schema's bounds of --column)."),
    mechanism: Mechanism = typer.Option(None, "--mechanism", "-m",
                                        help="Default: geometric for counts, else laplace."),
    categories: str = typer.Option(None, "--categories", help="histogram: public labels A,B,C "
                                   "(default: the schema's categories)."),
    bins: int = typer.Option(None, "--bins", help="histogram of numbers: bins over --bounds "
                             "(default: the schema's bins hint, else 10)."),
    q: float = typer.Option(0.5, "--q", help="quantile: which quantile, in [0, 1]."),
    delimiter: str = typer.Option(None, "--delimiter", help="Field delimiter (sniffed if unset)."),
    ledger: ChargeLedger = None,
    principal: ChargePrincipal = None,
    seed: TestingSeed = None,
    schema: Annotated[str, option("declared schema",
                                  "Declared public schema: a bundled name (privlab schema list) or "
                                  "a YAML/JSON file; gives the column's bounds/categories and the "
                                  "privacy unit (default: none; --bounds / --categories declare "
                                  "the column).")] = None,
    on_invalid: OnInvalid = "refuse",
    max_rows_per_unit: Annotated[int, option(
        "contribution bound", "With a person-level schema: keep each person's "
                              "first M rows (contribution bound; default: "
                              "the schema's max_rows_per_unit).")] = None,
    public_size: int = typer.Option(None, "--public-size", help="Public number of rows (or "
                                    "persons) that the delta check uses; default: the "
                                    "schema's public_size. Needed with --delta."),
    allow_weak: Annotated[bool, option("weak delta",
                                       "Accept a delta above 1e-3 or not below 1/public size "
                                       "(refused otherwise, exit 4).")] = False,
    as_json: Json = False,
) -> None:
    """Release one DP statistic of a column, with its guarantee and grid.

    An epsilon above 8 gets a one-line warning; a delta above 1e-3 or not below 1/(public
    size) is refused (exit 4) unless --allow-weak. The size is public (never len(rows)).

    `privlab release plan FILE --plan PLAN.yaml`: several statistics, one budget (see
    `privlab release plan --help`)."""
    stat = statistic.value
    epsilon, delta, pair, mech = _check_options(
        epsilon, delta, bounds, mechanism, ledger=ledger, principal=principal,
        public_size=public_size)
    sch = load_schema(schema) if schema is not None else None
    check_delta_strength(delta, allow_weak, public_size=public_size_of(sch, public_size),
                         size_hint="--public-size N or a --schema that declares public_size")
    # A header-only table is a table of 0 rows: it releases noise on 0 like its neighbours.
    frame = read_table(file, delimiter=delimiter, allow_empty=True)
    require_columns(frame, [column], "--column")
    frame, domain = _declared_domain(frame, sch, stat, column, on_invalid, max_rows_per_unit,
                                     mech, ReleaseDomain(pair, parse_list(categories,
                                                                          "--categories"),
                                                         bins, 1, None))
    values, domain, coerced = _checked_values(frame[column], stat, column, domain, mech, q,
                                              declared=sch is not None)
    # Everything the query would refuse was refused above, before any budget is charged.
    charge = _charge(ledger, principal, epsilon, delta,
                     f"release {stat} of {column} from {file.name}")
    result = _compute(stat, values, domain, epsilon / domain.per_unit, delta, mech, q, seed,
                      integer=sch is not None and sch.column(column).type == "integer")
    result = dataclasses.replace(result, guarantee=release_guarantee(
        result.guarantee, stat, column, epsilon, domain.per_unit, domain.unit, schema,
        coerced=coerced))
    payload = _payload(result, stat, column, domain, charge, principal)
    if as_json:
        emit_json(payload)
        return
    _print_human(result, payload, stat, column, charge, principal)


def _check_options(epsilon: float, delta: float, bounds: str | None,
                   mechanism: Mechanism | None, *, ledger: str | None, principal: str | None,
                   public_size: int | None) -> tuple[float, float, Any, str | None]:
    """Options that need neither the schema nor the rows: (epsilon, delta, bounds pair,
    mechanism name or None), each refused with a one-line error naming it."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    warn_weak_epsilon(epsilon)
    pair = parse_range(bounds, "--bounds")
    mech = mechanism.value if mechanism else None
    if mech == "gaussian" and delta == 0:
        raise InvalidInputError("--mechanism gaussian needs --delta > 0 (e.g. 1e-6)")
    if mech != "gaussian" and delta > 0 and mech is not None:
        raise InvalidInputError(f"--delta is only used by the gaussian mechanism, not {mech}")
    check_charge_options(ledger, principal)
    if public_size is not None and (isinstance(public_size, bool) or public_size < 1):
        raise InvalidInputError(f"--public-size must be a whole number >= 1, got {public_size}")
    return epsilon, delta, pair, mech


def _declared_domain(frame: pd.DataFrame, sch: Any, stat: str, column: str, on_invalid: str,
                     max_rows_per_unit: int | None, mech: str | None,
                     given: ReleaseDomain) -> tuple[pd.DataFrame, ReleaseDomain]:
    """The column's public domain: the schema's (rows conformed to it, each person's rows
    bounded) where one is declared, else the command line's, each row one person."""
    if sch is not None:
        return conform_for_release(frame, sch, on_invalid, column, stat, given,
                                   max_rows_per_unit, mech,
                                   reads_numbers=stats.get(stat).numeric)
    if max_rows_per_unit is not None:
        raise InvalidInputError("--max-rows-per-unit needs --schema with a privacy unit column")
    return frame, given


def _checked_values(values: pd.Series, stat: str, column: str, domain: ReleaseDomain,
                    mech: str | None, q: float, *, declared: bool
                    ) -> tuple[Any, ReleaseDomain, bool]:
    """The values the statistic reads, and the domain with its histogram bins settled; every
    refusal the query would make, made here (before any charge). `coerced`: without a
    declared type, a cell that is not a number counts as missing, for every table, so one
    text value cannot turn a release into a refusal (exit code) on a neighbour."""
    pair, cats, bins = domain.bounds, domain.categories, domain.bins
    definition = stats.get(stat)
    numeric = definition.numeric
    coerced = not declared and (numeric or (stat == "histogram" and cats is None))
    if coerced:  # the cells' text by the one numeric rule (privlab.schema.values)
        values = numbers(values)
    if numeric and pair is None:
        raise InvalidInputError(f"{stat} needs --bounds LO:HI (public clamping range) or "
                                "--schema (draft one with `privlab schema draft`); bounds "
                                "taken from the data are not private")
    if numeric:
        values = queries.as_numeric(values.to_numpy(), f"column {column!r}")
    if pair is not None:
        queries.check_bounds(pair, "--bounds")
    if stat == "histogram":
        values, bins = _histogram_values(values, column, pair, cats, bins)
    if mech is not None and mech not in definition.mechanisms:
        raise InvalidInputError(f"{stat} uses the {definition.default_mechanism} mechanism; "
                                "omit --mechanism")
    if stat == "quantile" and not 0.0 <= q <= 1.0:
        raise InvalidInputError(f"--q must be in [0, 1], got {q}")
    if stat == "sum" and mech == "geometric" and not all(float(b).is_integer() for b in pair):
        raise InvalidInputError("--mechanism geometric needs integer --bounds LO:HI; use laplace")
    return values, domain._replace(bins=bins), coerced


def _histogram_values(values: pd.Series, column: str, pair: Any, cats: list[str] | None,
                      bins: int | None) -> tuple[Any, int]:
    """A histogram needs a public domain (categories, or bounds with bins): its values without
    missing cells, and the number of bins (default 10)."""
    if cats is None and pair is None:
        raise InvalidInputError("histogram needs a public domain: --categories A,B,C, "
                                "--bounds LO:HI with --bins N for numbers, or --schema "
                                "(draft one with `privlab schema draft`)")
    bins = 10 if bins is None else bins
    if bins < 1:
        raise InvalidInputError(f"--bins must be a positive integer, got {bins}")
    values = values.dropna()
    if cats is None:
        values = queries.as_numeric(values.to_numpy(), f"column {column!r}")
    return values, bins


def _charge(ledger: str | None, principal: str | None, epsilon: float, delta: float,
            description: str) -> Any:
    """Charge the ledger first, in one transaction (refused past the budget: exit 3); the
    value is computed only after the charge committed. None without --ledger."""
    if ledger is None:
        return None
    from privlab.core.ledger import BudgetLedger

    # create=False: a ledger that does not exist holds no budget, so the charge is refused
    # (exit 2) before any database or writer-lock file is created
    with BudgetLedger(str(ledger), create=False) as book:
        return book.charge(principal, epsilon, delta, description=description)


def _compute(stat: str, values: Any, domain: ReleaseDomain, eps: float, delta: float,
             mech: str | None, q: float, seed: int | None, *, integer: bool) -> Any:
    """The DP statistic at the per-record epsilon (`epsilon / per_unit`, group privacy), by
    its one definition in the registry."""
    definition = stats.get(stat)
    cats = tuple(domain.categories) if domain.categories is not None else None
    inputs = stats.Inputs(domain.bounds, cats, cats, domain.bins, integer,
                          mech or definition.default_mechanism, eps, delta, q)
    return definition.release(values, inputs, seed)


def _payload(result: Any, stat: str, column: str, domain: ReleaseDomain, charge: Any,
             principal: str | None) -> dict[str, Any]:
    """The JSON output (the human output prints from it too)."""
    payload = {"statistic": stat, "column": column, **result.to_dict()}
    approx = stats.get(stat).release_half_width(result)
    if payload["confidence_interval_95"] is None and approx is not None:
        payload[f"{stat}_half_width_95_approx"] = approx
    if stat == "histogram" and domain.categories:
        # public wording, the same whatever the rows hold: saying "nothing matched" would
        # reveal the data (issue 23)
        payload["category_matching"] = CATEGORY_MATCHING_NOTE
    if charge is not None:
        payload["ledger"] = {"principal": principal, "entry_id": charge.entry_id,
                             "remaining_epsilon": charge.remaining_epsilon,
                             "remaining_delta": charge.remaining_delta}
    return payload


def _print_human(result: Any, payload: dict[str, Any], stat: str, column: str, charge: Any,
                 principal: str | None) -> None:
    """The console output: headline, value, bins, half-width, guarantee, notes, ledger."""
    gaussian = "gaussian" in result.guarantee.mechanism
    console.print(result.guarantee.headline(), highlight=False)
    console.print(f"[bold]{stat}[/bold] of {column}: {payload['value']}")
    _print_bin_labels(payload)
    words = None if payload["confidence_interval_95"] is not None else \
        stats.get(stat).half_width_words(result)
    hw_text = words or half_width_text(payload["confidence_interval_95"], result.noise,
                                       result.details, gaussian)
    console.print(f"  grid: {result.granularity}   95% noise half-width: {hw_text}")
    console.print(f"  guarantee: {result.guarantee.describe()}")
    for note in result.guarantee.notes:
        console.print(f"  note: {note}")
    if payload.get("category_matching"):
        console.print(f"  note: {payload['category_matching']}", highlight=False)
    if charge is not None:
        console.print(f"  ledger: charged {principal}; remaining epsilon "
                      f"{charge.remaining_epsilon:g}")


CATEGORY_MATCHING_NOTE = (
    "categories match exactly and case-sensitively ('male' does not count 'Male'); rows whose "
    "value is not a listed category are not counted (with --schema, a declared <other> "
    "category collects them)")


def register(app: typer.Typer) -> None:
    from privlab.cli.release_plan import ReleaseCommand

    app.command("release", cls=ReleaseCommand)(release_cmd)


def _print_bin_labels(payload: dict[str, Any]) -> None:
    """A histogram's bins on the console: `label: noisy count` per bin."""
    labels = (payload.get("details") or {}).get("labels")
    value = payload.get("value")
    if payload.get("statistic") != "histogram" or not labels or not isinstance(value, list):
        return
    console.print("  bins: " + ", ".join(f"{lab}: {v}" for lab, v in zip(labels, value,
                                                                        strict=False)),
                  highlight=False, markup=False)
