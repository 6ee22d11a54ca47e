"""`privlab release plan DATA --plan FILE.yaml`: an analysis plan (privlab.measure.analysis).

Several statistics over several columns with one budget split by weights: previewed before
any row is read (`--preview` reads none), charged once (`--ledger/--principal`, one entry of
the composed total, before any value), packaged once (`-o DIR`: one release.json with every
value, its guarantee, the total and the plan, so the package reruns). An item with `by:`
is released per declared group of that column (privlab.measure.groups).

`release` keeps its one-statistic grammar (`privlab release STATISTIC FILE ...`); the word
`plan` in the statistic's place hands the rest of the line to this command
(`ReleaseCommand.make_context`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import click
import typer
from typer.core import TyperCommand

from privlab.cli.common import check_delta_strength, console, emit_json, warn_weak_epsilon
from privlab.cli.options import (
    ChargeLedger,
    ChargePrincipal,
    Json,
    OnInvalid,
    TestingSeed,
    check_charge_options,
    option,
)
from privlab.measure.analysis import Analysis, load_plan
from privlab.schema import load_schema
from privlab.schema.release import public_size_of


def plan_cmd(
    data: Path = typer.Argument(..., help="CSV / TSV / Parquet file (not read with --preview)."),
    plan: Path = typer.Option(..., "--plan", help="The analysis plan (YAML/JSON): "
                              "schema, epsilon, delta, statistics with weights "
                              "and optional by: COLUMN (examples/analysis.yaml, "
                              "examples/analysis_by_group.yaml)."),
    schema: Annotated[str, option("declared schema",
                                  "Declared public schema: a bundled name or a YAML/JSON file "
                                  "(default: the plan's schema).")] = None,
    on_invalid: OnInvalid = "refuse",
    max_rows_per_unit: Annotated[int, option(
        "contribution bound", "With a person-level schema: keep each person's "
                              "first M rows (default: the plan's "
                              "max_rows_per_unit, else the schema's).")] = None,
    ledger: ChargeLedger = None,
    principal: ChargePrincipal = None,
    out: Annotated[Path, option("output file",
                                "Folder for the package (release.json; default: none, the "
                                "package is only printed).")] = None,
    preview: bool = typer.Option(False, "--preview", help="State the measurements, their "
                                 "noise and half-widths and the total; read no row, charge "
                                 "nothing."),
    allow_weak: Annotated[bool, option("weak delta",
                                       "Accept a delta above 1e-3 or not below 1/public size "
                                       "(refused otherwise, exit 4).")] = False,
    seed: TestingSeed = None,
    as_json: Json = False,
) -> None:
    """Release an analysis plan: several statistics, one budget split by weights, one charge,
    one package."""
    check_charge_options(ledger, principal)
    analysis = Analysis.from_plan(load_plan(plan), schema)
    if max_rows_per_unit is not None:
        analysis.max_rows_per_unit = max_rows_per_unit
    warn_weak_epsilon(float(analysis.epsilon), "the plan's epsilon")
    if analysis.delta:
        check_delta_strength(float(analysis.delta), allow_weak,
                             public_size=public_size_of(load_schema(analysis.schema), None),
                             size_hint="a schema that declares public_size",
                             field="the plan's delta")
    stated = analysis.preview()  # every refusal (unknown column, mechanism...) happens here
    if preview:
        _show_preview(stated, as_json)
        return
    package = analysis.run(data, ledger=ledger, principal=principal, rng=seed, out=out,
                           on_invalid=on_invalid,
                           description=f"release plan {plan.name} on {data.name}")
    if as_json:
        emit_json(package)
        return
    _show_package(package, out)


def _show_preview(stated: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json(stated)
        return
    g = stated["guarantee"]
    console.print(f"plan (no row read): {g['headline']} in total, {g['accountant']}",
                  highlight=False)
    for line in stated["describe"]:
        console.print(f"  {line}", highlight=False, markup=False)


def _show_package(package: dict[str, Any], out: Path | None) -> None:
    g = package["guarantee"]
    console.print(f"{g['headline']} in total ({g['accountant']})", highlight=False)
    for r in package["releases"]:
        hw = r.get("half_width_95")
        words = f"  (95% half-width \u00b1{hw:.4g})" if hw is not None else ""
        if "by" in r:  # one value per declared group
            words = (f"  (95% half-width \u00b1{hw:.4g} in each group)" if hw is not None
                     else "")
            values = ", ".join(f"{k}: {v}" for k, v in r["value"].items())
            console.print(f"  {r['statistic']} of {r['column'] or 'rows'} by {r['by']}: "
                          f"{values}{words}", highlight=False, markup=False)
            continue
        console.print(f"  {r['statistic']} of {r['column'] or 'rows'}: {r['value']}{words}",
                      highlight=False, markup=False)
    if "ledger" in package:
        led = package["ledger"]
        console.print(f"  ledger: charged {led['principal']} once; remaining epsilon "
                      f"{led['remaining_epsilon']:g}", highlight=False)
    if out is not None:
        console.print(f"  package: {Path(out) / 'release.json'}", highlight=False,
                      markup=False)


#: The click command of `release plan` (built once, on first use).
_PLAN: list[click.Command] = []


def plan_command() -> click.Command:
    if not _PLAN:
        sub = typer.Typer(context_settings={"show_default": True})
        sub.command("plan")(plan_cmd)
        _PLAN.append(typer.main.get_command(sub))
    return _PLAN[0]


class ReleaseCommand(TyperCommand):
    """`release`: one statistic, or with `plan` first, an analysis plan."""

    @property
    def plan_command(self) -> click.Command:
        return plan_command()

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        if args and args[0] == "plan":
            return self.plan_command.make_context(f"{info_name} plan", list(args[1:]),
                                                  parent=parent, **extra)
        return super().make_context(info_name, args, parent=parent, **extra)


__all__ = ["ReleaseCommand", "plan_cmd", "plan_command"]
